//! The container's cgroup through libcgroups: finding it, and killing and
//! removing what a crashed create or a forced delete leaves behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use libcgroups::common::{AnyCgroupManager, CgroupConfig};
use libcontainer::container::Container;

use crate::engine::cgroup::fs::Hierarchy;
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
    parts.len() == 3 && !text.contains('/') && !parts[2].is_empty() && (parts[0].is_empty() || parts[0].ends_with(".slice"))
}

/// Whether systemd makes the container's cgroup (a transient scope), as
/// libcgroups decides: its driver on a pure v2 host with a path that is not
/// absolute. On v1 libcgroups' cgroupfs manager takes every path.
pub fn placed_by_systemd(path: &Path, systemd: bool, cgroups: &[Hierarchy]) -> bool {
    (systemd || is_systemd_form(path)) && !path.is_absolute() && crate::engine::cgroup::fs::is_unified(cgroups)
}

/// The unit systemd makes for `slice:prefix:name`: `prefix-name.scope`, or
/// the slice itself when the name is one (libcgroups' naming).
pub fn systemd_unit(path: &Path) -> Option<String> {
    let text = path.to_str()?;
    let mut parts = text.splitn(3, ':').skip(1);
    let (prefix, name) = (parts.next()?, parts.next()?);
    Some(if name.ends_with(".slice") { name.to_string() } else { format!("{prefix}-{name}.scope") })
}

/// Where systemd puts the unit of `slice:prefix:name`, below the v2 root,
/// known before the unit exists: the slice nested by its dashes as systemd
/// nests slices (`a-b.slice` is in `a.slice`; none given is
/// `system.slice`, `-.slice` the root), then the unit; a unit that is a
/// slice itself is nested by its own name.
pub fn systemd_path(path: &Path) -> Option<PathBuf> {
    let slice = path.to_str()?.split(':').next().filter(|s| !s.is_empty()).unwrap_or("system.slice");
    let unit = systemd_unit(path)?;
    let (nested, leaf) = if unit.ends_with(".slice") { (unit.as_str(), None) } else { (slice, Some(unit.as_str())) };
    let mut out = PathBuf::from("/");
    if nested != "-.slice" {
        let stem = nested.strip_suffix(".slice")?;
        for (end, _) in stem.match_indices('-').chain([(stem.len(), "")]) {
            out.push(format!("{}.slice", &stem[..end]));
        }
    }
    out.extend(leaf);
    Some(out)
}

/// The cgroup (below the v2 root) of the scope systemd made for `path`,
/// found where the container's `init` is: the ancestor of its cgroup named
/// as the unit (a container may have moved its init into a cgroup below).
/// None when the init is in no such cgroup.
pub fn systemd_scope_of(path: &Path, init: i32) -> Option<PathBuf> {
    let unit = systemd_unit(path)?;
    let text = std::fs::read_to_string(format!("/proc/{init}/cgroup")).ok()?;
    scope_in(&text, &unit)
}

fn scope_in(proc_cgroup: &str, unit: &str) -> Option<PathBuf> {
    let own = crate::engine::cgroup::fs::path_in(proc_cgroup, None)?;
    let mut scope = PathBuf::from("/");
    for part in Path::new(&own).components().skip(1) {
        scope.push(part);
        if part.as_os_str() == unit {
            return Some(scope);
        }
    }
    None
}

/// Removes the default parent `/rustpod` from every hierarchy once its last
/// container is gone, so that delete leaves no more than create made.
/// Creates hold `guard` shared while the engine makes their cgroup (and
/// their waiting init keeps it until exec), so we only try it exclusively,
/// without waiting: a parent is never removed between its mkdir and its
/// child's, and a busy moment just leaves it to a later delete.
pub fn remove_default_parent(cgroups: &[Hierarchy], guard: &Path) {
    let Ok(file) = std::fs::File::open(guard) else { return };
    let exclusive = nix::fcntl::FlockArg::LockExclusiveNonblock;
    let Ok(_lock) = nix::fcntl::Flock::lock(file, exclusive) else {
        return;
    };
    // Below each hierarchy's mount point, where create made it; not below
    // every entry of /sys/fs/cgroup, which on v2 are other cgroups
    // (`system.slice/rustpod` is not ours) and the root's files.
    for dir in dirs(cgroups, Path::new(DEFAULT_PARENT)) {
        // Fails (EBUSY) while any container is still in it: that is the point.
        let _ = std::fs::remove_dir(dir);
    }
}

/// The cgroup manager for a loaded container.
pub fn manager_for(container: &Container) -> Result<AnyCgroupManager> {
    let config = container.spec().map_err(|e| Error::engine("read cgroup of", container.id(), &e))?;
    manager(config.cgroup_path, container.systemd(), container.id())
}

pub fn manager(path: PathBuf, systemd: bool, id: &str) -> Result<AnyCgroupManager> {
    libcgroups::common::create_cgroup_manager(CgroupConfig {
        cgroup_path: path.clone(),
        systemd_cgroup: systemd,
        container_name: id.to_string(),
    })
    .map_err(|e| Error::Cgroup { path, reason: crate::error::one_line_chain(&e) })
}

