//! The device nodes and /dev symlinks the engine makes in the image's own
//! /dev (when no mount covers /dev). The engine fails on what the image
//! already has there with only "failed to prepare rootfs"; a symlink there
//! is CVE-2025-31133's shape (masked paths are bind-mounted from /dev/null,
//! so a /dev/null leading to /proc/sys/kernel/core_pattern would expose it).
//! Each is refused first, naming the path, what is there and why.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

use crate::engine::mount::rootfs_path;

/// The nodes the engine always makes (its default devices).
const DEFAULT_NODES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/urandom", "/dev/random"];
/// The symlinks it always makes (`/dev/kcore` too where the host has /proc/kcore).
const DEFAULT_LINKS: &[&str] = &["/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"];

/// Why the engine cannot make a node or symlink in the image's /dev; each
/// names the path in the container first.
#[derive(Debug, thiserror::Error)]
pub enum DevNodeError {
    /// Following the image's symlinks to the path failed.
    #[error("{}: {err}", path.display())]
    Resolve { path: PathBuf, err: std::io::Error },
    #[error("{}: the image leads it through a symlink to {} (rootfs {}): refused, the runtime makes its device nodes itself and masks paths by bind-mounting /dev/null, which must not lead elsewhere (CVE-2025-31133)", path.display(), landing.display(), host.display())]
    ThroughSymlink { path: PathBuf, landing: PathBuf, host: PathBuf },
    /// What the engine's `syscall` would fail with EEXIST on.
    #[error("{}: {syscall} {}: EEXIST: the image already has {what} there, and the runtime makes it itself; mount a tmpfs on /dev (as runc's and containerd's specs do) or remove it from the image", path.display(), host.display())]
    Exists { path: PathBuf, syscall: &'static str, host: PathBuf, what: String },
}

/// Every node and symlink the engine would make in the image's /dev lands on
/// nothing: not through a symlink, not on an existing file.
pub fn check(spec: &Spec, rootfs: &Path) -> Result<(), DevNodeError> {
    if dev_is_mounted(spec) {
        return Ok(());
    }
    for (path, syscall) in made_in_dev(spec) {
        let landing = match rootfs_path::resolve(rootfs, &[], &path) {
            Ok(landing) => landing,
            Err(err) => return Err(DevNodeError::Resolve { path, err }),
        };
        let host = rootfs_path::on_host(rootfs, &landing);
        if landing != rootfs_path::lexical(&path) {
            return Err(DevNodeError::ThroughSymlink { path, landing, host });
        }
        if let Ok(meta) = fs::symlink_metadata(&host) {
            return Err(DevNodeError::Exists { path, syscall, host, what: describe(&meta) });
        }
    }
    Ok(())
}

/// A mount on /dev itself: the nodes go on it, not in the image.
fn dev_is_mounted(spec: &Spec) -> bool {
    spec.mounts().iter().flatten().any(|m| rootfs_path::lexical(m.destination()) == Path::new("/dev"))
}

/// Each path the engine makes under /dev, with the syscall that makes it.
fn made_in_dev(spec: &Spec) -> Vec<(PathBuf, &'static str)> {
    let listed: Vec<PathBuf> =
        spec.linux().as_ref().and_then(|l| l.devices().clone()).unwrap_or_default().iter().map(|d| d.path().clone()).collect();
    let defaults = DEFAULT_NODES.iter().map(PathBuf::from).filter(|p| !listed.contains(p));
    let mut made: Vec<(PathBuf, &'static str)> = listed.iter().cloned().chain(defaults).map(|p| (p, "mknod")).collect();
    made.extend(DEFAULT_LINKS.iter().map(|p| (PathBuf::from(p), "symlink")));
    if Path::new("/proc/kcore").exists() {
        made.push((PathBuf::from("/dev/kcore"), "symlink"));
    }
    made
}

/// What a file is, in a few words ("a regular file", "char device 1:3").
fn describe(meta: &fs::Metadata) -> String {
    let kind = meta.file_type();
    let dev = || format!("{}:{}", libc::major(meta.rdev()), libc::minor(meta.rdev()));
    if kind.is_dir() {
        "a directory".into()
    } else if kind.is_char_device() {
        format!("char device {}", dev())
    } else if kind.is_block_device() {
        format!("block device {}", dev())
    } else if kind.is_fifo() {
        "a FIFO".into()
    } else if kind.is_socket() {
        "a socket".into()
    } else {
        "a regular file".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn spec(mount_dev: bool) -> Spec {
        let mounts = if mount_dev {
            serde_json::json!([{"destination": "/dev", "type": "tmpfs", "source": "tmpfs"}])
        } else {
            serde_json::json!([])
        };
        serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2", "root": {"path": "rootfs"}, "mounts": mounts, "linux": {}
        }))
        .unwrap()
    }

    fn rootfs(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rustpod-dev-nodes-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("dev")).unwrap();
        dir
    }

    #[test]
    fn a_dev_null_symlink_is_refused_naming_its_target() {
        let root = rootfs("link");
        symlink("/proc/sys/kernel/core_pattern", root.join("dev/null")).unwrap();
        let err = check(&spec(false), &root).unwrap_err();
        assert!(matches!(&err, DevNodeError::ThroughSymlink { path, .. } if path == Path::new("/dev/null")), "{err}");
        let err = err.to_string();
        assert!(err.starts_with("/dev/null: the image leads it through a symlink to /proc/sys/kernel/core_pattern"), "{err}");
        assert!(err.contains("CVE-2025-31133"), "{err}");
        // Under a tmpfs on /dev the image's node is hidden: nothing to refuse.
        check(&spec(true), &root).unwrap();
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_existing_file_is_named_with_its_kind() {
        let root = rootfs("file");
        fs::create_dir(root.join("dev/zero")).unwrap();
        let err = check(&spec(false), &root).unwrap_err();
        assert!(matches!(&err, DevNodeError::Exists { syscall: "mknod", .. }), "{err}");
        let err = err.to_string();
        assert!(err.contains("/dev/zero: mknod") && err.contains("EEXIST: the image already has a directory there"), "{err}");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_empty_dev_passes() {
        let root = rootfs("empty");
        check(&spec(false), &root).unwrap();
        fs::remove_dir_all(&root).unwrap();
    }
}
