//! Reaping: on every SIGCHLD, wait for exited children (we are a subreaper,
//! so orphaned container processes are ours too) and hand each (pid, status)
//! to the task service, which maps pids to processes. Children the server
//! forks and waits for itself (the engine's poststart and poststop hooks)
//! keep their status: while a [`Hold`] lives, only known pids are reaped.

use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use signal_hook::consts::SIGCHLD;
use signal_hook::iterator::Signals;

use crate::process::ExitStatus;

/// Fork-and-wait calls in flight, and whether a reap of unknown pids was
/// put off for them. The reaper reaps every child only under this lock, so
/// no such child can be forked and reaped by it between a hold's checks.
struct Holds {
    count: usize,
    deferred: bool,
}

static HOLDS: Mutex<Holds> = Mutex::new(Holds { count: 0, deferred: false });

fn holds() -> MutexGuard<'static, Holds> {
    HOLDS.lock().unwrap_or_else(|p| p.into_inner())
}

/// While alive, the reaper leaves alone every child it was not told about,
/// so the holder can fork and `wait` for its own (the engine's hooks).
#[must_use = "the hold ends when dropped"]
pub struct Hold(());

/// Starts a hold; call it before the code that forks and waits.
pub fn hold() -> Hold {
    holds().count += 1;
    Hold(())
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut holds = holds();
        holds.count -= 1;
        if holds.count == 0 && std::mem::take(&mut holds.deferred) {
            drop(holds);
            // Reap what was put off: children that ended meanwhile sent
            // their SIGCHLD while we held it back.
            let _ = nix::sys::signal::kill(Pid::this(), nix::sys::signal::SIGCHLD);
        }
    }
}

/// Calls `on_exit(pid, status)` for every reaped child, from one thread.
/// `known()` lists the pids the reaper may take during a hold. Fails only
/// if its thread cannot be started.
pub fn start(
    mut signals: Signals,
    known: impl Fn() -> Vec<i32> + Send + 'static,
    on_exit: impl Fn(i32, ExitStatus) + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new().name("reaper".into()).stack_size(256 * 1024).spawn(move || {
        for signal in signals.forever() {
            if signal == SIGCHLD {
                for (pid, exit) in reap(&known) {
                    on_exit(pid, exit);
                }
            } else {
                log::info!("ignoring signal {signal}");
            }
        }
    })?;
    Ok(())
}

/// Every exited child; during a hold, only those of `known()`.
fn reap(known: &impl Fn() -> Vec<i32>) -> Vec<(i32, ExitStatus)> {
    let mut holds = holds();
    if holds.count == 0 {
        return reap_while(None, || true);
    }
    holds.deferred = true;
    drop(holds);
    known().into_iter().flat_map(|pid| reap_while(Some(Pid::from_raw(pid)), || false)).collect()
}

/// Reaps `pid` (any child for None) without blocking, again while `more()`.
fn reap_while(pid: Option<Pid>, more: impl Fn() -> bool) -> Vec<(i32, ExitStatus)> {
    let mut reaped = Vec::new();
    loop {
        // __WALL: also children whose exit signal is not SIGCHLD.
        match waitpid(pid, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(pid, code)) => reaped.push((pid.as_raw(), status(code as u32))),
            Ok(WaitStatus::Signaled(pid, sig, _)) => reaped.push((pid.as_raw(), status(128 + sig as u32))),
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return reaped,
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                log::warn!("waitpid: {e}");
                return reaped;
            }
        }
        if !more() {
            return reaped;
        }
    }
}

fn status(code: u32) -> ExitStatus {
    ExitStatus { code, at: SystemTime::now() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child forked under a hold is left to its parent's wait, however
    /// the reaper is asked meanwhile.
    #[test]
    fn a_held_child_keeps_its_status_for_its_waiter() {
        let _hold = hold();
        let mut child = std::process::Command::new("/bin/sh").args(["-c", "exit 7"]).spawn().expect("spawn sh");
        let pid = child.id() as i32;
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z")) {
            std::thread::yield_now();
        }
        let reaped = reap(&Vec::new);
        assert!(reaped.iter().all(|(p, _)| *p != pid), "the reaper took the held child: {reaped:?}");
        assert_eq!(child.wait().expect("wait for our child").code(), Some(7));
    }
}
