//! `start`: run the user's program in a created container, then its
//! poststart hooks once that program runs.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use libcontainer::container::{Container, ContainerStatus};

use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};
use crate::state::status_word;

pub fn start(root: &Path, id: &str) -> Result<()> {
    let dir = ContainerDir::new(root, id)?;
    let mut container = dir.load()?;
    let status = container.status();
    if status != ContainerStatus::Created {
        return Err(Error::WrongStatus {
            id: id.to_string(),
            op: "start",
            status: status_word(status).to_string(),
            wanted: "created",
        });
    }
    container
        .start()
        .map_err(|e| Error::engine("start", id, &e))?;
    let hooks = dir.metadata().map(|m| m.poststart).unwrap_or_default();
    if !hooks.is_empty() {
        run_poststart(&container, &hooks);
    }
    Ok(())
}

/// The spec runs poststart after the user's program started; a failing
/// poststart hook is logged and does not fail `start`.
fn run_poststart(container: &Container, hooks: &[oci_spec::runtime::Hook]) {
    if let Some(pid) = container.pid() {
        wait_for_exec(pid.as_raw(), Duration::from_secs(10));
    }
    let hooks = hooks.to_vec();
    if let Err(err) = libcontainer::hooks::run_hooks(Some(&hooks), Some(&container.state), None, None, None) {
        tracing::warn!("poststart hook failed: {}", crate::error::one_line_chain(&err));
    }
}

/// Waits until `pid` no longer runs our own binary (the init has exec'd
/// the user's program) or has gone; bounded by `limit`.
fn wait_for_exec(pid: i32, limit: Duration) {
    let ours = std::fs::metadata("/proc/self/exe").ok().map(|m| (m.dev(), m.ino()));
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let theirs = std::fs::metadata(format!("/proc/{pid}/exe")).ok().map(|m| (m.dev(), m.ino()));
        if theirs.is_none() || theirs != ours {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
