//! One spec mount made from its plan: a detached mount (a clone of the
//! bind's source, or a new filesystem) is given its flags while nothing can
//! see it, moved onto its destination opened inside the rootfs, then given
//! its propagation. An idmapped bind comes detached and mapped from the
//! host side of `create`; a `remount` changes what is at the destination.
//! No path is looked up after the destination is open. Every call goes
//! through the `Syscall` seam.

use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::mount::MsFlags;

use crate::engine::mount::propagation::setattr_of;
use crate::engine::rootfs::error::{Detail, RootfsError};
use crate::engine::rootfs::plan::{Kind, PlannedMount};
use crate::sys::io_errno::errno_of;
use crate::sys::mount_api::MountAttr;
use crate::sys::mount_target::Want;
use crate::sys::new_mount::NewFs;
use crate::sys::syscall::Syscall;

/// What of `m` these steps do not make yet (later steps of
/// `docs/rootfs-plan.md`), so the engine must.
pub fn uncovered(m: &PlannedMount) -> Option<&'static str> {
    match &m.kind {
        _ if m.idmap.is_some() => Some("an idmapped mount"),
        _ => None,
    }
}

/// Makes `m` inside the rootfs `root` is open on.
pub fn make(sys: &dyn Syscall, root: &OwnedFd, m: &PlannedMount) -> Result<(), RootfsError> {
    let fail = |detail: Detail| failed(m, detail);
    if let Some(what) = uncovered(m) {
        return Err(fail(Detail::NotCovered(what)));
    }
    if m.remount {
        return remount(sys, root, m);
    }
    let call = |call: &'static str, path: &Path| call_failed(m, call, path);
    let dest = &m.destination;
    let mut target = None;
    let (mount, want) = match &m.kind {
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
            let mut fs = writable_for_copyup(new_fs(fstype, m), m);
            let has_mode = m.data.iter().any(|d| d.starts_with("mode="));
            if fstype == "tmpfs" && !has_mode {
                if let Some((dir, mode)) = image_dir_mode(sys, root, m)? {
                    fs.params.push(("mode".into(), Some(format!("{mode:04o}"))));
                    target = Some(dir);
                }
            }
            let fs = sys.new_fs(&fs).map_err(|e| fail(Detail::NewFs(e)))?;
            // runc: proc and sysfs go on a directory, never on a symlink.
            let want = if fstype == "proc" || fstype == "sysfs" { Want::PlainDir } else { Want::Dir };
            (fs, want)
        }
    };
    if m.recursive.named != MsFlags::empty() {
        sys.mount_setattr(&mount, m.recursive.to_attr(), libc::AT_RECURSIVE).map_err(call("mount_setattr", dest))?;
    }
    place(sys, root, m, &mount, want, target)?;
    // fsconfig(2) takes no iversion or silent flag (EINVAL): a remount of
    // the placed filesystem sets them, with lazytime, which it would clear.
    let remount = remount_options(m);
    if remount.is_empty() {
        return Ok(());
    }
    crate::engine::mount::sb_flags::apply(sys, root, dest, &remount).map_err(|e| fail(Detail::Remount(e)))
}

