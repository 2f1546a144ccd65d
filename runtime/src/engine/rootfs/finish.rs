//! The rootfs's last confinement steps, after pivot_root: `readonlyPaths`
//! become read-only binds of themselves, and `maskedPaths` are hidden, a
//! directory under a read-only tmpfs and anything else under a bind of
//! /dev/null. Each path is opened once inside the root (a missing one is
//! skipped, as runc skips it) and bound from that descriptor, so no path is
//! looked up twice. /dev/null is opened without following a symlink and
//! checked to be the 1:3 character device before anything is masked with
//! it (CVE-2025-31133: a /dev/null leading to /proc/sys/kernel/core_pattern
//! would make that file writable). The calls go through the `Syscall` seam.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::engine::rootfs::error::StepFailed;
use crate::sys::io_errno::errno_of;
use crate::sys::mount_api::MountAttr;
use crate::sys::new_mount::NewFs;
use crate::sys::syscall::Syscall;

const STEP_READONLY: &str = "making readonlyPaths read-only";
const STEP_MASKED: &str = "masking maskedPaths";

/// `path` opened inside `root` for a bind, or None when it does not exist.
/// A path under /proc or /sys must be on a procfs or a sysfs: one that leads
/// elsewhere (a symlink or a mount raced in, CVE-2025-52881's class) would
/// leave the real file unmasked, so it is refused.
fn open_existing(sys: &dyn Syscall, root: &OwnedFd, path: &Path, step: &'static str) -> Result<Option<OwnedFd>, StepFailed> {
    let fail = |call: &'static str, errno: Errno| StepFailed { step, call, path: path.to_path_buf(), errno };
    let fd = match sys.open_in_root(root, path, libc::O_PATH) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(fail("openat2", errno_of(&e))),
    };
    let wanted = if path.starts_with("/proc") {
        nix::sys::statfs::PROC_SUPER_MAGIC
    } else if path.starts_with("/sys") {
        nix::sys::statfs::SYSFS_MAGIC
    } else {
        return Ok(Some(fd));
    };
    let magic = sys.fs_magic(&fd).map_err(|errno| fail("fstatfs", errno))?;
    if magic != wanted.0 {
        return Err(fail("fstatfs (not on the filesystem its path names)", Errno::EXDEV));
    }
    Ok(Some(fd))
}

/// Each path becomes a read-only bind of itself (with what is mounted below
/// it); its other flags stay as they are, as runc keeps them.
pub fn readonly_paths(sys: &dyn Syscall, root: &OwnedFd, paths: &[PathBuf]) -> Result<(), StepFailed> {
    for path in paths {
        let fail = |call: &'static str| move |errno: Errno| StepFailed { step: STEP_READONLY, call, path: path.clone(), errno };
        let Some(target) = open_existing(sys, root, path, STEP_READONLY)? else { continue };
        let tree = sys.clone_tree(&target, true).map_err(|e| fail("open_tree")(errno_of(&e)))?;
        sys.mount_setattr(&tree, MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0).map_err(fail("mount_setattr"))?;
        sys.move_mount(&tree, &target).map_err(fail("move_mount"))?;
    }
    Ok(())
}

/// Hides each path: a directory under an empty read-only tmpfs, anything
/// else under a bind of the container's /dev/null, checked first.
pub fn masked_paths(sys: &dyn Syscall, root: &OwnedFd, paths: &[PathBuf]) -> Result<(), StepFailed> {
    let mut null = None;
    for path in paths {
        let fail = |call: &'static str| move |errno: Errno| StepFailed { step: STEP_MASKED, call, path: path.clone(), errno };
        let Some(target) = open_existing(sys, root, path, STEP_MASKED)? else { continue };
        let mask = if sys.is_dir(&target).map_err(fail("fstat"))? {
            let tmpfs =
                NewFs { fstype: "tmpfs".into(), params: vec![("source".into(), Some("tmpfs".into()))], attrs: libc::MOUNT_ATTR_RDONLY };
            sys.new_fs(&tmpfs).map_err(|e| fail("fsmount")(e.errno))?
        } else {
            if null.is_none() {
                null = Some(dev_null(sys, root)?);
            }
            let null = null.as_ref().expect("opened above");
            sys.clone_tree(null, false).map_err(|e| fail("open_tree")(errno_of(&e)))?
        };
        sys.move_mount(&mask, &target).map_err(fail("move_mount"))?;
    }
    Ok(())
}

