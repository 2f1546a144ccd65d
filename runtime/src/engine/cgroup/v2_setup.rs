//! A new container's cgroup on a cgroup v2 host, made and limited before
//! its init exists, so that the init is born in it
//! (`clone3(CLONE_INTO_CGROUP)`): never a moment outside its limits, and no
//! move afterwards. libcgroups' v2 manager makes the directory only when it
//! adds a task; here we make it (the root's controllers enabled on each
//! level above it, as that manager does), then its manager writes the
//! resources into it.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use libcgroups::common::{CgroupConfig, CgroupManager, ControllerOpt};
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;
use oci_spec::runtime::LinuxResources;

use crate::engine::cgroup::fs::{self, Hierarchy, StepError};
use crate::error::{Error, Result};

/// The cgroup2 root of a pure v2 host, among the command's `cgroups`.
pub fn unified_root(cgroups: &[Hierarchy]) -> Option<&Path> {
    fs::is_unified(cgroups).then_some(Path::new("/sys/fs/cgroup"))
}

/// Makes `config`'s cgroup under `root`, writes `resources` into it, and
/// returns the directory open for `CLONE_INTO_CGROUP`.
pub fn prepare(root: &Path, config: &CgroupConfig, resources: Option<&LinuxResources>) -> Result<OwnedFd> {
    let fail = |reason: String| Error::Cgroup { path: config.cgroup_path.clone(), reason };
    let step = |e: StepError| fail(e.to_string());
    let relative = fs::relative(&config.cgroup_path);
    let dir = make_dirs(root, &relative).map_err(step)?;
    if let Some(resources) = resources {
        let manager = libcgroups::common::create_cgroup_manager(config.clone()).map_err(|e| fail(crate::error::one_line_chain(&e)))?;
        let disable_oom_killer = resources.memory().as_ref().and_then(|m| m.disable_oom_killer()).unwrap_or(false);
        let opts = ControllerOpt { resources, freezer_state: None, oom_score_adj: None, disable_oom_killer };
        manager.apply(&opts).map_err(|e| fail(crate::error::one_line_chain(&e)))?;
    }
    let fd = open(&dir, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|errno| step(StepError::File { op: "openat", path: dir.clone(), errno }))?;
    // SAFETY: open just returned this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// mkdir of each level below `root`; every level above the container's
/// gets the root's controllers in its `cgroup.subtree_control` (the leaf
/// none: a cgroup with controllers enabled for children holds no process).
fn make_dirs(root: &Path, relative: &Path) -> std::result::Result<PathBuf, StepError> {
    let available = read(&root.join("cgroup.controllers"))?;
    let wanted: Vec<&str> = available.split_whitespace().collect();
    let mut dir = root.to_path_buf();
    for part in relative.components() {
        enable(&dir, &wanted);
        dir.push(part);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StepError::file("mkdir", &dir, &e)),
        }
    }
    Ok(dir)
}

/// Best effort, as libcgroups: a controller that cannot be enabled fails
/// the limit that needs it, naming that file.
fn enable(dir: &Path, wanted: &[&str]) {
    let file = dir.join("cgroup.subtree_control");
    let enabled = read(&file).unwrap_or_default();
    let enabled: Vec<&str> = enabled.split_whitespace().collect();
    for controller in wanted.iter().filter(|c| !enabled.contains(c)) {
        if let Err(e) = std::fs::write(&file, format!("+{controller}")) {
            tracing::debug!("could not enable {controller} in {}: {e}", file.display());
        }
    }
}

fn read(path: &Path) -> std::result::Result<String, StepError> {
    std::fs::read_to_string(path).map_err(|e| StepError::file("read", path, &e))
}
