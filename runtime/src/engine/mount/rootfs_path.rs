//! Where a path of the container lands in its rootfs: symlinks are followed
//! inside the rootfs (an absolute target from its top, `..` stopping
//! there), as runc's SecureJoin and the engine resolve a mount destination
//! or a device path when they make it, so also through what the mounts made
//! before it show there (a bind's source tree). Checks of where a mount or
//! node would go judge this path, not the one the config spells.

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed before giving up, as the kernel's ELOOP bound for a
/// whole lookup.
const MAX_LINKS: usize = 40;

/// What an earlier mount shows at `at` (a resolved path of the container):
/// a bind its `source`'s tree, any other filesystem (None) a fresh one, with
/// no symlink a later destination could be led through.
pub struct Layer {
    pub at: PathBuf,
    pub source: Option<PathBuf>,
}

/// `path` resolved in `rootfs` as it is once the mounts `layers` (in order)
/// are made, as an absolute path inside the container. Parts that do not
/// exist are taken as spelled.
pub fn resolve(rootfs: &Path, layers: &[Layer], path: &Path) -> io::Result<PathBuf> {
    // A stack: the next part on top.
    let mut pending: Vec<OsString> = parts(path).into_iter().rev().collect();
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let next = resolved.join(&part);
        let host = looked_up_at(rootfs, layers, &next);
        let Some(target) = host.map_or(Ok(None), |host| symlink_target(&host))? else {
            resolved = next;
            continue;
        };
        links += 1;
        if links > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        if target.is_absolute() {
            resolved = PathBuf::from("/");
        }
        pending.extend(parts(&target).into_iter().rev());
    }
    Ok(resolved)
}

/// `path` of the container (absolute) as a path on the host, under `rootfs`.
pub fn on_host(rootfs: &Path, path: &Path) -> PathBuf {
    rootfs.join(path.strip_prefix("/").unwrap_or(path))
}

/// The host file a lookup of `path` (resolved) reads: in the source of the
/// last mount on it or above it, else in the rootfs; None on a fresh filesystem.
fn looked_up_at(rootfs: &Path, layers: &[Layer], path: &Path) -> Option<PathBuf> {
    let Some(layer) = layers.iter().rev().find(|layer| path.starts_with(&layer.at)) else {
        return Some(on_host(rootfs, path));
    };
    let rest = path.strip_prefix(&layer.at).unwrap_or(path);
    layer.source.as_ref().map(|source| source.join(rest))
}

/// `path` with `.` and repeated `/` dropped (`..` kept: the caller refuses it).
pub fn lexical(path: &Path) -> PathBuf {
    path.components().collect()
}

/// What the symlink at `host` points to; None if it is not a symlink or is
/// not there (a missing part is taken as spelled).
fn symlink_target(host: &Path) -> io::Result<Option<PathBuf>> {
    match std::fs::symlink_metadata(host) {
        Ok(meta) if meta.file_type().is_symlink() => {
            std::fs::read_link(host).map(Some).map_err(|e| io::Error::new(e.kind(), format!("readlink {}: {e}", host.display())))
        }
        Ok(_) => Ok(None),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => Ok(None),
        Err(e) => Err(io::Error::new(e.kind(), format!("lstat {}: {e}", host.display()))),
    }
}

/// The names and `..` of `path`, in order.
fn parts(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn rootfs() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rustpod-rootfs-path-{}-{:?}", std::process::id(), std::thread::current().id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("proc")).unwrap();
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        dir
    }

    #[test]
    fn symlinks_are_followed_inside_the_rootfs() {
        let root = rootfs();
        symlink("/proc/sys/kernel", root.join("evil")).unwrap();
        symlink("../../../../proc/sys", root.join("etc/up")).unwrap();
        symlink("sub/../../proc", root.join("etc/rel")).unwrap();
        let r = |p: &str| resolve(&root, &[], Path::new(p)).unwrap();
        assert_eq!(r("/evil/core_pattern"), Path::new("/proc/sys/kernel/core_pattern"));
        assert_eq!(r("/etc/up/vm"), Path::new("/proc/sys/vm"));
        assert_eq!(r("/etc/rel/sysrq-trigger"), Path::new("/proc/sysrq-trigger"));
        assert_eq!(r("//proc/./sys/"), Path::new("/proc/sys"));
        assert_eq!(r("/../../proc/sys"), Path::new("/proc/sys"));
        assert_eq!(r("/data/x"), Path::new("/data/x"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_symlink_loop_is_eloop() {
        let root = rootfs();
        symlink("/b", root.join("a")).unwrap();
        symlink("/a", root.join("b")).unwrap();
        let err = resolve(&root, &[], Path::new("/a/x")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_earlier_bind_shows_its_sources_symlinks_and_a_tmpfs_none() {
        let root = rootfs();
        let host = root.with_extension("host");
        let _ = std::fs::remove_dir_all(&host);
        std::fs::create_dir_all(&host).unwrap();
        symlink("/proc/sys/kernel", host.join("x")).unwrap();
        symlink("/proc/sys/kernel", root.join("etc/x")).unwrap();
        let bind = Layer { at: PathBuf::from("/mnt"), source: Some(host.clone()) };
        let tmpfs = Layer { at: PathBuf::from("/etc"), source: None };
        let r = |layers: &[Layer], p: &str| resolve(&root, layers, Path::new(p)).unwrap();
        assert_eq!(r(&[], "/mnt/x/core_pattern"), Path::new("/mnt/x/core_pattern"));
        assert_eq!(r(std::slice::from_ref(&bind), "/mnt/x/core_pattern"), Path::new("/proc/sys/kernel/core_pattern"));
        assert_eq!(r(&[], "/etc/x/core_pattern"), Path::new("/proc/sys/kernel/core_pattern"));
        assert_eq!(r(&[bind, tmpfs], "/etc/x/core_pattern"), Path::new("/etc/x/core_pattern"));
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&host).unwrap();
    }
}
