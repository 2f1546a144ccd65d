//! `resume`: thaw a paused container.

use libcontainer::container::Container;

use crate::engine::container_dir::ContainerDir;
use crate::error::{Error, Result};

pub(crate) fn resume(dir: &ContainerDir, container: &mut Container) -> Result<()> {
    container.resume().map_err(|e| Error::engine("resume", &dir.id, &e))
}
