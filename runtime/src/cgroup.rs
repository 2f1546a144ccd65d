//! The container's cgroup through libcgroups: finding it, and killing and
//! removing what a crashed create or a forced delete leaves behind.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use libcgroups::common::{AnyCgroupManager, CgroupConfig, CgroupManager};
use libcontainer::container::Container;
use nix::sys::signal::{kill, Signal};

use crate::container_dir::ContainerDir;
use crate::engine_bundle;
use crate::error::{Error, Result};

/// The cgroup manager for a loaded container.
pub fn manager_for(container: &Container) -> Result<AnyCgroupManager> {
    let config = container
        .spec()
        .map_err(|e| Error::engine("read cgroup of", container.id(), &e))?;
    manager(config.cgroup_path, container.systemd(), container.id())
}

pub fn manager(path: PathBuf, systemd: bool, id: &str) -> Result<AnyCgroupManager> {
    libcgroups::common::create_cgroup_manager(CgroupConfig {
        cgroup_path: path.clone(),
        systemd_cgroup: systemd,
        container_name: id.to_string(),
    })
    .map_err(|e| Error::Cgroup {
        path,
        reason: crate::error::one_line_chain(&e),
    })
}

/// The cgroup path a container was (or was about to be) created with, read
/// from the engine copy of its config.
pub fn recorded_path(dir: &ContainerDir) -> Option<PathBuf> {
    let config = dir.engine_bundle().join("config.json");
    let spec = engine_bundle::parse_config(&config).ok()?;
    spec.linux().as_ref()?.cgroups_path().clone()
}

/// SIGKILLs every process in the cgroup, waits for them to go, and removes
/// the cgroup. A cgroup that does not exist is not an error.
pub fn kill_and_remove(path: &std::path::Path, id: &str) -> Result<()> {
    let systemd = path.to_string_lossy().contains(':');
    let manager = manager(path.to_path_buf(), systemd, id)?;
    let cgroup_err = |e: &dyn std::error::Error| Error::Cgroup {
        path: path.to_path_buf(),
        reason: crate::error::one_line_chain(e),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = manager.get_all_pids().unwrap_or_default();
        if pids.is_empty() || Instant::now() > deadline {
            break;
        }
        let _ = manager.freeze(libcgroups::common::FreezerState::Thawed);
        for pid in pids {
            let _ = kill(pid, Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    manager.remove().map_err(|e| cgroup_err(&e))
}