/// Whether `path` (a cgroupfs `cgroupsPath`) names the root cgroup: `/`,
/// `/..`, `.` and the like all resolve there.
pub fn is_root(path: &Path) -> bool {
    let mut depth = 0usize;
    for part in path.components() {
        match part {
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::ParentDir => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    depth == 0
}

/// The container's directory in every cgroup hierarchy (v1 and v2) where it
/// exists. A systemd `slice:prefix:name` has none we could name here.
pub fn dirs(cgroups: &[Hierarchy], path: &Path) -> Vec<PathBuf> {
    let mut dirs = named_dirs(cgroups, path);
    dirs.retain(|d| d.is_dir());
    dirs
}

/// Where the container's directory is in every hierarchy, whether or not
/// it exists there (nothing for a systemd `slice:prefix:name` or the root).
fn named_dirs(cgroups: &[Hierarchy], path: &Path) -> Vec<PathBuf> {
    if path.to_string_lossy().contains(':') || is_root(path) {
        return Vec::new();
    }
    let relative = path.strip_prefix("/").unwrap_or(path);
    cgroups.iter().map(|h| h.mount_point.join(relative)).collect()
}

/// Every process in `dir` and its descendants.
pub fn pids_in_tree(dir: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> =
        std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect();
    for child in child_dirs(dir) {
        pids.extend(pids_in_tree(&child));
    }
    pids
}

fn child_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).into_iter().flatten().flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect()
}

/// Every process in the cgroup `path`, in any hierarchy, once.
pub fn pids(cgroups: &[Hierarchy], path: &Path) -> Vec<i32> {
    pids_in(&dirs(cgroups, path))
}

