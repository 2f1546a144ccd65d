//! `pause`: freeze every process of a running container.

use std::path::Path;

use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};

pub fn pause(root: &Path, id: &str) -> Result<()> {
    let dir = ContainerDir::new(root, id)?;
    let mut container = dir.load()?;
    container.pause().map_err(|e| Error::engine("pause", id, &e))
}
