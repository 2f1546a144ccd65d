//! `pause`: freeze every process of a running container.

use libcontainer::container::Container;

use crate::engine::container_dir::ContainerDir;
use crate::error::{Error, Result};

pub(crate) fn pause(dir: &ContainerDir, container: &mut Container) -> Result<()> {
    container.pause().map_err(|e| Error::engine("pause", &dir.id, &e))
}
