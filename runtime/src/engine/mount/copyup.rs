//! runc's `tmpcopyup` mount option on the engine's route: a fresh tmpfs
//! starts with a copy of what the image has at its destination. The engine
//! would hand the option to mount(2) as data and fail, so it is taken out
//! of its spec and our createContainer step (`rootfs_hook`) copies, before
//! pivot_root, from a clone of the rootfs mount alone (the tmpfs on top is
//! not in it) into the tmpfs (`sys::copy_tree`). A read-only one is
//! mounted writable and made read-only after the copy, as runc remounts it.
//! Our own rootfs steps copy into the new tmpfs before it is attached
//! (`rootfs::mounts`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::sys::copy_tree::{self, EntryError};
use crate::sys::in_root;
use crate::sys::io_errno::errno_of;
use crate::sys::mount_api::{mount_setattr, MountAttr};

pub fn is_copyup(option: &str) -> bool {
    option == "tmpcopyup"
}

/// Takes `tmpcopyup`, and `ro`/`rw`, out of each mount that has it, as
/// (destination, options) for the hook: `["tmpcopyup"]`, with `"ro"` after
/// it when the last of `ro`/`rw` is `ro`. The engine then mounts the tmpfs
/// writable, so the copy can fill it.
pub fn take(mounts: &mut [oci_spec::runtime::Mount]) -> Vec<(PathBuf, Vec<String>)> {
    crate::engine::mount::rootfs_hook::take_with(mounts, |options| {
        if !options.iter().any(|o| is_copyup(o)) {
            return None;
        }
        let read_only = options.iter().rev().find(|o| *o == "ro" || *o == "rw").is_some_and(|o| o == "ro");
        let rest = options.iter().filter(|o| !is_copyup(o) && *o != "ro" && *o != "rw").cloned().collect();
        let hook = if read_only { vec!["tmpcopyup".to_string(), "ro".to_string()] } else { vec!["tmpcopyup".to_string()] };
        Some((hook, rest))
    })
}

/// Why the copy failed: a step on the destination, or the syscall, the
/// entry (its path under the destination) and the errno.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CopyupError {
    #[error("{what} {}: {errno}", dest.display())]
    Dest { what: &'static str, dest: PathBuf, errno: Errno },
    #[error("copy the image's files into {}: {err}", dest.display())]
    Copy { dest: PathBuf, err: EntryError },
    #[error("mount_setattr(MOUNT_ATTR_RDONLY) the tmpfs at {} after the copy: {errno}", dest.display())]
    ReadOnly { dest: PathBuf, errno: Errno },
}

/// Copies the image's `dest` (in the rootfs mount, under the tmpfs) into
/// the tmpfs mounted at `dest`, then makes that mount read-only if asked.
pub fn apply(root: &OwnedFd, dest: &Path, read_only: bool) -> Result<(), CopyupError> {
    let at = |what: &'static str| move |errno: Errno| CopyupError::Dest { what, dest: dest.to_path_buf(), errno };
    let image = clone_mount(root).map_err(at("open_tree(OPEN_TREE_CLONE) of the rootfs for"))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY;
    let to = in_root::open(Some(root), dest, flags).map_err(|e| at("openat2 (RESOLVE_IN_ROOT) the tmpfs at")(errno_of(&e)))?;
    match in_root::open(Some(&image), dest, flags) {
        Ok(from) => copy_tree::copy_dir(&from, &to).map_err(|err| CopyupError::Copy { dest: dest.to_path_buf(), err })?,
        // Nothing in the image there: an empty tmpfs, as runc.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(at("openat2 (RESOLVE_IN_ROOT) the image's")(errno_of(&e))),
    }
    if read_only {
        // The mount alone, as runc's MS_REMOUNT|MS_BIND|MS_RDONLY.
        mount_setattr(&to, MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0)
            .map_err(|errno| CopyupError::ReadOnly { dest: dest.to_path_buf(), errno })?;
    }
    Ok(())
}

/// A detached copy of the mount `root` is on, without the mounts below it.
fn clone_mount(root: &OwnedFd) -> Result<OwnedFd, Errno> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    // SAFETY: a valid fd and an empty C string; the result is a new fd we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            root.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: open_tree returned a new fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::{Mount, MountBuilder};

    use super::*;

    fn tmpfs(destination: &str, options: &[&str]) -> Mount {
        let options = options.iter().map(|o| o.to_string()).collect::<Vec<_>>();
        MountBuilder::default().destination(destination).typ("tmpfs").source("tmpfs").options(options).build().unwrap()
    }

    #[test]
    fn a_read_only_copyup_is_mounted_writable_and_the_hook_is_told_ro() {
        let mut mounts =
            vec![tmpfs("/a", &["tmpcopyup", "ro", "nosuid"]), tmpfs("/b", &["ro", "tmpcopyup", "rw"]), tmpfs("/c", &["ro", "nodev"])];
        let taken = take(&mut mounts);
        let hook = |opts: &[&str]| opts.iter().map(|o| o.to_string()).collect::<Vec<_>>();
        assert_eq!(taken, vec![(PathBuf::from("/a"), hook(&["tmpcopyup", "ro"])), (PathBuf::from("/b"), hook(&["tmpcopyup"]))]);
        let left: Vec<_> = mounts.iter().map(|m| m.options().clone().unwrap()).collect();
        assert_eq!(left, vec![hook(&["nosuid"]), hook(&[]), hook(&["ro", "nodev"])], "a mount without tmpcopyup keeps its ro");
    }
}
