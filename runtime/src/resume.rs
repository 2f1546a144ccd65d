//! `resume`: thaw a paused container.

use std::path::Path;

use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};

pub fn resume(root: &Path, id: &str) -> Result<()> {
    let dir = ContainerDir::new(root, id)?;
    let mut container = dir.load()?;
    container.resume().map_err(|e| Error::engine("resume", id, &e))
}
