//! The new mount API's calls on mounts held as descriptors: mount_setattr(2)
//! changes attributes and propagation without a path, so no `/proc/self/fd`
//! magic link is looked up; open_tree(2) gives a detached copy of a mount,
//! and move_mount(2) attaches a detached mount onto a descriptor.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What one mount_setattr(2) changes: the `MOUNT_ATTR_*` bits to set and to
/// clear, and at most one propagation type (`MS_SHARED`, `MS_SLAVE`,
/// `MS_PRIVATE` or `MS_UNBINDABLE`; 0 leaves it alone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MountAttr {
    pub set: u64,
    pub clear: u64,
    pub propagation: u64,
}

impl MountAttr {
    /// Sets `set` and clears `clear`, propagation unchanged.
    pub fn flags(set: u64, clear: u64) -> Self {
        MountAttr { set, clear, propagation: 0 }
    }

    /// Changes only the propagation type.
    pub fn propagation(propagation: u64) -> Self {
        MountAttr { propagation, ..Default::default() }
    }
}

/// mount_setattr(2) on the mount `target` is open on; with `AT_RECURSIVE`
/// in `flags` on every mount below it too.
pub fn mount_setattr(target: &OwnedFd, attr: MountAttr, flags: libc::c_int) -> nix::Result<()> {
    let attr = libc::mount_attr { attr_set: attr.set, attr_clr: attr.clear, propagation: attr.propagation, userns_fd: 0 };
    // SAFETY: a valid fd, an empty C string and a mount_attr of the size given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            target.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | flags,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(nix::errno::Errno::last())
    }
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// open_tree(OPEN_TREE_CLONE): a detached copy of the mount at `source`
/// (with `recursive`, of every mount below it too), for a bind mount.
pub fn open_tree_clone(source: &Path, recursive: bool) -> io::Result<OwnedFd> {
    let path = CString::new(source.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    open_tree(libc::AT_FDCWD, &path, 0, recursive)
}

/// open_tree(OPEN_TREE_CLONE) of the mount `fd` is open on (AT_EMPTY_PATH):
/// a bind of what was already resolved, with no path looked up again.
pub fn clone_tree(fd: &OwnedFd, recursive: bool) -> io::Result<OwnedFd> {
    open_tree(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH as libc::c_uint, recursive)
}

fn open_tree(dirfd: libc::c_int, path: &std::ffi::CStr, flags: libc::c_uint, recursive: bool) -> io::Result<OwnedFd> {
    let mut flags = flags | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: a NUL-terminated path and a descriptor or AT_FDCWD; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, dirfd, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// move_mount(2) of the detached mount `from` onto the path `to` is open on.
pub fn move_mount(from: &OwnedFd, to: &OwnedFd) -> nix::Result<()> {
    // SAFETY: valid descriptors and empty C strings.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            from.as_raw_fd(),
            c"".as_ptr(),
            to.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(nix::errno::Errno::last())
    }
}
