// Mounts a test makes on the host, all under one scratch dir: binds, propagation changes, and
// tmpfs, overlay and proc mounts. On Drop every mount under the dir (also those a container
// propagated to it) is detached, deepest first, like `umount -R`, before the dir is removed.

use crate::leftovers;
use crate::scratch::ScratchDir;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::fs;
use std::path::{Path, PathBuf};

pub struct HostMounts {
    dir: ScratchDir,
}

impl HostMounts {
    pub fn new(prefix: &str) -> Self {
        HostMounts { dir: ScratchDir::new(prefix) }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `<dir>/<relative>`, created (with parents) as a directory.
    pub fn mkdir(&self, relative: &str) -> PathBuf {
        let path = self.dir.join(relative);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        path
    }

    /// `mount --bind path path`.
    pub fn bind_self(&self, path: &Path) {
        self.check_inside(path);
        mount(Some(path), path, None::<&str>, MsFlags::MS_BIND, None::<&str>)
            .unwrap_or_else(|e| panic!("bind {} onto itself: {e}", path.display()));
    }

    /// `mount --rbind source target` (the source may be anywhere; the target must be ours).
    pub fn rbind(&self, source: &Path, target: &Path) {
        self.check_inside(target);
        let flags = MsFlags::MS_BIND | MsFlags::MS_REC;
        mount(Some(source), target, None::<&str>, flags, None::<&str>)
            .unwrap_or_else(|e| panic!("bind {} onto {}: {e}", source.display(), target.display()));
    }

    /// `<dir>/<relative>` created, bound onto itself and made rshared (as kubelet does with
    /// /var/lib/kubelet), so that what is mounted under it propagates to its peers.
    pub fn shared_dir(&self, relative: &str) -> PathBuf {
        let path = self.mkdir(relative);
        self.bind_self(&path);
        self.set_propagation(&path, MsFlags::MS_SHARED | MsFlags::MS_REC);
        path
    }

    /// `mount --make-<flags> path` (MS_SHARED|MS_REC for rshared…).
    pub fn set_propagation(&self, path: &Path, flags: MsFlags) {
        self.check_inside(path);
        mount(None::<&str>, path, None::<&str>, flags, None::<&str>)
            .unwrap_or_else(|e| panic!("set propagation {flags:?} on {}: {e}", path.display()));
    }

    /// A fresh tmpfs at `path` holding one file `marker` (so it is told apart from what it hides).
    pub fn tmpfs_with_marker(&self, path: &Path, marker: &str) {
        self.check_inside(path);
        mount(Some("tmpfs"), path, Some("tmpfs"), MsFlags::empty(), Some("size=1m"))
            .unwrap_or_else(|e| panic!("mount tmpfs on {}: {e}", path.display()));
        fs::write(path.join(marker), marker).expect("write marker into tmpfs");
    }

    /// A procfs of the test's pid namespace at `path`: a full one, as the host's /proc is.
    pub fn procfs(&self, path: &Path) {
        self.check_inside(path);
        mount(Some("proc"), path, Some("proc"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC, None::<&str>)
            .unwrap_or_else(|e| panic!("mount proc on {}: {e}", path.display()));
    }

    /// An overlayfs at `<name>/merged` over `<name>/lower` (holding `marker`, a relative path, host root's), with
    /// its upper and work dirs beside; returns (merged, upper).
    pub fn overlay_with_marker(&self, name: &str, marker: &str) -> (PathBuf, PathBuf) {
        let [lower, upper, work, merged] = ["lower", "upper", "work", "merged"].map(|d| self.mkdir(&format!("{name}/{d}")));
        let file = lower.join(marker);
        fs::create_dir_all(file.parent().expect("marker in a dir")).expect("mkdir in the lower dir");
        fs::write(&file, marker).expect("write marker into the lower dir");
        let options = format!("lowerdir={},upperdir={},workdir={}", lower.display(), upper.display(), work.display());
        mount(Some("overlay"), &merged, Some("overlay"), MsFlags::empty(), Some(options.as_str()))
            .unwrap_or_else(|e| panic!("mount overlay on {}: {e}", merged.display()));
        (merged, upper)
    }

    fn check_inside(&self, path: &Path) {
        assert!(path.starts_with(self.dir.path()), "{} is outside this test's mount dir", path.display());
    }
}

/// A config.json bind mount of `source` at `destination` with `options` (`rbind`, `ro`…).
pub fn bind_spec(source: &Path, destination: &str, options: &[&str]) -> serde_json::Value {
    serde_json::json!({"destination": destination, "type": "bind", "source": source,
                       "options": options})
}

/// Whether `path` is a mount point in the test's (the host's) mount namespace.
pub fn is_mount_point(path: &Path) -> bool {
    let wanted = path.to_string_lossy();
    leftovers::mount_points_under(&wanted).iter().any(|m| m == wanted.as_ref())
}

impl Drop for HostMounts {
    fn drop(&mut self) {
        // Stacked mounts show up again after the top one goes: repeat until none is left.
        for _ in 0..100 {
            let mounts = leftovers::mount_points_under(self.dir.str());
            if mounts.is_empty() {
                return;
            }
            for mount_point in mounts.iter().rev() {
                let _ = umount2(mount_point.as_str(), MntFlags::MNT_DETACH);
            }
        }
        eprintln!("warning: mounts left under {}: {:?}", self.dir.str(), leftovers::mount_points_under(self.dir.str()));
    }
}
