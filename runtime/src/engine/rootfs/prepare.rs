//! The rootfs steps in runc's order, from a spec: what of it they cover
//! (`Rootfs::from_spec` names what they do not, so that spec goes the
//! engine's way), the part before the createContainer hooks (the rootfs
//! readied, the spec's mounts, /dev's nodes and links) and the part after
//! (pivot_root or `--no-pivot`'s move, sysctls, the read-only root,
//! readonlyPaths, maskedPaths).

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::MsFlags;
use oci_spec::runtime::Spec;

use crate::engine::mount::propagation::propagation_flags;
use crate::engine::rootfs::cgroup::{self, Placed, Step};
use crate::engine::rootfs::dev::{self, Node};
use crate::engine::rootfs::error::{Detail, RootfsError, StepFailed};
use crate::engine::rootfs::plan::{plan, Kind};
use crate::engine::rootfs::{finish, mounts, move_root, pivot, sysctl};
use crate::sys::io_errno::errno_of;
use crate::sys::mount_api::MountAttr;
use crate::sys::procfs::ProcFd;
use crate::sys::syscall::Syscall;

/// What the rootfs steps make for one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rootfs {
    pub path: PathBuf,
    pub propagation: MsFlags,
    /// The spec's mounts in order, a cgroup mount expanded.
    pub mounts: Vec<Step>,
    /// Device nodes and /dev's links are made unless /dev is a bind.
    pub setup_dev: bool,
    pub devices: Vec<Node>,
    pub kcore: bool,
    pub in_userns: bool,
    pub readonly: bool,
    pub readonly_paths: Vec<PathBuf>,
    pub masked_paths: Vec<PathBuf>,
    pub sysctl: HashMap<String, String>,
    /// `--no-pivot`: the rootfs is moved onto `/` and chrooted into.
    pub no_pivot: bool,
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
    /// `cgroups`: the host's hierarchies with the container's cgroup in
    /// each, for a cgroup mount; `cgroupns`: the container has its own.
    pub fn from_spec(spec: &Spec, path: &Path, in_userns: bool, cgroups: &[Placed], cgroupns: bool) -> Result<Self, &'static str> {
        let linux = spec.linux().as_ref();
        let planned = plan(spec.mounts().as_deref().unwrap_or_default());
        let mut mounts = Vec::with_capacity(planned.len());
        for m in planned {
            match &m.kind {
                Kind::New { fstype } if fstype == "cgroup" || fstype == "cgroup2" => {
                    if cgroups.is_empty() {
                        return Err("a cgroup mount on a host with no cgroup hierarchy read");
                    }
                    mounts.extend(cgroup::expand(&m, cgroups, cgroupns));
                }
                _ if m.idmap.is_some() => mounts.push(Step::Detached { mount: m, fd: None }),
                _ => mounts.push(Step::Mount(m)),
            }
        }
        let uncovered = |step: &Step| match step {
            Step::Mount(m) | Step::MountOr(m, _) => mounts::uncovered(m),
            _ => None,
        };
        if let Some(what) = mounts.iter().find_map(uncovered) {
            return Err(what);
        }
        let propagation = match linux.and_then(|l| l.rootfs_propagation().as_deref()) {
            None | Some("") => MsFlags::MS_SLAVE | MsFlags::MS_REC,
            Some(other) => propagation_flags(other).ok_or("an unknown rootfsPropagation")?,
        };
        let setup_dev = !mounts
            .iter()
            .any(|s| matches!(s, Step::Mount(m) | Step::Detached { mount: m, .. } if matches!(m.kind, Kind::Bind { .. }) && m.destination == Path::new("/dev")));
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
            no_pivot: false,
        })
    }

    /// Hands over the detached tree of `mounts[index]`, an idmapped mount
    /// or, in a user namespace, a bind made on the host's side (the
    /// container's root may not reach its source): `fd` must stay open in
    /// this process until the init is cloned. False when no such mount is
    /// planned.
    pub fn attach_detached(&mut self, index: usize, fd: RawFd) -> bool {
        let in_userns = self.in_userns;
        let found = self.mounts.iter_mut().find_map(|step| match step {
            Step::Detached { mount, .. } if mount.index == index => Some((mount.clone(), step)),
            Step::Mount(m) if in_userns && m.index == index && matches!(m.kind, Kind::Bind { .. }) => Some((m.clone(), step)),
            _ => None,
        });
        found.map(|(mount, step)| *step = Step::Detached { mount, fd: Some(fd) }).is_some()
    }

    /// Before the createContainer hooks, in the container's mount
    /// namespace: the rootfs's own mount, which `pivot_into` enters.
    pub fn before_hooks(&self, sys: &dyn Syscall) -> Result<OwnedFd, PrepareError> {
        let root = pivot::prepare(sys, &self.path, self.propagation)?;
        for step in &self.mounts {
            run_step(sys, &root, step)?;
        }
        if self.setup_dev {
            dev::make_nodes(sys, &root, &self.devices, self.in_userns)?;
            dev::make_links(sys, &root, self.kcore)?;
        }
        Ok(root)
    }

    /// After the hooks: pivot_root into the rootfs `before_hooks` made (or,
    /// with `--no-pivot`, move it onto `/` and chroot). Its descriptor is
    /// dropped here, before the init changes directory and execs
    /// (CVE-2024-21626).
    pub fn pivot_into(&self, sys: &dyn Syscall, root: OwnedFd) -> Result<(), PrepareError> {
        match self.no_pivot {
            true => move_root::move_root(sys, &root, &self.path, self.propagation)?,
            false => pivot::pivot(sys, &root, self.propagation)?,
        }
        drop(root);
        Ok(())
    }

    /// In the new root: sysctls, then the read-only root, readonlyPaths and
    /// maskedPaths, which also cover what came after pivot_root (the
    /// console), as runc orders them.
    pub fn confine(&self, sys: &dyn Syscall, proc: Option<&ProcFd>) -> Result<(), PrepareError> {
        if let Some(proc) = proc {
            sysctl::write_all(proc, &self.sysctl)?;
        }
        let slash = sys.open_dir(Path::new("/")).map_err(|e| StepFailed {
            step: "after pivot_root",
            call: "open",
            path: "/".into(),
            errno: errno_of(&e),
        })?;
        if self.readonly {
            sys.mount_setattr(&slash, MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0).map_err(|errno| StepFailed {
                step: "making the rootfs read-only",
                call: "mount_setattr",
                path: "/".into(),
                errno,
            })?;
        }
        finish::readonly_paths(sys, &slash, &self.readonly_paths)?;
        finish::masked_paths(sys, &slash, &self.masked_paths)?;
        Ok(())
    }
}

