//! Lets `start` learn whether the container's startContainer hooks passed.
//! The engine runs them inside the init, as confined as the user's process,
//! after `start` has released it; a last hook of ours (the barrier) waits
//! there until `start` has seen it, so reaching it proves the others passed.

use std::path::PathBuf;
use std::time::Duration;

use oci_spec::runtime::Hook;

use crate::engine::start_report::Answer;
use crate::error::{Error, Result};

/// argv[0] by which our binaries recognise the barrier invocation.
pub const BARRIER_ARG0: &str = "rustpod-start-barrier";
/// The barrier's comm once it is ready for `start`'s signal.
const READY_COMM: &str = "rustpod-ready";
/// How long the barrier waits for a `start` that may have died or stopped
/// waiting: as long as `start` waits for it, so that hooks which outlast
/// that wait delay the program no longer.
const BARRIER_WAIT: Duration = START_HOOKS_WAIT;

/// How long `start` waits for the startContainer hooks to pass. runc's
/// start (1.2 and later) does not wait for them at all; we do, to report a
/// failing hook, but a hook that never ends (its binary comes from the image)
/// must not hold `start`: past this, start succeeds as runc's does. Well
/// under containerd's 2 s deadline for a task's State: its runc shim holds
/// the process lock across `start`, and a State that times out shows the
/// task with pid 0, for which containerd 2's `task delete --force` skips
/// its kill and then fails on the running task.
pub const START_HOOKS_WAIT: Duration = Duration::from_secs(1);

/// The hook appended after the user's startContainer hooks. It re-executes
/// our binary through the init's /proc/self/exe.
pub fn hook() -> Hook {
    let mut hook = Hook::default();
    hook.set_path(PathBuf::from("/proc/self/exe"));
    hook.set_args(Some(vec![BARRIER_ARG0.to_string()]));
    hook
}

/// The barrier's body: block SIGUSR1, say so through our comm, and wait for
/// `start` to send it. Always exits 0: a barrier that times out lets the
/// container run, as it would have without `start` watching.
pub fn main() -> i32 {
    let mut usr1 = nix::sys::signal::SigSet::empty();
    usr1.add(nix::sys::signal::Signal::SIGUSR1);
    if usr1.thread_block().is_err() {
        return 0;
    }
    let _ = nix::sys::prctl::set_name(&std::ffi::CString::new(READY_COMM).expect("no NUL"));
    let timeout = libc::timespec { tv_sec: BARRIER_WAIT.as_secs() as i64, tv_nsec: 0 };
    // SAFETY: a valid signal set and timespec; no info is asked for.
    unsafe { libc::sigtimedwait(usr1.as_ref(), std::ptr::null_mut(), &timeout) };
    0
}

/// After the init was released: waits until the barrier is reached (the
/// hooks passed; it is let go) or the init dies before (a hook failed), at
/// most `limit`.
pub fn wait(init_pid: i32, limit: Duration) -> Result<Answer> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if std::time::Instant::now() >= deadline {
            return Ok(Answer::StillRunning);
        }
        if !crate::sys::proc_stat::alive(init_pid) {
            return Ok(Answer::Died);
        }
        if let Some(barrier) = ready_barrier(init_pid) {
            return nix::sys::signal::kill(nix::unistd::Pid::from_raw(barrier), nix::sys::signal::Signal::SIGUSR1)
                .map(|()| Answer::Passed)
                .map_err(|e| Error::sys("kill(SIGUSR1) the startContainer barrier", e));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The init's child that is our barrier, blocking SIGUSR1 by now.
fn ready_barrier(init_pid: i32) -> Option<i32> {
    let children = std::fs::read_to_string(format!("/proc/{init_pid}/task/{init_pid}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|c| c.parse::<i32>().ok())
        .find(|child| std::fs::read_to_string(format!("/proc/{child}/comm")).is_ok_and(|comm| comm.trim_end() == READY_COMM))
}
