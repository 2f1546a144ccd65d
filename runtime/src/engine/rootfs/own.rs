//! Whether a new container's rootfs is made by our own steps: the route
//! for a spec they cover, started without the engine's intermediate, with
//! pivot_root or `--no-pivot`'s move; everything else keeps the engine's rootfs and our
//! createContainer workarounds (docs/rootfs-plan.md, steps 4 and 9).

use std::path::{Path, PathBuf};

use oci_spec::runtime::LinuxNamespaceType;

use crate::engine::cgroup::fs::{Hierarchy, ThreadCgroups};
use crate::engine::engine_bundle::Bundle;
use crate::engine::rootfs::cgroup::Placed;
use crate::engine::rootfs::prepare::Rootfs;

/// What the decision needs besides the bundle.
pub struct Request<'a> {
    pub id: &'a str,
    pub cgroups: &'a [Hierarchy],
    /// Where the forking thread is: the init starts there in every
    /// hierarchy the container gets no cgroup of its own in.
    pub thread_cgroups: &'a ThreadCgroups,
    pub systemd_cgroup: bool,
    pub no_pivot: bool,
}

/// The rootfs steps for `bundle`, or why the engine makes its rootfs.
pub fn decide(bundle: &Bundle, req: &Request) -> Result<Rootfs, &'static str> {
    let spec = &bundle.spec;
    let linux = spec.linux().as_ref().ok_or("no linux section")?;
    let listed = |typ| linux.namespaces().iter().flatten().find(|ns| ns.typ() == typ);
    listed(LinuxNamespaceType::Mount).ok_or("no mount namespace")?;
    // A joined mount namespace with a new user namespace is refused at
    // create (`validate`); with one joined by path too, our init joins the
    // user namespace first (`user_ns`), then the mount namespace.
    let in_userns = crate::engine::process::user_ns::Plan::of(spec) != crate::engine::process::user_ns::Plan::None;
    if linux.mount_label().as_deref().is_some_and(|l| !l.is_empty()) {
        return Err("a mount label");
    }
    let mut spec = spec.clone();
    if let Some(linux) = spec.linux_mut() {
        // Where create puts the container's cgroup when the spec says not.
        crate::engine::engine_bundle::default_cgroups_path(linux, req.id, req.systemd_cgroup);
    }
    let cgroupns = listed(LinuxNamespaceType::Cgroup).is_some_and(|ns| ns.path().is_none());
    let linux = spec.linux().as_ref().ok_or("no linux section")?;
    // Only v1 hierarchies without a cgroup of the container's own need where we are.
    let needs_own =
        !crate::engine::cgroup::fs::is_unified(req.cgroups) && spec.mounts().iter().flatten().any(|m| m.typ().as_deref() == Some("cgroup"));
    let own = if needs_own { req.thread_cgroups.text().map_err(|_| "no /proc/thread-self/cgroup")? } else { "" };
    let placed = placed(req.cgroups, &container_cgroup(linux, req.id), own);
    let mut rootfs = Rootfs::from_spec(&spec, &bundle.rootfs, in_userns, &placed, cgroupns)?;
    rootfs.no_pivot = req.no_pivot;
    Ok(rootfs)
}

/// The container's cgroup path, as the engine names it; where systemd
/// places it, the path its unit will have (a bind of it is the cgroup
/// mount of a user-namespaced container without a cgroup namespace).
fn container_cgroup(linux: &oci_spec::runtime::Linux, id: &str) -> PathBuf {
    let path = libcontainer::utils::get_cgroup_path(linux.cgroups_path(), id);
    match crate::engine::cgroup::manager::is_systemd_form(&path) {
        true => crate::engine::cgroup::manager::systemd_path(&path).unwrap_or(path),
        false => path,
    }
}

