// The cgroups of a test container: `/rustpod-test-<id>/<id>` (or `/rustpod/<id>`) in every
// hierarchy under /sys/fs/cgroup; reading v1 files, and removing what a runtime left. Each
// container gets its own parent, so that removing it can never race with another test.

use crate::{leftovers, wait};
use std::fs;
use std::path::{Path, PathBuf};

const CGROUP_FS: &str = "/sys/fs/cgroup";

/// The cgroupsPath a container of this suite gets, unless its test clears it.
pub fn cgroups_path(id: &str) -> String {
    format!("{}/{id}", parent(id))
}

fn parent(id: &str) -> String {
    format!("/rustpod-test-{id}")
}

/// Removes the (empty) per-container parent the runtime made for `id`'s cgroup.
pub fn remove_parent(id: &str) {
    for h in hierarchies() {
        let _ = fs::remove_dir(h.join(parent(id).trim_start_matches('/')));
    }
}

/// Every hierarchy's root: the v1 ones under /sys/fs/cgroup, and /sys/fs/cgroup itself, which
/// is the one hierarchy of a pure cgroup v2 host.
fn hierarchies() -> Vec<PathBuf> {
    let v1 = fs::read_dir(CGROUP_FS).into_iter().flatten().flatten().map(|h| h.path());
    std::iter::once(PathBuf::from(CGROUP_FS)).chain(v1).collect()
}

/// The content (trimmed) of `/sys/fs/cgroup/<controller>/rustpod-test-<id>/<id>/<file>`.
pub fn v1_file(controller: &str, id: &str, file: &str) -> String {
    read_in(&Path::new(CGROUP_FS).join(controller), id, file)
}

/// The content (trimmed) of `/sys/fs/cgroup/rustpod-test-<id>/<id>/<file>` on a cgroup v2 host.
pub fn v2_file(id: &str, file: &str) -> String {
    read_in(Path::new(CGROUP_FS), id, file)
}

fn read_in(hierarchy: &Path, id: &str, file: &str) -> String {
    let path = hierarchy.join(cgroups_path(id).trim_start_matches('/')).join(file);
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .trim()
        .to_string()
}

/// Existing cgroup dirs for `/rustpod-test-<id>/<id>` or `/rustpod/<id>` under any hierarchy.
pub fn dirs(id: &str) -> Vec<PathBuf> {
    let relative = [cgroups_path(id), format!("/rustpod/{id}")];
    hierarchies()
        .into_iter()
        .flat_map(|h| {
            relative
                .iter()
                .map(move |rel| h.join(rel.trim_start_matches('/')))
        })
        .filter(|dir| dir.is_dir())
        .collect()
}

/// SIGKILLs, by pid, every process in container `id`'s cgroups.
pub fn kill_processes(id: &str) {
    for dir in dirs(id) {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        leftovers::kill_pids(procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()));
    }
}

/// Removes container `id`'s (empty) cgroup dirs; returns those that could not be removed.
pub fn remove_dirs(id: &str) -> Vec<PathBuf> {
    wait::eventually(|| {
        dirs(id).iter().for_each(|dir| drop(fs::remove_dir(dir)));
        dirs(id).is_empty()
    });
    dirs(id)
}
