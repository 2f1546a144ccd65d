//! The container's cgroup through libcgroups: finding it, and killing and
//! removing what a crashed create or a forced delete leaves behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use libcgroups::common::{AnyCgroupManager, CgroupConfig, CgroupManager};
use libcontainer::container::Container;
use nix::sys::signal::{kill, Signal};

use crate::error::{Error, Result};

/// Where a container without `cgroupsPath` goes: `/rustpod/<id>`.
pub const DEFAULT_PARENT: &str = "/rustpod";

pub fn default_path(id: &str) -> PathBuf {
    Path::new(DEFAULT_PARENT).join(id)
}

/// Whether `path` is systemd's `slice:prefix:name` form (kubelet's systemd
/// driver sends it). As crun does, such a path means the systemd driver
/// even without `--systemd-cgroup`: taken as a cgroupfs path it would make a
/// directory named with colons at the root, outside the pod's slice.
pub fn is_systemd_form(path: &Path) -> bool {
    let text = path.to_string_lossy();
    let parts: Vec<&str> = text.split(':').collect();
    parts.len() == 3
        && !text.contains('/')
        && !parts[2].is_empty()
        && (parts[0].is_empty() || parts[0].ends_with(".slice"))
}

/// Removes the default parent `/rustpod` from every hierarchy once its last
/// container is gone, so that delete leaves no more than create made.
/// Creates hold `guard` shared while the engine makes their cgroup (and
/// their waiting init keeps it until exec), so we only try it exclusively,
/// without waiting: a parent is never removed between its mkdir and its
/// child's, and a busy moment just leaves it to a later delete.
pub fn remove_default_parent(guard: &Path) {
    let Ok(file) = std::fs::File::open(guard) else { return };
    let exclusive = nix::fcntl::FlockArg::LockExclusiveNonblock;
    let Ok(_lock) = nix::fcntl::Flock::lock(file, exclusive) else {
        return;
    };
    let name = DEFAULT_PARENT.trim_start_matches('/');
    let roots = std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|h| h.path())
        .chain(std::iter::once(PathBuf::from("/sys/fs/cgroup")));
    for root in roots {
        // Fails (EBUSY) while any container is still in it: that is the point.
        let _ = std::fs::remove_dir(root.join(name));
    }
}

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

#[cfg(test)]
mod systemd_form_tests {
    use super::*;

    #[test]
    fn kubelets_systemd_paths_are_recognised() {
        assert!(is_systemd_form(Path::new("kubepods-besteffort-pod1.slice:cri-containerd:abc")));
        assert!(is_systemd_form(Path::new(":rustpod:abc")));
        assert!(!is_systemd_form(Path::new("/kubepods/besteffort/pod1/abc")));
        assert!(!is_systemd_form(Path::new("/a:b:c")));
        assert!(!is_systemd_form(Path::new("a:b")));
    }
}
