//! Waiting for a container process in the foreground: forward the signals
//! we get to it, and turn its end into a shell-style exit code. Also waiting
//! for a descriptor with a deadline (the console socket, the shim's helpers).

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::error::{Error, Result};

/// Exit code for a wait status as a shell reports it: the code, or 128+signal.
pub fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

/// Waits for our child `pid` to exit, forwarding every catchable signal we
/// receive meanwhile, and returns its exit code.
///
/// Signals are blocked only here, after the child was forked, so the
/// container never inherits a blocked mask.
pub fn forward_signals_until_exit(pid: Pid) -> Result<i32> {
    let set = forwarded_signals();
    set.thread_block().map_err(|e| Error::sys("block signals", e))?;
    let result = wait_loop(pid, &set);
    let _ = set.thread_unblock();
    result
}

fn wait_loop(pid: Pid, set: &SigSet) -> Result<i32> {
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(status) => {
                if let Some(code) = exit_code(status) {
                    return Ok(code);
                }
            }
            Err(e) => return Err(Error::sys("wait for container process", e)),
        }
        let sig = set.wait().map_err(|e| Error::sys("wait for signal", e))?;
        if sig != Signal::SIGCHLD {
            let _ = kill(pid, sig);
        }
    }
}

fn forwarded_signals() -> SigSet {
    let mut set = SigSet::empty();
    for sig in Signal::iterator() {
        let synchronous = matches!(
            sig,
            Signal::SIGKILL
                | Signal::SIGSTOP
                | Signal::SIGSEGV
                | Signal::SIGBUS
                | Signal::SIGILL
                | Signal::SIGFPE
                | Signal::SIGTRAP
                | Signal::SIGSYS
                | Signal::SIGPIPE
        );
        if !synchronous {
            set.add(sig);
        }
    }
    set
}

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
