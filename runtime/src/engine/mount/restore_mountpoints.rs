//! Before criu restores a container, the mountpoints its mounts need in
//! the rootfs, made as create would make them (runc's
//! prepareCriuRestoreMounts): a restore into a fresh rootfs (containerd's
//! new snapshot) lacks the ones create made, such as the file under a bind
//! of /etc/hosts. Mounts under a tmpfs are left out: criu brings the
//! tmpfs back with its content. Every step resolves inside the rootfs
//! (openat2 RESOLVE_IN_ROOT), so no symlink in the image leads out.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use oci_spec::runtime::{Mount, Spec};

use crate::error::{Error, Result};

/// Makes each missing mountpoint of `spec`'s mounts under `rootfs`.
pub fn make(rootfs: &Path, spec: &Spec) -> Result<()> {
    let mounts = spec.mounts().clone().unwrap_or_default();
    let tmpfs: Vec<PathBuf> = mounts.iter().filter(|m| m.typ().as_deref() == Some("tmpfs")).map(|m| m.destination().clone()).collect();
    let root =
        crate::sys::in_root::open(None, rootfs, libc::O_PATH | libc::O_DIRECTORY).map_err(|e| Error::io("open rootfs", rootfs, e))?;
    for m in &mounts {
        let dest = m.destination();
        let on_tmpfs = tmpfs.iter().any(|t| dest.starts_with(t));
        if on_tmpfs || m.typ().as_deref() == Some("cgroup") {
            continue;
        }
        make_one(&root, rootfs, m)?;
    }
    Ok(())
}

/// A file for a bind of a file, else a directory.
fn make_one(root: &OwnedFd, rootfs: &Path, m: &Mount) -> Result<()> {
    let dest = m.destination();
    let is_file = crate::engine::engine_bundle::is_bind(m)
        && m.source().as_ref().is_some_and(|s| std::fs::metadata(s).is_ok_and(|meta| !meta.is_dir()));
    let Some(parent) = dest.parent() else { return Ok(()) };
    let parent_fd = make_dirs(root, rootfs, parent)?;
    let Some(name) = dest.file_name() else { return Ok(()) };
    let on_host = rootfs.join(dest.strip_prefix("/").unwrap_or(dest));
    if is_file {
        create_file(&parent_fd, name, &on_host)
    } else {
        make_dir(&parent_fd, name, &on_host)
    }
}

/// Each missing directory of `path` inside the root; its last one, open.
fn make_dirs(root: &OwnedFd, rootfs: &Path, path: &Path) -> Result<OwnedFd> {
    let mut here = PathBuf::from("/");
    for part in path.components() {
        let Component::Normal(name) = part else { continue };
        let parent = open_dir(root, &here, rootfs)?;
        make_dir(&parent, name, &rootfs.join(here.strip_prefix("/").unwrap_or(&here)).join(name))?;
        here.push(name);
    }
    open_dir(root, &here, rootfs)
}

fn open_dir(root: &OwnedFd, path: &Path, rootfs: &Path) -> Result<OwnedFd> {
    crate::sys::in_root::open(Some(root), path, libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| Error::io("open (in rootfs)", rootfs.join(path.strip_prefix("/").unwrap_or(path)), e))
}

/// mkdirat, a directory already there being fine.
fn make_dir(parent: &OwnedFd, name: &std::ffi::OsStr, on_host: &Path) -> Result<()> {
    let cname = CString::new(name.as_bytes()).map_err(|_| Error::Invalid(format!("{}: NUL in name", on_host.display())))?;
    // SAFETY: a valid fd and NUL-terminated name for the duration of the call.
    let rc = unsafe { libc::mkdirat(parent.as_raw_fd(), cname.as_ptr(), 0o755) };
    let err = std::io::Error::last_os_error();
    match rc {
        0 => Ok(()),
        _ if err.raw_os_error() == Some(libc::EEXIST) => Ok(()),
        _ => Err(Error::io("mkdirat", on_host, err)),
    }
}

/// openat(O_CREAT) of an empty file, not following a symlink there.
fn create_file(parent: &OwnedFd, name: &std::ffi::OsStr, on_host: &Path) -> Result<()> {
    let cname = CString::new(name.as_bytes()).map_err(|_| Error::Invalid(format!("{}: NUL in name", on_host.display())))?;
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid fd and NUL-terminated name for the duration of the call.
    let fd = unsafe { libc::openat(parent.as_raw_fd(), cname.as_ptr(), flags, 0o644) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        // Something other than a file is there already (a directory): the bind decides.
        if err.raw_os_error() == Some(libc::EISDIR) {
            return Ok(());
        }
        return Err(Error::io("openat O_CREAT", on_host, err));
    }
    // SAFETY: openat just returned it.
    unsafe { libc::close(fd) };
    Ok(())
}
