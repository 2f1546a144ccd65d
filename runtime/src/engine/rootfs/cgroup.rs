//! What a spec `cgroup` mount becomes, as runc makes it, worked out from
//! the host's hierarchies (read once by the command) and the container's
//! cgroup in each, with no mountinfo or /proc/self/cgroup read in the init:
//! - on a cgroup v2 host, a new cgroup2 filesystem, or where the kernel
//!   refuses one (a user namespace without a cgroup namespace) a bind of the
//!   container's own cgroup;
//! - on a v1 or hybrid host, a tmpfs holding each v1 hierarchy: a new cgroup
//!   filesystem of its controllers in a cgroup namespace, else a bind of the
//!   container's cgroup there; links for co-mounted controllers (`cpu` and
//!   `cpuacct` to `cpu,cpuacct`); the tmpfs made read-only last when the
//!   mount asks for `ro`.
//!
//! The engine reads mountinfo and /proc/<ppid>/cgroup in the init for this
//! (and gets a joined PID namespace wrong, `mount/cgroup_ns.rs`), and drops
//! the mount's flags on v1 (`mount/cgroup_flags.rs`). Our rootfs route
//! runs these steps (`prepare.rs`).

use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;

use crate::engine::cgroup::fs::Hierarchy;
use crate::engine::rootfs::plan::{Flags, Kind, PlannedMount};

/// One step of a cgroup mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Mount(PlannedMount),
    /// The first, or the second where the kernel answers EPERM or EBUSY.
    MountOr(PlannedMount, PlannedMount),
    /// A symlink `at` leading to `target`.
    Symlink {
        at: PathBuf,
        target: PathBuf,
    },
    /// The mount at this path made read-only.
    ReadOnly(PathBuf),
    /// An idmapped bind, made and mapped on the host side of `create`
    /// (`idmap::detached`) and moved in at its place in the spec's order;
    /// its descriptor is `None` until `create` hands it over.
    Detached {
        mount: PlannedMount,
        fd: Option<RawFd>,
    },
}

/// One host hierarchy with the container's cgroup in it (relative to the
/// hierarchy's root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub hierarchy: Hierarchy,
    pub cgroup: PathBuf,
}

/// runc's flags for the tmpfs and what it holds.
const DEFAULT: MsFlags = MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV).union(MsFlags::MS_NOEXEC);

/// The steps for the spec's cgroup mount `m` on a host with `placed`
/// hierarchies; `cgroupns`: the container has a cgroup namespace of its own.
pub fn expand(m: &PlannedMount, placed: &[Placed], cgroupns: bool) -> Vec<Step> {
    let unified = placed.iter().find(|p| p.hierarchy.unified && p.hierarchy.mount_point == Path::new("/sys/fs/cgroup"));
    match unified {
        Some(v2) => vec![v2_steps(m, v2)],
        None => v1_steps(m, placed, cgroupns),
    }
}

fn v2_steps(m: &PlannedMount, v2: &Placed) -> Step {
    let fresh = PlannedMount { kind: Kind::New { fstype: "cgroup2".into() }, source: Some("cgroup2".into()), data: vec![], ..m.clone() };
    let bind = PlannedMount {
        kind: Kind::Bind { recursive: true },
        source: Some(v2.hierarchy.mount_point.join(relative(&v2.cgroup))),
        data: vec![],
        ..m.clone()
    };
    Step::MountOr(fresh, bind)
}

