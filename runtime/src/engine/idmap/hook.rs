//! Idmapped mounts, our createContainer step: in the container's mount
//! namespace before pivot_root, moves each detached mount `idmap_detached`
//! made onto its destination, opened inside the rootfs with
//! `openat2(RESOLVE_IN_ROOT)` (made when missing), and reports a failure
//! back to `create` on a pipe.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::engine::idmap::detached::Detached;
use crate::sys::in_root;
use crate::sys::io_errno::errno_of;
use crate::sys::mount_api::move_mount;
use crate::sys::mount_target::{self, TargetError, Want};

/// Why a detached mount could not be moved into the rootfs: the argument,
/// or the path, the syscall and the errno.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("missing rootfs argument")]
    NoRootfs,
    #[error("arguments must be fd/kind/destination triples")]
    NotTriples,
    #[error("bad fd argument")]
    BadFd,
    #[error("open rootfs {rootfs:?}: {errno}")]
    OpenRootfs { rootfs: OsString, errno: Errno },
    /// Opening or making the destination inside the rootfs.
    #[error(transparent)]
    Destination(#[from] TargetError),
    #[error("move_mount onto {}: {errno}", dest.display())]
    MoveMount { dest: PathBuf, errno: Errno },
}

/// argv[0] by which our binaries recognise the createContainer step.
pub const HOOK_ARG0: &str = "rustpod-idmap";

/// The createContainer hook moving `mounts` into `rootfs`, in order, and
/// writing why it failed to `errors`.
pub fn hook(rootfs: &Path, errors: RawFd, mounts: &[Detached]) -> oci_spec::runtime::Hook {
    let mut args = vec![HOOK_ARG0.to_string(), rootfs.display().to_string(), errors.to_string()];
    for m in mounts {
        args.push(m.fd.as_raw_fd().to_string());
        args.push(if m.is_dir { "dir" } else { "file" }.to_string());
        args.push(m.destination.display().to_string());
    }
    crate::engine::mount::rootfs_hook::self_exec_hook(args)
}

/// The hook's body: `<rootfs> <error fd> (<fd> <dir|file> <destination>)…`;
/// returns the exit code. The reason of a failure goes to create through
/// the error fd (one line there), else to stderr.
pub fn main(args: Vec<OsString>) -> i32 {
    let errors: Option<RawFd> = args.get(1).and_then(|a| a.to_str()?.parse().ok());
    let rest = args.iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, a)| a.clone()).collect();
    match move_all(rest) {
        Ok(()) => 0,
        Err(err) => {
            let reported = errors.is_some_and(|fd| {
                // SAFETY: create passed this descriptor to us for this one use.
                let pipe = unsafe { OwnedFd::from_raw_fd(fd) };
                nix::unistd::write(&pipe, format!("idmapped mount: {err}").as_bytes()).is_ok()
            });
            if !reported {
                eprintln!("rustpod: idmapped mount: {err}");
            }
            1
        }
    }
}

fn move_all(args: Vec<OsString>) -> Result<(), HookError> {
    let (rootfs, rest) = args.split_first().ok_or(HookError::NoRootfs)?;
    if rest.len() % 3 != 0 {
        return Err(HookError::NotTriples);
    }
    let root = in_root::open(None, Path::new(rootfs), libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| HookError::OpenRootfs { rootfs: rootfs.clone(), errno: errno_of(&e) })?;
    for triple in rest.chunks(3) {
        let fd: RawFd = triple[0].to_str().and_then(|s| s.parse().ok()).ok_or(HookError::BadFd)?;
        // SAFETY: create passed this descriptor to us for this one use.
        let tree = unsafe { OwnedFd::from_raw_fd(fd) };
        let dest = Path::new(&triple[2]);
        let target = ensure_destination(&root, dest, triple[1] == "dir")?;
        move_mount(&tree, &target).map_err(|errno| HookError::MoveMount { dest: dest.to_path_buf(), errno })?;
    }
    Ok(())
}

/// Opens the destination inside the rootfs (a symlink resolves inside it,
/// never out to the host), making it and its parents when missing.
pub(crate) fn ensure_destination(root: &OwnedFd, dest: &Path, is_dir: bool) -> Result<OwnedFd, HookError> {
    let want = if is_dir { Want::Dir } else { Want::File };
    Ok(mount_target::open(root, dest, want)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_before_any_syscall() {
        assert!(matches!(move_all(Vec::new()), Err(HookError::NoRootfs)));
        let two = vec![OsString::from("/r"), OsString::from("3"), OsString::from("dir")];
        assert!(matches!(move_all(two), Err(HookError::NotTriples)));
    }

    #[test]
    fn each_error_names_the_destination_the_call_and_the_errno() {
        let err = HookError::from(TargetError { call: "mkdirat", path: "/data/x".into(), errno: Errno::EROFS });
        assert_eq!(err.to_string(), "mkdirat /data/x: EROFS: Read-only file system");
        let err = HookError::MoveMount { dest: "/data/x".into(), errno: Errno::EINVAL };
        assert_eq!(err.to_string(), "move_mount onto /data/x: EINVAL: Invalid argument");
    }
}
