//! Waiting for a descriptor to become readable, with a deadline that
//! signals do not cut short.

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Waits up to `timeout` for `fd` to be readable; false on timeout. Signals
/// do not cut the wait short: the reaper's SIGCHLD for any other process of
/// the shim may arrive on this thread.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> nix::Result<bool> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)) {
            Ok(ready) => return Ok(ready > 0),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}
