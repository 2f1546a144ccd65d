//! `ps`: the processes in a container's cgroup.

use std::path::Path;

use libcgroups::common::CgroupManager;

use crate::cgroup;
use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};

/// The pids of every process in the container, sorted.
pub fn pids(root: &Path, id: &str) -> Result<Vec<i32>> {
    let dir = ContainerDir::new(root, id)?;
    let container = dir.load()?;
    let manager = cgroup::manager_for(&container)?;
    let mut pids: Vec<i32> = manager
        .get_all_pids()
        .map_err(|e| Error::engine("list processes of", id, &e))?
        .into_iter()
        .map(|p| p.as_raw())
        .collect();
    pids.sort_unstable();
    Ok(pids)
}
