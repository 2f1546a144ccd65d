//! Idmapped mounts, our createContainer step: in the container's mount
//! namespace before pivot_root, moves each detached mount `idmap_detached`
//! made onto its destination, opened inside the rootfs with
//! `openat2(RESOLVE_IN_ROOT)` (made when missing), and reports a failure
//! back to `create` on a pipe.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use nix::errno::Errno;

use crate::engine::idmap::detached::Detached;
use crate::engine::idmap::userns as idmap_userns;
use crate::sys::in_root;

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

fn move_all(args: Vec<OsString>) -> Result<(), String> {
    let (rootfs, rest) = args.split_first().ok_or("missing rootfs argument")?;
    if rest.len() % 3 != 0 {
        return Err("arguments must be fd/kind/destination triples".into());
    }
    let root = in_root::open(None, Path::new(rootfs), libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| format!("open rootfs {rootfs:?}: {}", idmap_userns::errno_of(&e)))?;
    for triple in rest.chunks(3) {
        let fd: RawFd = triple[0].to_str().and_then(|s| s.parse().ok()).ok_or("bad fd argument")?;
        // SAFETY: create passed this descriptor to us for this one use.
        let tree = unsafe { OwnedFd::from_raw_fd(fd) };
        let dest = Path::new(&triple[2]);
        let target = ensure_destination(&root, dest, triple[1] == "dir")?;
        move_mount(&tree, &target).map_err(|e| format!("move_mount onto {}: {e}", dest.display()))?;
    }
    Ok(())
}

/// Opens the destination inside the rootfs (a symlink resolves inside it,
/// never out to the host), making it and its parents when missing.
pub(crate) fn ensure_destination(root: &OwnedFd, dest: &Path, is_dir: bool) -> Result<OwnedFd, String> {
    match in_root::open(Some(root), dest, libc::O_PATH) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(format!("openat2({}, RESOLVE_IN_ROOT): {}", dest.display(), idmap_userns::errno_of(&e))),
    }
    let parent_path = dest.parent().ok_or_else(|| format!("{}: no parent", dest.display()))?;
    let parent = match parent_path == Path::new("/") {
        true => in_root::open(Some(root), parent_path, libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| format!("openat2(/): {}", idmap_userns::errno_of(&e)))?,
        false => ensure_destination(root, parent_path, true)?,
    };
    let name = dest.file_name().ok_or_else(|| format!("{}: no file name", dest.display()))?;
    let made = if is_dir {
        nix::sys::stat::mkdirat(Some(parent.as_raw_fd()), name, nix::sys::stat::Mode::from_bits_truncate(0o755))
    } else {
        let flags = nix::fcntl::OFlag::O_CREAT | nix::fcntl::OFlag::O_EXCL | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC;
        nix::fcntl::openat(Some(parent.as_raw_fd()), name, flags, nix::sys::stat::Mode::from_bits_truncate(0o644)).map(|fd| {
            let _ = nix::unistd::close(fd);
        })
    };
    made.map_err(|e| format!("{}({}): {e}", if is_dir { "mkdirat" } else { "openat(O_CREAT)" }, dest.display()))?;
    in_root::open(Some(root), dest, libc::O_PATH)
        .map_err(|e| format!("openat2({}, RESOLVE_IN_ROOT): {}", dest.display(), idmap_userns::errno_of(&e)))
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
