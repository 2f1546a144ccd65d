//! Opens a path inside a container's root with openat2(RESOLVE_IN_ROOT), so
//! no symlink or `..` in the container can lead the lookup out to the host.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// openat2 of `path` with `flags` (O_CLOEXEC is added): resolved inside
/// `root` when given, else as an ordinary path.
pub fn open(root: Option<&OwnedFd>, path: &Path, flags: i32) -> io::Result<OwnedFd> {
    open_resolving(root, path, flags, 0)
}

/// [`open`] with more `RESOLVE_*` flags inside `root` (`RESOLVE_NO_SYMLINKS`).
pub fn open_resolving(root: Option<&OwnedFd>, path: &Path, flags: i32, resolve: u64) -> io::Result<OwnedFd> {
    match root {
        Some(root) => {
            let rel = path.strip_prefix("/").unwrap_or(path);
            openat2(root.as_raw_fd(), rel, flags, libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS | resolve)
        }
        None => openat2(libc::AT_FDCWD, path, flags, 0),
    }
}

/// openat2 of the relative `path` under `dir` with exactly the `resolve`
/// flags given (`RESOLVE_BENEATH`, …).
pub fn open_beneath(dir: &OwnedFd, path: &Path, flags: i32, resolve: u64) -> io::Result<OwnedFd> {
    openat2(dir.as_raw_fd(), path, flags, resolve)
}

fn openat2(dirfd: i32, rel: &Path, flags: i32, resolve: u64) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let cpath = CString::new(rel.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: open_how is plain data; zeroed is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = resolve;
    // SAFETY: the pointers are valid for the duration of the call.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dirfd, cpath.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
