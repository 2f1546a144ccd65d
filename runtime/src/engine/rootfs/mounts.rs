//! One spec mount made from its plan: a detached mount (a clone of the
//! bind's source, or a new filesystem) is given its flags while nothing can
//! see it, moved onto its destination opened inside the rootfs, then given
//! its propagation. No path is looked up after the destination is open.
//! Every call goes through the `Syscall` seam.

use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::mount::MsFlags;

use crate::engine::mount::propagation::setattr_of;
use crate::engine::rootfs::error::{Detail, RootfsError};
use crate::engine::rootfs::plan::{Kind, PlannedMount};
use crate::sys::new_mount::NewFs;
use crate::sys::mount_target::Want;
use crate::sys::syscall::Syscall;
use crate::sys::io_errno::errno_of;

/// What of `m` these steps do not make yet (later steps of
/// `docs/rootfs-plan.md`), so the engine must.
pub fn uncovered(m: &PlannedMount) -> Option<&'static str> {
    match &m.kind {
        _ if m.remount => Some("a remount"),
        _ if m.copyup => Some("tmpcopyup"),
        _ if m.idmap.is_some() => Some("an idmapped mount"),
        Kind::New { fstype } if fstype == "cgroup" || fstype == "cgroup2" => Some("a cgroup mount"),
        Kind::Bind { .. } if m.superblock.named != MsFlags::empty() => Some("a superblock flag on a bind"),
        _ => None,
    }
}

/// Makes `m` inside the rootfs `root` is open on.
pub fn make(sys: &dyn Syscall, root: &OwnedFd, m: &PlannedMount) -> Result<(), RootfsError> {
    let fail = |detail: Detail| RootfsError { src: source_name(m), dest: m.destination.clone(), detail };
    if let Some(what) = uncovered(m) {
        return Err(fail(Detail::NotCovered(what)));
    }
    let call = |call: &'static str, path: &Path| {
        let (path, src) = (path.to_path_buf(), source_name(m));
        move |errno: Errno| RootfsError { src, dest: m.destination.clone(), detail: Detail::Call { call, path, errno } }
    };
    let dest = &m.destination;
    let (mount, want) = match &m.kind {
        Kind::Bind { .. } if !m.data.is_empty() => return Err(fail(Detail::BindData(m.data.join(",")))),
        Kind::Bind { recursive } => {
            let source = m.source.as_deref().unwrap_or(Path::new(""));
            let tree = sys.open_tree(source, *recursive).map_err(|e| call("open_tree", source)(errno_of(&e)))?;
            let want = if sys.is_dir(&tree).map_err(call("fstat", source))? { Want::Dir } else { Want::File };
            if m.flags.named != MsFlags::empty() {
                sys.mount_setattr(&tree, m.flags.to_attr(), 0).map_err(call("mount_setattr", source))?;
            }
            (tree, want)
        }
        Kind::New { fstype } => {
            let fs = sys.new_fs(&new_fs(fstype, m)).map_err(|e| fail(Detail::NewFs(e)))?;
            // runc: proc and sysfs go on a directory, never on a symlink.
            let want = if fstype == "proc" || fstype == "sysfs" { Want::PlainDir } else { Want::Dir };
            (fs, want)
        }
    };
    if m.recursive.named != MsFlags::empty() {
        sys.mount_setattr(&mount, m.recursive.to_attr(), libc::AT_RECURSIVE).map_err(call("mount_setattr", dest))?;
    }
    let target = sys.open_target(root, dest, want).map_err(|e| fail(e.into()))?;
    refuse_inside_proc(sys, &target, m).map_err(fail)?;
    sys.move_mount(&mount, &target).map_err(call("move_mount", dest))?;
    for flags in &m.propagation {
        let (attr, recursive) = setattr_of(*flags);
        sys.mount_setattr(&mount, attr, recursive).map_err(call("mount_setattr", dest))?;
    }
    Ok(())
}

/// runc ≥ 1.2's rule where the mount lands, on the opened target: nothing
/// over a procfs file but those lxcfs emulates, and on a procfs only another
/// procfs (create checks the paths first; this holds if the image changed
/// since, or a mount before this one put a procfs there).
fn refuse_inside_proc(sys: &dyn Syscall, target: &OwnedFd, m: &PlannedMount) -> Result<(), Detail> {
    let magic = sys.fs_magic(target).map_err(|errno| Detail::Call { call: "fstatfs", path: m.destination.clone(), errno })?;
    if magic != nix::sys::statfs::PROC_SUPER_MAGIC.0 as i64 {
        return Ok(());
    }
    let allowed = crate::engine::validate::PROC_FILES_LXCFS_EMULATES.iter().any(|f| Path::new(f) == m.destination);
    let procfs_on_proc = matches!(&m.kind, Kind::New { fstype } if fstype == "proc") && m.destination == Path::new("/proc");
    if allowed || procfs_on_proc {
        return Ok(());
    }
    Err(Detail::InsideProc)
}