/// `remount`: what is mounted at the destination changes, with runc's one
/// mount(2) call. Not fspick and mount_setattr: a legacy remount sets the
/// superblock flags it is not given (ro, sync, mand, lazytime, iversion)
/// back to off and replaces the mount's own flags (keeping its atime mode
/// when none is named), and fsconfig takes no iversion or silent. A bind's
/// remount (MS_BIND) changes the mount's flags alone; its source is not
/// read. Nothing mounted there: EINVAL, as runc's.
fn remount(sys: &dyn Syscall, root: &OwnedFd, m: &PlannedMount) -> Result<(), RootfsError> {
    let fail = |detail: Detail| failed(m, detail);
    let call = |call: &'static str, path: &Path| call_failed(m, call, path);
    let dest = &m.destination;
    let (want, kind_flags, late_ro) = match &m.kind {
        Kind::Bind { .. } => (Want::File, MsFlags::MS_BIND, false),
        Kind::New { fstype } if fstype == "proc" || fstype == "sysfs" => (Want::PlainDir, m.superblock.set, false),
        // runc remounts a tmpfs, and anything on /dev, writable, then makes
        // the mount (not the filesystem) read-only once it is set up.
        Kind::New { fstype } => (Want::Dir, m.superblock.set, fstype == "tmpfs" || dest == Path::new("/dev")),
    };
    let target = sys.open_target(root, dest, want).map_err(|e| fail(e.into()))?;
    refuse_inside_proc(sys, &target, m).map_err(fail)?;
    let mut flags = MsFlags::MS_REMOUNT | kind_flags | m.flags.set;
    let read_only_after = late_ro && flags.contains(MsFlags::MS_RDONLY);
    if read_only_after {
        flags.remove(MsFlags::MS_RDONLY);
    }
    sys.remount(&target, flags, &m.data.join(",")).map_err(call("mount(MS_REMOUNT)", dest))?;
    if read_only_after {
        sys.mount_setattr(&target, MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0).map_err(call("mount_setattr", dest))?;
    }
    if m.recursive.named != MsFlags::empty() {
        sys.mount_setattr(&target, m.recursive.to_attr(), libc::AT_RECURSIVE).map_err(call("mount_setattr", dest))?;
    }
    for flags in &m.propagation {
        let (attr, recursive) = setattr_of(*flags);
        sys.mount_setattr(&target, attr, recursive).map_err(call("mount_setattr", dest))?;
    }
    Ok(())
}

/// The superblock options a remount of `m` takes: none unless iversion or
/// silent is named.
fn remount_options(m: &PlannedMount) -> Vec<String> {
    const BY_REMOUNT: &[(MsFlags, &str, &str)] = &[
        (MsFlags::MS_LAZYTIME, "lazytime", "nolazytime"),
        (MsFlags::MS_I_VERSION, "iversion", "noiversion"),
        (MsFlags::MS_SILENT, "silent", "loud"),
    ];
    if !m.superblock.named.intersects(MsFlags::MS_I_VERSION | MsFlags::MS_SILENT) {
        return Vec::new();
    }
    let named = BY_REMOUNT.iter().filter(|(flag, _, _)| m.superblock.named.contains(*flag));
    named.map(|(flag, on, off)| if m.superblock.set.contains(*flag) { on } else { off }.to_string()).collect()
}

/// `m` failed with `detail`.
fn failed(m: &PlannedMount, detail: Detail) -> RootfsError {
    RootfsError { src: source_name(m), dest: m.destination.clone(), detail }
}

/// `m` failed in `call` on `path` with the errno given.
fn call_failed<'a>(m: &'a PlannedMount, call: &'static str, path: &Path) -> impl FnOnce(Errno) -> RootfsError + 'a {
    let path = path.to_path_buf();
    move |errno| failed(m, Detail::Call { call, path, errno })
}

/// Moves in the idmapped bind `m` whose `tree` the host side of `create`
/// cloned, mapped and gave its flags (`idmap::detached`), at its place in
/// the spec's order; then its propagation, as for any bind.
pub fn attach(sys: &dyn Syscall, root: &OwnedFd, m: &PlannedMount, tree: &OwnedFd) -> Result<(), RootfsError> {
    let source = m.source.as_deref().unwrap_or(Path::new(""));
    let is_dir = sys.is_dir(tree).map_err(call_failed(m, "fstat", source))?;
    place(sys, root, m, tree, if is_dir { Want::Dir } else { Want::File }, None)
}

/// A tmpfs over a directory the image has gets that directory's mode, as
/// runc gives it (`mode=` first in its data): else its root would be 1777,
/// and any user of the container could write where the image let none. The
/// directory, opened inside the rootfs, is the mount's target too. None
/// where the image has no directory there (one made for the mount stays
/// the tmpfs's 1777, as with runc).
fn image_dir_mode(sys: &dyn Syscall, root: &OwnedFd, m: &PlannedMount) -> Result<Option<(OwnedFd, u32)>, RootfsError> {
    // Another failure is open_target's to name, in place().
    let Ok(dir) = sys.open_in_root(root, &m.destination, libc::O_PATH | libc::O_DIRECTORY) else { return Ok(None) };
    let (mode, _) = sys.file_kind(&dir).map_err(call_failed(m, "fstat", &m.destination))?;
    Ok(Some((dir, mode & 0o7777)))
}

