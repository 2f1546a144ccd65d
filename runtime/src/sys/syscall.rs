//! The syscalls of the rootfs and mount steps behind one trait, as youki's
//! `libcontainer::syscall::Syscall`: the steps take a `&dyn Syscall`, the
//! runtime passes [`LinuxSyscall`], and unit tests pass a [`Recording`]
//! double, so which flags a step sets, in what order, on which path, and
//! what it refuses is tested without root or a mount namespace.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::mount::{mount, MsFlags};
use nix::sys::statvfs::{fstatvfs, FsFlags};

use crate::sys::in_root;
use crate::sys::mount_api::{self, MountAttr};

pub trait Syscall {
    /// openat2(2) of `path` inside `root` (RESOLVE_IN_ROOT, see `in_root`).
    fn open_in_root(&self, root: &OwnedFd, path: &Path, flags: i32) -> io::Result<OwnedFd>;

    /// mount(2) with no source, type or data on the mount `target` is open
    /// on, through `/proc/self/fd`. Only `sb_flags`' MS_REMOUNT uses it: a
    /// superblock flag is the one change mount_setattr cannot make.
    fn mount_flags(&self, target: &OwnedFd, flags: MsFlags) -> nix::Result<()>;

    /// mount_setattr(2) on the mount `target` is open on: its attributes
    /// and propagation (`AT_RECURSIVE` in `flags`: the mounts below too).
    fn mount_setattr(&self, target: &OwnedFd, attr: MountAttr, flags: libc::c_int) -> nix::Result<()>;

    /// fstatvfs(2): the flags of the mount `target` is open on.
    fn mount_flags_of(&self, target: &OwnedFd) -> nix::Result<FsFlags>;
}

/// The kernel.
pub struct LinuxSyscall;

impl Syscall for LinuxSyscall {
    fn open_in_root(&self, root: &OwnedFd, path: &Path, flags: i32) -> io::Result<OwnedFd> {
        in_root::open(Some(root), path, flags)
    }

    fn mount_flags(&self, target: &OwnedFd, flags: MsFlags) -> nix::Result<()> {
        // Through the descriptor, so the path is never looked up again.
        let path = format!("/proc/self/fd/{}", target.as_raw_fd());
        mount(None::<&str>, path.as_str(), None::<&str>, flags, None::<&str>)
    }

    fn mount_setattr(&self, target: &OwnedFd, attr: MountAttr, flags: libc::c_int) -> nix::Result<()> {
        mount_api::mount_setattr(target, attr, flags)
    }

    fn mount_flags_of(&self, target: &OwnedFd) -> nix::Result<FsFlags> {
        fstatvfs(target).map(|s| s.flags())
    }
}

#[cfg(test)]
pub use recording::{Call, Recording};

/// The test double: records each call with the path its descriptor was
/// opened for, and answers from what the test set.
#[cfg(test)]
mod recording {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::os::fd::RawFd;
    use std::path::PathBuf;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Call {
        Open { path: PathBuf, flags: i32 },
        Mount { path: PathBuf, flags: MsFlags },
        SetAttr { path: PathBuf, attr: MountAttr, flags: libc::c_int },
        Statvfs { path: PathBuf },
    }

    #[derive(Default)]
    pub struct Recording {
        calls: RefCell<Vec<Call>>,
        opened: RefCell<HashMap<RawFd, PathBuf>>,
        current: FsFlags,
        open_fails: Option<nix::errno::Errno>,
        setattr_fails: Option<nix::errno::Errno>,
    }

    impl Recording {
        /// A double whose mounts have the flags `current` (`mount_flags_of`).
        pub fn with_mount_flags(current: FsFlags) -> Self {
            Recording { current, ..Default::default() }
        }

        /// A double whose every open fails with `errno`.
        pub fn failing_open(errno: nix::errno::Errno) -> Self {
            Recording { open_fails: Some(errno), ..Default::default() }
        }

        /// A double whose every mount_setattr fails with `errno`.
        pub fn failing_setattr(errno: nix::errno::Errno) -> Self {
            Recording { setattr_fails: Some(errno), ..Default::default() }
        }

        pub fn calls(&self) -> Vec<Call> {
            self.calls.borrow().clone()
        }

        fn path_of(&self, fd: &OwnedFd) -> PathBuf {
            self.opened.borrow().get(&fd.as_raw_fd()).cloned().unwrap_or_default()
        }
    }

    impl Syscall for Recording {
        fn open_in_root(&self, _root: &OwnedFd, path: &Path, flags: i32) -> io::Result<OwnedFd> {
            self.calls.borrow_mut().push(Call::Open { path: path.to_path_buf(), flags });
            if let Some(errno) = self.open_fails {
                return Err(errno.into());
            }
            // A real descriptor, so the step can hold and drop it.
            let fd: OwnedFd = std::fs::File::open("/dev/null")?.into();
            self.opened.borrow_mut().insert(fd.as_raw_fd(), path.to_path_buf());
            Ok(fd)
        }

        fn mount_flags(&self, target: &OwnedFd, flags: MsFlags) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Mount { path: self.path_of(target), flags });
            Ok(())
        }

        fn mount_setattr(&self, target: &OwnedFd, attr: MountAttr, flags: libc::c_int) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::SetAttr { path: self.path_of(target), attr, flags });
            self.setattr_fails.map_or(Ok(()), Err)
        }

        fn mount_flags_of(&self, target: &OwnedFd) -> nix::Result<FsFlags> {
            self.calls.borrow_mut().push(Call::Statvfs { path: self.path_of(target) });
            Ok(self.current)
        }
    }
}