/// One mount step; the second of a `MountOr` where the kernel refuses the
/// first with EPERM or EBUSY (cgroup2 in a user namespace without a cgroup
/// namespace), as runc falls back.
fn run_step(sys: &dyn Syscall, root: &OwnedFd, step: &Step) -> Result<(), PrepareError> {
    let fail = |step: &'static str, call: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |errno: Errno| StepFailed { step, call, path, errno }
    };
    match step {
        Step::Mount(m) => mounts::make(sys, root, m)?,
        Step::MountOr(first, second) => match mounts::make(sys, root, first) {
            Err(RootfsError { detail: Detail::NewFs(e), .. }) if matches!(e.errno, Errno::EPERM | Errno::EBUSY) => {
                mounts::make(sys, root, second)?
            }
            other => other?,
        },
        Step::Symlink { at, target } => {
            let (parent, name) = (at.parent().unwrap_or(Path::new("/")), at.file_name().unwrap_or_default());
            let dir = sys.open_dir_no_symlinks(root, parent).map_err(|e| StepFailed {
                step: STEP_CGROUP,
                call: e.call,
                path: e.path,
                errno: e.errno,
            })?;
            sys.symlink_at(target, &dir, name).map_err(fail(STEP_CGROUP, "symlinkat", at))?;
        }
        Step::Detached { mount, fd: Some(fd) } => {
            // SAFETY: create keeps this descriptor open until the init is
            // cloned, and the init closes it only at its exec (O_CLOEXEC).
            let tree = ManuallyDrop::new(unsafe { OwnedFd::from_raw_fd(*fd) });
            mounts::attach(sys, root, mount, &tree)?
        }
        Step::Detached { mount, fd: None } => mounts::make(sys, root, mount)?,
        Step::ReadOnly(path) => {
            let fd = sys.open_in_root(root, path, libc::O_PATH).map_err(|e| fail(STEP_CGROUP, "openat2", path)(errno_of(&e)))?;
            sys.mount_setattr(&fd, MountAttr::flags(libc::MOUNT_ATTR_RDONLY, 0), 0).map_err(fail(STEP_CGROUP, "mount_setattr", path))?;
        }
    }
    Ok(())
}