/// The detached `mount` onto `m`'s destination, opened (made when missing)
/// inside the rootfs unless `target` is it already, then its propagation.
fn place(
    sys: &dyn Syscall,
    root: &OwnedFd,
    m: &PlannedMount,
    mount: &OwnedFd,
    want: Want,
    target: Option<OwnedFd>,
) -> Result<(), RootfsError> {
    let fail = |detail: Detail| failed(m, detail);
    let call = |call: &'static str, path: &Path| call_failed(m, call, path);
    let dest = &m.destination;
    let target = match target {
        Some(target) => target,
        None => sys.open_target(root, dest, want).map_err(|e| fail(e.into()))?,
    };
    refuse_inside_proc(sys, &target, m).map_err(fail)?;
    if m.copyup {
        // Into the new tmpfs while only we can see it; the target is still
        // the image's directory.
        sys.copy_tree(&target, mount).map_err(|e| fail(Detail::Copy(e)))?;
        if m.flags.to_attr().set & libc::MOUNT_ATTR_RDONLY != 0 {
            sys.mount_setattr(mount, MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0).map_err(call("mount_setattr", dest))?;
        }
    }
    sys.move_mount(mount, &target).map_err(call("move_mount", dest))?;
    for flags in &m.propagation {
        let (attr, recursive) = setattr_of(*flags);
        sys.mount_setattr(mount, attr, recursive).map_err(call("mount_setattr", dest))?;
    }
    Ok(())
}

