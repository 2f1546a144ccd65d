//! The rootfs made the container's root, crun's way, with no mountinfo
//! read. Before the spec's mounts: `/` gets rootfsPropagation (rslave
//! unless the spec says otherwise, so nothing mounted in the container
//! reaches the host), the rootfs is bound onto itself (pivot_root needs a
//! mount) and the mount above it is made private (pivot_root refuses a
//! shared one): found by going up `..` until mount_setattr accepts the
//! directory as a mount's root (EINVAL for any other). After them:
//! pivot_root(".", "."), the old root made a slave so detaching it does not
//! reach the host, then detached. The calls go through the `Syscall` seam.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::MsFlags;

use crate::engine::rootfs::error::StepFailed;
use crate::sys::io_errno::errno_of;
use crate::sys::mount_api::MountAttr;
use crate::sys::syscall::Syscall;

const STEP_PREPARE: &str = "preparing the rootfs";
const STEP_PIVOT: &str = "pivot_root into the rootfs";

/// How far up the parent mount is looked for before giving up.
const MAX_DEPTH: usize = 4096;

/// Readies `rootfs` for the spec's mounts; the descriptor returned is the
/// rootfs's own mount, the root every later step opens paths in.
pub fn prepare(sys: &dyn Syscall, rootfs: &Path, propagation: MsFlags) -> Result<OwnedFd, StepFailed> {
    let fail = |call: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |errno: Errno| StepFailed { step: STEP_PREPARE, call, path, errno }
    };
    let start = start_propagation(propagation);
    sys.set_propagation(Path::new("/"), start).map_err(fail("mount", Path::new("/")))?;
    let dir = sys.open_dir(rootfs).map_err(|e| fail("open", rootfs)(errno_of(&e)))?;
    if start.contains(MsFlags::MS_SHARED) {
        // Before the clone, which takes the propagation of the mount it
        // copies: pivot_root refuses a shared one.
        make_private(sys, &dir, rootfs)?;
    }
    let root = sys.clone_tree(&dir, true).map_err(|e| fail("open_tree", rootfs)(errno_of(&e)))?;
    sys.move_mount(&root, &dir).map_err(fail("move_mount", rootfs))?;
    Ok(root)
}

/// What `/` gets before the mounts, as the engine applies rootfsPropagation:
/// its type on every mount below, but slave for unbindable (nothing could
/// be bound from an unbindable tree: not the rootfs, not the cgroup
/// hierarchies), which [`pivot`] sets once the mounts are made.
fn start_propagation(propagation: MsFlags) -> MsFlags {
    let kind = propagation.difference(MsFlags::MS_REC);
    match kind == MsFlags::MS_UNBINDABLE {
        true => MsFlags::MS_SLAVE | MsFlags::MS_REC,
        false => kind | MsFlags::MS_REC,
    }
}

/// mount_setattr(MS_PRIVATE) on the mount the rootfs is on: `dir` itself
/// when it is a mount's root, else the first directory above that is. Run
/// in the container's mount namespace: the host's mounts keep their
/// propagation. A shared one there would make the rootfs's clone shared,
/// which pivot_root refuses; an unbindable one could not be cloned.
fn make_private(sys: &dyn Syscall, dir: &OwnedFd, rootfs: &Path) -> Result<(), StepFailed> {
    let mut at = PathBuf::from(rootfs);
    let fail = |call: &'static str, path: PathBuf| move |errno: Errno| StepFailed { step: STEP_PREPARE, call, path, errno };
    let mut above: Option<OwnedFd> = None;
    for _ in 0..MAX_DEPTH {
        let current = above.as_ref().unwrap_or(dir);
        match sys.mount_setattr(current, MountAttr::propagation(libc::MS_PRIVATE), 0) {
            Ok(()) => return Ok(()),
            Err(Errno::EINVAL) => {
                above = Some(sys.parent_of(current).map_err(fail("openat ..", at.clone()))?);
                at = at.parent().map(Path::to_path_buf).unwrap_or(at);
            }
            Err(errno) => return Err(fail("mount_setattr", at)(errno)),
        }
    }
    Err(fail("mount_setattr", at)(Errno::ELOOP))
}

