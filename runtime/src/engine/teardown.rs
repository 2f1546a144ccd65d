//! What `delete`, `kill` and a failed `create` share: killing the
//! container's own processes (never the rest of a shared cgroup), and
//! removing what a create that died half-way or a broken state leaves.

use std::path::Path;

use libcgroups::common::CgroupManager;
use libcontainer::container::{Container, ContainerStatus};

use crate::engine::cgroup::fs::Hierarchy;
use crate::engine::cgroup::manager as cgroup;
use crate::engine::container_dir::{ContainerDir, Metadata};
use crate::engine::{engine_bundle, stop};
use crate::error::Result;

/// SIGKILLs the init and the container's other processes left in its
/// cgroup, never the rest of what that cgroup may hold (the engine would).
/// `cgroups`: the host's hierarchies, as the command read them.
pub fn kill_own_processes(cgroups: &[Hierarchy], container: &Container, dir: &ContainerDir, cgroup_path: Option<&Path>) -> Result<()> {
    let alive = matches!(
        container.status(),
        ContainerStatus::Created | ContainerStatus::Running | ContainerStatus::Paused | ContainerStatus::Creating
    );
    let meta = dir.metadata();
    let members = stop::Members {
        init: container.pid().filter(|_| alive).map(|p| p.as_raw()),
        mount_ns: meta.as_ref().and_then(|m| m.mount_ns),
        rootfs: rootfs_id(dir, meta.as_ref()),
        own_pid_ns: meta.as_ref().is_some_and(|m| m.own_pid_ns),
    };
    let paused = container.status() == ContainerStatus::Paused;
    // SIGKILL does not reach a process in a frozen v1 cgroup until it thaws.
    let thaw = || {
        if paused {
            if let Ok(manager) = cgroup::manager_for(container) {
                let _ = manager.freeze(libcgroups::common::FreezerState::Thawed);
            }
        }
    };
    stop::kill_members(cgroups, &members, cgroup_path, &thaw)
}

/// The container's root directory, from our metadata or the engine config.
fn rootfs_id(dir: &ContainerDir, meta: Option<&Metadata>) -> Option<stop::FileId> {
    let rootfs = match meta {
        Some(meta) => meta.rootfs.clone(),
        None => {
            let spec = engine_bundle::parse_config(&dir.config_path()).ok()?;
            spec.root().as_ref()?.path().clone()
        }
    };
    stop::FileId::of(&rootfs)
}

/// Kills what is left of a container whose create failed or whose state is
/// broken (only its own processes: those in its rootfs), removes its cgroup
/// and the state. Used after a failed create and by `delete --force`.
pub fn remove_leftovers(cgroups: &[Hierarchy], dir: &ContainerDir) -> Result<()> {
    let path = dir.cgroups_path();
    let meta = dir.metadata();
    let members = stop::Members {
        init: None,
        mount_ns: meta.as_ref().and_then(|m| m.mount_ns),
        rootfs: rootfs_id(dir, meta.as_ref()),
        // A create that died half-way: its init's pid is not known.
        own_pid_ns: false,
    };
    stop::kill_members(cgroups, &members, path.as_deref(), &|| {})?;
    if let Some(path) = &path {
        let others = cgroup::remove_tree(cgroups, path);
        if !others.is_empty() {
            tracing::warn!("cgroup {} kept: it holds processes of others: {others:?}", path.display());
        }
    }
    dir.remove_all()?;
    if path == Some(cgroup::default_path(&dir.id)) {
        cgroup::remove_default_parent(cgroups, &dir.root);
    }
    Ok(())
}
