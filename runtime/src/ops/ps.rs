//! `ps`: the processes in a container's cgroup.

use libcgroups::common::CgroupManager;
use libcontainer::container::Container;

use crate::engine::cgroup::manager as cgroup;
use crate::engine::container_dir::ContainerDir;
use crate::error::{Error, Result};

/// The pids of every process in the container, sorted.
pub(crate) fn pids(dir: &ContainerDir, container: &Container) -> Result<Vec<i32>> {
    let manager = cgroup::manager_for(container)?;
    let mut pids: Vec<i32> =
        manager.get_all_pids().map_err(|e| Error::engine("list processes of", &dir.id, &e))?.into_iter().map(|p| p.as_raw()).collect();
    pids.sort_unstable();
    Ok(pids)
}
