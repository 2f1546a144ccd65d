//! `delete`: remove a stopped container (or, with `force`, any container,
//! including one whose create crashed half-way) and everything it owned.

use std::path::Path;

use libcontainer::container::{Container, ContainerStatus};

use crate::engine::cgroup::fs::Hierarchy;
use crate::engine::cgroup::manager as cgroup;
use crate::engine::container_dir::ContainerDir;
use crate::engine::state::status_word;
use crate::engine::teardown;
use crate::error::{Error, Result};

/// Deletes container `id` of `root`, also one whose state is missing or
/// broken (a create that died half-way): with `force`, or when nothing
/// but our directory is left.
/// `cgroups`: the host's hierarchies, read once for the whole command.
pub(crate) fn delete(cgroups: &[Hierarchy], root: &Path, id: &str, force: bool) -> Result<()> {
    let dir = ContainerDir::new(root, id)?;
    if !dir.exists() {
        if dir.path().exists() {
            // A create that died before the engine wrote any state.
            return teardown::remove_leftovers(cgroups, &dir);
        }
        return if force { Ok(()) } else { Err(Error::NotFound(id.to_string())) };
    }
    let container = match dir.load() {
        Ok(c) => c,
        Err(_) if force => return teardown::remove_leftovers(cgroups, &dir),
        Err(e) => return Err(e),
    };
    delete_loaded(cgroups, &dir, container, force)
}

/// Deletes a loaded container: a stopped or created one, or with `force`
/// any.
pub(crate) fn delete_loaded(cgroups: &[Hierarchy], dir: &ContainerDir, mut container: Container, force: bool) -> Result<()> {
    let id = dir.id.as_str();
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
    let killed = teardown::kill_own_processes(cgroups, &container, dir, cgroup_path.as_deref());
    if let Err(err) = killed {
        if !force {
            return Err(err);
        }
    }
    let _ = container.refresh_status();
    let removed = match finish(cgroups, &mut container, dir, cgroup_path.as_deref()) {
        Ok(()) => Ok(()),
        Err(_) if force => return teardown::remove_leftovers(cgroups, dir),
        Err(e) => Err(e),
    };
    if removed.is_ok() && cgroup_path == Some(cgroup::default_path(id)) {
        cgroup::remove_default_parent(cgroups, &dir.root);
    }
    removed
}

/// With the container's processes gone: its cgroup (sub-cgroups first), the
/// poststop hooks and the state. A cgroup that other processes still hold is
/// theirs too, and stays.
fn finish(cgroups: &[Hierarchy], container: &mut Container, dir: &ContainerDir, cgroup_path: Option<&Path>) -> Result<()> {
    let others = cgroup_path.map(|path| cgroup::remove_tree(cgroups, path)).unwrap_or_default();
    if others.is_empty() && !container.systemd() {
        // The cgroup is gone: all the engine's delete would still do is the
        // poststop hooks, after building a cgroup manager (two /proc reads
        // per v1 controller) to remove it again.
        run_poststop(container);
        return dir.remove_all();
    }
    if others.is_empty() {
        // systemd: the engine's removal also stops the container's unit; the
        // cgroup is empty, so its SIGKILL reaches nothing.
        match container.delete(false) {
            Ok(()) => {}
            // The engine stops at a failing poststop hook; the spec says to
            // warn and go on.
            Err(libcontainer::error::LibcontainerError::Hook(e)) => {
                tracing::warn!("poststop hook of {} failed: {}", dir.id, crate::error::one_line_chain(&e));
            }
            Err(e) => return Err(Error::engine("delete", &dir.id, &e)),
        }
        return dir.remove_all();
    }
    tracing::warn!("cgroup {} kept: it holds processes of others: {others:?}", cgroup_path.unwrap_or(Path::new("")).display());
    run_poststop(container);
    dir.remove_all()
}

/// The poststop hooks, as the engine's delete runs them; a failing one is a
/// warning, as the spec says.
fn run_poststop(container: &Container) {
    let Ok(config) = libcontainer::config::YoukiConfig::load(&container.root) else { return };
    let poststop = config.hooks.as_ref().and_then(|h| h.poststop().clone());
    if let Err(err) = libcontainer::hooks::run_hooks(poststop.as_ref(), Some(&container.state), None, None, None) {
        tracing::warn!("poststop hooks: {err}");
    }
}
