//! A restored tree in its container's cgroup when that is not the cgroup it
//! was dumped from (a new container id, as containerd's CRI restore makes):
//! criu puts the tree back where it was dumped from and makes those cgroups
//! again. runc tells criu the new cgroup root so that none come back; our
//! criu client cannot, so after the restore the tree's other processes
//! follow its init into the container's cgroup and the cgroups criu made
//! again go, as far as they are empty. Pure cgroup v2 only (one hierarchy);
//! on v1 the tree stays as criu put it.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// How often the tree is searched again for processes left behind (one may
/// fork while we move it).
const ROUNDS: usize = 50;

/// Process `pid`'s cgroup directory on a pure v2 host; None on v1 or hybrid.
pub fn dir_of(pid: i32) -> Option<PathBuf> {
    let hierarchies = super::fs::hierarchies();
    let [unified] = hierarchies.as_slice() else { return None };
    if !unified.unified {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Some(super::fs::join(&unified.mount_point, &super::fs::path_in(&text, None)?))
}

/// Moves the descendants of `init` still in `dumped` (where criu put the
/// tree) into `init`'s cgroup now, then removes `dumped` and its parents
/// while they are empty and not the container's.
pub fn gather(init: i32, dumped: &Path) -> Result<()> {
    let Some(ours) = dir_of(init) else { return Ok(()) };
    if ours == dumped {
        return Ok(());
    }
    for _ in 0..ROUNDS {
        let left: Vec<i32> = descendants(init).into_iter().filter(|&p| dir_of(p).as_deref() == Some(dumped)).collect();
        if left.is_empty() {
            break;
        }
        for pid in left {
            move_to(&ours, pid)?;
        }
    }
    remove_emptied(dumped, &ours);
    Ok(())
}

/// Writes `pid` to `cgroup`'s cgroup.procs; a process gone meanwhile is fine.
fn move_to(cgroup: &Path, pid: i32) -> Result<()> {
    let procs = cgroup.join("cgroup.procs");
    match std::fs::write(&procs, pid.to_string()) {
        Err(e) if e.raw_os_error() != Some(libc::ESRCH) => {
            Err(Error::Cgroup { path: cgroup.to_path_buf(), reason: format!("write {pid} to {}: {e}", procs.display()) })
        }
        _ => Ok(()),
    }
}

/// The processes under `pid` (children of any of its threads, recursively).
fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for task in tasks.flatten() {
            let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
                if !found.contains(&child) {
                    found.push(child);
                    todo.push(child);
                }
            }
        }
    }
    found
}

/// rmdir(2) of `dir`, then of each parent, until one is not empty or is an
/// ancestor of `keep` (the container's cgroup). A cgroup still in use is
/// busy and stays.
fn remove_emptied(dir: &Path, keep: &Path) {
    let mut next = Some(dir);
    while let Some(d) = next {
        if keep.starts_with(d) || d.parent().is_none() || std::fs::remove_dir(d).is_err() {
            break;
        }
        next = d.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::remove_emptied;

    #[test]
    fn emptied_dirs_go_up_to_the_containers_ancestor_and_a_busy_one_stays() {
        let root = std::env::temp_dir().join(format!("restored-tree-{}", std::process::id()));
        let (dumped, keep) = (root.join("slice/old-pod/old-scope"), root.join("slice/new-pod/new-scope"));
        std::fs::create_dir_all(&dumped).expect("mkdir dumped");
        std::fs::create_dir_all(&keep).expect("mkdir keep");
        remove_emptied(&dumped, &keep);
        assert!(!root.join("slice/old-pod").exists(), "the emptied parent went");
        assert!(keep.exists() && root.join("slice").exists(), "the container's cgroup and its ancestors stay");
        let busy = root.join("slice/busy/scope");
        std::fs::create_dir_all(&busy).expect("mkdir busy");
        std::fs::write(busy.join("procs"), "1").expect("write");
        remove_emptied(&busy, &keep);
        assert!(busy.exists(), "a cgroup still in use stays");
        std::fs::remove_dir_all(&root).expect("clean up");
    }
}
