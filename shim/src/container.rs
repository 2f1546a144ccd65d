//! One container as the shim sees it: its init and exec processes, its
//! rootfs and pause state, and the status words containerd expects.

use std::collections::HashMap;
use std::path::PathBuf;

use containerd_shim::protos::types::task::Status as TaskStatus;

use crate::process::{Process, Status};

pub struct Container {
    pub bundle: String,
    /// `<bundle>/rootfs` if the shim mounted containerd's rootfs there.
    pub mounted_rootfs: Option<PathBuf>,
    pub init: Process,
    pub execs: HashMap<String, Process>,
    pub paused: bool,
    /// Its cgroup manager for Stats, built on the first call.
    pub metrics: Option<std::sync::Arc<crate::metrics::Source>>,
}

impl Container {
    /// The init for an empty exec id, else that exec.
    pub fn process(&self, exec_id: &str) -> Option<&Process> {
        if exec_id.is_empty() { Some(&self.init) } else { self.execs.get(exec_id) }
    }

    pub fn process_mut(&mut self, exec_id: &str) -> Option<&mut Process> {
        if exec_id.is_empty() { Some(&mut self.init) } else { self.execs.get_mut(exec_id) }
    }

    /// containerd's status of one of our processes.
    pub fn task_status(&self, p: &Process) -> TaskStatus {
        match p.status() {
            Status::Stopped => TaskStatus::STOPPED,
            Status::Created => TaskStatus::CREATED,
            Status::Running if self.paused => TaskStatus::PAUSED,
            Status::Running => TaskStatus::RUNNING,
        }
    }
}
