//! `--no-pivot`: the rootfs made the container's root by moving its mount
//! onto `/` and chroot'ing into it, as runc does where pivot_root cannot
//! be used (a rootfs on an initramfs). The host's mounts stay in the
//! container's mount namespace, under the rootfs. The kernel lets a user
//! namespace mount a procfs only where a full one is already in its mount
//! namespace, and a process there counts as not chrooted (its root is the
//! namespace's root, followed down), so it may make one. So first every
//! full procfs and sysfs outside the rootfs (the filesystem's root mounted;
//! runc's rule) is made a slave and detached, or covered by an empty
//! read-only tmpfs where it cannot be. The engine detached only `/proc` and
//! `/sys` by name.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::MsFlags;

use crate::engine::rootfs::error::StepFailed;
use crate::sys::io_errno::errno_of;
use crate::sys::new_mount::NewFs;
use crate::sys::syscall::Syscall;

const STEP_HIDE: &str = "hiding the host's procfs and sysfs before the move";
const STEP_MOVE: &str = "moving the rootfs onto /";

/// Why `--no-pivot` cannot take a spec's `rootfsPropagation`, checked
/// before anything is made.
pub fn refuse(rootfs_propagation: Option<&str>) -> Result<(), String> {
    // The mount moved onto a shared `/` would propagate to its peers: the
    // host's own root, where systemd made it shared.
    let flags = rootfs_propagation.and_then(crate::engine::mount::propagation::propagation_flags);
    match flags.is_some_and(|f| f.contains(MsFlags::MS_SHARED)) {
        true => Err(format!(
            "linux.rootfsPropagation {:?} with --no-pivot: the rootfs moved onto a shared / would be mounted on the host's / too",
            rootfs_propagation.unwrap_or_default()
        )),
        false => Ok(()),
    }
}

/// Hides the host's procfs and sysfs mounts, moves the rootfs's mount
/// (`root`, at `rootfs`) onto `/` and chroots into it; then `/` gets an
/// unbindable rootfsPropagation, as after pivot_root (slave and private
/// already hold).
pub fn move_root(sys: &dyn Syscall, root: &OwnedFd, rootfs: &Path, propagation: MsFlags) -> Result<(), StepFailed> {
    let fail = |call: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |errno: Errno| StepFailed { step: STEP_MOVE, call, path, errno }
    };
    let info = sys.mountinfo().map_err(|e| StepFailed {
        step: STEP_HIDE,
        call: "read",
        path: "/proc/self/mountinfo".into(),
        errno: errno_of(&e),
    })?;
    for path in host_pseudo_mounts(&info, rootfs) {
        hide(sys, &path)?;
    }
    let slash = sys.open_dir(Path::new("/")).map_err(|e| fail("open", Path::new("/"))(errno_of(&e)))?;
    sys.fchdir(root).map_err(fail("fchdir", rootfs))?;
    sys.move_mount(root, &slash).map_err(fail("move_mount", rootfs))?;
    drop(slash);
    sys.chroot_here().map_err(fail("chroot", Path::new(".")))?;
    sys.chdir(Path::new("/")).map_err(fail("chdir", Path::new("/")))?;
    if propagation.contains(MsFlags::MS_UNBINDABLE) {
        sys.set_propagation(Path::new("/"), MsFlags::MS_UNBINDABLE).map_err(fail("mount", Path::new("/")))?;
    }
    Ok(())
}

/// One host mount made unreachable: a slave first, so that detaching it
/// never reaches the host's copy, then detached; covered where it cannot
/// be detached (EINVAL, EPERM: a locked mount). Gone already (ENOENT: a
/// mount below one detached before) is fine.
fn hide(sys: &dyn Syscall, path: &Path) -> Result<(), StepFailed> {
    let fail = |call: &'static str| {
        let path = path.to_path_buf();
        move |errno: Errno| StepFailed { step: STEP_HIDE, call, path, errno }
    };
    match sys.set_propagation(path, MsFlags::MS_SLAVE | MsFlags::MS_REC) {
        Err(Errno::ENOENT) => return Ok(()),
        other => other.map_err(fail("mount"))?,
    }
    match sys.umount_detach(path) {
        Ok(()) => Ok(()),
        Err(Errno::EINVAL | Errno::EPERM) => cover(sys, path),
        Err(errno) => Err(fail("umount2")(errno)),
    }
}

