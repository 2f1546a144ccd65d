//! One procfs opened for a whole step and checked once: a new, detached
//! instance (fsopen("proc") and fsmount, attached nowhere, so nothing in the
//! container can mount over it), proven to be procfs's root by fstatfs and
//! its inode, and every file under it opened with openat2 refusing to leave
//! it or follow any link. pathrs, the engine's, re-checks its handle on
//! every open (~8 statx/fstatfs each).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use crate::sys::new_mount::{self, NewFs};

const PROC_SUPER_MAGIC: i64 = 0x9fa0;
const PROC_ROOT_INO: u64 = 1;

/// A checked procfs root.
#[derive(Debug)]
pub struct ProcFd(OwnedFd);

/// Why procfs could not be opened or checked: the call and the errno.
#[derive(Debug, thiserror::Error)]
#[error("{call} proc: {err}")]
pub struct ProcError {
    pub call: &'static str,
    pub err: io::Error,
}

impl ProcFd {
    /// A new procfs instance of the caller's PID namespace.
    pub fn new() -> Result<Self, ProcError> {
        let fs = NewFs {
            fstype: "proc".into(),
            params: vec![("source".into(), Some("proc".into()))],
            attrs: libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC,
        };
        let fd = new_mount::new_fs(&fs).map_err(|e| ProcError { call: e.call, err: e.errno.into() })?;
        Self::checked(fd)
    }

    /// `fd` if it is the root of a procfs.
    pub fn checked(fd: OwnedFd) -> Result<Self, ProcError> {
        let fs = nix::sys::statfs::fstatfs(&fd).map_err(|e| ProcError { call: "fstatfs", err: e.into() })?;
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| ProcError { call: "fstat", err: e.into() })?;
        if fs.filesystem_type().0 as i64 != PROC_SUPER_MAGIC || st.st_ino != PROC_ROOT_INO {
            return Err(ProcError { call: "fstatfs", err: io::Error::other("not the root of a procfs") });
        }
        Ok(ProcFd(fd))
    }

    /// Opens `rel` beneath this procfs: no `..` out of it, no other mount,
    /// no symlink or magic link on the way.
    pub fn open(&self, rel: &Path, flags: i32) -> io::Result<OwnedFd> {
        let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_XDEV | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_SYMLINKS;
        crate::sys::in_root::open_beneath(&self.0, rel, flags, resolve)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// A new procfs needs CAP_SYS_ADMIN; the test says so when it cannot run.
    fn procfs() -> Option<ProcFd> {
        match ProcFd::new() {
            Ok(proc) => Some(proc),
            Err(e) if e.err.raw_os_error() == Some(libc::EPERM) => {
                eprintln!("SKIP: a new procfs needs CAP_SYS_ADMIN: {e}");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn reads_under_a_checked_procfs_and_never_leaves_it() {
        let Some(proc) = procfs() else { return };
        let mut hostname = String::new();
        std::fs::File::from(proc.open(Path::new("sys/kernel/hostname"), libc::O_RDONLY).unwrap()).read_to_string(&mut hostname).unwrap();
        assert_eq!(hostname.trim(), nix::unistd::gethostname().unwrap().to_str().unwrap());
        // self is a symlink, fd/N magic links, .. out of it: all refused.
        for (rel, errno) in [("self/status", libc::ELOOP), ("thread-self", libc::ELOOP), ("../etc/passwd", libc::EXDEV)] {
            let err = proc.open(Path::new(rel), libc::O_RDONLY).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(errno), "{rel}: {err}");
        }
    }

    #[test]
    fn anything_but_a_procfs_root_is_refused() {
        let Some(proc) = procfs() else { return };
        let sys_dir = proc.open(Path::new("sys"), libc::O_PATH | libc::O_DIRECTORY).unwrap();
        assert!(ProcFd::checked(sys_dir).is_err(), "a directory of procfs is not its root");
        let tmp: OwnedFd = std::fs::File::open(std::env::temp_dir()).unwrap().into();
        assert!(ProcFd::checked(tmp).is_err());
    }
}
