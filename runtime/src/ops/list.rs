//! `list`: the state of every container under a root.

use std::path::Path;

use crate::engine::container_dir::{self, ContainerDir};
use crate::engine::state::{self, State};
use crate::error::Result;

/// Containers whose state cannot be read (a create in progress) are skipped.
pub fn list(root: &Path) -> Result<Vec<State>> {
    let ids = container_dir::list_ids(root)?;
    Ok(ids.iter().filter_map(|id| ContainerDir::new(root, id).ok()).filter_map(|dir| state::state(&dir).ok()).collect())
}
