//! runc's `ShimCgroup`: `start` puts the server it spawns in that cgroup, as containerd's runc
//! shim does: on a pure v2 host in the unified hierarchy; otherwise in every v1 hierarchy
//! where the cgroup exists (a hybrid host's unified one is not among them, as with runc's
//! shim). A cgroup found nowhere is an error: the shim would run unaccounted.

use std::path::{Path, PathBuf};

use nix::errno::Errno;
use rustpod::cgroup_fs::Hierarchy;

#[derive(Debug, thiserror::Error)]
pub enum ShimCgroupError {
    #[error("ShimCgroup {cgroup}: no such cgroup under /sys/fs/cgroup")]
    Missing { cgroup: String },
    #[error("ShimCgroup {cgroup}: write {}: {errno}", file.display())]
    Join { cgroup: String, file: PathBuf, errno: Errno },
}

/// Moves `pid` into `cgroup` (a path below each hierarchy's root).
pub fn join(cgroup: &str, pid: u32) -> Result<(), ShimCgroupError> {
    let dirs = dirs_of(&rustpod::cgroup_fs::hierarchies(), cgroup, Path::is_dir);
    if dirs.is_empty() {
        return Err(ShimCgroupError::Missing { cgroup: cgroup.to_string() });
    }
    for dir in dirs {
        let file = dir.join("cgroup.procs");
        std::fs::write(&file, pid.to_string()).map_err(|e| ShimCgroupError::Join {
            cgroup: cgroup.to_string(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            file,
        })?;
    }
    Ok(())
}

/// The directories of `cgroup` to join: the unified one on a pure v2 host, else those of the v1
/// hierarchies where `exists`. `..` never climbs above a hierarchy's root (runc's shim joins
/// the path as given: `/../../x` would leave /sys/fs/cgroup).
fn dirs_of(hierarchies: &[Hierarchy], cgroup: &str, exists: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let pure_v2 = !hierarchies.is_empty() && hierarchies.iter().all(|h| h.unified);
    hierarchies
        .iter()
        .filter(|h| h.unified == pure_v2)
        .map(|h| h.mount_point.join(rustpod::cgroup_fs::relative(Path::new(cgroup))))
        .filter(|dir| exists(dir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hierarchy(mount: &str, unified: bool) -> Hierarchy {
        Hierarchy { mount_point: mount.into(), controllers: Vec::new(), unified }
    }

    #[test]
    fn a_hybrid_host_joins_its_v1_hierarchies_where_the_cgroup_is() {
        let hybrid = [
            hierarchy("/sys/fs/cgroup/unified", true),
            hierarchy("/sys/fs/cgroup/systemd", false),
            hierarchy("/sys/fs/cgroup/cpu,cpuacct", false),
            hierarchy("/sys/fs/cgroup/pids", false),
        ];
        let dirs = dirs_of(&hybrid, "/shims/a", |d| !d.starts_with("/sys/fs/cgroup/pids"));
        let expected: Vec<PathBuf> = vec!["/sys/fs/cgroup/systemd/shims/a".into(), "/sys/fs/cgroup/cpu,cpuacct/shims/a".into()];
        assert_eq!(dirs, expected);
    }

    #[test]
    fn a_pure_v2_host_joins_the_unified_hierarchy() {
        let dirs = dirs_of(&[hierarchy("/sys/fs/cgroup", true)], "shims/a", |_| true);
        assert_eq!(dirs, vec![PathBuf::from("/sys/fs/cgroup/shims/a")]);
        assert!(dirs_of(&[hierarchy("/sys/fs/cgroup", true)], "/gone", |_| false).is_empty());
        let climb = dirs_of(&[hierarchy("/sys/fs/cgroup", true)], "/../../etc", |_| true);
        assert_eq!(climb, vec![PathBuf::from("/sys/fs/cgroup/etc")]);
    }
}
