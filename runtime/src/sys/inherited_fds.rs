//! Descriptors our caller left open must not reach the hooks and helpers we
//! start (runc passes hooks only 0-2). Every entry point marks everything
//! above stderr close-on-exec before it opens anything, then clears the
//! flag again on the few it passes on by design (`--preserve-fds`,
//! systemd's `LISTEN_FDS`).

use std::os::fd::RawFd;

use crate::error::{Error, Result};

/// The first descriptor after stdin, stdout and stderr.
const FIRST_EXTRA: RawFd = 3;

/// Marks every descriptor above stderr close-on-exec. Call first in `main`.
pub fn close_on_exec_all() -> Result<()> {
    // SAFETY: close_range only sets a flag on our own descriptors.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, FIRST_EXTRA as libc::c_uint, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if rc == 0 {
        return Ok(());
    }
    match nix::errno::Errno::last() {
        // Kernels before 5.11 lack the flag: mark them one by one.
        nix::errno::Errno::EINVAL | nix::errno::Errno::ENOSYS => mark_each_listed(),
        e => Err(Error::sys("close_range(3, ~0, CLOSE_RANGE_CLOEXEC)", e)),
    }
}

/// Slow path: every descriptor /proc/self/fd lists, above stderr.
fn mark_each_listed() -> Result<()> {
    let listed = std::fs::read_dir("/proc/self/fd").map_err(|e| Error::io("read directory", "/proc/self/fd", e))?;
    let fds: Vec<RawFd> = listed.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).filter(|fd| *fd >= FIRST_EXTRA).collect();
    for fd in fds {
        // The directory's own descriptor is gone by now: EBADF is fine.
        let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC));
    }
    Ok(())
}

/// Lets the `count` descriptors after stderr through exec again, as the
/// caller asked us to pass them on. A descriptor that is not open is left
/// for the engine to report.
pub fn pass_on(count: i32) -> Result<()> {
    for fd in FIRST_EXTRA..FIRST_EXTRA.saturating_add(count.max(0)) {
        match nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty())) {
            Ok(_) | Err(nix::errno::Errno::EBADF) => {}
            Err(e) => return Err(Error::sys("fcntl(F_SETFD) a descriptor to pass on", e)),
        }
    }
    Ok(())
}

/// How many descriptors systemd socket activation passes (`LISTEN_FDS`),
/// which the engine hands to the container as runc does.
pub fn listen_fds() -> i32 {
    std::env::var("LISTEN_FDS").ok().and_then(|n| n.parse().ok()).filter(|n: &i32| *n > 0).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn cloexec(fd: RawFd) -> bool {
        let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).unwrap();
        nix::fcntl::FdFlag::from_bits_truncate(flags).contains(nix::fcntl::FdFlag::FD_CLOEXEC)
    }

    #[test]
    fn inherited_descriptors_become_close_on_exec_and_passed_ones_not() {
        let file = std::fs::File::open("/dev/null").unwrap();
        nix::fcntl::fcntl(file.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty())).unwrap();
        close_on_exec_all().unwrap();
        assert!(cloexec(file.as_raw_fd()));
        pass_on(file.as_raw_fd() - FIRST_EXTRA + 1).unwrap();
        assert!(!cloexec(file.as_raw_fd()));
        close_on_exec_all().unwrap();
    }
}