/// runc ≥ 1.2's rule where the mount lands, on the opened target: nothing
/// over a procfs file but those lxcfs emulates, and on a procfs only another
/// procfs (create checks the paths first; this holds if the image changed
/// since, or a mount before this one put a procfs there).
fn refuse_inside_proc(sys: &dyn Syscall, target: &OwnedFd, m: &PlannedMount) -> Result<(), Detail> {
    let magic = sys.fs_magic(target).map_err(|errno| Detail::Call { call: "fstatfs", path: m.destination.clone(), errno })?;
    if magic != nix::sys::statfs::PROC_SUPER_MAGIC.0 {
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

/// A `tmpcopyup` tmpfs is made writable and turned read-only after the
/// copy, as runc remounts it.
fn writable_for_copyup(mut fs: NewFs, m: &PlannedMount) -> NewFs {
    if m.copyup {
        fs.attrs &= !libc::MOUNT_ATTR_RDONLY;
    }
    fs
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
    use std::path::PathBuf;

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

    /// CVE-2021-30465's race against this step, on the kernel: while a
    /// thread swaps the destination's directory with a symlink to a host
    /// directory (renameat2 RENAME_EXCHANGE), 300 tmpfs mounts are made
    /// there. None may land on the host directory, and some must land where
    /// asked (else the race tested nothing).
    #[test]
    fn on_the_kernel_a_racing_symlink_never_leads_a_mount_out() {
        if !nix::unistd::geteuid().is_root() {
            return eprintln!("SKIP: mounts need root");
        }
        let (passed, text) = crate::engine::rootfs::in_child("engine::rootfs::mounts::tests::race_child", "RUSTPOD_RACE_CHILD");
        assert!(passed, "{text}");
    }

    #[test]
    fn race_child() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;

        use crate::sys::syscall::LinuxSyscall;

        let Some(scratch) = std::env::var_os("RUSTPOD_RACE_CHILD") else { return };
        let scratch = PathBuf::from(scratch);
        let (rootfs, victim) = (scratch.join("rootfs"), scratch.join("host-victim"));
        std::fs::create_dir_all(rootfs.join("race/target")).unwrap();
        std::fs::create_dir_all(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, rootfs.join("race/link")).unwrap();
        // Where the link leads inside the root exists too, so a mount that
        // follows it succeeds there (one that fails tests nothing).
        std::fs::create_dir_all(rootfs.join(victim.strip_prefix("/").unwrap())).unwrap();
        // This thread only, and no mount propagates out or in.
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
        nix::mount::mount(None::<&str>, "/", None::<&str>, MsFlags::MS_PRIVATE | MsFlags::MS_REC, None::<&str>).unwrap();
        let root: OwnedFd = std::fs::File::open(&rootfs).unwrap().into();
        let stop = Arc::new(AtomicBool::new(false));
        // Paused while a mount is looked at and undone, so its path holds.
        let (pause, paused) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let swapper = {
            let (stop, race) = (stop.clone(), rootfs.join("race"));
            let (pause, paused) = (pause.clone(), paused.clone());
            std::thread::spawn(move || {
                let dir = std::fs::File::open(&race).unwrap();
                let fd = std::os::fd::AsRawFd::as_raw_fd(&dir);
                let mut swaps = 0u64;
                let swap = || nix::fcntl::renameat2(Some(fd), "target", Some(fd), "link", nix::fcntl::RenameFlags::RENAME_EXCHANGE);
                while !stop.load(Ordering::Relaxed) {
                    paused.store(pause.load(Ordering::SeqCst), Ordering::SeqCst);
                    if pause.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                        continue;
                    }
                    // EBUSY while a mount is on the directory.
                    match swap() {
                        Ok(()) => swaps += 1,
                        Err(nix::errno::Errno::EBUSY) => {}
                        Err(e) => panic!("renameat2: {e}"),
                    }
                }
                if swaps % 2 == 1 {
                    swap().unwrap();
                }
            })
        };
        let (mut asked, mut elsewhere, mut tries) = (0, 0, 0);
        // 300 tries, and more until one lands where asked: on a loaded
        // machine the swapper can win each of the first 300.
        while tries < 300 || (asked == 0 && tries < 3000) {
            tries += 1;
            let m = planned("tmpfs", "rustpod-race", "/race/target", &[]);
            if make(&LinuxSyscall, &root, &m).is_err() {
                continue; // a swap mid-walk may fail the step: never a way out
            }
            pause.store(true, Ordering::SeqCst);
            while !paused.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let info = std::fs::read_to_string("/proc/thread-self/mountinfo").unwrap();
            let ours = info.lines().find(|l| l.contains(" - tmpfs rustpod-race ")).expect("the mount made is listed");
            let point = PathBuf::from(ours.split_whitespace().nth(4).unwrap());
            assert!(!point.starts_with(&victim), "a mount landed on the host directory: {}", point.display());
            assert!(point.starts_with(&rootfs), "a mount left the rootfs: {}", point.display());
            if point == rootfs.join("race/target") || point == rootfs.join("race/link") {
                asked += 1;
            } else {
                elsewhere += 1; // the link resolved inside the root: made there
            }
            nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH).unwrap();
            pause.store(false, Ordering::SeqCst);
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        eprintln!("race: {asked} where asked, {elsewhere} inside the rootfs through the link");
        assert!(asked > 0, "no mount landed where asked: the race tested nothing");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "nothing made in the host directory");
    }

    #[test]
    fn a_new_filesystem_is_made_with_its_flags_then_moved_onto_its_destination() {
        let sys = Recording::default();
        let m = planned("tmpfs", "tmpfs", "/dev", &["nosuid", "strictatime", "mode=755", "size=65536k", "sync"]);
        make(&sys, &root(), &m).unwrap();
        let fs = NewFs {
            fstype: "tmpfs".into(),
            params: vec![
                ("source".into(), Some("tmpfs".into())),
                ("mode".into(), Some("755".into())),
                ("size".into(), Some("65536k".into())),
                ("sync".into(), None),
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

    /// fsconfig(2) takes no iversion: the placed tmpfs is remounted with it
    /// and with lazytime, which a remount without it would clear again.
    #[test]
    fn iversion_is_set_by_a_remount_that_keeps_lazytime() {
        let sys = Recording::default();
        make(&sys, &root(), &planned("tmpfs", "tmpfs", "/t", &["lazytime", "iversion", "nosuid"])).unwrap();
        let remounts: Vec<MsFlags> =
            sys.calls().into_iter().filter_map(|c| if let Call::Remount { flags, .. } = c { Some(flags) } else { None }).collect();
        assert_eq!(remounts.len(), 1, "{:?}", sys.calls());
        assert!(remounts[0].contains(MsFlags::MS_REMOUNT | MsFlags::MS_I_VERSION | MsFlags::MS_LAZYTIME), "{:?}", remounts[0]);
        assert_eq!(
            remount_options(&planned("tmpfs", "tmpfs", "/t", &["lazytime", "nosuid"])),
            Vec::<String>::new(),
            "fsconfig sets lazytime"
        );
        assert_eq!(remount_options(&planned("tmpfs", "tmpfs", "/t", &["silent", "nolazytime"])), ["nolazytime", "silent"]);
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
        let sys = Recording::failing("open_target", Errno::ENOTDIR).with_missing("/etc/passwd/x");
        let err = make(&sys, &root(), &m).unwrap_err();
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
    /// for a bind; such a mount stays the engine's (it does the same).
    /// runc's order: the tmpfs is filled while writable, then made read-only;
    /// here before anything can see it, from the image's directory the
    /// destination still is.
    #[test]
    fn a_tmpcopyup_tmpfs_is_filled_from_the_image_then_made_read_only_and_moved() {
        let sys = Recording::default();
        let m = planned("tmpfs", "tmpfs", "/etc", &["tmpcopyup", "ro", "nosuid"]);
        make(&sys, &root(), &m).unwrap();
        let calls = sys.calls();
        let Call::NewFs(fs) = &calls[2] else { panic!("{calls:?}") };
        assert_eq!(fs.attrs, libc::MOUNT_ATTR_NOSUID, "made without MOUNT_ATTR_RDONLY");
        assert_eq!(
            calls[3..],
            [
                Call::Statfs { path: "/etc".into() },
                Call::CopyTree { from: "/etc".into(), to: "fs:tmpfs".into() },
                set_attr("fs:tmpfs", MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0),
                Call::Move { from: "fs:tmpfs".into(), to: "/etc".into() },
            ]
        );
    }

    /// runc's rule: a tmpfs over an image directory takes its mode (else it
    /// would be 1777, writable by any user of the container), and the
    /// directory looked at is where it goes; a `mode=` of the spec's, or no
    /// directory in the image, leaves the tmpfs's own.
    #[test]
    fn a_tmpfs_over_an_image_directory_takes_its_mode() {
        let image_dir = || Recording::default().with_node("/srv", libc::S_IFDIR | 0o750, 0);
        let sys = image_dir();
        make(&sys, &root(), &planned("tmpfs", "tmpfs", "/srv", &["size=1m"])).unwrap();
        let fs = NewFs {
            fstype: "tmpfs".into(),
            params: vec![("source".into(), Some("tmpfs".into())), ("size".into(), Some("1m".into())), ("mode".into(), Some("0750".into()))],
            attrs: 0,
        };
        let want = vec![
            Call::Open { path: "/srv".into(), flags: libc::O_PATH | libc::O_DIRECTORY },
            Call::Fstat { path: "/srv".into() },
            Call::NewFs(fs),
            Call::Statfs { path: "/srv".into() },
            Call::Move { from: "fs:tmpfs".into(), to: "/srv".into() },
        ];
        assert_eq!(sys.calls(), want);
        let sys = image_dir();
        make(&sys, &root(), &planned("tmpfs", "tmpfs", "/srv", &["mode=1777"])).unwrap();
        assert!(
            matches!(&sys.calls()[0], Call::NewFs(fs) if !fs.params.contains(&("mode".into(), Some("0750".into())))),
            "{:?}",
            sys.calls()
        );
        let sys = Recording::default().with_missing("/new");
        make(&sys, &root(), &planned("tmpfs", "tmpfs", "/new", &[])).unwrap();
        let Some(Call::NewFs(fs)) = sys.calls().into_iter().find(|c| matches!(c, Call::NewFs(_))) else { panic!("{:?}", sys.calls()) };
        assert!(!fs.params.iter().any(|(key, _)| key == "mode"), "no image directory: {:?}", fs.params);
        assert!(sys.calls().contains(&Call::Target { path: "/new".into(), want: Want::Dir }), "made as runc makes it");
    }

    #[test]
    fn a_failed_copy_names_the_mount_the_entry_the_call_and_the_errno_and_moves_nothing() {
        let sys = Recording::failing("copy_tree", Errno::ENOSPC);
        let err = make(&sys, &root(), &planned("tmpfs", "tmpfs", "/etc", &["tmpcopyup"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"error mounting "tmpfs" to rootfs at "/etc": tmpcopyup: copying the image's files: mkdirat sub: ENOSPC: No space left on device"#
        );
        assert!(!sys.calls().iter().any(|c| matches!(c, Call::Move { .. })), "nothing moved in");
    }

    /// fsconfig(2) takes lazytime as a flag; a later nolazytime leaves it
    /// clear, as a new filesystem starts.
    #[test]
    fn lazytime_is_an_fsconfig_flag_and_nolazytime_after_it_leaves_none() {
        for (options, want) in [(&["lazytime"][..], true), (&["lazytime", "nolazytime"][..], false)] {
            let sys = Recording::default();
            make(&sys, &root(), &planned("tmpfs", "tmpfs", "/lazy", options)).unwrap();
            let Some(Call::NewFs(fs)) = sys.calls().into_iter().find(|c| matches!(c, Call::NewFs(_))) else { panic!("{:?}", sys.calls()) };
            assert_eq!(fs.params.contains(&("lazytime".to_string(), None)), want, "{options:?}: {:?}", fs.params);
        }
    }

    #[test]
    fn what_is_not_covered_yet_is_refused_before_any_call() {
        let sys = Recording::default();
        let err = make(&sys, &root(), &planned("bind", "/src", "/mnt", &["rbind", "idmap"])).unwrap_err();
        assert_eq!(err.detail, Detail::NotCovered("an idmapped mount"));
        assert!(sys.calls().is_empty());
    }

    fn remount_call(path: &str, flags: MsFlags, data: &str) -> Call {
        Call::Remount { path: path.into(), flags, data: data.into() }
    }

    /// A remount changes what is at the destination: nothing is made or
    /// moved, and the flags and data are runc's mount(2) call's.
    #[test]
    fn a_remount_is_runcs_one_mount_call_on_the_opened_destination() {
        let ro_nosuid = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID;
        for (typ, dest, options, want, data) in [
            ("proc", "/proc", &["remount", "ro", "nosuid"][..], Want::PlainDir, ""),
            ("ext4", "/data", &["remount", "ro", "nosuid", "lazytime", "errors=remount-ro"][..], Want::Dir, "errors=remount-ro"),
            ("bind", "/etc/hosts", &["bind", "remount", "ro", "nosuid"][..], Want::File, ""),
        ] {
            let sys = Recording::default();
            make(&sys, &root(), &planned(typ, "/src", dest, options)).unwrap();
            let kind = match typ {
                "bind" => MsFlags::MS_BIND,
                "ext4" => MsFlags::MS_LAZYTIME,
                _ => MsFlags::empty(),
            };
            let want_calls = [
                Call::Target { path: dest.into(), want },
                Call::Statfs { path: dest.into() },
                remount_call(dest, MsFlags::MS_REMOUNT | ro_nosuid | kind, data),
            ];
            assert_eq!(sys.calls(), want_calls, "{options:?}");
        }
    }

    /// runc remounts a tmpfs writable and makes only the mount read-only
    /// after: the filesystem stays rw, as mountinfo shows under runc.
    #[test]
    fn a_read_only_tmpfs_remount_leaves_the_filesystem_writable_and_the_mount_read_only() {
        let sys = Recording::default();
        make(&sys, &root(), &planned("tmpfs", "tmpfs", "/t", &["remount", "ro", "size=2m", "rslave"])).unwrap();
        let calls = sys.calls();
        assert_eq!(calls[2], remount_call("/t", MsFlags::MS_REMOUNT, "size=2m"));
        assert_eq!(calls[3], set_attr("/t", MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0));
        let (slave, recursive) = setattr_of(MsFlags::MS_SLAVE | MsFlags::MS_REC);
        assert_eq!(calls[4], set_attr("/t", slave, recursive));
        assert_eq!(calls.len(), 5, "{calls:?}");
    }

    #[test]
    fn a_remount_with_nothing_mounted_there_fails_in_one_line_naming_the_call() {
        let sys = Recording::default().failing_at("remount", "/t", nix::errno::Errno::EINVAL);
        let err = make(&sys, &root(), &planned("tmpfs", "tmpfs", "/t", &["remount"])).unwrap_err();
        assert_eq!(err.to_string(), r#"error mounting "tmpfs" to rootfs at "/t": mount(MS_REMOUNT) /t: EINVAL: Invalid argument"#);
    }
}
