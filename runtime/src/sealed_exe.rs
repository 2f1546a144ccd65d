//! CVE-2019-5736: a container must not be able to rewrite the runtime binary
//! through /proc/<pid>/exe of a runtime process that entered it. Before any
//! step that forks into a container we re-execute from a sealed, read-only
//! in-memory copy of our binary, so that is all /proc/<pid>/exe can reach.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use crate::error::{Error, Result};

/// The memfd name; /proc/self/exe reads `/memfd:<NAME> (deleted)`.
const MEMFD_NAME: &str = "rustpod-sealed";
/// memfd_create flag asking for an executable memfd (Linux 6.3+; older
/// kernels reject unknown flags, so we retry without it).
const MFD_EXEC: libc::c_uint = 0x0010;

/// True if this process already runs from a sealed copy.
pub fn is_sealed() -> bool {
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.as_os_str().as_bytes().starts_with(format!("/memfd:{MEMFD_NAME}").as_bytes()))
        .unwrap_or(false)
}

/// Re-executes this process, same argv and environment, from a sealed copy
/// of its binary. Returns only on failure.
pub fn reexec() -> Error {
    match sealed_copy() {
        Ok(fd) => exec_fd(&fd),
        Err(err) => err,
    }
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

/// execveat(fd, "", argv, environ, AT_EMPTY_PATH) with our own argv.
fn exec_fd(fd: &OwnedFd) -> Error {
    let args: Vec<CString> = std::env::args_os()
        .map(|a| CString::new(a.as_bytes()).expect("argv has no NUL"))
        .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let empty = CString::new("").expect("no NUL");
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: argv is NULL-terminated and outlives the call; environ is the
    // process environment. On success this does not return.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            fd.as_raw_fd(),
            empty.as_ptr(),
            argv.as_ptr(),
            environ,
            libc::AT_EMPTY_PATH,
        );
    }
    Error::io("execveat", MEMFD_NAME, std::io::Error::last_os_error())
}
