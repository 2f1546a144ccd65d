//! Idmapped bind mounts (a mount's `uidMappings`/`gidMappings`, or its
//! `idmap`/`ridmap` option), the plan: which mounts of a config are
//! idmapped, with which mapping, checked as runc ≥ 1.2 checks them.
//! libcontainer 0.7 would bind them unmapped; `idmap_detached` makes them
//! on the host side and `idmap_hook` moves them into the rootfs.

use std::path::PathBuf;

use oci_spec::runtime::{LinuxIdMapping, LinuxNamespaceType, Mount, Spec};

/// Options an idmapped mount may carry: ours, the bind's, and the flags we
/// set with mount_setattr. Propagation options are applied by `rootfs_hook`.
const ATTRS: &[(&str, u64)] = &[
    ("ro", libc::MOUNT_ATTR_RDONLY),
    ("nosuid", libc::MOUNT_ATTR_NOSUID),
    ("nodev", libc::MOUNT_ATTR_NODEV),
    ("noexec", libc::MOUNT_ATTR_NOEXEC),
    ("noatime", libc::MOUNT_ATTR_NOATIME),
    ("nodiratime", libc::MOUNT_ATTR_NODIRATIME),
    ("strictatime", libc::MOUNT_ATTR_STRICTATIME),
    ("relatime", libc::MOUNT_ATTR_RELATIME),
];
const NO_OPS: &[&str] = &["bind", "rbind", "idmap", "ridmap", "rw", "suid", "dev", "exec", "atime", "diratime"];

/// One idmapped mount as planned from the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub index: usize,
    pub destination: PathBuf,
    pub source: PathBuf,
    /// `rbind`: the submounts of the source come along.
    pub rbind: bool,
    /// `ridmap`: the mapping applies to those submounts too.
    pub ridmap: bool,
    pub attrs: u64,
    pub mapping: Mapping,
}

/// Where an idmapped mount's mapping comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    Explicit {
        uid: Vec<LinuxIdMapping>,
        gid: Vec<LinuxIdMapping>,
    },
    /// The container joins this user namespace; use it as is.
    JoinedUserns(PathBuf),
    /// None: a plain bind of a user-namespaced container, its source opened on the host's side
    /// as runc does, since the container's root may not reach it from inside (containerd's
    /// state dirs are 0700).
    Unmapped,
}

/// Why a mount cannot be made idmapped: the mount, the field and why, as
/// runc ≥ 1.2 refuses it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("mounts[{index}] ({}): {field}: {why}", destination.display())]
    Field { index: usize, destination: PathBuf, field: &'static str, why: String },
    #[error("mounts[{index}] ({}): idmapped mounts need CAP_SYS_ADMIN in the initial user namespace: not supported rootless", destination.display())]
    Rootless { index: usize, destination: PathBuf },
}

/// What the kernel would refuse in a mapping with a bare EINVAL.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RangeError {
    #[error("empty: needs at least one range")]
    Empty,
    #[error("[{0}]: size 0")]
    SizeZero(usize),
    #[error("[{0}]: range past 4294967295")]
    PastMax(usize),
}

/// A later mount (one the engine makes) that overlaps a mount we would make
/// first, out of the config's order.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("mounts[{index}] ({}) comes later and overlaps it; list the idmapped mount after it", destination.display())]
pub struct Overlap {
    pub index: usize,
    pub destination: PathBuf,
}

/// Whether `mount` asks for an idmapped mount.
pub fn is_idmapped(mount: &Mount) -> bool {
    mount.uid_mappings().is_some()
        || mount.gid_mappings().is_some()
        || mount.options().as_deref().unwrap_or_default().iter().any(|o| o == "idmap" || o == "ridmap")
}

