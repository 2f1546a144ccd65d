//! Reaping: on every SIGCHLD, wait for all exited children (we are a
//! subreaper, so orphaned container processes are ours too) and hand each
//! (pid, status) to the task service, which maps pids to processes.

use std::time::SystemTime;

use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use signal_hook::consts::SIGCHLD;
use signal_hook::iterator::Signals;

use crate::process::ExitStatus;

/// Calls `on_exit(pid, status)` for every reaped child, from one thread.
pub fn start(mut signals: Signals, on_exit: impl Fn(i32, ExitStatus) + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name("reaper".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGCHLD {
                    reap_all(&on_exit);
                } else {
                    log::info!("ignoring signal {signal}");
                }
            }
        })
        .map_err(|e| format!("start reaper thread: {e}"))?;
    Ok(())
}

fn reap_all(on_exit: &impl Fn(i32, ExitStatus)) {
    loop {
        // __WALL: also children whose exit signal is not SIGCHLD.
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(pid, code)) => on_exit(pid.as_raw(), status(code as u32)),
            Ok(WaitStatus::Signaled(pid, sig, _)) => on_exit(pid.as_raw(), status(128 + sig as u32)),
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                log::warn!("waitpid: {e}");
                return;
            }
        }
    }
}

fn status(code: u32) -> ExitStatus {
    ExitStatus { code, at: SystemTime::now() }
}
