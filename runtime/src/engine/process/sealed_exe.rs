//! CVE-2019-5736: a container must not be able to rewrite the runtime binary
//! through /proc/<pid>/exe of a runtime process that entered it. Before any
//! step that forks into a container we re-execute from our binary opened
//! through a read-only bind mount that is detached as soon as it is open:
//! the new process's /proc/<pid>/exe is on a read-only mount that no path
//! reaches, so opens for writing fail with EROFS, and nothing stays mounted.
//! Where that mount cannot be made we fall back to a sealed memfd copy,
//! which costs a copy of the binary per call.

use std::ffi::CString;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::statvfs::{statvfs, FsFlags};

use crate::error::{Error, Result};

/// Where the transient mount points of our binary are made.
pub const SEALED_DIR: &str = "/run/rustpod-exe";

/// The memfd name; /proc/self/exe reads `/memfd:<NAME> (deleted)`.
const MEMFD_NAME: &str = "rustpod-sealed";
/// memfd_create flag asking for an executable memfd (Linux 6.3+; older
/// kernels reject unknown flags, so we retry without it).
const MFD_EXEC: libc::c_uint = 0x0010;

/// True if this process's binary cannot be written through /proc/self/exe:
/// it is on a read-only mount, or it is our sealed copy.
pub fn is_sealed() -> bool {
    let sealed_copy = fs::read_link("/proc/self/exe")
        .is_ok_and(|exe| exe.as_os_str().as_bytes().starts_with(format!("/memfd:{MEMFD_NAME}").as_bytes()));
    sealed_copy || statvfs("/proc/self/exe").is_ok_and(|v| v.flags().contains(FsFlags::ST_RDONLY))
}

/// Re-executes this process, same argv and environment, from a read-only
/// mount of its binary (or a sealed copy). Returns only on failure.
pub fn reexec() -> Error {
    let target = read_only_exe().or_else(|err| {
        tracing::debug!("read-only mount of the binary: {err}; using a sealed copy");
        sealed_copy()
    });
    match target {
        Ok(fd) => exec_fd(&fd),
        Err(err) => err,
    }
}

/// Our binary, opened through a read-only bind mount that is detached right
/// after the open: the descriptor keeps the mount alive, nothing else does.
pub fn read_only_exe() -> Result<OwnedFd> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = Path::new(SEALED_DIR);
    fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let point = dir.join(format!("exe-{}-{n}", std::process::id()));
    File::create(&point).map_err(|e| Error::io("create", &point, e))?;
    let opened = bind_read_only(&point).and_then(|()| {
        File::open(&point).map(OwnedFd::from).map_err(|e| Error::io("open", &point, e))
    });
    let _ = umount2(&point, MntFlags::MNT_DETACH);
    let _ = fs::remove_file(&point);
    opened
}

/// Bind-mounts /proc/self/exe onto `point` and makes that mount read-only.
fn bind_read_only(point: &Path) -> Result<()> {
    let none: Option<&str> = None;
    mount(Some("/proc/self/exe"), point, none, MsFlags::MS_BIND, none)
        .map_err(|e| Error::sys("bind-mount the runtime binary", e))?;
    let ro = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    mount(none, point, none, ro, none).map_err(|e| Error::sys("make the runtime binary's mount read-only", e))
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
