//! Rootfs mounts with `uidmap=`/`gidmap=` options: containerd 2.x's overlay snapshotter sends
//! them for a pod in a user namespace (kubelet's `hostUsers: false`) on a kernel that can
//! idmap overlay layers, instead of chowned snapshots. As containerd's own mount code does, the
//! lower layers are seen through one read-only idmapped mount of their common parent (the
//! upper dir is already owned by the mapped ids); that mount is detached once overlayfs holds
//! the layers. Any other mount type with these options is refused: never mounted unmapped.

use std::path::{Path, PathBuf};

use nix::mount::{umount2, MntFlags};
use oci_spec::runtime::{LinuxIdMapping, LinuxIdMappingBuilder};

use crate::mount::MountSpec;

/// Why idmapped layers could not be prepared for a rootfs mount.
#[derive(Debug, thiserror::Error)]
pub enum IdmapError {
    #[error("{typ} mount {source_path}: uidmap and gidmap come together, got only one")]
    OnlyOne { typ: String, source_path: String },
    #[error("{typ} mount {source_path}: uidmap/gidmap are supported on overlay rootfs mounts only")]
    NotOverlay { typ: String, source_path: String },
    #[error("overlay mount {0}: no lowerdir option")]
    NoLowerDir(String),
    #[error("overlay mount {source_path}: lower dirs {lowers:?} share no parent")]
    NoCommonParent { source_path: String, lowers: Vec<PathBuf> },
    /// A `uidmap=`/`gidmap=` option (`option` names which) that does not parse.
    #[error("{option}={value}: {reason}")]
    Mappings { option: &'static str, value: String, reason: MappingError },
    #[error("user namespace for the layers' idmap: {0}")]
    Userns(rustpod::idmap::UsernsError),
    #[error("mkdir {}: {source}", path.display())]
    Mkdir { path: PathBuf, source: std::io::Error },
    /// open_tree, mount_setattr or move_mount: the path, the call and the errno.
    #[error("{0}")]
    Mount(rustpod::idmap::DetachedError),
}

/// Why one `container:host:size` mapping does not parse.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    #[error("{one}: {source}")]
    NotANumber { one: String, source: std::num::ParseIntError },
    #[error("{0}: not container:host:size")]
    Shape(String),
    #[error(transparent)]
    Build(#[from] oci_spec::OciSpecError),
}

/// The idmapped view of the layers, mounted at `dir` until dropped.
#[derive(Debug)]
pub struct MappedLayers {
    dir: PathBuf,
}

impl Drop for MappedLayers {
    fn drop(&mut self) {
        let _ = umount2(&self.dir, MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// `m` as it can be mounted: unchanged without idmap options; else an overlay whose lower
/// dirs are seen through an idmapped mount made at `scratch` (held by the returned guard).
pub fn prepare(m: &MountSpec, scratch: &Path) -> Result<(MountSpec, Option<MappedLayers>), IdmapError> {
    let (options, uid, gid) = split_idmap_options(&m.options)?;
    let (uid, gid) = match (uid, gid) {
        (None, None) => return Ok((m.clone(), None)),
        (Some(uid), Some(gid)) => (uid, gid),
        _ => return Err(IdmapError::OnlyOne { typ: m.typ.clone(), source_path: m.source.clone() }),
    };
    if m.typ != "overlay" {
        return Err(IdmapError::NotOverlay { typ: m.typ.clone(), source_path: m.source.clone() });
    }
    let lowers = lower_dirs(&options).ok_or_else(|| IdmapError::NoLowerDir(m.source.clone()))?;
    let Some(common) = common_parent(&lowers) else {
        return Err(IdmapError::NoCommonParent { source_path: m.source.clone(), lowers });
    };
    let userns = rustpod::idmap::userns_with_mappings(&uid, &gid).map_err(IdmapError::Userns)?;
    std::fs::create_dir(scratch).map_err(|source| IdmapError::Mkdir { path: scratch.to_path_buf(), source })?;
    let layers = MappedLayers { dir: scratch.to_path_buf() };
    rustpod::idmap::mount_idmapped(&common, scratch, &userns, libc::MOUNT_ATTR_RDONLY).map_err(IdmapError::Mount)?;
    let remapped: Vec<String> =
        lowers.iter().map(|l| scratch.join(l.strip_prefix(&common).unwrap_or(l)).to_string_lossy().into_owned()).collect();
    let options =
        options.into_iter().map(|o| if o.starts_with("lowerdir=") { format!("lowerdir={}", remapped.join(":")) } else { o }).collect();
    Ok((MountSpec { typ: m.typ.clone(), source: m.source.clone(), options }, Some(layers)))
}

type Mappings = Option<Vec<LinuxIdMapping>>;

/// The options without `uidmap=`/`gidmap=`, and those two parsed.
fn split_idmap_options(options: &[String]) -> Result<(Vec<String>, Mappings, Mappings), IdmapError> {
    let (mut rest, mut uid, mut gid) = (Vec::new(), None, None);
    let parse =
        |option, value: &str| parse_mappings(value).map_err(|reason| IdmapError::Mappings { option, value: value.to_string(), reason });
    for o in options {
        if let Some(v) = o.strip_prefix("uidmap=") {
            uid = Some(parse("uidmap", v)?);
        } else if let Some(v) = o.strip_prefix("gidmap=") {
            gid = Some(parse("gidmap", v)?);
        } else {
            rest.push(o.clone());
        }
    }
    Ok((rest, uid, gid))
}

/// containerd's `container:host:size[,container:host:size…]`.
fn parse_mappings(value: &str) -> Result<Vec<LinuxIdMapping>, MappingError> {
    value
        .split(',')
        .map(|one| {
            let ids: Vec<u32> = one
                .split(':')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|source| MappingError::NotANumber { one: one.to_string(), source })?;
            let [container, host, size] = ids[..] else {
                return Err(MappingError::Shape(one.to_string()));
            };
            Ok(LinuxIdMappingBuilder::default().container_id(container).host_id(host).size(size).build()?)
        })
        .collect()
}

fn lower_dirs(options: &[String]) -> Option<Vec<PathBuf>> {
    let value = options.iter().find_map(|o| o.strip_prefix("lowerdir="))?;
    Some(value.split(':').map(PathBuf::from).collect())
}

/// The deepest directory holding every one of `dirs` (the snapshotter's `snapshots/`).
fn common_parent(dirs: &[PathBuf]) -> Option<PathBuf> {
    let first = dirs.first()?.parent()?;
    first.ancestors().find(|a| dirs.iter().all(|d| d.starts_with(a) && d != a)).map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(typ: &str, options: &[&str]) -> MountSpec {
        MountSpec { typ: typ.into(), source: "overlay".into(), options: options.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn containerd_mappings_parse_container_host_size() {
        let (rest, uid, gid) =
            split_idmap_options(&spec("overlay", &["index=off", "uidmap=0:65536:65536", "gidmap=0:131072:10,10:5:1"]).options).unwrap();
        assert_eq!(rest, ["index=off"]);
        let uid = uid.unwrap();
        assert_eq!((uid[0].container_id(), uid[0].host_id(), uid[0].size()), (0, 65536, 65536));
        assert_eq!(gid.unwrap().len(), 2);
        assert!(parse_mappings("0:1").is_err() && parse_mappings("a:1:2").is_err());
    }

    #[test]
    fn layers_share_the_snapshots_dir() {
        let lowers = lower_dirs(&["lowerdir=/s/snapshots/3/fs:/s/snapshots/1/fs".to_string()]).unwrap();
        assert_eq!(common_parent(&lowers), Some(PathBuf::from("/s/snapshots")));
        assert_eq!(common_parent(&[PathBuf::from("/s/snapshots/1/fs")]), Some(PathBuf::from("/s/snapshots/1")));
    }

    #[test]
    fn idmap_options_off_overlay_or_alone_are_refused() {
        let scratch = Path::new("/nonexistent/scratch");
        let refused = |s: MountSpec| prepare(&s, scratch).unwrap_err().to_string();
        assert!(refused(spec("bind", &["rbind", "uidmap=0:1:1", "gidmap=0:1:1"])).contains("overlay rootfs mounts only"));
        assert!(refused(spec("overlay", &["lowerdir=/a/b", "uidmap=0:1:1"])).contains("only one"));
        assert_eq!(
            refused(spec("overlay", &["lowerdir=/a/b", "uidmap=0:x:1", "gidmap=0:1:1"])),
            "uidmap=0:x:1: 0:x:1: invalid digit found in string"
        );
        let (same, none) = prepare(&spec("overlay", &["lowerdir=/a/b"]), scratch).unwrap();
        assert!(none.is_none() && same.options == ["lowerdir=/a/b"]);
    }
}
