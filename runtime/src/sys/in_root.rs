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

/// How often a scoped lookup is tried again after EAGAIN.
const EAGAIN_TRIES: usize = 128;

fn openat2(dirfd: i32, rel: &Path, flags: i32, resolve: u64) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let cpath = CString::new(rel.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: open_how is plain data; zeroed is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = resolve;
    // A scoped lookup (RESOLVE_IN_ROOT, RESOLVE_BENEATH) through `..` fails
    // EAGAIN when any rename or mount on the host raced it, as the kernel
    // cannot then prove it stayed inside; on a busy node that is routine,
    // and openat2(2) says to try again.
    let mut tries = 0;
    loop {
        // SAFETY: the pointers are valid for the duration of the call.
        let fd = unsafe {
            libc::syscall(libc::SYS_openat2, dirfd, cpath.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
        };
        if fd >= 0 {
            // SAFETY: the kernel just returned this descriptor to us.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        let err = io::Error::last_os_error();
        tries += 1;
        let scoped = resolve & (libc::RESOLVE_IN_ROOT | libc::RESOLVE_BENEATH) != 0;
        if !scoped || err.raw_os_error() != Some(libc::EAGAIN) || tries == EAGAIN_TRIES {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::thread;

    use super::*;

    /// A scoped lookup through `..` while another thread renames a file
    /// elsewhere: the kernel answers some of them EAGAIN (about 1 in 100
    /// here), which made `create` fail on a busy node and this crate's own
    /// tests flake; each is tried again.
    #[test]
    fn a_lookup_through_dotdot_survives_renames_racing_it() {
        let dir = std::env::temp_dir().join(format!("rustpod-in-root-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("rootfs/a")).unwrap();
        symlink("..", dir.join("rootfs/up")).unwrap();
        let root: OwnedFd = fs::File::open(dir.join("rootfs")).unwrap().into();
        let stop = Arc::new(AtomicBool::new(false));
        let renamer = {
            let (stop, x, y): (_, PathBuf, PathBuf) = (stop.clone(), dir.join("x"), dir.join("y"));
            fs::write(&x, "").unwrap();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    fs::rename(&x, &y).unwrap();
                    fs::rename(&y, &x).unwrap();
                }
            })
        };
        let failed = (0..50_000).filter_map(|_| open(Some(&root), Path::new("/up/up/up/a"), libc::O_PATH).err()).next();
        stop.store(true, Ordering::Relaxed);
        renamer.join().unwrap();
        let _ = fs::remove_dir_all(&dir);
        assert!(failed.is_none(), "openat2 of /up/up/up/a in the root: {failed:?}");
    }
}
