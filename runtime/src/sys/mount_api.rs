//! The new mount API's calls on a mount already open as a descriptor:
//! mount_setattr(2) changes its attributes and propagation without a path,
//! so no `/proc/self/fd` magic link is looked up.

use std::os::fd::{AsRawFd, OwnedFd};

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
    let attr = libc::mount_attr {
        attr_set: attr.set,
        attr_clr: attr.clear,
        propagation: attr.propagation,
        userns_fd: 0,
    };
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
