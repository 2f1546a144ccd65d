//! runc's `tmpcopyup` mount option on the engine's route: a fresh tmpfs
//! starts with a copy of what the image has at its destination. The engine
//! would hand the option to mount(2) as data and fail, so it is taken out
//! of its spec and our createContainer step (`rootfs_hook`) copies, before
//! pivot_root, from a clone of the rootfs mount alone (the tmpfs on top is
//! not in it) into the tmpfs (`sys::copy_tree`). Our own rootfs steps copy
//! into the new tmpfs before it is attached (`rootfs::mounts`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::sys::copy_tree::{self, EntryError};
use crate::sys::in_root;
use crate::sys::io_errno::errno_of;

pub fn is_copyup(option: &str) -> bool {
    option == "tmpcopyup"
}

/// Why the copy failed: a step on the destination, or the syscall, the
/// entry (its path under the destination) and the errno.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CopyupError {
    #[error("{what} {}: {errno}", dest.display())]
    Dest { what: &'static str, dest: PathBuf, errno: Errno },
    #[error("copy the image's files into {}: {err}", dest.display())]
    Copy { dest: PathBuf, err: EntryError },
}

/// Copies the image's `dest` (in the rootfs mount, under the tmpfs) into
/// the tmpfs mounted at `dest`.
pub fn apply(root: &OwnedFd, dest: &Path) -> Result<(), CopyupError> {
    let at = |what: &'static str| move |errno: Errno| CopyupError::Dest { what, dest: dest.to_path_buf(), errno };
    let image = clone_mount(root).map_err(at("open_tree(OPEN_TREE_CLONE) of the rootfs for"))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY;
    let from = match in_root::open(Some(&image), dest, flags) {
        Ok(fd) => fd,
        // Nothing in the image there: an empty tmpfs, as runc.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(at("openat2 (RESOLVE_IN_ROOT) the image's")(errno_of(&e))),
    };
    let to = in_root::open(Some(root), dest, flags).map_err(|e| at("openat2 (RESOLVE_IN_ROOT) the tmpfs at")(errno_of(&e)))?;
    copy_tree::copy_dir(&from, &to).map_err(|err| CopyupError::Copy { dest: dest.to_path_buf(), err })
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

