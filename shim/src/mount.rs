//! The rootfs mounts containerd sends with Create (overlay, bind…), done at
//! `<bundle>/rootfs` by the helper, and their removal at Delete.

use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use serde::{Deserialize, Serialize};

/// Why containerd's rootfs could not be mounted or unmounted.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// An idmapped overlay could not be prepared.
    #[error(transparent)]
    Idmap(#[from] crate::mount_idmap::IdmapError),
    /// The filesystem options do not fit mount(2)'s one page of data.
    #[error("mount {typ} {}: options are {len} bytes, more than a page", target.display())]
    OptionsTooLong { typ: String, target: PathBuf, len: usize },
    /// mount(2) failed at `step` ("mount", "remount read-only", "set propagation of").
    #[error("{step} {source_path} ({typ}) on {}: {errno}", target.display())]
    Mount { step: &'static str, source_path: String, typ: String, target: PathBuf, errno: Errno },
    /// umount2(2) failed other than with "not mounted".
    #[error("unmount {}: {errno}", target.display())]
    Unmount { target: PathBuf, errno: Errno },
    #[error("unmount {}: still mounted after {UNMOUNT_TRIES} unmounts", target.display())]
    StillMounted { target: PathBuf },
}

/// Mounts stacked on one target that `unmount_all` peels off before it gives up.
const UNMOUNT_TRIES: usize = 64;

/// One of containerd's rootfs mounts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MountSpec {
    pub typ: String,
    pub source: String,
    pub options: Vec<String>,
}

/// Mounts each of `mounts` on `target`, in order; overlay layers that carry containerd's
/// `uidmap=`/`gidmap=` are idmapped first (`mount_idmap`), next to `target`.
pub fn mount_all(mounts: &[MountSpec], target: &Path) -> Result<(), MountError> {
    for (i, m) in mounts.iter().enumerate() {
        let scratch = target.with_file_name(format!("idmapped-layers-{i}"));
        let (m, _mapped_layers) = crate::mount_idmap::prepare(m, &scratch)?;
        mount_one(&m, target)?;
    }
    Ok(())
}

fn mount_one(m: &MountSpec, target: &Path) -> Result<(), MountError> {
    let (mut flags, data, propagation) = parse_options(&m.options);
    if m.typ == "bind" {
        flags |= MsFlags::MS_BIND;
    }
    let data = (!data.is_empty()).then_some(data);
    if data.as_ref().is_some_and(|d| d.len() >= page_size()) {
        let len = data.as_ref().map_or(0, String::len);
        return Err(MountError::OptionsTooLong { typ: m.typ.clone(), target: target.to_path_buf(), len });
    }
    let fail = |step: &'static str, errno: Errno| MountError::Mount {
        step,
        source_path: m.source.clone(),
        typ: m.typ.clone(),
        target: target.to_path_buf(),
        errno,
    };
    let fstype = (!m.typ.is_empty() && m.typ != "bind").then_some(m.typ.as_str());
    mount(Some(m.source.as_str()), target, fstype, flags, data.as_deref()).map_err(|e| fail("mount", e))?;
    let bind_ro = MsFlags::MS_BIND | MsFlags::MS_RDONLY;
    if flags.contains(bind_ro) {
        mount(None::<&str>, target, None::<&str>, flags | MsFlags::MS_REMOUNT, None::<&str>).map_err(|e| fail("remount read-only", e))?;
    }
    if !propagation.is_empty() {
        mount(None::<&str>, target, None::<&str>, propagation, None::<&str>).map_err(|e| fail("set propagation of", e))?;
    }
    Ok(())
}

/// Splits mount options into flags, filesystem data and propagation flags.
fn parse_options(options: &[String]) -> (MsFlags, String, MsFlags) {
    let mut flags = MsFlags::empty();
    let mut propagation = MsFlags::empty();
    let mut data: Vec<&str> = Vec::new();
    for opt in options {
        let (set, clear) = match opt.as_str() {
            "ro" => (MsFlags::MS_RDONLY, MsFlags::empty()),
            "rw" => (MsFlags::empty(), MsFlags::MS_RDONLY),
            "bind" => (MsFlags::MS_BIND, MsFlags::empty()),
            "rbind" => (MsFlags::MS_BIND | MsFlags::MS_REC, MsFlags::empty()),
            "nosuid" => (MsFlags::MS_NOSUID, MsFlags::empty()),
            "suid" => (MsFlags::empty(), MsFlags::MS_NOSUID),
            "nodev" => (MsFlags::MS_NODEV, MsFlags::empty()),
            "dev" => (MsFlags::empty(), MsFlags::MS_NODEV),
            "noexec" => (MsFlags::MS_NOEXEC, MsFlags::empty()),
            "exec" => (MsFlags::empty(), MsFlags::MS_NOEXEC),
            "sync" => (MsFlags::MS_SYNCHRONOUS, MsFlags::empty()),
            "async" => (MsFlags::empty(), MsFlags::MS_SYNCHRONOUS),
            "noatime" => (MsFlags::MS_NOATIME, MsFlags::empty()),
            "atime" => (MsFlags::empty(), MsFlags::MS_NOATIME),
            "nodiratime" => (MsFlags::MS_NODIRATIME, MsFlags::empty()),
            "relatime" => (MsFlags::MS_RELATIME, MsFlags::empty()),
            "norelatime" => (MsFlags::empty(), MsFlags::MS_RELATIME),
            "strictatime" => (MsFlags::MS_STRICTATIME, MsFlags::empty()),
            "remount" => (MsFlags::MS_REMOUNT, MsFlags::empty()),
            "defaults" => (MsFlags::empty(), MsFlags::empty()),
            other => {
                if let Some(p) = rustpod::mount_propagation::propagation_flags(other) {
                    propagation |= p;
                } else {
                    data.push(other);
                }
                continue;
            }
        };
        flags = (flags | set) & !clear;
    }
    (flags, data.join(","), propagation)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as usize
    } else {
        4096
    }
}

/// Unmounts everything stacked on `target` (lazily); nothing mounted is fine.
pub fn unmount_all(target: &Path) -> Result<(), MountError> {
    for _ in 0..UNMOUNT_TRIES {
        match umount2(target, MntFlags::MNT_DETACH) {
            Ok(()) => continue,
            Err(Errno::EINVAL) | Err(Errno::ENOENT) => return Ok(()),
            Err(errno) => return Err(MountError::Unmount { target: target.to_path_buf(), errno }),
        }
    }
    Err(MountError::StillMounted { target: target.to_path_buf() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_split_into_flags_and_data() {
        let opts: Vec<String> = ["ro", "nosuid", "lowerdir=/a", "upperdir=/b", "rslave"].map(String::from).to_vec();
        let (flags, data, prop) = parse_options(&opts);
        assert!(flags.contains(MsFlags::MS_RDONLY | MsFlags::MS_NOSUID));
        assert_eq!(data, "lowerdir=/a,upperdir=/b");
        assert!(prop.contains(MsFlags::MS_SLAVE));
    }

    #[test]
    fn errors_name_the_step_the_paths_and_the_errno() {
        let e = MountError::Mount {
            step: "remount read-only",
            source_path: "/src".into(),
            typ: "bind".into(),
            target: "/b/rootfs".into(),
            errno: Errno::EPERM,
        };
        assert_eq!(e.to_string(), "remount read-only /src (bind) on /b/rootfs: EPERM: Operation not permitted");
        let e = MountError::StillMounted { target: "/b/rootfs".into() };
        assert_eq!(e.to_string(), "unmount /b/rootfs: still mounted after 64 unmounts");
    }
}
