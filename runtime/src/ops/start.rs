//! `start`: let the init run the startContainer hooks and exec the user's
//! program, then run the poststart hooks once that program runs.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use libcontainer::container::{Container, ContainerStatus};

use crate::engine::container_dir::ContainerDir;
use crate::engine::process::notify;
use crate::engine::start_barrier;
use crate::engine::start_report::{self, Answer};
use crate::engine::state::status_word;
use crate::error::{Error, Result};

/// The second half of `start`, which needs no handle on the container: the
/// wait for its startContainer hooks (the container's own code) and the
/// poststart hooks. Callers that serialise operations on a container
/// release it first, so that kill and delete are never stuck behind a hook.
pub struct Starting {
    id: String,
    init: Option<i32>,
    hooks: StartHooks,
    init_exe: Option<(u64, u64)>,
    poststart: Vec<oci_spec::runtime::Hook>,
    state: libcontainer::container::State,
}

/// `start` whole: release, then wait.
pub(crate) fn start(dir: &ContainerDir, container: &mut Container) -> Result<()> {
    release(dir, container)?.finish()
}

/// Releases the init and records the container as running, as runc's start
/// does once the init has read its exec fifo.
pub(crate) fn release(dir: &ContainerDir, container: &mut Container) -> Result<Starting> {
    let id = dir.id.as_str();
    let status = container.status();
    if status != ContainerStatus::Created {
        return Err(Error::WrongStatus { id: id.to_string(), op: "start", status: status_word(status).to_string(), wanted: "created" });
    }
    let meta = dir.metadata();
    let poststart = meta.as_ref().map(|m| m.poststart.clone()).unwrap_or_default();
    let hooks = match &meta {
        // Before the release: the init answers only a `start` already waiting.
        Some(m) if m.start_report => StartHooks::Report(start_report::connect(container.root.as_path())?),
        Some(m) if m.start_barrier => StartHooks::Barrier,
        _ => StartHooks::None,
    };
    // What the waiting init runs now (our binary, or its sealed copy).
    let init = container.pid().map(|p| p.as_raw());
    let init_exe = init.and_then(exe_identity);
    release_init(container.root.as_path())?;
    container.set_status(ContainerStatus::Running).save().map_err(|e| Error::engine("start", id, &e))?;
    Ok(Starting { id: id.to_string(), init, hooks, init_exe, poststart, state: container.state.clone() })
}

/// How `start` learns that the init's startContainer hooks passed.
enum StartHooks {
    None,
    /// The engine's init runs them, ending at our barrier (`start_barrier`).
    Barrier,
    /// Our init answers on this connection (`start_report`).
    Report(std::os::unix::net::UnixStream),
}

impl Starting {
    /// Waits (bounded) for the startContainer hooks, then runs the poststart
    /// hooks once the user's program runs.
    pub fn finish(self) -> Result<()> {
        let wait = start_barrier::START_HOOKS_WAIT;
        let answer = match (self.hooks, self.init) {
            (StartHooks::Barrier, Some(pid)) => start_barrier::wait(pid, wait)?,
            (StartHooks::Report(stream), _) => start_report::wait(stream, wait)?,
            _ => Answer::Passed,
        };
        match answer {
            Answer::Passed => {}
            // Left to run: runc's start would have returned long before.
            Answer::StillRunning => tracing::warn!("startContainer hooks of {} still run after {wait:?}; start returns", self.id),
            Answer::Died => {
                // The spec: a failing startContainer hook stops the container
                // (its init, and with it its PID namespace; never the rest of
                // a cgroup it may share).
                if let Some(pid) = self.init {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                }
                return Err(Error::Invalid("startContainer hook failed: the container's init exited before running its process".into()));
            }
        }
        if !self.poststart.is_empty() {
            if let (Some(pid), Some(exe)) = (self.init, self.init_exe) {
                wait_for_exec(pid, exe, Duration::from_secs(10));
            }
            run_poststart(&self.id, &self.state, &self.poststart);
        }
        Ok(())
    }
}

/// Tells the init, waiting on the container's notify socket, to exec the
/// user's program.
fn release_init(container_root: &Path) -> Result<()> {
    notify::notify_socket(container_root, &container_root.join(libcontainer::notify_socket::NOTIFY_FILE))
}

/// The spec runs poststart after the user's program started; a failing
/// poststart hook is logged and does not fail `start`.
fn run_poststart(id: &str, state: &libcontainer::container::State, hooks: &[oci_spec::runtime::Hook]) {
    let hooks = hooks.to_vec();
    if let Err(err) = libcontainer::hooks::run_hooks(Some(&hooks), Some(state), None, None, None) {
        tracing::warn!("poststart hook failed: {} (container {id})", crate::error::one_line_chain(&err));
    }
}

/// The (device, inode) of the program `pid` runs.
fn exe_identity(pid: i32) -> Option<(u64, u64)> {
    std::fs::metadata(format!("/proc/{pid}/exe")).ok().map(|m| (m.dev(), m.ino()))
}

/// Waits until `pid` no longer runs `before` (the init has exec'd the
/// user's program) or has gone; bounded by `limit`.
fn wait_for_exec(pid: i32, before: (u64, u64), limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if exe_identity(pid) != Some(before) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