/// The container's /dev/null, not followed if a symlink, and refused unless
/// it is the 1:3 character device.
fn dev_null(sys: &dyn Syscall, root: &OwnedFd) -> Result<OwnedFd, StepFailed> {
    let path = PathBuf::from("/dev/null");
    let fail = |call: &'static str, errno: Errno| StepFailed { step: STEP_MASKED, call, path: path.clone(), errno };
    let fd = sys.open_in_root(root, &path, libc::O_PATH | libc::O_NOFOLLOW).map_err(|e| fail("openat2", errno_of(&e)))?;
    let (mode, rdev) = sys.file_kind(&fd).map_err(|errno| fail("fstat", errno))?;
    if mode & libc::S_IFMT != libc::S_IFCHR || rdev != libc::makedev(1, 3) {
        // Not /dev/null: a symlink (O_PATH|O_NOFOLLOW opens the link
        // itself), a file or another device. EPERM as runc answers.
        return Err(fail("fstat (not the 1:3 character device)", Errno::EPERM));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::syscall::{Call, Recording};

    fn root() -> OwnedFd {
        std::fs::File::open("/").unwrap().into()
    }

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    fn open(path: &str, flags: i32) -> Call {
        Call::Open { path: path.into(), flags }
    }

    const NULL: (u32, u64) = (libc::S_IFCHR | 0o666, 0);

    fn real_null() -> Recording {
        Recording::default()
            .with_file_source("/proc/kcore")
            .with_node("/dev/null", NULL.0, libc::makedev(1, 3))
            .with_procfs("/proc")
            .with_sysfs("/sys")
    }

    #[test]
    fn a_readonly_path_is_a_read_only_bind_of_itself_and_a_missing_one_is_skipped() {
        let sys = Recording::default().with_missing("/proc/nope").with_procfs("/proc");
        readonly_paths(&sys, &root(), &paths(&["/proc/sys", "/proc/nope"])).unwrap();
        assert_eq!(
            sys.calls(),
            vec![
                open("/proc/sys", libc::O_PATH),
                Call::Statfs { path: "/proc/sys".into() },
                Call::CloneTree { path: "/proc/sys".into(), recursive: true },
                Call::SetAttr { path: "tree:/proc/sys".into(), attr: MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), flags: 0 },
                Call::Move { from: "tree:/proc/sys".into(), to: "/proc/sys".into() },
                open("/proc/nope", libc::O_PATH),
            ]
        );
    }

    #[test]
    fn a_masked_directory_gets_a_read_only_tmpfs_and_a_file_the_checked_dev_null() {
        let sys = real_null();
        masked_paths(&sys, &root(), &paths(&["/sys/firmware", "/proc/kcore"])).unwrap();
        let tmpfs = NewFs { fstype: "tmpfs".into(), params: vec![("source".into(), Some("tmpfs".into()))], attrs: libc::MOUNT_ATTR_RDONLY };
        assert_eq!(
            sys.calls(),
            vec![
                open("/sys/firmware", libc::O_PATH),
                Call::Statfs { path: "/sys/firmware".into() },
                Call::Fstat { path: "/sys/firmware".into() },
                Call::NewFs(tmpfs),
                Call::Move { from: "fs:tmpfs".into(), to: "/sys/firmware".into() },
                open("/proc/kcore", libc::O_PATH),
                Call::Statfs { path: "/proc/kcore".into() },
                Call::Fstat { path: "/proc/kcore".into() },
                open("/dev/null", libc::O_PATH | libc::O_NOFOLLOW),
                Call::Fstat { path: "/dev/null".into() },
                Call::CloneTree { path: "/dev/null".into(), recursive: false },
                Call::Move { from: "tree:/dev/null".into(), to: "/proc/kcore".into() },
            ]
        );
    }

    /// A /proc path that leads off procfs (the rootfs's /proc swapped for a
    /// symlink, or a mount raced in) would leave the real file unmasked.
    #[test]
    fn a_proc_or_sys_path_off_its_filesystem_is_refused() {
        let sys = Recording::default().with_file_source("/proc/kcore").with_node("/dev/null", NULL.0, libc::makedev(1, 3));
        let err = masked_paths(&sys, &root(), &paths(&["/proc/kcore"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "masking maskedPaths: fstatfs (not on the filesystem its path names) /proc/kcore: EXDEV: Cross-device link"
        );
        let err = readonly_paths(&Recording::default().with_procfs("/proc"), &root(), &paths(&["/sys/fs"])).unwrap_err();
        assert_eq!(err.errno, Errno::EXDEV);
        readonly_paths(&Recording::default(), &root(), &paths(&["/etc"])).unwrap();
    }

    #[test]
    fn a_dev_null_that_is_not_1_3_masks_nothing() {
        for (mode, rdev, what) in [
            (libc::S_IFLNK | 0o777, 0, "a symlink"),
            (libc::S_IFREG | 0o644, 0, "a file"),
            (libc::S_IFCHR | 0o666, libc::makedev(1, 5), "/dev/zero"),
        ] {
            let sys = Recording::default().with_file_source("/proc/kcore").with_node("/dev/null", mode, rdev).with_procfs("/proc");
            let err = masked_paths(&sys, &root(), &paths(&["/proc/kcore"])).unwrap_err();
            assert_eq!(err.errno, Errno::EPERM, "{what}");
            assert_eq!(err.path, Path::new("/dev/null"), "{what}");
            assert!(!sys.calls().iter().any(|c| matches!(c, Call::Move { .. })), "{what}: nothing moved");
        }
    }
}
