//! `delete`: remove a stopped container (or, with `force`, any container,
//! including one whose create crashed half-way) and everything it owned.

use std::path::Path;

use libcontainer::container::ContainerStatus;

use crate::cgroup;
use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};
use crate::state::status_word;

pub fn delete(root: &Path, id: &str, force: bool) -> Result<()> {
    let dir = ContainerDir::new(root, id)?;
    if !dir.exists() {
        if dir.path().exists() {
            // A create that died before the engine wrote any state.
            return remove_leftovers(&dir);
        }
        return if force { Ok(()) } else { Err(Error::NotFound(id.to_string())) };
    }
    let mut container = match dir.load() {
        Ok(c) => c,
        Err(_) if force => return remove_leftovers(&dir),
        Err(e) => return Err(e),
    };
    let status = container.status();
    let deletable = matches!(status, ContainerStatus::Stopped | ContainerStatus::Created);
    if !deletable && !force {
        return Err(Error::WrongStatus {
            id: id.to_string(),
            op: "delete",
            status: status_word(status).to_string(),
            wanted: "stopped (or use --force)",
        });
    }
    let cgroup_path = container.spec().ok().map(|c| c.cgroup_path);
    let removed = match container.delete(force) {
        // The engine removed the cgroup; only our own files remain.
        Ok(()) => dir.remove_all(),
        // The engine stops at a failing poststop hook, once the cgroup is
        // gone; the spec says to warn and go on.
        Err(libcontainer::error::LibcontainerError::Hook(e)) => {
            tracing::warn!("poststop hook of {id} failed: {}", crate::error::one_line_chain(&e));
            dir.remove_all()
        }
        Err(_) if force => return remove_leftovers(&dir),
        Err(e) => Err(Error::engine("delete", id, &e)),
    };
    if removed.is_ok() && cgroup_path == Some(cgroup::default_path(id)) {
        cgroup::remove_default_parent(&dir.root);
    }
    removed
}

/// Kills whatever is still in the container's cgroup, removes the cgroup
/// and the state. Used after a failed create and by `delete --force`.
pub fn remove_leftovers(dir: &ContainerDir) -> Result<()> {
    let path = dir.cgroups_path();
    if let Some(path) = &path {
        cgroup::kill_and_remove(path, &dir.id)?;
    }
    dir.remove_all()?;
    if path == Some(cgroup::default_path(&dir.id)) {
        cgroup::remove_default_parent(&dir.root);
    }
    Ok(())
}
