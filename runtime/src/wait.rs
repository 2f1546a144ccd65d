//! Waiting for a container process in the foreground: forward the signals
//! we get to it, and turn its end into a shell-style exit code.

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
