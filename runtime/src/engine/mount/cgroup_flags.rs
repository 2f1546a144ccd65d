//! The `ro`, `nosuid`, `nodev` and `noexec` of a `cgroup` mount on a v1 or
//! hybrid host: the engine drops them there (a writable cgroupfs lets a
//! container lift its own limits), so our createContainer step
//! (`rootfs_hook`) sets them on the whole mounted tree before pivot_root.
//! On a v2-only host the engine mounts cgroup2 (or binds it) with them.
//! Its syscalls go through the `Syscall` seam, except the remount fallback
//! for kernels without mount_setattr.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{mount, MsFlags};
use oci_spec::runtime::Spec;

use crate::engine::cgroup::fs::{is_unified, Hierarchy};
use crate::engine::mount::step_error::StepError;
use crate::sys::in_root;
use crate::sys::mount_api::MountAttr;
use crate::sys::syscall::Syscall;

/// The options this module applies, with their mount(2) flag and
/// mount_setattr(2) attribute.
const FLAGS: &[(&str, MsFlags, u64)] = &[
    ("ro", MsFlags::MS_RDONLY, libc::MOUNT_ATTR_RDONLY),
    ("nosuid", MsFlags::MS_NOSUID, libc::MOUNT_ATTR_NOSUID),
    ("nodev", MsFlags::MS_NODEV, libc::MOUNT_ATTR_NODEV),
    ("noexec", MsFlags::MS_NOEXEC, libc::MOUNT_ATTR_NOEXEC),
];

/// One cgroup mount: where it goes and which of [`FLAGS`] it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMountFlags {
    pub destination: PathBuf,
    pub options: Vec<String>,
}

/// The cgroup mounts of `spec` that ask for any of [`FLAGS`], on a host
/// whose `cgroups` make the engine take its v1 path; none on a v2-only host,
/// so a default spec needs no rootfs hook there. Call before
/// `cgroup_mount::rewrite`, which turns some of them into tmpfs + binds.
pub fn wanted(spec: &Spec, cgroups: &[Hierarchy]) -> Vec<CgroupMountFlags> {
    if is_unified(cgroups) {
        return Vec::new();
    }
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    mounts
        .iter()
        .filter(|m| m.typ().as_deref() == Some("cgroup"))
        .filter_map(|m| {
            let options: Vec<String> =
                m.options().as_deref().unwrap_or_default().iter().filter(|o| FLAGS.iter().any(|(name, _, _)| name == o)).cloned().collect();
            (!options.is_empty()).then(|| CgroupMountFlags { destination: m.destination().clone(), options })
        })
        .collect()
}

/// Sets `options` on the mount at `dest` (resolved inside the rootfs, so a
/// symlink cannot point it at the host) and on every mount below it.
pub fn apply(sys: &dyn Syscall, root: &OwnedFd, dest: &Path, options: &[String]) -> Result<(), StepError> {
    let (flags, attrs) = parse(dest, options)?;
    let target = sys.open_in_root(root, dest, libc::O_PATH | libc::O_DIRECTORY).map_err(|e| StepError::open(dest, &e))?;
    // One step for the tmpfs and each controller mounted in it, leaving
    // their atime settings alone.
    match sys.mount_setattr(&target, MountAttr::flags(attrs, 0), libc::AT_RECURSIVE) {
        Ok(()) => Ok(()),
        // Kernels before 5.12: remount each mount of the tree instead.
        Err(nix::errno::Errno::ENOSYS) => remount_tree(&target, flags),
        Err(errno) => Err(StepError::call("mount_setattr(AT_RECURSIVE)", dest, &options.join(","), errno)),
    }
}

fn parse(dest: &Path, options: &[String]) -> Result<(MsFlags, u64), StepError> {
    let mut flags = MsFlags::empty();
    let mut attrs = 0;
    for option in options {
        let (_, flag, attr) = FLAGS.iter().find(|(name, _, _)| name == option).ok_or_else(|| StepError::NotOurs {
            dest: dest.to_path_buf(),
            option: option.clone(),
            kind: "cgroup mount flag",
        })?;
        flags |= *flag;
        attrs |= attr;
    }
    Ok((flags, attrs))
}

/// The fallback: MS_REMOUNT|MS_BIND of the target and of each mount below
/// it, keeping each one's own flags.
fn remount_tree(target: &OwnedFd, flags: MsFlags) -> Result<(), StepError> {
    let fd_path = PathBuf::from(format!("/proc/self/fd/{}", target.as_raw_fd()));
    let top = std::fs::read_link(&fd_path).map_err(|e| StepError::path("readlink", &fd_path, &e))?;
    let mountinfo = Path::new("/proc/self/mountinfo");
    let info = std::fs::read_to_string(mountinfo).map_err(|e| StepError::path("read", mountinfo, &e))?;
    for (point, current) in mounts_under(&info, &top) {
        let fd = in_root::open(None, &point, libc::O_PATH | libc::O_NOFOLLOW).map_err(|e| StepError::path("open", &point, &e))?;
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let all = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | current | flags;
        mount(None::<&str>, path.as_str(), None::<&str>, all, None::<&str>)
            .map_err(|errno| StepError::call("mount(MS_REMOUNT|MS_BIND)", &point, &format!("{all:?}"), errno))?;
    }
    Ok(())
}

