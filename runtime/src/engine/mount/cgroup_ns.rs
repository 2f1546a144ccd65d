//! The `cgroup` mount of a container that joins an existing PID namespace
//! (a pod sharing its sandbox's PIDs). libcontainer 0.7 finds the cgroups
//! to show there by looking its own namespaced pid up in the host's /proc,
//! which fails or picks another process; so for such containers we replace
//! that mount with what it should produce on cgroup v1: a tmpfs with a
//! bind mount of the container's own cgroup of each controller.

use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Mount, MountBuilder, Spec};

use crate::engine::cgroup::fs::Hierarchy;

/// Controllers libcgroups creates a cgroup in (named hierarchies such as
/// name=systemd get ours from `named_cgroup`).
pub(crate) const CONTROLLERS: &[&str] =
    &["blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "hugetlb", "memory", "net_cls", "net_prio", "perf_event", "pids", "rdma"];

/// Rewrites `spec`'s cgroup mounts if the engine would get them wrong;
/// `cgroups` are the host's hierarchies, as the command read them.
pub fn rewrite(spec: &mut Spec, cgroups: &[Hierarchy]) {
    if !joins_pid_namespace(spec) {
        return;
    }
    let Some(cgroup_path) = cgroups_path(spec) else { return };
    let hierarchies = v1_hierarchies(cgroups);
    if hierarchies.is_empty() {
        return;
    }
    let Some(mounts) = spec.mounts_mut() else { return };
    let mut out = Vec::with_capacity(mounts.len() + hierarchies.len());
    for mount in mounts.drain(..) {
        if mount.typ().as_deref() == Some("cgroup") {
            out.extend(replacement(&mount, &cgroup_path, &hierarchies));
        } else {
            out.push(mount);
        }
    }
    *mounts = out;
}

fn joins_pid_namespace(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| ns.iter().any(|n| n.typ() == LinuxNamespaceType::Pid && n.path().is_some()))
}

/// The cgroupfs-form path (systemd's `slice:prefix:name` is left alone).
fn cgroups_path(spec: &Spec) -> Option<PathBuf> {
    let path = spec.linux().as_ref()?.cgroups_path().clone()?;
    if path.to_string_lossy().contains(':') {
        return None;
    }
    Some(path)
}

/// Mount points of the host's v1 hierarchies where the container has a
/// cgroup of its own: a controller's, or a named one's.
fn v1_hierarchies(cgroups: &[Hierarchy]) -> Vec<PathBuf> {
    cgroups
        .iter()
        .filter(|h| !h.unified && CONTROLLERS.iter().any(|c| h.has(c)))
        .chain(crate::engine::cgroup::named::named(cgroups))
        .map(|h| h.mount_point.clone())
        .collect()
}

fn replacement(mount: &Mount, cgroup_path: &Path, hierarchies: &[PathBuf]) -> Vec<Mount> {
    let dest = mount.destination().clone();
    let read_only = mount.options().as_ref().is_some_and(|o| o.iter().any(|x| x == "ro"));
    let mut mounts = vec![MountBuilder::default()
        .destination(dest.clone())
        .typ("tmpfs")
        .source("tmpfs")
        .options(vec!["nosuid".into(), "noexec".into(), "nodev".into(), "mode=755".into()])
        .build()
        .expect("static mount")];
    let relative = cgroup_path.strip_prefix("/").unwrap_or(cgroup_path);
    for point in hierarchies {
        let Some(name) = point.file_name() else { continue };
        let mut options = vec!["rbind".to_string(), "nosuid".into(), "noexec".into(), "nodev".into()];
        if read_only {
            options.push("ro".into());
        }
        mounts.push(
            MountBuilder::default()
                .destination(dest.join(name))
                .typ("bind")
                .source(point.join(relative))
                .options(options)
                .build()
                .expect("static mount"),
        );
    }
    mounts
}