/// Every process in `dirs` and their descendants, once.
fn pids_in(dirs: &[PathBuf]) -> Vec<i32> {
    let mut pids: Vec<i32> = dirs.iter().flat_map(|d| pids_in_tree(d)).collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Why a new container cannot have the cgroup it asks for; the caller
/// places it (the config's `Error::Config`).
#[derive(Debug, thiserror::Error)]
pub enum NewCgroupError {
    #[error("linux.cgroupsPath {:?}: the root cgroup cannot be a container's cgroup", .0.display().to_string())]
    Root(PathBuf),
    /// `check_unused`'s refusal, which names the cgroup.
    #[error("{0}")]
    InUse(Error),
}

/// Checks the cgroup a new container asks for (`requested`, else the
/// default for `id`): never the root cgroup, and (on cgroupfs) one that
/// nothing else uses.
pub fn check_new(cgroups: &[Hierarchy], requested: Option<&Path>, id: &str, systemd: bool) -> std::result::Result<(), NewCgroupError> {
    let Some(path) = requested.filter(|p| !p.as_os_str().is_empty()) else {
        return if systemd { Ok(()) } else { check_unused(cgroups, &default_path(id)).map_err(NewCgroupError::InUse) };
    };
    if systemd || is_systemd_form(path) {
        return Ok(());
    }
    if is_root(path) {
        return Err(NewCgroupError::Root(path.to_path_buf()));
    }
    check_unused(cgroups, path).map_err(NewCgroupError::InUse)
}

/// As runc (1.2 and later): a new container's cgroup must hold no process
/// and must not be frozen, or it is not the container's own.
pub fn check_unused(cgroups: &[Hierarchy], path: &Path) -> Result<()> {
    let existing = dirs(cgroups, path);
    let found = pids_in(&existing);
    if !found.is_empty() {
        return Err(Error::Cgroup {
            path: path.to_path_buf(),
            reason: format!("container's cgroup is not empty: {} process(es) found", found.len()),
        });
    }
    if existing.iter().any(|d| is_frozen(d)) {
        return Err(Error::Cgroup { path: path.to_path_buf(), reason: "container's cgroup unexpectedly frozen".into() });
    }
    Ok(())
}

fn is_frozen(dir: &Path) -> bool {
    let v1 = std::fs::read_to_string(dir.join("freezer.state")).is_ok_and(|s| s.trim() != "THAWED");
    let v2 = std::fs::read_to_string(dir.join("cgroup.freeze")).is_ok_and(|s| s.trim() == "1");
    v1 || v2
}

/// Removes the cgroup `path` from every hierarchy, sub-cgroups first,
/// without signalling anything. Returns the processes that keep it (none of
/// them ours, once the caller has killed ours) after a short retry.
pub fn remove_tree(cgroups: &[Hierarchy], path: &Path) -> Vec<i32> {
    // No stat first: rmdir answers ENOENT where it is not.
    let mut left = named_dirs(cgroups, path);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        left.retain(|dir| !remove_depth_first(dir));
        // Processes that were just killed leave their cgroup a moment later.
        if left.is_empty() || Instant::now() > deadline {
            return pids_in(&left);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// rmdir first: a leaf cgroup, the usual case, needs no listing. Only when
/// it is busy (sub-cgroups, or processes still leaving) are its children
/// removed and the rmdir tried again. True once `dir` is gone (or never
/// was a directory).
fn remove_depth_first(dir: &Path) -> bool {
    let gone = |result: std::io::Result<()>| match result {
        Ok(()) => true,
        Err(e) => matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)),
    };
    if gone(std::fs::remove_dir(dir)) {
        return true;
    }
    for child in child_dirs(dir) {
        remove_depth_first(&child);
    }
    // EBUSY while a process is still in it; the caller decides.
    gone(std::fs::remove_dir(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_removed_children_first_and_a_missing_one_is_gone() {
        let scratch = tempfile::tempdir().unwrap();
        let top = scratch.path().join("c1");
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        std::fs::create_dir_all(top.join("c")).unwrap();
        assert!(remove_depth_first(&top), "a tree of directories goes, leaves first");
        assert!(!top.exists());
        assert!(remove_depth_first(&top), "what is not there is gone");
        std::fs::create_dir(&top).unwrap();
        std::fs::write(top.join("held"), b"").unwrap();
        // A directory rmdir cannot take (here a file in it, in a cgroup a
        // process) is reported as kept.
        assert!(!remove_depth_first(&top));
        assert!(top.exists());
    }

    #[test]
    fn every_spelling_of_the_root_cgroup_is_the_root() {
        for root in ["/", "//", "/..", ".", "/a/..", ""] {
            assert!(is_root(Path::new(root)), "{root}");
        }
        assert!(!is_root(Path::new("/a")));
        assert!(!is_root(Path::new("/a/../b")));
    }

    #[test]
    fn the_root_cgroup_is_refused_naming_the_field() {
        let err = check_new(&[], Some(Path::new("/a/..")), "c1", false).unwrap_err();
        assert!(matches!(&err, NewCgroupError::Root(p) if p == Path::new("/a/..")));
        assert_eq!(err.to_string(), r#"linux.cgroupsPath "/a/..": the root cgroup cannot be a container's cgroup"#);
    }
}

#[cfg(test)]
mod systemd_form_tests {
    use super::*;

    #[test]
    fn systemd_names_the_unit_as_libcgroups_does() {
        let unit = |p: &str| systemd_unit(Path::new(p));
        assert_eq!(unit("kubepods-pod1.slice:cri-containerd:abc").as_deref(), Some("cri-containerd-abc.scope"));
        assert_eq!(unit(":rustpod:abc").as_deref(), Some("rustpod-abc.scope"));
        assert_eq!(unit("system.slice:rp:pods.slice").as_deref(), Some("pods.slice"));
        let path = |p: &str| systemd_path(Path::new(p)).unwrap().display().to_string();
        assert_eq!(
            path("kubepods-besteffort-pod1.slice:cri-containerd:abc"),
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-abc.scope"
        );
        assert_eq!(path("system.slice:rp:c1"), "/system.slice/rp-c1.scope");
        assert_eq!(path(":rp:c1"), "/system.slice/rp-c1.scope");
        assert_eq!(path("-.slice:rp:c1"), "/rp-c1.scope");
        assert_eq!(path("system.slice:rp:pods-a.slice"), "/pods.slice/pods-a.slice");
        assert_eq!(unit("/a/b"), None);
    }

    #[test]
    fn the_scope_is_found_where_the_init_is() {
        let unit = "rp-c1.scope";
        assert_eq!(scope_in("0::/system.slice/rp-c1.scope\n", unit), Some("/system.slice/rp-c1.scope".into()));
        assert_eq!(scope_in("0::/system.slice/rp-c1.scope/init.scope\n", unit), Some("/system.slice/rp-c1.scope".into()));
        assert_eq!(scope_in("0::/system.slice/other.scope\n", unit), None);
        assert_eq!(scope_in("0::/system.slice/rp-c1.scope.evil\n", unit), None);
    }

    #[test]
    fn systemd_places_only_relative_paths_on_a_v2_host() {
        let v2 = [crate::engine::cgroup::fs::Hierarchy { mount_point: "/sys/fs/cgroup".into(), controllers: vec![], unified: true }];
        let v1 = [crate::engine::cgroup::fs::Hierarchy {
            mount_point: "/sys/fs/cgroup/memory".into(),
            controllers: vec!["memory".into()],
            unified: false,
        }];
        assert!(placed_by_systemd(Path::new("system.slice:rp:c1"), false, &v2));
        assert!(placed_by_systemd(Path::new(":rp:c1"), true, &v2));
        assert!(!placed_by_systemd(Path::new("/pods/c1"), true, &v2));
        assert!(!placed_by_systemd(Path::new("system.slice:rp:c1"), true, &v1));
    }

    #[test]
    fn kubelets_systemd_paths_are_recognised() {
        assert!(is_systemd_form(Path::new("kubepods-besteffort-pod1.slice:cri-containerd:abc")));
        assert!(is_systemd_form(Path::new(":rustpod:abc")));
        assert!(!is_systemd_form(Path::new("/kubepods/besteffort/pod1/abc")));
        assert!(!is_systemd_form(Path::new("/a:b:c")));
        assert!(!is_systemd_form(Path::new("a:b")));
    }
}