/// The idmapped mounts of `spec` (the user's, with bind sources resolved),
/// checked as runc ≥ 1.2 checks them; each refusal is one line naming the
/// mount, the field and why. With a user namespace and as root, plain binds are made that way too (`Mapping::Unmapped`),
/// those whose options mount_setattr can set; the rest stay the engine's.
pub fn plan(spec: &Spec) -> Result<Vec<Planned>, PlanError> {
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    let host_side_binds = container_mapping(spec).is_some() && nix::unistd::geteuid().is_root();
    let mut planned = Vec::new();
    for (index, mount) in mounts.iter().enumerate() {
        let bad = |field: &'static str, why: &str| PlanError::Field {
            index,
            destination: mount.destination().clone(),
            field,
            why: why.to_string(),
        };
        if is_idmapped(mount) {
            planned.push(plan_one(spec, index, mount, &bad)?);
        } else if host_side_binds && crate::engine::engine_bundle::is_bind(mount) {
            planned.extend(plan_one(spec, index, mount, &bad).ok());
        }
    }
    if let Some(p) = planned.iter().find(|p| p.mapping != Mapping::Unmapped).filter(|_| !nix::unistd::geteuid().is_root()) {
        return Err(PlanError::Rootless { index: p.index, destination: p.destination.clone() });
    }
    Ok(planned)
}

/// Where the engine makes the rootfs: `planned` less each plain bind that a
/// later engine mount overlaps, which stays the engine's to keep its order.
/// Our own rootfs steps move every detached tree in at its place.
pub fn keep_engine_order(spec: &Spec, mut planned: Vec<Planned>) -> Vec<Planned> {
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    while let Some(i) =
        planned.iter().position(|p| p.mapping == Mapping::Unmapped && check_order(mounts, p.index, &routed(&planned)).is_err())
    {
        planned.remove(i);
    }
    planned
}

/// Where the engine makes the rootfs, our mounts go on after all of its own
/// (our createContainer step moves them in): a later mount at, above or
/// beneath an idmapped mount's destination would be stacked out of the
/// spec's order, so it is refused. Our own rootfs steps mount them in
/// order and need no such rule.
pub fn refuse_out_of_order(spec: &Spec, planned: &[Planned]) -> Result<(), PlanError> {
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    for p in planned {
        check_order(mounts, p.index, &routed(planned)).map_err(|overlap| PlanError::Field {
            index: p.index,
            destination: p.destination.clone(),
            field: "destination",
            why: overlap.to_string(),
        })?;
    }
    Ok(())
}

fn routed(planned: &[Planned]) -> Vec<usize> {
    planned.iter().map(|p| p.index).collect()
}