fn v1_steps(m: &PlannedMount, placed: &[Placed], cgroupns: bool) -> Vec<Step> {
    let dest = &m.destination;
    let tmpfs = PlannedMount {
        kind: Kind::New { fstype: "tmpfs".into() },
        source: Some("tmpfs".into()),
        flags: Flags { set: DEFAULT, named: DEFAULT },
        data: vec!["mode=755".into()],
        propagation: m.propagation.clone(),
        ..m.clone()
    };
    let mut steps = vec![Step::Mount(tmpfs)];
    let mut links = Vec::new();
    for p in placed.iter().filter(|p| !p.hierarchy.unified) {
        let Some(name) = p.hierarchy.mount_point.file_name() else { continue };
        let at = dest.join(name);
        let (kind, source, data) = if cgroupns {
            let params = hierarchy_params(&p.hierarchy);
            // runc's source for a named hierarchy is its name (`systemd`).
            let source = params.iter().find_map(|o| o.strip_prefix("name=")).unwrap_or("cgroup");
            (Kind::New { fstype: "cgroup".into() }, Some(PathBuf::from(source)), params)
        } else {
            (Kind::Bind { recursive: true }, Some(p.hierarchy.mount_point.join(relative(&p.cgroup))), vec![])
        };
        let flags = Flags { set: m.flags.set | DEFAULT, named: m.flags.named | DEFAULT };
        steps.push(Step::Mount(PlannedMount { destination: at, kind, source, data, flags, ..m.clone() }));
        let name = name.to_string_lossy();
        if name.contains(',') {
            for part in name.split(',').filter(|part| !part.is_empty()) {
                links.push(Step::Symlink { at: dest.join(part), target: PathBuf::from(name.as_ref()) });
            }
        }
    }
    steps.extend(links);
    if m.flags.set.contains(MsFlags::MS_RDONLY) {
        steps.push(Step::ReadOnly(dest.clone()));
    }
    steps
}

/// What names a v1 hierarchy to fsconfig(2): each controller a flag of its
/// own, `name=…` a string. mount(2) took `cpu,cpuacct` as one string;
/// fsconfig takes one key per call. The hierarchy's own options that
/// mountinfo also lists are left out: the access mode, and those of its
/// superblock, which a second mount of a hierarchy cannot change (the
/// kernel ignores them with a warning) and `release_agent` must never be
/// set from a container's mount.
fn hierarchy_params(h: &Hierarchy) -> Vec<String> {
    const NOT_A_NAME: &[&str] =
        &["rw", "ro", "none", "all", "noprefix", "clone_children", "cpuset_v2_mode", "xattr", "favordynmods", "nofavordynmods"];
    h.controllers.iter().filter(|o| !NOT_A_NAME.contains(&o.as_str()) && !o.starts_with("release_agent=")).cloned().collect()
}