/// (mount point, its per-mount flags) of `top` and every mount below it.
fn mounts_under(mountinfo: &str, top: &Path) -> Vec<(PathBuf, MsFlags)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let point = PathBuf::from(fields.nth(4)?);
            let options = fields.next()?;
            point.starts_with(top).then(|| (point, per_mount_flags(options)))
        })
        .collect()
}

fn per_mount_flags(options: &str) -> MsFlags {
    options.split(',').fold(MsFlags::empty(), |acc, o| {
        acc | match o {
            "ro" => MsFlags::MS_RDONLY,
            "nosuid" => MsFlags::MS_NOSUID,
            "nodev" => MsFlags::MS_NODEV,
            "noexec" => MsFlags::MS_NOEXEC,
            "noatime" => MsFlags::MS_NOATIME,
            "nodiratime" => MsFlags::MS_NODIRATIME,
            "relatime" => MsFlags::MS_RELATIME,
            _ => MsFlags::empty(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::syscall::{Call, Recording};

    #[test]
    fn keeps_only_the_flags_it_applies() {
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "mounts": [
                {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                 "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
                {"destination": "/proc", "type": "proc", "source": "proc", "options": ["ro"]},
                {"destination": "/c2", "type": "cgroup", "source": "cgroup", "options": ["rw"]}
            ]
        }))
        .unwrap();
        let wanted = wanted(&spec, &hybrid());
        assert_eq!(wanted.len(), 1);
        assert_eq!(wanted[0].destination, PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(wanted[0].options, vec!["nosuid", "noexec", "nodev", "ro"]);
    }

    fn hierarchy(mount_point: &str, controllers: &[&str], unified: bool) -> Hierarchy {
        let controllers = controllers.iter().map(|c| c.to_string()).collect();
        Hierarchy { mount_point: PathBuf::from(mount_point), controllers, unified }
    }

    fn hybrid() -> Vec<Hierarchy> {
        vec![hierarchy("/sys/fs/cgroup/pids", &["pids"], false), hierarchy("/sys/fs/cgroup/unified", &[], true)]
    }

    #[test]
    fn a_v2_only_host_wants_none_as_the_engine_mounts_cgroup2_with_them() {
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "mounts": [{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                        "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}]
        }))
        .unwrap();
        assert_eq!(wanted(&spec, &[hierarchy("/sys/fs/cgroup", &[], true)]), vec![]);
        assert_eq!(wanted(&spec, &hybrid()).len(), 1);
    }

    #[test]
    fn an_option_it_does_not_apply_is_named() {
        let dest = Path::new("/sys/fs/cgroup");
        assert_eq!(
            parse(dest, &["ro".into(), "nodev".into()]).unwrap(),
            (MsFlags::MS_RDONLY | MsFlags::MS_NODEV, libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NODEV)
        );
        let err = parse(dest, &["ro".into(), "rw".into()]).unwrap_err();
        assert_eq!(err.to_string(), r#"/sys/fs/cgroup: "rw" is not a cgroup mount flag"#);
    }

    fn apply_to(sys: &Recording, options: &[&str]) -> Result<(), StepError> {
        let root: OwnedFd = std::fs::File::open("/").unwrap().into();
        let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        apply(sys, &root, Path::new("/sys/fs/cgroup"), &options)
    }

    #[test]
    fn sets_the_attrs_on_the_whole_tree_in_one_call() {
        let sys = Recording::default();
        apply_to(&sys, &["ro", "nosuid", "nodev", "noexec"]).unwrap();
        let dest = PathBuf::from("/sys/fs/cgroup");
        let attrs = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC;
        assert_eq!(
            sys.calls(),
            vec![
                Call::Open { path: dest.clone(), flags: libc::O_PATH | libc::O_DIRECTORY },
                Call::SetAttr { path: dest, attr: MountAttr::flags(attrs, 0), flags: libc::AT_RECURSIVE },
            ]
        );
    }

    #[test]
    fn a_foreign_option_is_refused_before_any_syscall() {
        let sys = Recording::default();
        let err = apply_to(&sys, &["ro", "rbind"]).unwrap_err();
        assert_eq!(err.to_string(), r#"/sys/fs/cgroup: "rbind" is not a cgroup mount flag"#);
        assert_eq!(sys.calls(), vec![]);
    }

    #[test]
    fn a_refused_call_names_the_destination_the_options_the_syscall_and_the_errno() {
        let sys = Recording::failing_setattr(nix::errno::Errno::EPERM);
        let err = apply_to(&sys, &["ro", "nodev"]).unwrap_err();
        assert_eq!(err.to_string(), "mount_setattr(AT_RECURSIVE) /sys/fs/cgroup (ro,nodev): EPERM: Operation not permitted");
    }

    #[test]
    fn finds_the_mounts_of_a_tree_with_their_flags() {
        let info = "72 71 0:45 / /r/sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw\n\
                    73 72 0:29 /c /r/sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                    74 71 0:30 / /r/sys/fs/cgroupx rw - tmpfs tmpfs rw\n";
        let found = mounts_under(info, Path::new("/r/sys/fs/cgroup"));
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].0, PathBuf::from("/r/sys/fs/cgroup/cpu"));
        assert_eq!(found[1].1, MsFlags::MS_RELATIME);
    }
}
