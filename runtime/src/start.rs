//! `start`: run the user's program in a created container.

use std::path::Path;

use libcontainer::container::ContainerStatus;

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
        .map_err(|e| Error::engine("start", id, &e))
}
