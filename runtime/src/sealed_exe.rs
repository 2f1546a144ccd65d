//! CVE-2019-5736: a container must not be able to rewrite the runtime binary
//! through /proc/<pid>/exe of a runtime process that entered it. Before any
//! step that forks into a container we re-execute through a read-only bind
//! mount of our binary (made once per boot and binary under
//! `/run/rustpod-exe`), so /proc/<pid>/exe opens for writing fail with EROFS.
//! Where that mount cannot be made we fall back to a sealed memfd copy,
//! which costs a copy of the binary per call.

use std::ffi::CString;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use nix::mount::{mount, MsFlags};

use crate::error::{Error, Result};

/// Where the read-only views of our binaries are mounted.
pub const SEALED_DIR: &str = "/run/rustpod-exe";

/// The memfd name; /proc/self/exe reads `/memfd:<NAME> (deleted)`.
const MEMFD_NAME: &str = "rustpod-sealed";
/// memfd_create flag asking for an executable memfd (Linux 6.3+; older
/// kernels reject unknown flags, so we retry without it).
const MFD_EXEC: libc::c_uint = 0x0010;

/// True if this process already runs from a read-only view or sealed copy.
pub fn is_sealed() -> bool {
    let Ok(exe) = fs::read_link("/proc/self/exe") else {
        return false;
    };
    let exe = exe.as_os_str().as_bytes();
    exe.starts_with(SEALED_DIR.as_bytes()) || exe.starts_with(format!("/memfd:{MEMFD_NAME}").as_bytes())
}

/// Re-executes this process, same argv and environment, from a read-only
/// view of its binary (or a sealed copy). Returns only on failure.
pub fn reexec() -> Error {
    let target = match read_only_view() {
        Ok(path) => File::open(&path).map(OwnedFd::from).map_err(|e| Error::io("open", path, e)),
        Err(err) => {
            tracing::debug!("read-only view of the binary: {err}; using a sealed copy");
            sealed_copy()
        }
    };
    match target {
        Ok(fd) => exec_fd(&fd),
        Err(err) => err,
    }
}

/// The path of a read-only bind mount of our binary, made if missing.
pub fn read_only_view() -> Result<PathBuf> {
    let exe = fs::metadata("/proc/self/exe").map_err(|e| Error::io("stat", "/proc/self/exe", e))?;
    let name = fs::read_link("/proc/self/exe")
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "exe".into());
    let dir = Path::new(SEALED_DIR);
    let view = dir.join(format!("{name}-{:x}-{:x}", exe.dev(), exe.ino()));
    if is_read_only_view(&view, &exe) {
        return Ok(view);
    }
    fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    let dir_file = File::open(dir).map_err(|e| Error::io("open", dir, e))?;
    let _lock = Flock::lock(dir_file, FlockArg::LockExclusive)
        .map_err(|(_, e)| Error::sys("lock /run/rustpod-exe", e))?;
    if !is_read_only_view(&view, &exe) {
        prune_stale_views(dir);
        make_read_only_view(&view)?;
    }
    Ok(view)
}

/// Unmounts and removes the views whose binary has since been deleted (a
/// rebuilt or upgraded runtime): they would pin the old file forever. A
/// process running from one keeps running (MNT_DETACH).
fn prune_stale_views(dir: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else { return };
    for line in info.lines() {
        let mut fields = line.split_whitespace();
        let (Some(root), Some(point)) = (fields.nth(3), fields.next()) else { continue };
        if Path::new(point).parent() == Some(dir) && root.ends_with("//deleted") {
            let _ = nix::mount::umount2(point, nix::mount::MntFlags::MNT_DETACH);
            let _ = fs::remove_file(point);
        }
    }
}

fn is_read_only_view(view: &Path, exe: &fs::Metadata) -> bool {
    let same_file = fs::metadata(view).is_ok_and(|m| m.dev() == exe.dev() && m.ino() == exe.ino());
    same_file
        && nix::sys::statvfs::statvfs(view)
            .is_ok_and(|v| v.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

/// Bind-mounts /proc/self/exe onto `view` and makes that mount read-only.
fn make_read_only_view(view: &Path) -> Result<()> {
    let _ = nix::mount::umount2(view, nix::mount::MntFlags::MNT_DETACH);
    File::create(view).map_err(|e| Error::io("create", view, e))?;
    let none: Option<&str> = None;
    mount(Some("/proc/self/exe"), view, none, MsFlags::MS_BIND, none)
        .map_err(|e| Error::sys("bind-mount the runtime binary", e))?;
    let ro = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    if let Err(e) = mount(none, view, none, ro, none) {
        let _ = nix::mount::umount2(view, nix::mount::MntFlags::MNT_DETACH);
        return Err(Error::sys("make the runtime binary's mount read-only", e));
    }
    Ok(())
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
