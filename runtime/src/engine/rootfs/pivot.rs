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
    sys.set_propagation(Path::new("/"), propagation).map_err(fail("mount", Path::new("/")))?;
    let dir = sys.open_dir(rootfs).map_err(|e| fail("open", rootfs)(errno_of(&e)))?;
    let root = sys.clone_tree(&dir, true).map_err(|e| fail("open_tree", rootfs)(errno_of(&e)))?;
    sys.move_mount(&root, &dir).map_err(fail("move_mount", rootfs))?;
    make_parent_private(sys, &root, rootfs)?;
    Ok(root)
}

/// mount_setattr(MS_PRIVATE) on the first directory above `root` that is a
/// mount's root. Run in the container's mount namespace: the host's mounts
/// keep their propagation, and this one goes with the old root.
fn make_parent_private(sys: &dyn Syscall, root: &OwnedFd, rootfs: &Path) -> Result<(), StepFailed> {
    let mut at = PathBuf::from(rootfs);
    let fail = |call: &'static str, path: PathBuf| move |errno: Errno| StepFailed { step: STEP_PREPARE, call, path, errno };
    let mut dir = sys.parent_of(root).map_err(fail("openat ..", at.clone()))?;
    for _ in 0..MAX_DEPTH {
        at = at.parent().map(Path::to_path_buf).unwrap_or(at);
        match sys.mount_setattr(&dir, MountAttr::propagation(libc::MS_PRIVATE), 0) {
            Ok(()) => return Ok(()),
            Err(Errno::EINVAL) => dir = sys.parent_of(&dir).map_err(fail("openat ..", at.clone()))?,
            Err(errno) => return Err(fail("mount_setattr", at)(errno)),
        }
    }
    Err(fail("mount_setattr", at)(Errno::ELOOP))
}

/// pivot_root into `root` and the old root detached; then `/` gets
/// rootfsPropagation again when it is shared or unbindable (set before the
/// mounts, slave and private already hold), as runc does.
pub fn pivot(sys: &dyn Syscall, root: &OwnedFd, propagation: MsFlags) -> Result<(), StepFailed> {
    let fail = |call: &'static str, path: &str| {
        let path = PathBuf::from(path);
        move |errno: Errno| StepFailed { step: STEP_PIVOT, call, path, errno }
    };
    sys.fchdir(root).map_err(fail("fchdir", "/"))?;
    sys.pivot_root_here().map_err(fail("pivot_root", "."))?;
    sys.set_propagation(Path::new("."), MsFlags::MS_SLAVE | MsFlags::MS_REC).map_err(fail("mount", "."))?;
    sys.umount_detach(Path::new(".")).map_err(fail("umount2", "."))?;
    sys.chdir(Path::new("/")).map_err(fail("chdir", "/"))?;
    if propagation.intersects(MsFlags::MS_SHARED | MsFlags::MS_UNBINDABLE) {
        sys.set_propagation(Path::new("/"), propagation).map_err(fail("mount", "/"))?;
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
    fn the_rootfs_is_bound_onto_itself_and_the_mount_above_made_private() {
        // The Recording labels `..` of a descriptor by its label's parent;
        // /var/lib is the one mount root above the rootfs.
        let sys = Recording::default().with_mount_roots(&["tree:/var/lib"]);
        prepare(&sys, Path::new("/var/lib/b/rootfs"), RSLAVE).unwrap();
        assert_eq!(
            sys.calls(),
            vec![
                Call::Propagation { path: "/".into(), flags: RSLAVE },
                Call::OpenHostDir { path: "/var/lib/b/rootfs".into() },
                Call::CloneTree { path: "/var/lib/b/rootfs".into(), recursive: true },
                Call::Move { from: "tree:/var/lib/b/rootfs".into(), to: "/var/lib/b/rootfs".into() },
                Call::Parent { path: "tree:/var/lib/b/rootfs".into() },
                private("tree:/var/lib/b"),
                Call::Parent { path: "tree:/var/lib/b".into() },
                private("tree:/var/lib"),
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
        nix::sys::stat::mkdirat(Some(std::os::fd::AsRawFd::as_raw_fd(&mnt)), "sub", nix::sys::stat::Mode::from_bits_truncate(0o755)).unwrap();
        let sub = crate::sys::in_root::open_beneath(&mnt, Path::new("sub"), libc::O_PATH | libc::O_DIRECTORY, 0).unwrap();
        let private = MountAttr::propagation(libc::MS_PRIVATE);
        assert_eq!(LinuxSyscall.mount_setattr(&sub, private, 0), Err(Errno::EINVAL));
        let up = LinuxSyscall.parent_of(&sub).unwrap();
        assert_eq!(LinuxSyscall.mount_setattr(&up, private, 0), Ok(()));
    }

    #[test]
    fn pivot_root_then_the_old_root_is_detached_as_a_slave() {
        let sys = Recording::default();
        let root: OwnedFd = std::fs::File::open("/").unwrap().into();
        pivot(&sys, &root, RSLAVE).unwrap();
        assert_eq!(
            sys.calls(),
            vec![
                Call::Fchdir { path: "".into() },
                Call::PivotRootHere,
                Call::Propagation { path: ".".into(), flags: RSLAVE },
                Call::UmountDetach { path: ".".into() },
                Call::Chdir { path: "/".into() },
            ]
        );
        let sys = Recording::default();
        pivot(&sys, &root, MsFlags::MS_SHARED | MsFlags::MS_REC).unwrap();
        assert_eq!(sys.calls().last(), Some(&Call::Propagation { path: "/".into(), flags: MsFlags::MS_SHARED | MsFlags::MS_REC }));
    }

    #[test]
    fn a_failed_pivot_names_the_call() {
        let root: OwnedFd = std::fs::File::open("/").unwrap().into();
        let err = pivot(&Recording::failing("pivot_root_here", Errno::EINVAL), &root, RSLAVE).unwrap_err();
        assert_eq!(err.to_string(), "pivot_root into the rootfs: pivot_root .: EINVAL: Invalid argument");
    }
}
