//! The container state as `rustpod state` and `list` print it: runc's
//! field names, status words and formatting.

use std::collections::HashMap;
use std::path::PathBuf;

use libcontainer::container::{Container, ContainerStatus};
use serde::Serialize;

use crate::engine::container_dir::ContainerDir;
use crate::error::Result;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub oci_version: String,
    pub id: String,
    pub pid: i32,
    pub status: String,
    pub bundle: PathBuf,
    pub rootfs: PathBuf,
    pub created: String,
    pub owner: String,
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub annotations: HashMap<String, String>,
}

/// runc's word for a status.
pub fn status_word(status: ContainerStatus) -> &'static str {
    match status {
        ContainerStatus::Creating => "creating",
        ContainerStatus::Created => "created",
        ContainerStatus::Running => "running",
        ContainerStatus::Stopped => "stopped",
        ContainerStatus::Paused => "paused",
    }
}

/// Loads a container and describes it as runc would.
pub fn state(dir: &ContainerDir) -> Result<State> {
    let container = dir.load()?;
    Ok(describe(dir, &container))
}

pub fn describe(dir: &ContainerDir, container: &Container) -> State {
    let status = container.status();
    let meta = dir.metadata();
    let bundle = meta.as_ref().map(|m| m.bundle.clone()).unwrap_or_else(|| container.bundle().clone());
    let rootfs = meta.map(|m| m.rootfs).unwrap_or_default();
    // runc reports pid 0 once the init is gone.
    let pid = match status {
        ContainerStatus::Stopped => 0,
        _ => container.pid().map(|p| p.as_raw()).unwrap_or(0),
    };
    State {
        oci_version: container.state.oci_version.clone(),
        id: container.id().to_string(),
        pid,
        status: status_word(status).to_string(),
        bundle,
        rootfs,
        created: container.created().map(|c| c.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)).unwrap_or_default(),
        owner: owner_name(container.state.creator),
        annotations: container.state.annotations.clone().unwrap_or_default(),
    }
}

/// runc leaves owner empty for root and prints the user name otherwise.
fn owner_name(uid: Option<u32>) -> String {
    match uid {
        None | Some(0) => String::new(),
        Some(uid) => {
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten().map(|u| u.name).unwrap_or_else(|| uid.to_string())
        }
    }
}