/// An empty read-only tmpfs on top of `path`.
fn cover(sys: &dyn Syscall, path: &Path) -> Result<(), StepFailed> {
    let fail = |call: &'static str| {
        let path = path.to_path_buf();
        move |errno: Errno| StepFailed { step: STEP_HIDE, call, path, errno }
    };
    let empty = NewFs {
        fstype: "tmpfs".into(),
        params: vec![("source".into(), Some("tmpfs".into())), ("size".into(), Some("0".into()))],
        attrs: libc::MOUNT_ATTR_RDONLY,
    };
    let fs = sys.new_fs(&empty).map_err(|e| fail("fsmount")(e.errno))?;
    let target = sys.open_dir(path).map_err(|e| fail("open")(errno_of(&e)))?;
    sys.move_mount(&fs, &target).map_err(fail("move_mount"))
}

/// The mount points in `mountinfo` of every procfs and sysfs whose
/// filesystem root is mounted, outside `rootfs`, in mountinfo's order
/// (a parent before what is mounted below it).
fn host_pseudo_mounts(mountinfo: &str, rootfs: &Path) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            let mut fields = left.split(' ').skip(3);
            let (root, point) = (fields.next()?, PathBuf::from(unescape(fields.next()?)));
            let pseudo = fstype == "proc" || fstype == "sysfs";
            (pseudo && root == "/" && !point.starts_with(rootfs)).then_some(point)
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::syscall::{Call, Recording};

    const RSLAVE: MsFlags = MsFlags::MS_SLAVE.union(MsFlags::MS_REC);

    /// This host's kind of table: the rootfs's own procfs and sysfs are
    /// inside it, a subtree bind of procfs is no full mount, and a path with
    /// a space comes escaped.
    const MOUNTINFO: &str = "\
22 1 0:21 / /proc rw,nosuid - proc proc rw
23 1 0:22 / /sys rw,nosuid - sysfs sysfs rw
24 23 0:23 / /sys/fs/cgroup ro - tmpfs tmpfs ro
25 22 0:24 / /proc/sys/fs/binfmt_misc rw - autofs systemd-1 rw
26 1 8:1 / /var/lib/b/rootfs rw - ext4 /dev/vda rw
27 26 0:30 / /var/lib/b/rootfs/proc rw - proc proc rw
28 26 0:31 / /var/lib/b/rootfs/sys ro - sysfs sysfs ro
29 1 0:21 /sys /var/tmp/procsys rw - proc proc rw
30 1 0:32 / /var/tmp/a\\040b rw - proc proc rw
31 1 0:33 / /var/lib/b/rootfs2/proc rw - proc proc rw
";

    #[test]
    fn the_full_procfs_and_sysfs_mounts_outside_the_rootfs_are_found() {
        let found = host_pseudo_mounts(MOUNTINFO, Path::new("/var/lib/b/rootfs"));
        let found: Vec<_> = found.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(found, ["/proc", "/sys", "/var/tmp/a b", "/var/lib/b/rootfs2/proc"]);
    }

    #[test]
    fn each_is_a_slave_then_detached_then_the_rootfs_moved_onto_slash_and_chrooted() {
        let sys = Recording::default().with_mountinfo(MOUNTINFO);
        let root = sys.open_dir(Path::new("/var/lib/b/rootfs")).unwrap();
        move_root(&sys, &root, Path::new("/var/lib/b/rootfs"), RSLAVE).unwrap();
        let hidden = |p: &str| [Call::Propagation { path: p.into(), flags: RSLAVE }, Call::UmountDetach { path: p.into() }];
        let mut expected = vec![Call::OpenHostDir { path: "/var/lib/b/rootfs".into() }, Call::MountInfo];
        for p in ["/proc", "/sys", "/var/tmp/a b", "/var/lib/b/rootfs2/proc"] {
            expected.extend(hidden(p));
        }
        expected.extend([
            Call::OpenHostDir { path: "/".into() },
            Call::Fchdir { path: "/var/lib/b/rootfs".into() },
            Call::Move { from: "/var/lib/b/rootfs".into(), to: "/".into() },
            Call::ChrootHere,
            Call::Chdir { path: "/".into() },
        ]);
        assert_eq!(sys.calls(), expected);
    }

    #[test]
    fn a_mount_gone_with_its_parent_is_skipped_and_one_that_cannot_be_detached_is_covered() {
        let sys = Recording::default()
            .with_mountinfo("22 1 0:21 / /proc rw - proc proc rw\n23 1 0:22 / /sys rw - sysfs sysfs rw\n")
            .failing_at("set_propagation", "/proc", Errno::ENOENT)
            .failing_at("umount_detach", "/sys", Errno::EINVAL);
        let root = sys.open_dir(Path::new("/b/rootfs")).unwrap();
        move_root(&sys, &root, Path::new("/b/rootfs"), MsFlags::MS_PRIVATE | MsFlags::MS_REC).unwrap();
        let calls = sys.calls();
        assert!(!calls.contains(&Call::UmountDetach { path: "/proc".into() }), "{calls:?}");
        let at = calls.iter().position(|c| *c == Call::UmountDetach { path: "/sys".into() }).unwrap();
        let Call::NewFs(fs) = &calls[at + 1] else { panic!("no tmpfs after the failed detach: {calls:?}") };
        assert_eq!((fs.fstype.as_str(), fs.attrs), ("tmpfs", libc::MOUNT_ATTR_RDONLY));
        assert_eq!(calls[at + 2], Call::OpenHostDir { path: "/sys".into() });
        assert_eq!(calls[at + 3], Call::Move { from: "fs:tmpfs".into(), to: "/sys".into() });
    }

    #[test]
    fn a_failed_detach_or_move_names_the_call_and_the_path() {
        let sys = Recording::default().with_mountinfo(MOUNTINFO).failing_at("umount_detach", "/sys", Errno::EBUSY);
        let root = sys.open_dir(Path::new("/var/lib/b/rootfs")).unwrap();
        let err = move_root(&sys, &root, Path::new("/var/lib/b/rootfs"), RSLAVE).unwrap_err();
        assert_eq!(err.to_string(), "hiding the host's procfs and sysfs before the move: umount2 /sys: EBUSY: Device or resource busy");
        let sys = Recording::failing("move_mount", Errno::EINVAL).with_mountinfo("");
        let root = sys.open_dir(Path::new("/b/rootfs")).unwrap();
        let err = move_root(&sys, &root, Path::new("/b/rootfs"), RSLAVE).unwrap_err();
        assert_eq!(err.to_string(), "moving the rootfs onto /: move_mount /b/rootfs: EINVAL: Invalid argument");
    }

    #[test]
    fn unbindable_is_set_on_slash_after_the_move_and_shared_is_refused() {
        let sys = Recording::default().with_mountinfo("");
        let root = sys.open_dir(Path::new("/b/rootfs")).unwrap();
        move_root(&sys, &root, Path::new("/b/rootfs"), MsFlags::MS_UNBINDABLE | MsFlags::MS_REC).unwrap();
        assert_eq!(sys.calls().last(), Some(&Call::Propagation { path: "/".into(), flags: MsFlags::MS_UNBINDABLE }));
        let err = refuse(Some("rshared")).unwrap_err();
        assert!(err.starts_with("linux.rootfsPropagation \"rshared\" with --no-pivot: "), "{err}");
        assert!(refuse(Some("shared")).is_err());
        for ok in [None, Some("slave"), Some("rprivate"), Some("unbindable")] {
            assert_eq!(refuse(ok), Ok(()));
        }
    }
}