/// A refusal of the mount being planned: its field and why.
type Bad<'a> = &'a dyn Fn(&'static str, &str) -> PlanError;

fn plan_one(spec: &Spec, index: usize, mount: &Mount, bad: Bad) -> Result<Planned, PlanError> {
    if !crate::engine::engine_bundle::is_bind(mount) {
        return Err(bad("type", "id-mapped mounts are only supported for bind mounts"));
    }
    let dest = mount.destination();
    if dest.starts_with("/proc") || dest.starts_with("/sys") {
        return Err(bad("destination", "an idmapped mount over /proc or /sys is refused"));
    }
    // Absolute: the bundle's load resolved it (a relative one against the bundle, as runc).
    let source = mount.source().clone().ok_or_else(|| bad("source", "a bind mount needs a source"))?;
    let options = mount.options().as_deref().unwrap_or_default();
    let mut attrs = 0;
    for option in options {
        if let Some((_, attr)) = ATTRS.iter().find(|(name, _)| name == option) {
            attrs |= attr;
        } else if !NO_OPS.contains(&option.as_str()) && crate::engine::mount::propagation::propagation_flags(option).is_none() {
            return Err(bad("options", &format!("{option:?} is not supported on an idmapped mount")));
        }
    }
    let has = |o: &str| options.iter().any(|x| x == o);
    Ok(Planned {
        index,
        destination: dest.clone(),
        source,
        rbind: has("rbind"),
        ridmap: has("ridmap"),
        attrs,
        mapping: if is_idmapped(mount) { mapping_of(spec, mount, bad)? } else { Mapping::Unmapped },
    })
}

/// runc-spec 1.2: explicit mappings are used as given (both are needed);
/// `idmap`/`ridmap` alone take the container's user namespace's.
fn mapping_of(spec: &Spec, mount: &Mount, bad: Bad) -> Result<Mapping, PlanError> {
    match (mount.uid_mappings(), mount.gid_mappings()) {
        (Some(uid), Some(gid)) => {
            check_ranges(uid).map_err(|why| bad("uidMappings", &why.to_string()))?;
            check_ranges(gid).map_err(|why| bad("gidMappings", &why.to_string()))?;
            Ok(Mapping::Explicit { uid: uid.clone(), gid: gid.clone() })
        }
        (Some(_), None) => Err(bad("gidMappings", "id-mapped mounts must have both uid and gid mappings specified")),
        (None, Some(_)) => Err(bad("uidMappings", "id-mapped mounts must have both uid and gid mappings specified")),
        (None, None) => container_mapping(spec).ok_or_else(|| {
            bad("options", "idmap without uidMappings/gidMappings takes the container's user namespace mappings, but the container has no user namespace")
        }),
    }
}

fn container_mapping(spec: &Spec) -> Option<Mapping> {
    let linux = spec.linux().as_ref()?;
    let userns = linux.namespaces().as_deref()?.iter().find(|n| n.typ() == LinuxNamespaceType::User)?;
    if let Some(path) = userns.path() {
        return Some(Mapping::JoinedUserns(path.clone()));
    }
    let uid = linux.uid_mappings().clone().filter(|m| !m.is_empty())?;
    let gid = linux.gid_mappings().clone().filter(|m| !m.is_empty())?;
    Some(Mapping::Explicit { uid, gid })
}

/// What the kernel would refuse with a bare EINVAL, said plainly.
fn check_ranges(ranges: &[LinuxIdMapping]) -> Result<(), RangeError> {
    if ranges.is_empty() {
        return Err(RangeError::Empty);
    }
    for (i, r) in ranges.iter().enumerate() {
        if r.size() == 0 {
            return Err(RangeError::SizeZero(i));
        }
        let end_c = u64::from(r.container_id()) + u64::from(r.size());
        let end_h = u64::from(r.host_id()) + u64::from(r.size());
        if end_c > u64::from(u32::MAX) || end_h > u64::from(u32::MAX) {
            return Err(RangeError::PastMax(i));
        }
    }
    Ok(())
}

/// Our mounts (`routed`, by index) go on after all of the engine's: a later mount at, above
/// or beneath this destination would be stacked in the wrong order, so refuse.
fn check_order(mounts: &[Mount], index: usize, routed: &[usize]) -> Result<(), Overlap> {
    let dest = mounts[index].destination();
    for (later_index, later) in mounts.iter().enumerate().skip(index + 1) {
        let other = later.destination();
        if !routed.contains(&later_index) && (other.starts_with(dest) || dest.starts_with(other)) {
            return Err(Overlap { index: later_index, destination: other.clone() });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(mounts: serde_json::Value, linux: serde_json::Value) -> Spec {
        serde_json::from_value(json!({"ociVersion": "1.2.0", "mounts": mounts, "linux": linux})).unwrap()
    }

    fn userns() -> serde_json::Value {
        json!({"namespaces": [{"type": "user"}, {"type": "mount"}],
               "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
               "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}]})
    }

    #[test]
    fn idmap_alone_takes_the_containers_mapping_and_needs_a_userns() {
        let m = json!([{"destination": "/d", "type": "bind", "source": "/tmp", "options": ["rbind", "ridmap", "ro"]}]);
        let planned = plan(&spec(m.clone(), userns())).unwrap();
        assert_eq!(planned.len(), 1);
        assert!(planned[0].rbind && planned[0].ridmap);
        assert_eq!(planned[0].attrs, libc::MOUNT_ATTR_RDONLY);
        assert!(matches!(&planned[0].mapping, Mapping::Explicit { uid, .. } if uid[0].host_id() == 100000));
        let err = plan(&spec(m, json!({"namespaces": [{"type": "mount"}]}))).unwrap_err().to_string();
        assert!(err.starts_with("mounts[0] (/d): options:") && err.contains("no user namespace"), "{err}");
    }

    #[test]
    fn refusals_name_the_mount_and_field() {
        let cases = [
            (json!({"destination": "/d", "type": "tmpfs", "source": "tmpfs", "options": ["idmap"]}), "type"),
            (json!({"destination": "/proc/x", "type": "bind", "source": "/tmp", "options": ["idmap"]}), "destination"),
            (
                json!({"destination": "/d", "type": "bind", "source": "/tmp", "options": ["bind"],
                    "uidMappings": [{"containerID": 0, "hostID": 1, "size": 1}]}),
                "gidMappings",
            ),
            (json!({"destination": "/d", "type": "bind", "source": "/tmp", "options": ["bind", "idmap", "rro"]}), "options"),
        ];
        for (mount, field) in cases {
            let err = plan(&spec(json!([mount]), userns())).unwrap_err().to_string();
            assert!(err.starts_with("mounts[0] (/d") || err.starts_with("mounts[0] (/proc/x)"), "{err}");
            assert!(err.contains(&format!(": {field}:")), "{field}: {err}");
        }
    }

    #[test]
    fn a_later_overlapping_mount_is_refused_where_the_engine_mounts_the_rest() {
        let m = json!([{"destination": "/d", "type": "bind", "source": "/tmp", "options": ["bind", "idmap"]},
                       {"destination": "/d/sub", "type": "tmpfs", "source": "tmpfs"}]);
        let spec = spec(m, userns());
        let planned = plan(&spec).expect("planned: the order is judged once the route is known");
        let err = refuse_out_of_order(&spec, &planned).unwrap_err();
        assert!(matches!(&err, PlanError::Field { index: 0, field: "destination", .. }), "{err}");
        let err = err.to_string();
        assert!(err.contains("mounts[1] (/d/sub) comes later"), "{err}");
    }

    /// In a user namespace every plain bind is made on the host's side (as root). Where the
    /// engine makes the rest, one that a later mount overlaps stays the engine's, in its place.
    #[test]
    fn plain_binds_of_a_userns_container_are_host_side_until_the_engine_needs_their_order() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: host-side binds are planned for root only");
            return;
        }
        let m = json!([{"destination": "/a", "type": "bind", "source": "/tmp", "options": ["rbind"]},
                       {"destination": "/b", "type": "bind", "source": "/tmp", "options": ["rbind"]},
                       {"destination": "/b/sub", "type": "tmpfs", "source": "tmpfs"}]);
        let spec = spec(m, userns());
        let planned = plan(&spec).unwrap();
        assert_eq!(routed(&planned), [0, 1], "our rootfs steps move each in at its place");
        assert!(planned.iter().all(|p| p.mapping == Mapping::Unmapped));
        assert_eq!(routed(&keep_engine_order(&spec, planned)), [0]);
    }

    #[test]
    fn ranges_the_kernel_would_refuse_are_named() {
        let m = |c: u32, h: u32, n: u32| {
            oci_spec::runtime::LinuxIdMappingBuilder::default().container_id(c).host_id(h).size(n).build().unwrap()
        };
        assert_eq!(check_ranges(&[]), Err(RangeError::Empty));
        assert_eq!(check_ranges(&[m(0, 1, 1), m(1, 2, 0)]), Err(RangeError::SizeZero(1)));
        assert_eq!(check_ranges(&[m(0, u32::MAX, 2)]).unwrap_err().to_string(), "[0]: range past 4294967295");
        assert_eq!(check_ranges(&[m(0, 100000, 65536)]), Ok(()));
    }
}
