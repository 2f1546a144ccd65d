//! `kill`: send a signal to the init, or with `all` to every process of
//! the container.

use libcontainer::container::{Container, ContainerStatus};
use nix::sys::signal::Signal;

use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};
use crate::state::status_word;

pub(crate) fn kill(dir: &ContainerDir, container: &mut Container, signal: Signal, all: bool) -> Result<()> {
    let id = &dir.id;
    let status = container.status();
    let alive = matches!(
        status,
        ContainerStatus::Created | ContainerStatus::Running | ContainerStatus::Paused
    );
    if !alive && !all {
        return Err(Error::WrongStatus {
            id: id.clone(),
            op: "kill",
            status: status_word(status).to_string(),
            wanted: "created, running or paused",
        });
    }
    match container.kill(signal, all) {
        // After signalling, the engine saves the status; a foreground `run` (or a delete) may
        // have removed the state dir by then because the signal ended the container.
        Err(_) if !dir.path().exists() => Ok(()),
        result => result.map_err(|e| Error::engine("kill", id, &e)),
    }
}