/// The new filesystem's parameters: its source, its data in order, and the
/// superblock flags set (a new filesystem starts with them clear).
fn new_fs(fstype: &str, m: &PlannedMount) -> NewFs {
    const SUPERBLOCK: &[(MsFlags, &str)] = &[
        (MsFlags::MS_SYNCHRONOUS, "sync"),
        (MsFlags::MS_DIRSYNC, "dirsync"),
        (MsFlags::MS_MANDLOCK, "mand"),
        (MsFlags::MS_LAZYTIME, "lazytime"),
        (MsFlags::MS_I_VERSION, "iversion"),
        (MsFlags::MS_SILENT, "silent"),
    ];
    let mut params = Vec::new();
    if let Some(source) = &m.source {
        params.push(("source".to_string(), Some(source.to_string_lossy().into_owned())));
    }
    for option in &m.data {
        params.push(match option.split_once('=') {
            Some((key, value)) => (key.to_string(), Some(value.to_string())),
            None => (option.clone(), None),
        });
    }
    for (flag, name) in SUPERBLOCK {
        if m.superblock.set.contains(*flag) {
            params.push((name.to_string(), None));
        }
    }
    NewFs { fstype: fstype.to_string(), params, attrs: m.flags.to_attr().set }
}

/// The source as runc names it in errors: the path, else the type.
fn source_name(m: &PlannedMount) -> String {
    match (&m.source, &m.kind) {
        (Some(source), _) => source.to_string_lossy().into_owned(),
        (None, Kind::New { fstype }) => fstype.clone(),
        (None, Kind::Bind { .. }) => String::new(),
    }
}


#[cfg(test)]
mod tests {
    use oci_spec::runtime::MountBuilder;

    use super::*;
    use crate::engine::rootfs::plan::plan_one;
    use crate::sys::mount_api::MountAttr;
    use crate::sys::syscall::{Call, Recording};

    fn planned(typ: &str, source: &str, dest: &str, options: &[&str]) -> PlannedMount {
        let m = MountBuilder::default()
            .destination(dest)
            .typ(typ)
            .source(source)
            .options(options.iter().map(|o| o.to_string()).collect::<Vec<_>>())
            .build()
            .unwrap();
        plan_one(0, &m)
    }

    fn root() -> OwnedFd {
        std::fs::File::open("/").unwrap().into()
    }

    fn set_attr(path: &str, attr: MountAttr, flags: libc::c_int) -> Call {
        Call::SetAttr { path: path.into(), attr, flags }
    }

    #[test]
    fn a_new_filesystem_is_made_with_its_flags_then_moved_onto_its_destination() {
        let sys = Recording::default();
        let m = planned("tmpfs", "tmpfs", "/dev", &["nosuid", "strictatime", "mode=755", "size=65536k", "lazytime"]);
        make(&sys, &root(), &m).unwrap();
        let fs = NewFs {
            fstype: "tmpfs".into(),
            params: vec![
                ("source".into(), Some("tmpfs".into())),
                ("mode".into(), Some("755".into())),
                ("size".into(), Some("65536k".into())),
                ("lazytime".into(), None),
            ],
            attrs: libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_STRICTATIME,
        };
        assert_eq!(
            sys.calls(),
            vec![
                Call::NewFs(fs),
                Call::Target { path: "/dev".into(), want: Want::Dir },
                Call::Statfs { path: "/dev".into() },
                Call::Move { from: "fs:tmpfs".into(), to: "/dev".into() },
            ]
        );
    }

    #[test]
    fn a_bind_gets_its_flags_detached_and_its_propagation_once_attached() {
        let sys = Recording::default().with_file_source("/etc/hosts");
        let m = planned("bind", "/etc/hosts", "/etc/hosts", &["rbind", "ro", "nosuid", "rslave", "rnoexec"]);
        make(&sys, &root(), &m).unwrap();
        let tree = "file:/etc/hosts";
        let flags = MountAttr::flags(libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID, 0);
        assert_eq!(
            sys.calls(),
            vec![
                Call::OpenTree { source: "/etc/hosts".into(), recursive: true },
                Call::Fstat { path: tree.into() },
                set_attr(tree, flags, 0),
                set_attr(tree, MountAttr::flags(libc::MOUNT_ATTR_NOEXEC, 0), libc::AT_RECURSIVE),
                Call::Target { path: "/etc/hosts".into(), want: Want::File },
                Call::Statfs { path: "/etc/hosts".into() },
                Call::Move { from: tree.into(), to: "/etc/hosts".into() },
                set_attr(tree, MountAttr::propagation(libc::MS_SLAVE), libc::AT_RECURSIVE),
            ]
        );
    }