/// pivot_root into `root` and the old root detached; then `/` itself gets
/// rootfsPropagation when it is shared or unbindable (slave and private
/// already hold from [`prepare`]), as the engine does.
pub fn pivot(sys: &dyn Syscall, root: &OwnedFd, propagation: MsFlags) -> Result<(), StepFailed> {
    let fail = |call: &'static str, path: &str| {
        let path = PathBuf::from(path);
        move |errno: Errno| StepFailed { step: STEP_PIVOT, call, path, errno }
    };
    let old_root = sys.open_dir(Path::new("/")).map_err(|e| fail("open", "/")(errno_of(&e)))?;
    sys.fchdir(root).map_err(fail("fchdir", "/"))?;
    sys.pivot_root_here().map_err(fail("pivot_root", "."))?;
    // "." is the old root only from the old root's directory, which the
    // kernel does not promise the cwd is after pivot_root.
    sys.fchdir(&old_root).map_err(fail("fchdir", "old /"))?;
    drop(old_root);
    sys.set_propagation(Path::new("."), MsFlags::MS_SLAVE | MsFlags::MS_REC).map_err(fail("mount", "."))?;
    sys.umount_detach(Path::new(".")).map_err(fail("umount2", "."))?;
    sys.chdir(Path::new("/")).map_err(fail("chdir", "/"))?;
    if propagation.intersects(MsFlags::MS_SHARED | MsFlags::MS_UNBINDABLE) {
        // `/` alone, as the engine does: the mounts below stay slaves, and
        // readonlyPaths can still bind from them.
        sys.set_propagation(Path::new("/"), propagation.difference(MsFlags::MS_REC)).map_err(fail("mount", "/"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::syscall::{Call, Recording};

    const RSLAVE: MsFlags = MsFlags::MS_SLAVE.union(MsFlags::MS_REC);

    fn private(path: &str) -> Call {
        Call::SetAttr { path: path.into(), attr: MountAttr::propagation(libc::MS_PRIVATE), flags: 0 }
    }

    #[test]
    fn the_mount_the_rootfs_is_on_is_made_private_then_the_rootfs_bound_onto_itself() {
        // The Recording labels `..` of a descriptor by its label's parent;
        // /var/lib is the mount the rootfs is on.
        let sys = Recording::default().with_mount_roots(&["/var/lib"]);
        let rshared = MsFlags::MS_SHARED | MsFlags::MS_REC;
        prepare(&sys, Path::new("/var/lib/b/rootfs"), MsFlags::MS_SHARED).unwrap();
        assert_eq!(
            sys.calls(),
            vec![
                Call::Propagation { path: "/".into(), flags: rshared },
                Call::OpenHostDir { path: "/var/lib/b/rootfs".into() },
                private("/var/lib/b/rootfs"),
                Call::Parent { path: "/var/lib/b/rootfs".into() },
                private("/var/lib/b"),
                Call::Parent { path: "/var/lib/b".into() },
                private("/var/lib"),
                Call::CloneTree { path: "/var/lib/b/rootfs".into(), recursive: true },
                Call::Move { from: "tree:/var/lib/b/rootfs".into(), to: "/var/lib/b/rootfs".into() },
            ]
        );
    }

    /// What the parent walk stands on: mount_setattr takes a mount's root
    /// and refuses any other directory with EINVAL. Shown on a detached
    /// tmpfs, attached nowhere, so the host's mounts are untouched.
    #[test]
    fn on_the_kernel_only_a_mounts_root_takes_mount_setattr() {
        use crate::sys::new_mount::{new_fs, NewFs};
        use crate::sys::syscall::LinuxSyscall;

        let tmpfs = NewFs { fstype: "tmpfs".into(), params: vec![("source".into(), Some("tmpfs".into()))], attrs: 0 };
        let mnt = match new_fs(&tmpfs) {
            Ok(mnt) => mnt,
            Err(e) if e.errno == Errno::EPERM => return eprintln!("SKIP: a new tmpfs needs CAP_SYS_ADMIN: {e}"),
            Err(e) => panic!("{e}"),
        };
        nix::sys::stat::mkdirat(Some(std::os::fd::AsRawFd::as_raw_fd(&mnt)), "sub", nix::sys::stat::Mode::from_bits_truncate(0o755))
            .unwrap();
        let sub = crate::sys::in_root::open_beneath(&mnt, Path::new("sub"), libc::O_PATH | libc::O_DIRECTORY, 0).unwrap();
        let private = MountAttr::propagation(libc::MS_PRIVATE);
        assert_eq!(LinuxSyscall.mount_setattr(&sub, private, 0), Err(Errno::EINVAL));
        let up = LinuxSyscall.parent_of(&sub).unwrap();
        assert_eq!(LinuxSyscall.mount_setattr(&up, private, 0), Ok(()));
    }

    #[test]
    fn slave_and_private_need_no_private_parent_and_unbindable_waits_for_the_pivot() {
        for (asked, start) in
            [(RSLAVE, RSLAVE), (MsFlags::MS_PRIVATE, MsFlags::MS_PRIVATE | MsFlags::MS_REC), (MsFlags::MS_UNBINDABLE, RSLAVE)]
        {
            let sys = Recording::default();
            prepare(&sys, Path::new("/b/rootfs"), asked).unwrap();
            assert_eq!(sys.calls()[0], Call::Propagation { path: "/".into(), flags: start }, "{asked:?}");
            assert!(!sys.calls().iter().any(|c| matches!(c, Call::SetAttr { .. })), "{asked:?}: no parent made private");
        }
        let sys = Recording::default();
        let root: OwnedFd = std::fs::File::open("/").unwrap().into();
        pivot(&sys, &root, MsFlags::MS_UNBINDABLE).unwrap();
        assert_eq!(sys.calls().last(), Some(&Call::Propagation { path: "/".into(), flags: MsFlags::MS_UNBINDABLE }));
    }

    #[test]
    fn pivot_root_then_the_old_root_is_detached_as_a_slave() {
        let sys = Recording::default();
        let root: OwnedFd = std::fs::File::open("/").unwrap().into();
        pivot(&sys, &root, RSLAVE).unwrap();
        assert_eq!(
            sys.calls(),
            vec![
                Call::OpenHostDir { path: "/".into() },
                Call::Fchdir { path: "".into() },
                Call::PivotRootHere,
                Call::Fchdir { path: "/".into() },
                Call::Propagation { path: ".".into(), flags: RSLAVE },
                Call::UmountDetach { path: ".".into() },
                Call::Chdir { path: "/".into() },
            ]
        );
        let sys = Recording::default();
        pivot(&sys, &root, MsFlags::MS_SHARED | MsFlags::MS_REC).unwrap();
        assert_eq!(sys.calls().last(), Some(&Call::Propagation { path: "/".into(), flags: MsFlags::MS_SHARED }));
    }

    #[test]
    fn a_failed_pivot_names_the_call() {
        let root: OwnedFd = std::fs::File::open("/").unwrap().into();
        let err = pivot(&Recording::failing("pivot_root_here", Errno::EINVAL), &root, RSLAVE).unwrap_err();
        assert_eq!(err.to_string(), "pivot_root into the rootfs: pivot_root .: EINVAL: Invalid argument");
    }
}