/// Each hierarchy with where the init will be in it: the container's cgroup
/// where one is made for it, else where this process is.
fn placed(cgroups: &[Hierarchy], container: &Path, own: &str) -> Vec<Placed> {
    let made = |h: &Hierarchy| {
        h.unified
            || crate::engine::mount::cgroup_ns::CONTROLLERS.iter().any(|c| h.has(c))
            || crate::engine::cgroup::named::named(cgroups).any(|n| n == h)
    };
    cgroups
        .iter()
        .map(|h| {
            let cgroup = if made(h) {
                container.to_path_buf()
            } else {
                let controller = h.controllers.first().map(String::as_str);
                PathBuf::from(crate::engine::cgroup::fs::path_in(own, controller).unwrap_or_else(|| "/".into()))
            };
            Placed { hierarchy: h.clone(), cgroup }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hierarchy(mount_point: &str, controllers: &[&str], unified: bool) -> Hierarchy {
        Hierarchy { mount_point: mount_point.into(), controllers: controllers.iter().map(|c| c.to_string()).collect(), unified }
    }

    /// The init is in the container's cgroup where one is made for it, and
    /// where this process is in every other hierarchy (it inherits that).
    #[test]
    fn each_hierarchy_holds_the_init_where_it_will_be() {
        let cgroups = [
            hierarchy("/sys/fs/cgroup/memory", &["memory"], false),
            hierarchy("/sys/fs/cgroup/systemd", &["name=systemd"], false),
            hierarchy("/sys/fs/cgroup/misc", &["misc"], false),
            hierarchy("/sys/fs/cgroup/unified", &[], true),
        ];
        let own = "12:misc:/shim.slice\n5:memory:/shim.slice\n1:name=systemd:/shim.slice\n0::/shim.slice\n";
        let placed = placed(&cgroups, Path::new("/rustpod/c1"), own);
        let paths: Vec<_> = placed.iter().map(|p| p.cgroup.to_str().unwrap()).collect();
        assert_eq!(paths, ["/rustpod/c1", "/rustpod/c1", "/shim.slice", "/rustpod/c1"]);
    }

    #[test]
    fn every_mount_namespace_new_or_joined_gets_our_rootfs_steps() {
        let bundle = |extra: serde_json::Value| {
            let mut spec = serde_json::json!({
                "ociVersion": "1.2.0", "root": {"path": "rootfs"}, "process": {"cwd": "/", "args": ["true"], "user": {"uid": 0, "gid": 0}},
                "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}
            });
            for (k, v) in extra.as_object().unwrap() {
                spec[k] = v.clone();
            }
            Bundle { path: "/b".into(), rootfs: "/b/rootfs".into(), spec: serde_json::from_value(spec).unwrap(), pids_init_only: false }
        };
        let thread_cgroups = ThreadCgroups::default();
        let req = Request { id: "c1", cgroups: &[], thread_cgroups: &thread_cgroups, systemd_cgroup: false, no_pivot: false };
        assert!(decide(&bundle(serde_json::json!({})), &req).is_ok());
        let terminal = serde_json::json!({"process": {"cwd": "/", "args": ["true"], "user": {"uid": 0, "gid": 0}, "terminal": true}});
        assert!(decide(&bundle(terminal), &req).is_ok(), "our init binds the console");
        let joined = serde_json::json!({"linux": {"namespaces": [{"type": "pid"}, {"type": "mount", "path": "/proc/1/ns/mnt"}]}});
        assert!(decide(&bundle(joined), &req).is_ok(), "our init joins it, then makes the rootfs there");
        let joined_userns = serde_json::json!({"linux": {"namespaces": [{"type": "user", "path": "/proc/1/ns/user"},
            {"type": "mount", "path": "/proc/1/ns/mnt"}]}});
        assert!(decide(&bundle(joined_userns), &req).is_ok(), "our init joins the user namespace, then the mount namespace");
        let host = serde_json::json!({"linux": {"namespaces": [{"type": "pid"}]}});
        assert_eq!(decide(&bundle(host), &req).unwrap_err(), "no mount namespace");
        let no_pivot = Request { no_pivot: true, ..req };
        assert!(decide(&bundle(serde_json::json!({})), &no_pivot).unwrap().no_pivot, "our init moves the rootfs onto /");
    }
}
