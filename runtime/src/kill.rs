//! `kill`: send a signal to the init, or with `all` to every process of
//! the container.

use std::path::Path;

use libcontainer::container::ContainerStatus;
use nix::sys::signal::Signal;

use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};
use crate::state::status_word;

pub fn kill(root: &Path, id: &str, signal: Signal, all: bool) -> Result<()> {
    let dir = ContainerDir::new(root, id)?;
    let mut container = dir.load()?;
    let status = container.status();
    let alive = matches!(
        status,
        ContainerStatus::Created | ContainerStatus::Running | ContainerStatus::Paused
    );
    if !alive && !all {
        return Err(Error::WrongStatus {
            id: id.to_string(),
            op: "kill",
            status: status_word(status).to_string(),
            wanted: "created, running or paused",
        });
    }
    match container.kill(signal, all) {
        // systemd removes a scope's cgroup once its last process is gone: nothing is left to
        // signal, as runc says (`Stopped && !cgroupManager.Exists()`), and containerd's
        // WithProcessKill would otherwise retry the exit forever.
        Err(e) if all && !alive && cgroup_gone(&e) => Ok(()),
        result => result.map_err(|e| Error::engine("kill", id, &e)),
    }
}

/// Whether the engine failed because a file it read (the cgroup's) does not exist.
fn cgroup_gone(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound) {
            return true;
        }
        cause = e.source();
    }
    false
}
