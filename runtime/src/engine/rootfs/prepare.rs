//! The rootfs steps in runc's order, from a spec: what of it they cover
//! (`Rootfs::from_spec` names what they do not, so that spec goes the
//! engine's way), the part before the createContainer hooks (the rootfs
//! readied, the spec's mounts, /dev's nodes and links) and the part after
//! (pivot_root, sysctls, the read-only root, readonlyPaths, maskedPaths).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;
use oci_spec::runtime::Spec;

use crate::engine::mount::propagation::propagation_flags;
use crate::engine::rootfs::dev::{self, Node};
use crate::engine::rootfs::error::{RootfsError, StepFailed};
use crate::engine::rootfs::plan::{plan, Kind, PlannedMount};
use crate::engine::rootfs::{finish, mounts, pivot, sysctl};
use crate::sys::mount_api::MountAttr;
use crate::sys::procfs::ProcFd;
use crate::sys::syscall::Syscall;

/// What the rootfs steps make for one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rootfs {
    pub path: PathBuf,
    pub propagation: MsFlags,
    pub mounts: Vec<PlannedMount>,
    /// Device nodes and /dev's links are made unless /dev is a bind.
    pub setup_dev: bool,
    pub devices: Vec<Node>,
    pub kcore: bool,
    pub in_userns: bool,
    pub readonly: bool,
    pub readonly_paths: Vec<PathBuf>,
    pub masked_paths: Vec<PathBuf>,
    pub sysctl: HashMap<String, String>,
}

/// A failed rootfs step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Mount(#[from] RootfsError),
    #[error(transparent)]
    Step(#[from] StepFailed),
}

