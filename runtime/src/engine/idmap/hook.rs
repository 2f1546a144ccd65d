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
use crate::engine::idmap::userns::errno_of;
use crate::sys::in_root;

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
    #[error("openat2(/): {0}")]
    OpenRoot(Errno),
    #[error("openat2({}, RESOLVE_IN_ROOT): {errno}", dest.display())]
    Open { dest: PathBuf, errno: Errno },
    #[error("{}: no parent", dest.display())]
    NoParent { dest: PathBuf },
    #[error("{}: no file name", dest.display())]
    NoName { dest: PathBuf },
    #[error("{call}({}): {errno}", dest.display())]
    Make { call: &'static str, dest: PathBuf, errno: Errno },
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
    let open_error = |e: std::io::Error| HookError::Open { dest: dest.to_path_buf(), errno: errno_of(&e) };
    match in_root::open(Some(root), dest, libc::O_PATH) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(open_error(e)),
    }
    let parent_path = dest.parent().ok_or_else(|| HookError::NoParent { dest: dest.to_path_buf() })?;
    let parent = match parent_path == Path::new("/") {
        true => in_root::open(Some(root), parent_path, libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| HookError::OpenRoot(errno_of(&e)))?,
        false => ensure_destination(root, parent_path, true)?,
    };
    let name = dest.file_name().ok_or_else(|| HookError::NoName { dest: dest.to_path_buf() })?;
    let made = if is_dir {
        nix::sys::stat::mkdirat(Some(parent.as_raw_fd()), name, nix::sys::stat::Mode::from_bits_truncate(0o755))
    } else {
        let flags = nix::fcntl::OFlag::O_CREAT | nix::fcntl::OFlag::O_EXCL | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC;
        nix::fcntl::openat(Some(parent.as_raw_fd()), name, flags, nix::sys::stat::Mode::from_bits_truncate(0o644)).map(|fd| {
            let _ = nix::unistd::close(fd);
        })
    };
    let call = if is_dir { "mkdirat" } else { "openat(O_CREAT)" };
    made.map_err(|errno| HookError::Make { call, dest: dest.to_path_buf(), errno })?;
    in_root::open(Some(root), dest, libc::O_PATH).map_err(open_error)
}

pub(crate) fn move_mount(tree: &OwnedFd, target: &OwnedFd) -> Result<(), Errno> {
    // SAFETY: two valid fds and empty C strings.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
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
        let err = HookError::Make { call: "mkdirat", dest: "/data/x".into(), errno: Errno::EROFS };
        assert_eq!(err.to_string(), "mkdirat(/data/x): EROFS: Read-only file system");
        let err = HookError::MoveMount { dest: "/data/x".into(), errno: Errno::EINVAL };
        assert_eq!(err.to_string(), "move_mount onto /data/x: EINVAL: Invalid argument");
    }
}
