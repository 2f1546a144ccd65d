//! The container's own cgroup in the host's named v1 hierarchies
//! (`name=systemd`), which libcgroups does not manage. Left alone, the
//! container's processes stay in the host's root cgroup there, and the
//! container's cgroupfs shows that root: every host PID, `release_agent`,
//! the other containers' cgroups. As runc does, they go to `<cgroupsPath>`
//! of each named hierarchy instead; `delete` removes it with the rest
//! (`cgroup::dirs` lists every hierarchy).

use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

use crate::engine::cgroup::fs::{self as cgroup_fs, Hierarchy, ThreadCgroups};
use crate::error::{Error, Result};

/// The calling thread, moved into the container's named cgroups; dropping
/// it moves the thread back to where it was.
#[derive(Debug)]
pub struct Joined {
    tid: String,
    back: Vec<PathBuf>,
}

/// [`join`] for the container `id` of `spec` (its engine spec), when its
/// cgroups are ours to make: with `--systemd-cgroup`, systemd places the
/// processes. A user namespace changes nothing here: the engine takes one
/// for systemd's driver, but libcgroups makes v1 cgroups itself whatever
/// the driver, and named hierarchies exist only on v1.
pub fn join_for(cgroups: &[Hierarchy], own: &ThreadCgroups, id: &str, spec: &Spec, systemd: bool) -> Result<Option<Joined>> {
    let Some(linux) = spec.linux().as_ref() else { return Ok(None) };
    let path = libcontainer::utils::get_cgroup_path(linux.cgroups_path(), id);
    if systemd || crate::engine::cgroup::manager::is_systemd_form(&path) || crate::engine::cgroup::manager::is_root(&path) {
        return Ok(None);
    }
    join(cgroups, own, &path).map(Some)
}

/// Moves the calling thread (only it: v1 lets single threads move, so a
/// shim's other threads are not affected) into `path` of every named
/// hierarchy, making the cgroup, so that the processes the engine forks
/// from this thread start there, before their cgroup namespace or
/// cgroupfs mount is made.
pub fn join(cgroups: &[Hierarchy], own: &ThreadCgroups, path: &Path) -> Result<Joined> {
    let tid = nix::unistd::gettid().to_string();
    let mut joined = Joined { tid, back: Vec::new() };
    if named(cgroups).next().is_none() {
        return Ok(joined);
    }
    let own = own.text().map_err(|e| Error::io("read", ThreadCgroups::PATH, e))?;
    for hierarchy in named(cgroups) {
        let Some(name) = name_of(hierarchy) else { continue };
        let Some(current) = cgroup_fs::path_in(own, Some(name)) else { continue };
        let target = cgroup_fs::join(&hierarchy.mount_point, &path.to_string_lossy());
        std::fs::create_dir_all(&target).map_err(|e| Error::io("mkdir", target.clone(), e))?;
        write_tid(&target, &joined.tid)?;
        joined.back.push(cgroup_fs::join(&hierarchy.mount_point, &current));
    }
    Ok(joined)
}

impl Drop for Joined {
    fn drop(&mut self) {
        for dir in &self.back {
            if let Err(err) = write_tid(dir, &self.tid) {
                tracing::warn!("{err}");
            }
        }
    }
}

fn write_tid(dir: &Path, tid: &str) -> Result<()> {
    let tasks = dir.join("tasks");
    std::fs::write(&tasks, tid).map_err(|e| Error::io("write(2)", tasks, e))
}

/// The v1 hierarchies with a `name=` and no controller: libcgroups makes
/// the container's cgroup in every controller's hierarchy, never in these.
pub fn named(cgroups: &[Hierarchy]) -> impl Iterator<Item = &Hierarchy> {
    cgroups
        .iter()
        .filter(|h| !h.unified && name_of(h).is_some())
        .filter(|h| !crate::engine::mount::cgroup_ns::CONTROLLERS.iter().any(|c| h.has(c)))
}

/// `name=systemd` of a hierarchy mounted with that option.
fn name_of(hierarchy: &Hierarchy) -> Option<&str> {
    hierarchy.controllers.iter().map(String::as_str).find(|o| o.starts_with("name="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_named_hierarchies_without_a_controller_are_ours_to_make() {
        let info = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                    40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n\
                    41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                    42 31 0:39 / /sys/fs/cgroup/odd rw,relatime - cgroup cgroup rw,pids,name=odd\n";
        let all = cgroup_fs::parse_mountinfo(info);
        let found: Vec<&Hierarchy> = named(&all).collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].mount_point, PathBuf::from("/sys/fs/cgroup/systemd"));
        assert_eq!(name_of(found[0]), Some("name=systemd"));
    }
}