const STEP_CGROUP: &str = "mounting the cgroup filesystem";

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

    /// The cgroup mount is ours on both: on a v2 host cgroup2 anew with the
    /// spec's flags, else (EPERM, EBUSY) a bind of the container's cgroup,
    /// as runc; on v1 a bind of the container's cgroup in each hierarchy, or
    /// in a cgroup namespace each hierarchy anew.
    #[test]
    fn the_cgroup_mount_is_ours_on_v2_and_on_v1_with_or_without_a_cgroupns() {
        let cgroup = spec(
            serde_json::json!({"mounts": [{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["ro", "nosuid"]}]}),
        );
        let v2 = crate::engine::cgroup::fs::Hierarchy { mount_point: "/sys/fs/cgroup".into(), controllers: vec![], unified: true };
        let placed = [Placed { hierarchy: v2, cgroup: "/rustpod/c1".into() }];
        for cgroupns in [false, true] {
            let rootfs = Rootfs::from_spec(&cgroup, Path::new("/b/rootfs"), false, &placed, cgroupns).unwrap();
            let [Step::MountOr(fresh, bind)] = rootfs.mounts.as_slice() else { panic!("{:?}", rootfs.mounts) };
            assert_eq!(fresh.kind, Kind::New { fstype: "cgroup2".into() });
            assert!(fresh.flags.set.contains(MsFlags::MS_RDONLY | MsFlags::MS_NOSUID), "the spec's flags");
            assert_eq!(bind.source.as_deref(), Some(Path::new("/sys/fs/cgroup/rustpod/c1")));
        }
        let v1 = crate::engine::cgroup::fs::Hierarchy {
            mount_point: "/sys/fs/cgroup/memory".into(),
            controllers: vec!["rw".into(), "memory".into()],
            unified: false,
        };
        let placed = [Placed { hierarchy: v1, cgroup: "/rustpod/c1".into() }];
        assert!(Rootfs::from_spec(&cgroup, Path::new("/b/rootfs"), false, &placed, false).is_ok(), "binds of the container's cgroups");
        let rootfs = Rootfs::from_spec(&cgroup, Path::new("/b/rootfs"), false, &placed, true).unwrap();
        let Step::Mount(memory) = &rootfs.mounts[1] else { panic!("{:?}", rootfs.mounts) };
        assert_eq!((&memory.kind, &memory.data[..]), (&Kind::New { fstype: "cgroup".into() }, &["memory".to_string()][..]));
    }

    #[test]
    fn what_the_steps_do_not_cover_sends_the_spec_the_engines_way() {
        let cgroup = spec(serde_json::json!({"mounts": [{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup"}]}));
        assert_eq!(
            Rootfs::from_spec(&cgroup, Path::new("/b/rootfs"), false, &[], false).unwrap_err(),
            "a cgroup mount on a host with no cgroup hierarchy read"
        );
        let rootfs = Rootfs::from_spec(&spec(serde_json::json!({})), Path::new("/b/rootfs"), false, &[], false).unwrap();
        assert_eq!(rootfs.propagation, MsFlags::MS_SLAVE | MsFlags::MS_REC, "runc's default");
        assert!(rootfs.setup_dev && rootfs.readonly);
        let bound = spec(serde_json::json!({"mounts": [{"destination": "/dev", "type": "bind", "source": "/dev", "options": ["rbind"]}]}));
        assert!(!Rootfs::from_spec(&bound, Path::new("/b/rootfs"), false, &[], false).unwrap().setup_dev, "/dev bound: no nodes");
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
        let (passed, text) = crate::engine::rootfs::in_child("engine::rootfs::prepare::tests::kernel_child", "RUSTPOD_PREPARE_CHILD");
        assert!(passed, "{text}");
    }

    /// The image's owner swaps the rootfs's /proc, already mounted, for a
    /// symlink to a plain directory between the mounts and pivot_root (the
    /// host sees no mount there, so the rename works): the masked paths
    /// would land off procfs and leave the real files unmasked. The step
    /// refuses instead, naming the path.
    #[test]
    fn on_the_kernel_a_proc_swapped_after_its_mount_fails_the_masks() {
        if !nix::unistd::geteuid().is_root() {
            return eprintln!("SKIP: mounts and pivot_root need root");
        }
        let (passed, text) = crate::engine::rootfs::in_child("engine::rootfs::prepare::tests::swap_child", "RUSTPOD_SWAP_CHILD");
        assert!(passed, "{text}");
    }

    #[test]
    fn swap_child() {
        use crate::sys::syscall::LinuxSyscall;

        let Some(scratch) = std::env::var_os("RUSTPOD_SWAP_CHILD") else { return };
        let rootfs = Path::new(&scratch).join("rootfs");
        std::fs::create_dir_all(rootfs.join("fake")).unwrap();
        std::fs::write(rootfs.join("fake/timer_list"), "not procfs").unwrap();
        // A thread started before the unshare stays in the host's mount
        // namespace, where rootfs/proc is a plain directory.
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let swap = rootfs.clone();
        let swapper = std::thread::spawn(move || {
            wait.recv().unwrap();
            std::fs::rename(swap.join("proc"), swap.join("proc-moved")).unwrap();
            std::os::unix::fs::symlink("fake", swap.join("proc")).unwrap();
        });
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
        let spec = spec(serde_json::json!({"linux": {"maskedPaths": ["/proc/timer_list"]}}));
        let rootfs_steps = Rootfs::from_spec(&spec, &rootfs, false, &[], false).unwrap();
        let root = rootfs_steps.before_hooks(&LinuxSyscall).unwrap();
        go.send(()).unwrap();
        swapper.join().unwrap();
        let err = rootfs_steps.pivot_into(&LinuxSyscall, root).and_then(|()| rootfs_steps.confine(&LinuxSyscall, None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "masking maskedPaths: fstatfs (not on the filesystem its path names) /proc/timer_list: EXDEV: Cross-device link"
        );
        assert_eq!(std::fs::read_to_string("/fake/timer_list").unwrap(), "not procfs", "nothing bound over it");
    }

    /// Run by the test above in its own process; returns at once otherwise.
    #[test]
    fn kernel_child() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};

        use crate::sys::syscall::LinuxSyscall;

        let Some(scratch) = std::env::var_os("RUSTPOD_PREPARE_CHILD") else { return };
        let rootfs = Path::new(&scratch).join("rootfs");
        std::fs::create_dir(&rootfs).unwrap();
        // This thread only: its own fs struct and mount namespace.
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
        // timer_list: every kernel has it, not every one has kcore.
        let spec = spec(serde_json::json!({
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]},
                {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["ro", "nosuid", "noexec", "nodev"]}
            ],
            "linux": {"maskedPaths": ["/proc/timer_list"], "readonlyPaths": ["/proc/sys"]}
        }));
        // The host's hierarchies, the container's cgroup their root: binds
        // of them, seen in this namespace alone.
        let hierarchies = crate::engine::cgroup::fs::hierarchies();
        let placed: Vec<Placed> = hierarchies.iter().map(|h| Placed { hierarchy: h.clone(), cgroup: "/".into() }).collect();
        let v2 = crate::engine::cgroup::fs::is_unified(&hierarchies);
        let cgroup_mounts = if v2 { 1 } else { 1 + hierarchies.iter().filter(|h| !h.unified).count() };
        let rootfs = Rootfs::from_spec(&spec, &rootfs, false, &placed, false).unwrap();
        let root = rootfs.before_hooks(&LinuxSyscall).unwrap();
        let proc = ProcFd::new().unwrap();
        rootfs.pivot_into(&LinuxSyscall, root).unwrap();
        rootfs.confine(&LinuxSyscall, Some(&proc)).unwrap();
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
        assert_eq!(lines.len(), 5 + cgroup_mounts, "the rootfs, proc, /dev, the cgroup mounts and the two binds: {dev}");
        let err = std::fs::create_dir("/sys/fs/cgroup/x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EROFS), "the cgroup mount read-only");
        if let Some(memory) = hierarchies.iter().find(|h| h.has("memory")) {
            let inside = Path::new("/sys/fs/cgroup").join(memory.mount_point.file_name().unwrap());
            let fs = nix::sys::statfs::statfs(&inside).unwrap();
            assert_eq!(fs.filesystem_type(), nix::sys::statfs::CGROUP_SUPER_MAGIC, "{}", inside.display());
            let err = std::fs::write(inside.join("memory.limit_in_bytes"), "1").unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EROFS), "the memory hierarchy read-only");
        }
        if hierarchies.iter().any(|h| h.mount_point.ends_with("cpu,cpuacct")) {
            assert_eq!(std::fs::read_link("/sys/fs/cgroup/cpu").unwrap(), Path::new("cpu,cpuacct"));
        }
    }

    /// The order every call is made in, end to end: what the init driver
    /// will run.
    #[test]
    fn the_steps_run_in_runcs_order() {
        let mut rootfs = Rootfs::from_spec(&spec(serde_json::json!({})), Path::new("/b/rootfs"), false, &[], false).unwrap();
        rootfs.devices.truncate(1);
        rootfs.kcore = false;
        let sys = Recording::default()
            .with_file_source("/proc/kcore")
            .with_node("/dev/null", libc::S_IFCHR | 0o666, libc::makedev(1, 3))
            .with_procfs("/proc");
        let root = rootfs.before_hooks(&sys).unwrap();
        rootfs.pivot_into(&sys, root).unwrap();
        rootfs.confine(&sys, None).unwrap();
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
            "propagation /",
            "open /b/rootfs",
            "clone /b/rootfs",
            "move tree:/b/rootfs /b/rootfs",
            "new proc",
            "target /proc",
            "statfs /proc",
            "move fs:proc /proc",
            "new tmpfs",
            "target /dev",
            "statfs /dev",
            "move fs:tmpfs /dev",
            "dir /dev",
            "mknod /dev/null",
            "chown",
            "dir /dev",
            "symlink /dev/fd",
            "symlink /dev/stdin",
            "symlink /dev/stdout",
            "symlink /dev/stderr",
            "unlink /dev/ptmx",
            "symlink /dev/ptmx",
            "open /",
            "fchdir",
            "pivot_root",
            "fchdir",
            "propagation .",
            "umount",
            "chdir",
            "open /",
            "setattr /",
            "openat2 /proc/sys",
            "statfs /proc/sys",
            "clone /proc/sys",
            "setattr tree:/proc/sys",
            "move tree:/proc/sys /proc/sys",
            "openat2 /proc/kcore",
            "statfs /proc/kcore",
            "fstat /proc/kcore",
            "openat2 /dev/null",
            "fstat /dev/null",
            "clone /dev/null",
            "move tree:/dev/null /proc/kcore",
        ];
        assert_eq!(kinds, expected);
    }

    /// An idmapped bind is moved in from the tree create made, at its place
    /// in the spec's order: over the mount before it, under the one after,
    /// its source never cloned again (that clone would be unmapped). Where
    /// the engine makes the rootfs, our hook could only move it in after
    /// all of the engine's mounts, so such a stack was refused.
    #[test]
    fn an_idmapped_bind_goes_in_at_its_place_from_its_detached_tree() {
        use std::os::fd::AsRawFd;
        let mounts = serde_json::json!({"mounts": [
            {"destination": "/a", "type": "tmpfs", "source": "tmpfs"},
            {"destination": "/a/d", "type": "bind", "source": "/host/disk", "options": ["bind", "rslave"],
             "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
             "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}]},
            {"destination": "/a/d/sub", "type": "tmpfs", "source": "tmpfs"}
        ]});
        let mut rootfs = Rootfs::from_spec(&spec(mounts), Path::new("/b/rootfs"), false, &[], false).unwrap();
        rootfs.setup_dev = false;
        let sys = Recording::default();
        let unattached = rootfs.before_hooks(&sys).unwrap_err().to_string();
        assert!(unattached.contains("/a/d") && unattached.contains("an idmapped mount"), "never bound unmapped: {unattached}");

        // What create's host side made (idmap::detached), as the init inherits it.
        let sys = Recording::default();
        let tree = sys.open_tree(Path::new("/host/disk"), false).unwrap();
        assert!(!rootfs.attach_detached(0, tree.as_raw_fd()), "mounts[0] is no idmapped mount");
        assert!(rootfs.attach_detached(1, tree.as_raw_fd()));
        let calls = sys.calls().len();
        rootfs.before_hooks(&sys).unwrap();
        let steps: Vec<String> = sys.calls()[calls..]
            .iter()
            .filter_map(|c| match c {
                Call::OpenTree { source, .. } => Some(format!("open_tree {}", source.display())),
                Call::Move { from, to } => Some(format!("move {} {}", from.display(), to.display())),
                Call::SetAttr { path, attr, flags } if attr.propagation != 0 => {
                    Some(format!("propagation {} {:#x} {flags:#x}", path.display(), attr.propagation))
                }
                _ => None,
            })
            .collect();
        let slave_rec = format!("{:#x} {:#x}", libc::MS_SLAVE, libc::AT_RECURSIVE);
        assert_eq!(
            steps,
            [
                "move tree:/b/rootfs /b/rootfs".to_string(),
                "move fs:tmpfs /a".into(),
                "move tree:/host/disk /a/d".into(),
                format!("propagation tree:/host/disk {slave_rec}"),
                "move fs:tmpfs /a/d/sub".into(),
            ]
        );
    }

    /// In a user namespace a plain bind's tree may come from the host's side (its source may
    /// be out of the container root's reach); without one only idmapped mounts do.
    #[test]
    fn in_a_user_namespace_a_plain_bind_takes_a_detached_tree() {
        use std::os::fd::AsRawFd;
        let mounts = serde_json::json!({"mounts": [
            {"destination": "/t", "type": "tmpfs", "source": "tmpfs"},
            {"destination": "/v", "type": "bind", "source": "/host/vol", "options": ["rbind"]}
        ]});
        let sys = Recording::default();
        let tree = sys.open_tree(Path::new("/host/vol"), true).unwrap();
        let mut plain = Rootfs::from_spec(&spec(mounts.clone()), Path::new("/b/rootfs"), false, &[], false).unwrap();
        assert!(!plain.attach_detached(1, tree.as_raw_fd()), "no user namespace: bound by the init");
        let mut userns = Rootfs::from_spec(&spec(mounts), Path::new("/b/rootfs"), true, &[], false).unwrap();
        assert!(!userns.attach_detached(0, tree.as_raw_fd()), "a tmpfs is made inside");
        assert!(userns.attach_detached(1, tree.as_raw_fd()));
        assert!(matches!(&userns.mounts[1], Step::Detached { mount, fd: Some(_) } if mount.destination == Path::new("/v")));
    }
}