    #[test]
    fn a_bind_of_a_directory_with_no_flags_makes_no_setattr() {
        let sys = Recording::default();
        make(&sys, &root(), &planned("bind", "/srv", "/mnt", &["bind"])).unwrap();
        assert_eq!(
            sys.calls(),
            vec![
                Call::OpenTree { source: "/srv".into(), recursive: false },
                Call::Fstat { path: "tree:/srv".into() },
                Call::Target { path: "/mnt".into(), want: Want::Dir },
                Call::Statfs { path: "/mnt".into() },
                Call::Move { from: "tree:/srv".into(), to: "/mnt".into() },
            ]
        );
    }

    #[test]
    fn a_failure_names_the_mount_the_call_the_path_and_the_errno() {
        let m = planned("tmpfs", "tmpfs", "/etc/passwd/x", &[]);
        let err = make(&Recording::failing("open_target", Errno::ENOTDIR), &root(), &m).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"error mounting "tmpfs" to rootfs at "/etc/passwd/x": openat2 /etc/passwd/x: ENOTDIR: Not a directory"#
        );
        let m = planned("bind", "/srv", "/mnt", &["rbind"]);
        let err = make(&Recording::failing("move_mount", Errno::EBUSY), &root(), &m).unwrap_err();
        assert_eq!(err.to_string(), r#"error mounting "/srv" to rootfs at "/mnt": move_mount /mnt: EBUSY: Device or resource busy"#);
        let err = make(&Recording::failing("open_tree", Errno::ENOENT), &root(), &m).unwrap_err();
        assert_eq!(err.to_string(), r#"error mounting "/srv" to rootfs at "/mnt": open_tree /srv: ENOENT: No such file or directory"#);
    }

    #[test]
    fn nothing_lands_inside_proc_but_what_runc_allows() {
        let on_proc = || Recording::default().with_procfs("/proc");
        let err = make(&on_proc(), &root(), &planned("bind", "/x", "/proc/sys/kernel/core_pattern", &["bind"])).unwrap_err();
        assert_eq!(err.detail, Detail::InsideProc);
        assert!(err.to_string().ends_with("the destination is on procfs: only a procfs on /proc, or the files lxcfs emulates"), "{err}");
        make(&on_proc(), &root(), &planned("bind", "/x", "/proc/cpuinfo", &["bind"])).unwrap();
        make(&on_proc(), &root(), &planned("proc", "proc", "/proc", &[])).unwrap();
        let sys = Recording::default();
        make(&sys, &root(), &planned("sysfs", "sysfs", "/sys", &[])).unwrap();
        assert!(sys.calls().contains(&Call::Target { path: "/sys".into(), want: Want::PlainDir }), "sysfs on no symlink");
    }

    /// runc hands a bind's unknown options to mount(2), which ignores them
    /// for a bind; we refuse them rather than drop them unseen.
    #[test]
    fn filesystem_data_on_a_bind_is_refused_before_any_call() {
        let sys = Recording::default();
        let err = make(&sys, &root(), &planned("bind", "/srv", "/mnt", &["rbind", "size=1m", "ro"])).unwrap_err();
        assert_eq!(err.to_string(), r#"error mounting "/srv" to rootfs at "/mnt": "size=1m" is filesystem data, which a bind mount cannot take"#);
        assert!(sys.calls().is_empty());
    }

    #[test]
    fn what_is_not_covered_yet_is_refused_before_any_call() {
        for (typ, options, what) in [
            ("tmpfs", &["tmpcopyup"][..], "tmpcopyup"),
            ("tmpfs", &["remount"][..], "a remount"),
            ("bind", &["rbind", "idmap"][..], "an idmapped mount"),
            ("cgroup", &["ro"][..], "a cgroup mount"),
            ("bind", &["rbind", "lazytime"][..], "a superblock flag on a bind"),
        ] {
            let sys = Recording::default();
            let err = make(&sys, &root(), &planned(typ, "/src", "/mnt", options)).unwrap_err();
            assert_eq!(err.detail, Detail::NotCovered(what), "{options:?}");
            assert!(sys.calls().is_empty(), "{options:?}");
        }
    }
}
