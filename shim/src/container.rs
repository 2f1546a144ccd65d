//! One container as the shim sees it: its init and exec processes, its
//! rootfs and pause state, and the status words containerd expects.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use containerd_shim::protos::types::task::Status as TaskStatus;

use crate::process::{Process, State};

pub struct Container {
    pub bundle: String,
    /// Its init's end must kill the rest of it (no PID namespace of its own).
    pub kill_all_on_exit: bool,
    /// The library's handle on it, loaded on first use and then kept
    /// between requests (its state is read once, not per request); None
    /// until then and once deleted. Held across each runtime call on it: the
    /// engine rewrites `state.json` in place and takes `&mut` for it.
    pub handle: Arc<Mutex<Option<rustpod::Container>>>,
    /// `<bundle>/rootfs` if the shim mounted containerd's rootfs there.
    pub mounted_rootfs: Option<PathBuf>,
    pub init: Process,
    pub execs: HashMap<String, Process>,
    /// Its cgroup manager for Stats, built on the first call.
    pub metrics: Option<std::sync::Arc<crate::metrics::Source>>,
    /// runc's IoUid/IoGid from Create: its execs' pipes are chowned to them too.
    pub io_owner: Option<(u32, u32)>,
    /// The helper job that restores its init, from a Create with a
    /// checkpoint until a Start restores it (its init has no pid till then).
    pub restore_job: Option<crate::helper::Job>,
    /// Its OOM watch, flushed before each of its exits is published.
    pub oom: Option<Arc<crate::oom::OomWatch>>,
}

impl Container {
    /// Publishes any OOM kill not yet published: before an exit, so that
    /// containerd's clients see why the process died.
    pub fn flush_oom(&self) {
        if let Some(watch) = &self.oom {
            watch.flush();
        }
    }

    /// The init for None, else that exec.
    pub fn process(&self, exec_id: Option<&str>) -> Option<&Process> {
        match exec_id {
            None => Some(&self.init),
            Some(exec_id) => self.execs.get(exec_id),
        }
    }

    pub fn process_mut(&mut self, exec_id: Option<&str>) -> Option<&mut Process> {
        match exec_id {
            None => Some(&mut self.init),
            Some(exec_id) => self.execs.get_mut(exec_id),
        }
    }

    /// containerd's status of one of our processes: an exec of a paused
    /// container is paused too, as containerd's runc shim reports it.
    pub fn task_status(&self, p: &Process) -> TaskStatus {
        match p.state() {
            State::Created | State::Starting => TaskStatus::CREATED,
            State::Running if self.init.state() == State::Paused => TaskStatus::PAUSED,
            State::Running => TaskStatus::RUNNING,
            State::Paused => TaskStatus::PAUSED,
            State::Stopped | State::Deleted => TaskStatus::STOPPED,
        }
    }
}

/// Whether the bundle's container shares a PID namespace (the host's, or
/// its pod's by path), as containerd's runc shim decides; an unreadable
/// config counts as sharing, as there.
pub fn kill_all_on_exit(bundle: &Path) -> bool {
    let config = bundle.join("config.json");
    let spec: serde_json::Value = match std::fs::read(&config).map(|d| serde_json::from_slice(&d)) {
        Ok(Ok(spec)) => spec,
        Ok(Err(e)) => {
            log::warn!("{}: {e}", config.display());
            return true;
        }
        Err(e) => {
            log::warn!("read {}: {e}", config.display());
            return true;
        }
    };
    !owns_pid_namespace(&spec)
}

fn owns_pid_namespace(spec: &serde_json::Value) -> bool {
    let namespaces = spec.pointer("/linux/namespaces").and_then(|n| n.as_array());
    namespaces.into_iter().flatten().any(|ns| {
        ns.get("type").and_then(|t| t.as_str()) == Some("pid") && ns.get("path").and_then(|p| p.as_str()).unwrap_or_default().is_empty()
    })
}

#[cfg(test)]
mod tests {
    use super::owns_pid_namespace;
    use serde_json::json;

    #[test]
    fn a_new_pid_namespace_is_its_own() {
        assert!(owns_pid_namespace(&json!({"linux": {"namespaces": [{"type": "mount"}, {"type": "pid"}]}})));
        assert!(owns_pid_namespace(&json!({"linux": {"namespaces": [{"type": "pid", "path": ""}]}})));
    }

    #[test]
    fn a_joined_or_missing_pid_namespace_is_shared() {
        assert!(!owns_pid_namespace(&json!({"linux": {"namespaces": [{"type": "pid", "path": "/proc/1/ns/pid"}]}})));
        assert!(!owns_pid_namespace(&json!({"linux": {"namespaces": [{"type": "mount"}]}})));
        assert!(!owns_pid_namespace(&json!({})));
    }
}
