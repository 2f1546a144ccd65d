//! `kill`: send a signal to the init, or with `all` to every process of
//! the container.

use libcontainer::container::{Container, ContainerStatus};
use nix::sys::signal::Signal;

use crate::engine::container_dir::ContainerDir;
use crate::engine::state::status_word;
use crate::error::{Error, Result};

pub(crate) fn kill(dir: &ContainerDir, container: &mut Container, signal: Signal, all: bool) -> Result<()> {
    let id = &dir.id;
    let status = container.status();
    let alive = matches!(status, ContainerStatus::Created | ContainerStatus::Running | ContainerStatus::Paused);
    // As runc 1.2 and later: KILL without a PID namespace of the container's
    // own reaches every process of the container, also once the init is gone.
    let kill_all = signal == Signal::SIGKILL && !all && !owns_pid_namespace(dir);
    if !alive && !all && !kill_all {
        return Err(Error::WrongStatus {
            id: id.clone(),
            op: "kill",
            status: status_word(status).to_string(),
            wanted: "created, running or paused",
        });
    }
    // systemd removes a scope's cgroup once its last process is gone: nothing is left to
    // signal, and runc says so (`Stopped && !cgroupManager.Exists()`); containerd's
    // WithProcessKill sends this after every exit and would retry a failure forever.
    if all && !alive && cgroup_gone(container)? {
        return Ok(());
    }
    if kill_all {
        return kill_every_process(dir, container);
    }
    match container.kill(signal, all) {
        // After signalling, the engine saves the status; a foreground `run` (or a delete) may
        // have removed the state dir by then because the signal ended the container.
        Err(_) if !dir.path().exists() => Ok(()),
        result => result.map_err(|e| Error::engine("kill", id, &e)),
    }
}

/// Whether the container's cgroup no longer exists (listing its processes finds no directory).
fn cgroup_gone(container: &Container) -> Result<bool> {
    use libcgroups::common::{AnyManagerError as Any, CgroupManager, WrappedIoError};
    let not_found = |w: &WrappedIoError| w.inner().kind() == std::io::ErrorKind::NotFound;
    Ok(match crate::engine::cgroup::manager::manager_for(container)?.get_all_pids() {
        Err(Any::Systemd(libcgroups::systemd::manager::SystemdManagerError::WrappedIo(w))) => not_found(&w),
        Err(Any::V2(libcgroups::v2::manager::V2ManagerError::WrappedIo(w))) => not_found(&w),
        _ => false,
    })
}

/// Whether the container has a PID namespace of its own: SIGKILL to its
/// init then ends every process in it (pid_namespaces(7)). An unreadable
/// config counts as not, as containerd's runc shim decides.
fn owns_pid_namespace(dir: &ContainerDir) -> bool {
    crate::engine::engine_bundle::parse_config(&dir.config_path()).is_ok_and(|spec| crate::engine::stop::leads_pid_ns(&spec))
}

/// SIGKILLs the init and the container's other processes in its cgroup (as
/// runc's signalAllProcesses), sparing what the host put there, as delete
/// does (see `stop::Members`).
fn kill_every_process(dir: &ContainerDir, container: &Container) -> Result<()> {
    let cgroup_path = container.spec().ok().map(|c| c.cgroup_path);
    let cgroups = crate::engine::cgroup::fs::hierarchies();
    crate::engine::teardown::kill_own_processes(&cgroups, container, dir, cgroup_path.as_deref())
}
