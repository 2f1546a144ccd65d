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
    container
        .kill(signal, all)
        .map_err(|e| Error::engine("kill", id, &e))
}