impl Rootfs {
    /// The steps for `spec` with its rootfs at `path`, or what of it they
    /// do not cover yet.
    pub fn from_spec(spec: &Spec, path: &Path, in_userns: bool) -> Result<Self, &'static str> {
        let linux = spec.linux().as_ref();
        let mounts = plan(spec.mounts().as_deref().unwrap_or_default());
        if let Some(what) = mounts.iter().find_map(mounts::uncovered) {
            return Err(what);
        }
        let propagation = match linux.and_then(|l| l.rootfs_propagation().as_deref()) {
            None | Some("") => MsFlags::MS_SLAVE | MsFlags::MS_REC,
            Some(other) => propagation_flags(other).ok_or("an unknown rootfsPropagation")?,
        };
        let setup_dev = !mounts.iter().any(|m| matches!(m.kind, Kind::Bind { .. }) && m.destination == Path::new("/dev"));
        Ok(Rootfs {
            path: path.to_path_buf(),
            propagation,
            mounts,
            setup_dev,
            devices: dev::nodes(linux.and_then(|l| l.devices().as_deref()).unwrap_or_default()),
            kcore: Path::new("/proc/kcore").exists(),
            in_userns,
            readonly: spec.root().as_ref().and_then(|r| r.readonly()).unwrap_or(false),
            readonly_paths: linux.and_then(|l| l.readonly_paths().clone()).unwrap_or_default().into_iter().map(PathBuf::from).collect(),
            masked_paths: linux.and_then(|l| l.masked_paths().clone()).unwrap_or_default().into_iter().map(PathBuf::from).collect(),
            sysctl: linux.and_then(|l| l.sysctl().clone()).unwrap_or_default(),
        })
    }

    /// Before the createContainer hooks, in the container's mount
    /// namespace: the rootfs's own mount, which `after_hooks` pivots into.
    pub fn before_hooks(&self, sys: &dyn Syscall) -> Result<OwnedFd, PrepareError> {
        let root = pivot::prepare(sys, &self.path, self.propagation)?;
        for m in &self.mounts {
            mounts::make(sys, &root, m)?;
        }
        if self.setup_dev {
            dev::make_nodes(sys, &root, &self.devices, self.in_userns)?;
            dev::make_links(sys, &root, self.kcore)?;
        }
        Ok(root)
    }

    /// After the hooks: pivot_root, then the confinement of paths. Every
    /// descriptor is dropped on return, before the init changes directory
    /// and execs (CVE-2024-21626).
    pub fn after_hooks(&self, sys: &dyn Syscall, root: OwnedFd, proc: Option<&ProcFd>) -> Result<(), PrepareError> {
        pivot::pivot(sys, &root, self.propagation)?;
        drop(root);
        if let Some(proc) = proc {
            sysctl::write_all(proc, &self.sysctl)?;
        }
        let slash = sys.open_dir(Path::new("/")).map_err(|e| StepFailed {
            step: "after pivot_root",
            call: "open",
            path: "/".into(),
            errno: nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })?;
        if self.readonly {
            sys.mount_setattr(&slash, MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0)
                .map_err(|errno| StepFailed { step: "making the rootfs read-only", call: "mount_setattr", path: "/".into(), errno })?;
        }
        finish::readonly_paths(sys, &slash, &self.readonly_paths)?;
        finish::masked_paths(sys, &slash, &self.masked_paths)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::new_mount::NewFs;
    use crate::sys::syscall::{Call, Recording};

    fn spec(extra: serde_json::Value) -> Spec {
        let mut base = serde_json::json!({
            "ociVersion": "1.2.0",
            "root": {"path": "rootfs", "readonly": true},
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]}
            ],
            "linux": {"maskedPaths": ["/proc/kcore"], "readonlyPaths": ["/proc/sys"]}
        });
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn what_the_steps_do_not_cover_sends_the_spec_the_engines_way() {
        let cgroup = spec(serde_json::json!({"mounts": [{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup"}]}));
        assert_eq!(Rootfs::from_spec(&cgroup, Path::new("/b/rootfs"), false).unwrap_err(), "a cgroup mount");
        let rootfs = Rootfs::from_spec(&spec(serde_json::json!({})), Path::new("/b/rootfs"), false).unwrap();
        assert_eq!(rootfs.propagation, MsFlags::MS_SLAVE | MsFlags::MS_REC, "runc's default");
        assert!(rootfs.setup_dev && rootfs.readonly);
        let bound = spec(serde_json::json!({"mounts": [{"destination": "/dev", "type": "bind", "source": "/dev", "options": ["rbind"]}]}));
        assert!(!Rootfs::from_spec(&bound, Path::new("/b/rootfs"), false).unwrap().setup_dev, "/dev bound: no nodes");
    }

    /// On the kernel, end to end: a child of this test binary runs
    /// `kernel_child` alone, in a mount namespace of its own, on a scratch
    /// rootfs, and checks from inside what the steps made. The host's mounts
    /// never see it.
    #[test]
    fn on_the_kernel_the_rootfs_is_made_pivoted_into_and_confined() {
        if !nix::unistd::geteuid().is_root() {
            return eprintln!("SKIP: mounts and pivot_root need root");
        }
        let base = std::env::temp_dir().join(format!("rustpod-prepare-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("rootfs")).unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "engine::rootfs::prepare::tests::kernel_child", "--test-threads=1", "--nocapture"])
            .env("RUSTPOD_PREPARE_CHILD", base.join("rootfs"))
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&base);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
    }

    /// Run by the test above in its own process; returns at once otherwise.
    #[test]
    fn kernel_child() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};

        use crate::sys::syscall::LinuxSyscall;

        let Some(rootfs) = std::env::var_os("RUSTPOD_PREPARE_CHILD") else { return };
        // This thread only: its own fs struct and mount namespace.
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
        // timer_list: every kernel has it, not every one has kcore.
        let spec = spec(serde_json::json!({"linux": {"maskedPaths": ["/proc/timer_list"], "readonlyPaths": ["/proc/sys"]}}));
        let rootfs = Rootfs::from_spec(&spec, Path::new(&rootfs), false).unwrap();
        let root = rootfs.before_hooks(&LinuxSyscall).unwrap();
        let proc = ProcFd::new().unwrap();
        rootfs.after_hooks(&LinuxSyscall, root, Some(&proc)).unwrap();
        // Inside: the masked file is the container's /dev/null, the
        // readonly path and the root refuse writes, /dev has runc's links.
        let masked = std::fs::metadata("/proc/timer_list").unwrap();
        assert!(masked.file_type().is_char_device() && masked.rdev() == libc::makedev(1, 3), "timer_list masked");
        let err = std::fs::write("/proc/sys/kernel/hostname", "x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "/proc/sys read-only");
        let err = std::fs::create_dir("/new").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "the root read-only");
        assert_eq!(std::fs::read_link("/dev/ptmx").unwrap(), Path::new("pts/ptmx"));
        // thread-self: only this thread is in the new mount namespace.
        let dev = std::fs::read_to_string("/proc/thread-self/mountinfo").unwrap();
        let lines: Vec<&str> = dev.lines().collect();
        assert_eq!(lines.len(), 5, "the rootfs, proc, /dev, and the two binds: {dev}");
    }

    /// The order every call is made in, end to end: what the init driver
    /// will run.
    #[test]
    fn the_steps_run_in_runcs_order() {
        let mut rootfs = Rootfs::from_spec(&spec(serde_json::json!({})), Path::new("/b/rootfs"), false).unwrap();
        rootfs.devices.truncate(1);
        rootfs.kcore = false;
        let sys = Recording::default().with_file_source("/proc/kcore").with_node("/dev/null", libc::S_IFCHR | 0o666, libc::makedev(1, 3));
        let root = rootfs.before_hooks(&sys).unwrap();
        rootfs.after_hooks(&sys, root, None).unwrap();
        let kinds: Vec<String> = sys
            .calls()
            .iter()
            .map(|c| match c {
                Call::Propagation { path, .. } => format!("propagation {}", path.display()),
                Call::OpenHostDir { path } => format!("open {}", path.display()),
                Call::CloneTree { path, .. } => format!("clone {}", path.display()),
                Call::Move { from, to } => format!("move {} {}", from.display(), to.display()),
                Call::Parent { .. } => "..".into(),
                Call::SetAttr { path, .. } => format!("setattr {}", path.display()),
                Call::NewFs(NewFs { fstype, .. }) => format!("new {fstype}"),
                Call::Target { path, .. } => format!("target {}", path.display()),
                Call::OpenDir { path } => format!("dir {}", path.display()),
                Call::Mknod { path, .. } => format!("mknod {}", path.display()),
                Call::Chown { .. } => "chown".into(),
                Call::Symlink { path, .. } => format!("symlink {}", path.display()),
                Call::Unlink { path } => format!("unlink {}", path.display()),
                Call::Fchdir { .. } => "fchdir".into(),
                Call::PivotRootHere => "pivot_root".into(),
                Call::UmountDetach { .. } => "umount".into(),
                Call::Chdir { .. } => "chdir".into(),
                Call::Open { path, .. } => format!("openat2 {}", path.display()),
                Call::Fstat { path } => format!("fstat {}", path.display()),
                Call::Statfs { path } => format!("statfs {}", path.display()),
                other => format!("{other:?}"),
            })
            .collect();
        let expected = [
            "propagation /", "open /b/rootfs", "clone /b/rootfs", "move tree:/b/rootfs /b/rootfs", "..", "setattr tree:/b",
            "new proc", "target /proc", "statfs /proc", "move fs:proc /proc",
            "new tmpfs", "target /dev", "statfs /dev", "move fs:tmpfs /dev",
            "dir /dev", "mknod /dev/null", "chown",
            "dir /dev", "symlink /dev/fd", "symlink /dev/stdin", "symlink /dev/stdout", "symlink /dev/stderr", "unlink /dev/ptmx", "symlink /dev/ptmx",
            "fchdir", "pivot_root", "propagation .", "umount", "chdir",
            "open /", "setattr /",
            "openat2 /proc/sys", "clone /proc/sys", "setattr tree:/proc/sys", "move tree:/proc/sys /proc/sys",
            "openat2 /proc/kcore", "fstat /proc/kcore", "openat2 /dev/null", "fstat /dev/null", "clone /dev/null", "move tree:/dev/null /proc/kcore",
        ];
        assert_eq!(kinds, expected);
    }
}