fn relative(path: &Path) -> &Path {
    path.strip_prefix("/").unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::MountBuilder;

    use super::*;
    use crate::engine::rootfs::plan::plan_one;

    fn cgroup_mount(options: &[&str]) -> PlannedMount {
        let m = MountBuilder::default()
            .destination("/sys/fs/cgroup")
            .typ("cgroup")
            .source("cgroup")
            .options(options.iter().map(|o| o.to_string()).collect::<Vec<_>>())
            .build()
            .unwrap();
        plan_one(3, &m)
    }

    fn placed(mount_point: &str, controllers: &[&str], unified: bool, cgroup: &str) -> Placed {
        Placed {
            hierarchy: Hierarchy {
                mount_point: mount_point.into(),
                controllers: controllers.iter().map(|c| c.to_string()).collect(),
                unified,
            },
            cgroup: cgroup.into(),
        }
    }

    fn hybrid() -> Vec<Placed> {
        vec![
            placed("/sys/fs/cgroup/cpu,cpuacct", &["cpu", "cpuacct"], false, "/rp/c1"),
            placed("/sys/fs/cgroup/memory", &["memory"], false, "/rp/c1"),
            placed("/sys/fs/cgroup/systemd", &["name=systemd"], false, "/rp/c1"),
            placed("/sys/fs/cgroup/unified", &[], true, "/rp/c1"),
        ]
    }

    fn mounted(step: &Step) -> (&Path, &Kind, Option<&Path>, &[String]) {
        match step {
            Step::Mount(m) => (&m.destination, &m.kind, m.source.as_deref(), &m.data),
            other => panic!("not a mount: {other:?}"),
        }
    }

    #[test]
    fn on_v2_a_new_cgroup2_or_a_bind_of_the_containers_own_cgroup() {
        let m = cgroup_mount(&["ro", "nosuid"]);
        let steps = expand(&m, &[placed("/sys/fs/cgroup", &[], true, "/rp/c1")], false);
        let [Step::MountOr(fresh, bind)] = &steps[..] else { panic!("{steps:?}") };
        assert_eq!(fresh.kind, Kind::New { fstype: "cgroup2".into() });
        assert_eq!(bind.kind, Kind::Bind { recursive: true });
        assert_eq!(bind.source.as_deref(), Some(Path::new("/sys/fs/cgroup/rp/c1")));
        assert_eq!((fresh.flags, bind.flags), (m.flags, m.flags), "the mount's own flags, ro among them");
    }

    #[test]
    fn on_v1_a_tmpfs_of_binds_of_the_containers_cgroups_with_links_and_ro_last() {
        let steps = expand(&cgroup_mount(&["ro", "nosuid", "noexec", "nodev"]), &hybrid(), false);
        let (dest, kind, _, data) = mounted(&steps[0]);
        assert_eq!((dest, kind, data), (Path::new("/sys/fs/cgroup"), &Kind::New { fstype: "tmpfs".into() }, &["mode=755".to_string()][..]));
        let binds: Vec<_> =
            steps[1..4].iter().map(|s| mounted(s)).map(|(d, _, s, _)| (d.to_path_buf(), s.unwrap().to_path_buf())).collect();
        assert_eq!(
            binds,
            [
                ("/sys/fs/cgroup/cpu,cpuacct".into(), "/sys/fs/cgroup/cpu,cpuacct/rp/c1".into()),
                ("/sys/fs/cgroup/memory".into(), "/sys/fs/cgroup/memory/rp/c1".into()),
                ("/sys/fs/cgroup/systemd".into(), "/sys/fs/cgroup/systemd/rp/c1".into()),
            ]
            .map(|(a, b): (PathBuf, PathBuf)| (a, b)),
            "the unified hierarchy of a hybrid host is left out, as runc leaves it"
        );
        let Step::Mount(memory) = &steps[2] else { unreachable!() };
        assert!(memory.flags.set.contains(MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC | MsFlags::MS_NODEV));
        assert_eq!(
            steps[4..],
            [
                Step::Symlink { at: "/sys/fs/cgroup/cpu".into(), target: "cpu,cpuacct".into() },
                Step::Symlink { at: "/sys/fs/cgroup/cpuacct".into(), target: "cpu,cpuacct".into() },
                Step::ReadOnly("/sys/fs/cgroup".into()),
            ]
        );
    }

    #[test]
    fn in_a_cgroup_namespace_each_v1_hierarchy_is_a_new_cgroup_filesystem() {
        let mut placed = hybrid();
        // As mountinfo lists them: the access mode and the superblock's own options too.
        placed[0].hierarchy.controllers = ["rw", "cpu", "cpuacct", "noprefix"].map(String::from).to_vec();
        placed[2].hierarchy.controllers = ["rw", "xattr", "release_agent=/sbin/x", "name=systemd"].map(String::from).to_vec();
        let steps = expand(&cgroup_mount(&[]), &placed, true);
        let (_, kind, _, data) = mounted(&steps[1]);
        assert_eq!((kind, data), (&Kind::New { fstype: "cgroup".into() }, &["cpu".to_string(), "cpuacct".to_string()][..]));
        let (_, _, source, data) = mounted(&steps[3]);
        assert_eq!(data, ["name=systemd"], "never the host's release_agent");
        assert_eq!(source, Some(Path::new("systemd")), "runc's source");
        assert!(!steps.iter().any(|s| matches!(s, Step::ReadOnly(_))), "no ro asked");
    }
}
