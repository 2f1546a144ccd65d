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
pub fn prepare(m: &MountSpec, scratch: &Path) -> Result<(MountSpec, Option<MappedLayers>), String> {
    let (options, uid, gid) = split_idmap_options(&m.options)?;
    let (uid, gid) = match (uid, gid) {
        (None, None) => return Ok((m.clone(), None)),
        (Some(uid), Some(gid)) => (uid, gid),
        _ => return Err(format!("{} mount {}: uidmap and gidmap come together, got only one", m.typ, m.source)),
    };
    if m.typ != "overlay" {
        return Err(format!("{} mount {}: uidmap/gidmap are supported on overlay rootfs mounts only", m.typ, m.source));
    }
    let lowers = lower_dirs(&options).ok_or_else(|| format!("overlay mount {}: no lowerdir option", m.source))?;
    let common = common_parent(&lowers).ok_or_else(|| format!("overlay mount {}: lower dirs {lowers:?} share no parent", m.source))?;
    let userns = rustpod::idmap::userns_with_mappings(&uid, &gid).map_err(|e| format!("user namespace for the layers' idmap: {e}"))?;
    std::fs::create_dir(scratch).map_err(|e| format!("mkdir {}: {e}", scratch.display()))?;
    let layers = MappedLayers { dir: scratch.to_path_buf() };
    rustpod::idmap::mount_idmapped(&common, scratch, &userns, libc::MOUNT_ATTR_RDONLY)?;
    let remapped: Vec<String> = lowers
        .iter()
        .map(|l| scratch.join(l.strip_prefix(&common).unwrap_or(l)).to_string_lossy().into_owned())
        .collect();
    let options = options
        .into_iter()
        .map(|o| if o.starts_with("lowerdir=") { format!("lowerdir={}", remapped.join(":")) } else { o })
        .collect();
    Ok((MountSpec { typ: m.typ.clone(), source: m.source.clone(), options }, Some(layers)))
}

type Mappings = Option<Vec<LinuxIdMapping>>;

/// The options without `uidmap=`/`gidmap=`, and those two parsed.
fn split_idmap_options(options: &[String]) -> Result<(Vec<String>, Mappings, Mappings), String> {
    let (mut rest, mut uid, mut gid) = (Vec::new(), None, None);
    for o in options {
        if let Some(v) = o.strip_prefix("uidmap=") {
            uid = Some(parse_mappings(v).map_err(|e| format!("uidmap={v}: {e}"))?);
        } else if let Some(v) = o.strip_prefix("gidmap=") {
            gid = Some(parse_mappings(v).map_err(|e| format!("gidmap={v}: {e}"))?);
        } else {
            rest.push(o.clone());
        }
    }
    Ok((rest, uid, gid))
}

/// containerd's `container:host:size[,container:host:size…]`.
fn parse_mappings(value: &str) -> Result<Vec<LinuxIdMapping>, String> {
    value
        .split(',')
        .map(|one| {
            let ids: Vec<u32> = one.split(':').map(str::parse).collect::<Result<_, _>>().map_err(|e| format!("{one}: {e}"))?;
            let [container, host, size] = ids[..] else {
                return Err(format!("{one}: not container:host:size"));
            };
            LinuxIdMappingBuilder::default()
                .container_id(container)
                .host_id(host)
                .size(size)
                .build()
                .map_err(|e| e.to_string())
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
        assert!(prepare(&spec("bind", &["rbind", "uidmap=0:1:1", "gidmap=0:1:1"]), scratch).unwrap_err().contains("overlay rootfs mounts only"));
        assert!(prepare(&spec("overlay", &["lowerdir=/a/b", "uidmap=0:1:1"]), scratch).unwrap_err().contains("only one"));
        let (same, none) = prepare(&spec("overlay", &["lowerdir=/a/b"]), scratch).unwrap();
        assert!(none.is_none() && same.options == ["lowerdir=/a/b"]);
    }
}
