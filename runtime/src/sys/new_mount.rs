//! The new mount API's steps that make a detached mount: fsopen(2),
//! fsconfig(2) and fsmount(2). A mount made this way is never attached
//! anywhere: the descriptor is the only way to it, and it goes away with
//! the last descriptor (or executable) that holds it.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// fsconfig(2) commands (linux/mount.h).
const FSCONFIG_SET_FLAG: libc::c_uint = 0;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;

/// fsopen(2): a filesystem context for `fs_type` ("overlay", "tmpfs"…).
pub fn fsopen(fs_type: &str) -> io::Result<OwnedFd> {
    let name = c_string(fs_type.as_bytes())?;
    // SAFETY: a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_fsopen, name.as_ptr(), FSOPEN_CLOEXEC) };
    owned(fd)
}

/// fsconfig(FSCONFIG_SET_STRING): sets mount option `key` to `value`.
pub fn fsconfig_set_string(ctx: &OwnedFd, key: &str, value: &OsStr) -> io::Result<()> {
    let (key, value) = (c_string(key.as_bytes())?, c_string(value.as_bytes())?);
    // SAFETY: valid descriptor and NUL-terminated strings; the result is checked.
    let rc = unsafe { libc::syscall(libc::SYS_fsconfig, ctx.as_raw_fd(), FSCONFIG_SET_STRING, key.as_ptr(), value.as_ptr(), 0) };
    checked(rc)
}

/// fsconfig(FSCONFIG_CMD_CREATE): makes the superblock from the options set.
pub fn fsconfig_create(ctx: &OwnedFd) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY: valid descriptor; the command takes no key or value.
    let rc = unsafe { libc::syscall(libc::SYS_fsconfig, ctx.as_raw_fd(), FSCONFIG_CMD_CREATE, none, none, 0) };
    checked(rc)
}

/// fsmount(2): a detached mount of the context's superblock with the
/// `MOUNT_ATTR_*` flags in `attrs`.
pub fn fsmount(ctx: &OwnedFd, attrs: u64) -> io::Result<OwnedFd> {
    // SAFETY: valid descriptor and integer flags; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_fsmount, ctx.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) };
    owned(fd)
}

/// A filesystem to make: its type, and its parameters in order, each a
/// key with a value (`mode=755`, `source`) or a flag alone (`lazytime`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFs {
    pub fstype: String,
    pub params: Vec<(String, Option<String>)>,
    /// The `MOUNT_ATTR_*` flags fsmount(2) gives the mount.
    pub attrs: u64,
}

/// Why making a filesystem failed: the call, the parameter it was given
/// (none for fsopen, FSCONFIG_CMD_CREATE and fsmount) and the errno.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}{}: {errno}", param.as_ref().map(|p| format!(" {p}")).unwrap_or_default())]
pub struct NewFsError {
    pub call: &'static str,
    pub param: Option<String>,
    pub errno: nix::errno::Errno,
}

/// fsopen, fsconfig per parameter, FSCONFIG_CMD_CREATE and fsmount: a
/// detached mount of a new filesystem.
pub fn new_fs(fs: &NewFs) -> Result<OwnedFd, NewFsError> {
    let errno = |call: &'static str, param: Option<String>| {
        move |e: io::Error| NewFsError { call, param, errno: crate::sys::io_errno::errno_of(&e) }
    };
    let ctx = fsopen(&fs.fstype).map_err(errno("fsopen", None))?;
    for (key, value) in &fs.params {
        let shown = match value {
            Some(v) => format!("{key}={v}"),
            None => key.clone(),
        };
        match value {
            Some(v) => fsconfig_set_string(&ctx, key, std::ffi::OsStr::new(v)),
            None => fsconfig_set_flag(&ctx, key),
        }
        .map_err(errno("fsconfig", Some(shown)))?;
    }
    fsconfig_create(&ctx).map_err(errno("fsconfig(FSCONFIG_CMD_CREATE)", None))?;
    fsmount(&ctx, fs.attrs).map_err(errno("fsmount", None))
}

fn fsconfig_set_flag(ctx: &OwnedFd, key: &str) -> io::Result<()> {
    let key = CString::new(key).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: valid descriptor and a NUL-terminated key; the result is checked.
    let rc =
        unsafe { libc::syscall(libc::SYS_fsconfig, ctx.as_raw_fd(), FSCONFIG_SET_FLAG, key.as_ptr(), std::ptr::null::<libc::c_char>(), 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn c_string(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn checked(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    checked(fd)?;
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}
