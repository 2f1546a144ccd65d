//! CVE-2019-5736: a container must not be able to rewrite the runtime binary
//! through /proc/<pid>/exe of a runtime process that entered it. Before any
//! step that forks into a container we re-execute from our binary opened
//! through a private read-only overlayfs that was never attached anywhere:
//! the new process's /proc/<pid>/exe is an overlay inode, so an open for
//! writing fails with EROFS and never touches the real binary's inode.
//! A read-only bind mount is not enough: an open for writing takes write
//! access on the shared inode before the mount refuses it, and an execve of
//! the binary on the host that falls in that moment fails with ETXTBSY.
//! Where no overlay can be made we fall back to a sealed memfd copy, which
//! costs a copy of the binary per call.

use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;
use nix::sys::statfs::{statfs, OVERLAYFS_SUPER_MAGIC};
use nix::sys::statvfs::{statvfs, FsFlags};

use crate::error::{Error, Result};
use crate::sys::new_mount;
use crate::sys::read_only_fs::on_read_only_superblock;

/// An empty directory: the overlay's second lower layer (overlayfs is
/// read-only only with two lower layers and no upper one).
pub const EMPTY_LAYER: &str = "/run/rustpod-exe";

/// The memfd name; /proc/self/exe reads `/memfd:<NAME> (deleted)`.
const MEMFD_NAME: &str = "rustpod-sealed";
/// memfd_create flag asking for an executable memfd (Linux 6.3+; older
/// kernels reject unknown flags, so we retry without it).
const MFD_EXEC: libc::c_uint = 0x0010;

/// True if a container cannot take write access on this process's binary
/// through /proc/self/exe: it is our sealed copy, on a read-only overlay
/// (such as `open` makes, whose inodes no other process runs from; runc
/// checks the same), or on a filesystem that is read-only as a whole. A
/// read-only mount of a writable filesystem is not enough.
pub fn is_sealed() -> bool {
    let exe = Path::new("/proc/self/exe");
    let sealed_copy =
        fs::read_link(exe).is_ok_and(|target| target.as_os_str().as_bytes().starts_with(format!("/memfd:{MEMFD_NAME}").as_bytes()));
    if sealed_copy {
        return true;
    }
    if !statvfs(exe).is_ok_and(|v| v.flags().contains(FsFlags::ST_RDONLY)) {
        return false;
    }
    statfs(exe).is_ok_and(|fs| fs.filesystem_type() == OVERLAYFS_SUPER_MAGIC) || on_read_only_superblock(exe)
}

/// Re-executes this process, same argv and environment, from a sealed
/// binary (see `open`). Returns only on failure.
pub fn reexec() -> Error {
    match open() {
        Ok(fd) => exec_fd(&fd),
        Err(err) => err,
    }
}

/// Our binary, sealed: through a private overlay, else as a memfd copy.
pub fn open() -> Result<OwnedFd> {
    overlay_exe().or_else(|err| {
        tracing::debug!("overlay of the binary's directory: {err}; using a sealed copy");
        sealed_copy()
    })
}

/// Our binary, opened through a detached read-only overlayfs whose lower
/// layers are its directory and an empty one.
fn overlay_exe() -> Result<OwnedFd> {
    let exe = fs::read_link("/proc/self/exe").map_err(|e| Error::io("readlink", "/proc/self/exe", e))?;
    let (Some(dir), Some(name)) = (exe.parent(), exe.file_name()) else {
        return Err(Error::Invalid(format!("our binary {} has no directory", exe.display())));
    };
    let empty = Path::new(EMPTY_LAYER);
    fs::DirBuilder::new().mode(0o700).recursive(true).create(empty).map_err(|e| Error::io("mkdir", empty, e))?;
    // Our directory first, so that nothing in the empty one can hide the binary.
    let lowers = [escape_lower(dir.as_os_str()), escape_lower(empty.as_os_str())].join(&b':');
    let ctx = new_mount::fsopen("overlay").map_err(|e| Error::io("fsopen", "overlay", e))?;
    new_mount::fsconfig_set_string(&ctx, "lowerdir", OsStr::from_bytes(&lowers))
        .map_err(|e| Error::io("fsconfig lowerdir", OsStr::from_bytes(&lowers), e))?;
    // We need no unique inode numbers; xino would only log warnings when the layers' filesystems differ.
    let _ = new_mount::fsconfig_set_string(&ctx, "xino", OsStr::new("off"));
    new_mount::fsconfig_create(&ctx).map_err(|e| Error::io("fsconfig create overlay over", dir, e))?;
    let attrs = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOSUID;
    let mnt = new_mount::fsmount(&ctx, attrs).map_err(|e| Error::io("fsmount overlay over", dir, e))?;
    let fd = openat(Some(mnt.as_raw_fd()), name, OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| Error::io("openat in the overlay", name, e.into()))?;
    // SAFETY: openat just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// overlayfs splits lowerdir at ':' and takes '\' as its escape.
fn escape_lower(path: &OsStr) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for &b in path.as_bytes() {
        if b == b':' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// A sealed memfd holding a copy of our binary (the shim keeps one and
/// starts its helpers from it).
pub fn sealed_copy() -> Result<OwnedFd> {
    let memfd = create_memfd()?;
    let mut exe = File::open("/proc/self/exe").map_err(|e| Error::io("open", "/proc/self/exe", e))?;
    let mut out = File::from(memfd);
    std::io::copy(&mut exe, &mut out).map_err(|e| Error::io("copy to memfd", "/proc/self/exe", e))?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(out.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(Error::io("seal", "memfd", std::io::Error::last_os_error()));
    }
    Ok(OwnedFd::from(out))
}

fn create_memfd() -> Result<OwnedFd> {
    let name = CString::new(MEMFD_NAME).expect("no NUL in name");
    let base = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    for flags in [base | MFD_EXEC, base] {
        // SAFETY: name is a valid C string; the result is checked.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: the kernel just returned this descriptor to us.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    Err(Error::io("memfd_create", MEMFD_NAME, std::io::Error::last_os_error()))
}

/// execveat(fd, "", argv, environ, AT_EMPTY_PATH) with our own argv; the
/// fd is close-on-exec, so it does not reach the new program.
fn exec_fd(fd: &OwnedFd) -> Error {
    let args: Vec<CString> = std::env::args_os().map(|a| CString::new(a.as_bytes()).expect("argv has no NUL")).collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let empty = CString::new("").expect("no NUL");
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: argv is NULL-terminated and outlives the call; environ is the
    // process environment. On success this does not return.
    unsafe {
        libc::syscall(libc::SYS_execveat, fd.as_raw_fd(), empty.as_ptr(), argv.as_ptr(), environ, libc::AT_EMPTY_PATH);
    }
    Error::io("execveat", MEMFD_NAME, std::io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_dirs_escape_colons_and_backslashes() {
        assert_eq!(escape_lower(OsStr::new("/usr/local/bin")), b"/usr/local/bin");
        assert_eq!(escape_lower(OsStr::new("/opt/a:b\\c")), b"/opt/a\\:b\\\\c");
    }
}
