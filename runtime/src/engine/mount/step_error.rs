//! What a per-mount step of our rootfs hook (propagation, `nosymfollow`,
//! superblock flags, a cgroup mount's flags) reports when it fails: the destination, then the
//! syscall and the errno, or the option it does not take.

use std::path::{Path, PathBuf};

use nix::errno::Errno;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum StepError {
    /// openat2(RESOLVE_IN_ROOT) of the destination inside the rootfs.
    #[error("openat2 {} (RESOLVE_IN_ROOT): {errno}", dest.display())]
    Open { dest: PathBuf, errno: Errno },
    /// An option this step does not apply.
    #[error("{}: {option:?} is not a {kind}", dest.display())]
    NotOurs { dest: PathBuf, option: String, kind: &'static str },
    /// The syscall that set `options` on the destination.
    #[error("{call} {} ({options}): {errno}", dest.display())]
    Call { call: &'static str, dest: PathBuf, options: String, errno: Errno },
    /// A syscall on another path the step needed (`/proc/self/mountinfo`,
    /// a mount below the destination).
    #[error("{call} {}: {errno}", path.display())]
    Path { call: &'static str, path: PathBuf, errno: Errno },
}

impl StepError {
    pub fn open(dest: &Path, err: &std::io::Error) -> Self {
        StepError::Open { dest: dest.to_path_buf(), errno: Errno::from_raw(err.raw_os_error().unwrap_or(0)) }
    }

    pub fn path(call: &'static str, path: &Path, err: &std::io::Error) -> Self {
        StepError::Path { call, path: path.to_path_buf(), errno: Errno::from_raw(err.raw_os_error().unwrap_or(0)) }
    }

    pub fn call(call: &'static str, dest: &Path, options: &str, errno: Errno) -> Self {
        StepError::Call { call, dest: dest.to_path_buf(), options: options.to_string(), errno }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_destination_the_syscall_and_the_errno() {
        let err = StepError::open(Path::new("/mnt/l"), &std::io::Error::from_raw_os_error(libc::ELOOP));
        assert_eq!(err.to_string(), "openat2 /mnt/l (RESOLVE_IN_ROOT): ELOOP: Too many symbolic links encountered");
        let err = StepError::call("mount_setattr", Path::new("/m"), "nosymfollow", Errno::EPERM);
        assert_eq!(err.to_string(), "mount_setattr /m (nosymfollow): EPERM: Operation not permitted");
    }
}
