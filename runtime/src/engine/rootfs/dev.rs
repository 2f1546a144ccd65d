//! /dev's contents, made by our own steps after the spec's mounts: the
//! spec's device nodes and the default ones it does not list, runc's links
//! (fd, stdin, stdout, stderr, and core where the host has /proc/kcore), and
//! /dev/ptmx as a link to pts/ptmx. Each is made by name in a directory
//! opened inside the rootfs with no symlink followed, so a /dev or /dev/net
//! that leads elsewhere fails, named, instead of being written through, and
//! so does a node the image already has: masked paths are bind-mounted
//! from /dev/null, which must be ours (CVE-2025-31133). In a user
//! namespace, where mknod is refused, the host's node is bind-mounted onto
//! an empty file, as runc does. The calls go through the `Syscall` seam.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use oci_spec::runtime::{LinuxDevice, LinuxDeviceType};

use crate::engine::rootfs::error::StepFailed;
use crate::sys::io_errno::errno_of;
use crate::sys::mount_target::Want;
use crate::sys::syscall::Syscall;

/// One device node to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub path: PathBuf,
    /// The file type (`S_IFCHR`, `S_IFBLK`, `S_IFIFO`) and the permissions.
    pub mode: u32,
    pub major: u64,
    pub minor: u64,
    pub uid: u32,
    pub gid: u32,
}

/// runc's links in /dev: name, target.
const LINKS: &[(&str, &str)] =
    &[("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")];

const STEP_NODES: &str = "creating device nodes";
const STEP_LINKS: &str = "creating /dev symlinks";

/// runc's order of its six default nodes: in a user namespace, where each
/// is a bind, mountinfo lists them so.
const RUNC_ORDER: [&str; 6] = ["/dev/null", "/dev/random", "/dev/full", "/dev/tty", "/dev/zero", "/dev/urandom"];

/// The nodes to make for the spec's `devices`: those, then the defaults
/// they do not replace. A mode not given is 0666, an owner not given root.
/// (The defaults are runc's six, from libcontainer, in runc's order.) A listed
/// `/dev/ptmx` (containerd lists every host node for a privileged
/// container) is left to the link to `pts/ptmx` that replaces it: in a user
/// namespace it would be a bind the link cannot replace (EBUSY).
pub fn nodes(devices: &[LinuxDevice]) -> Vec<Node> {
    let mut defaults = libcontainer::rootfs::utils::default_devices();
    defaults.sort_by_key(|d| RUNC_ORDER.iter().position(|p| d.path() == Path::new(p)));
    let unlisted = defaults.iter().filter(|d| !devices.iter().any(|listed| listed.path() == d.path()));
    devices.iter().chain(unlisted).filter(|d| d.path() != Path::new("/dev/ptmx")).map(node).collect()
}

fn node(d: &LinuxDevice) -> Node {
    Node {
        path: d.path().clone(),
        mode: file_type(d.typ()) | d.file_mode().unwrap_or(0o666) & 0o7777,
        major: d.major() as u64,
        minor: d.minor() as u64,
        uid: d.uid().unwrap_or(0),
        gid: d.gid().unwrap_or(0),
    }
}

fn file_type(typ: LinuxDeviceType) -> u32 {
    match typ {
        LinuxDeviceType::B => libc::S_IFBLK,
        LinuxDeviceType::P => libc::S_IFIFO,
        LinuxDeviceType::C | LinuxDeviceType::U | LinuxDeviceType::A => libc::S_IFCHR,
    }
}

/// Makes each node in the rootfs `root` is open on: mknod and chown, or in
/// a user namespace a bind of the host's node.
pub fn make_nodes(sys: &dyn Syscall, root: &OwnedFd, nodes: &[Node], in_userns: bool) -> Result<(), StepFailed> {
    // The directory of the node before, kept for the next one in it: runc's
    // six default nodes all go in /dev.
    let mut open: Option<(&Path, OwnedFd)> = None;
    for node in nodes {
        let fail = |call: &'static str| move |errno: Errno| StepFailed { step: STEP_NODES, call, path: node.path.clone(), errno };
        if in_userns {
            bind_host_node(sys, root, node)?;
            continue;
        }
        let (parent, name) = split(&node.path).map_err(fail("mknodat"))?;
        let dir = match open.take() {
            Some((path, dir)) if path == parent => dir,
            _ => sys.open_dir_no_symlinks(root, parent).map_err(|e| StepFailed {
                step: STEP_NODES,
                call: e.call,
                path: e.path,
                errno: e.errno,
            })?,
        };
        sys.mknod_at(&dir, name, node.mode, libc::makedev(node.major as u32, node.minor as u32)).map_err(fail("mknodat"))?;
        sys.chown_at(&dir, name, node.uid, node.gid).map_err(fail("fchownat"))?;
        open = Some((parent, dir));
    }
    Ok(())
}

/// The host's node at the same path, bind-mounted onto an empty file.
fn bind_host_node(sys: &dyn Syscall, root: &OwnedFd, node: &Node) -> Result<(), StepFailed> {
    let fail = |call: &'static str| move |errno: Errno| StepFailed { step: STEP_NODES, call, path: node.path.clone(), errno };
    let tree = sys.open_tree(&node.path, false).map_err(|e| fail("open_tree")(errno_of(&e)))?;
    let target = sys.open_target(root, &node.path, Want::File).map_err(|e| StepFailed {
        step: STEP_NODES,
        call: e.call,
        path: e.path,
        errno: e.errno,
    })?;
    sys.move_mount(&tree, &target).map_err(fail("move_mount"))
}

/// runc's links in /dev (`core` too when `kcore`), and /dev/ptmx as a link
/// to pts/ptmx in place of what the image had there. A link that already
/// exists is kept, as runc keeps it.
pub fn make_links(sys: &dyn Syscall, root: &OwnedFd, kcore: bool) -> Result<(), StepFailed> {
    let dev = sys.open_dir_no_symlinks(root, Path::new("/dev")).map_err(|e| StepFailed {
        step: STEP_LINKS,
        call: e.call,
        path: e.path,
        errno: e.errno,
    })?;
    let core = kcore.then_some(("core", "/proc/kcore"));
    for (name, target) in LINKS.iter().copied().chain(core) {
        let path = Path::new("/dev").join(name);
        match sys.symlink_at(Path::new(target), &dev, OsStr::new(name)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(errno) => return Err(StepFailed { step: STEP_LINKS, call: "symlinkat", path, errno }),
        }
    }
    let ptmx = OsStr::new("ptmx");
    let path = PathBuf::from("/dev/ptmx");
    match sys.unlink_at(&dev, ptmx) {
        Ok(()) | Err(Errno::ENOENT) => {}
        Err(errno) => return Err(StepFailed { step: STEP_LINKS, call: "unlinkat", path, errno }),
    }
    sys.symlink_at(Path::new("pts/ptmx"), &dev, ptmx).map_err(|errno| StepFailed { step: STEP_LINKS, call: "symlinkat", path, errno })
}

/// A node's directory and name; a path with no name is refused.
fn split(path: &Path) -> Result<(&Path, &OsStr), Errno> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(Errno::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::LinuxDeviceBuilder;

    use super::*;
    use crate::sys::syscall::{Call, Recording};

    fn root() -> OwnedFd {
        std::fs::File::open("/").unwrap().into()
    }

    fn fuse() -> LinuxDevice {
        LinuxDeviceBuilder::default()
            .path("/dev/fuse")
            .typ(LinuxDeviceType::C)
            .major(10)
            .minor(229)
            .file_mode(0o600u32)
            .uid(5u32)
            .build()
            .unwrap()
    }

    #[test]
    fn the_spec_devices_come_first_then_the_defaults_they_do_not_replace_and_ptmx_is_a_link() {
        let null = LinuxDeviceBuilder::default().path("/dev/null").typ(LinuxDeviceType::C).major(1).minor(3).build().unwrap();
        let ptmx = LinuxDeviceBuilder::default().path("/dev/ptmx").typ(LinuxDeviceType::C).major(5).minor(2).build().unwrap();
        let made = nodes(&[fuse(), null, ptmx]);
        let paths: Vec<_> = made.iter().map(|n| n.path.to_str().unwrap()).collect();
        assert_eq!(paths, ["/dev/fuse", "/dev/null", "/dev/random", "/dev/full", "/dev/tty", "/dev/zero", "/dev/urandom"]);
        assert_eq!(made[0], Node { path: "/dev/fuse".into(), mode: libc::S_IFCHR | 0o600, major: 10, minor: 229, uid: 5, gid: 0 });
        assert_eq!(made[1].mode, libc::S_IFCHR | 0o666, "a mode not given is 0666");
    }

    #[test]
    fn a_node_is_made_and_owned_by_name_in_its_directory() {
        let sys = Recording::default();
        let tun = Node { path: "/dev/net/tun".into(), mode: libc::S_IFCHR | 0o666, major: 10, minor: 200, uid: 0, gid: 7 };
        make_nodes(&sys, &root(), &[tun], false).unwrap();
        assert_eq!(
            sys.calls(),
            vec![
                Call::OpenDir { path: "/dev/net".into() },
                Call::Mknod { path: "/dev/net/tun".into(), mode: libc::S_IFCHR | 0o666, dev: libc::makedev(10, 200) },
                Call::Chown { path: "/dev/net/tun".into(), uid: 0, gid: 7 },
            ]
        );
    }

    #[test]
    fn nodes_in_one_directory_share_its_descriptor() {
        let sys = Recording::default();
        let node = |path: &str| Node { path: path.into(), mode: libc::S_IFCHR | 0o666, major: 1, minor: 3, uid: 0, gid: 0 };
        make_nodes(&sys, &root(), &[node("/dev/null"), node("/dev/zero"), node("/dev/net/tun"), node("/dev/full")], false).unwrap();
        let opened: Vec<Call> = sys.calls().into_iter().filter(|c| matches!(c, Call::OpenDir { .. })).collect();
        assert_eq!(
            opened,
            vec![Call::OpenDir { path: "/dev".into() }, Call::OpenDir { path: "/dev/net".into() }, Call::OpenDir { path: "/dev".into() },]
        );
    }

    #[test]
    fn in_a_user_namespace_the_hosts_node_is_bound() {
        let sys = Recording::default().with_file_source("/dev/null");
        make_nodes(&sys, &root(), &nodes(&[])[..1], true).unwrap();
        assert_eq!(
            sys.calls(),
            vec![
                Call::OpenTree { source: "/dev/null".into(), recursive: false },
                Call::Target { path: "/dev/null".into(), want: Want::File },
                Call::Move { from: "file:/dev/null".into(), to: "/dev/null".into() },
            ]
        );
    }

    #[test]
    fn an_existing_node_or_a_symlinked_dev_fails_named() {
        let err = make_nodes(&Recording::failing("mknod_at", Errno::EEXIST), &root(), &nodes(&[]), false).unwrap_err();
        assert_eq!(err.to_string(), "creating device nodes: mknodat /dev/null: EEXIST: File exists");
        let err = make_links(&Recording::failing("open_dir_no_symlinks", Errno::ELOOP), &root(), false).unwrap_err();
        assert_eq!(err.to_string(), "creating /dev symlinks: openat2 /dev: ELOOP: Too many symbolic links encountered");
    }

    /// The kernel's answers, in a scratch rootfs: a FIFO needs no privilege.
    #[test]
    fn on_the_kernel_nodes_and_links_land_in_the_rootfs_and_a_symlinked_dev_is_refused() {
        use std::os::unix::fs::{symlink, FileTypeExt};

        use crate::sys::syscall::LinuxSyscall;

        let base = std::env::temp_dir().join(format!("rustpod-dev-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (rootfs, elsewhere) = (base.join("rootfs"), base.join("elsewhere"));
        std::fs::create_dir_all(rootfs.join("dev")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(rootfs.join("dev/ptmx"), "").unwrap();
        let root: OwnedFd = std::fs::File::open(&rootfs).unwrap().into();
        let (uid, gid) = (nix::unistd::getuid().as_raw(), nix::unistd::getgid().as_raw());
        let fifo = Node { path: "/dev/sub/fifo".into(), mode: libc::S_IFIFO | 0o640, major: 0, minor: 0, uid, gid };
        make_nodes(&LinuxSyscall, &root, std::slice::from_ref(&fifo), false).unwrap();
        make_links(&LinuxSyscall, &root, false).unwrap();
        let made = rootfs.join("dev/sub/fifo").symlink_metadata().unwrap();
        assert!(made.file_type().is_fifo());
        assert_eq!(std::fs::read_link(rootfs.join("dev/ptmx")).unwrap(), Path::new("pts/ptmx"));
        assert_eq!(std::fs::read_link(rootfs.join("dev/fd")).unwrap(), Path::new("/proc/self/fd"));
        // Again: the node is there now, and is refused.
        let err = make_nodes(&LinuxSyscall, &root, std::slice::from_ref(&fifo), false).unwrap_err();
        assert_eq!((err.call, err.errno), ("mknodat", Errno::EEXIST), "{err}");
        // /dev a symlink (even one inside the rootfs): nothing is made through it.
        std::fs::rename(rootfs.join("dev"), rootfs.join("real-dev")).unwrap();
        symlink("real-dev", rootfs.join("dev")).unwrap();
        symlink(&elsewhere, rootfs.join("real-dev/sub2")).unwrap();
        let err = make_links(&LinuxSyscall, &root, false).unwrap_err();
        assert_eq!((err.call, err.errno), ("openat2", Errno::ELOOP), "{err}");
        std::fs::remove_file(rootfs.join("dev")).unwrap();
        std::fs::rename(rootfs.join("real-dev"), rootfs.join("dev")).unwrap();
        let inner = Node { path: "/dev/sub2/fifo".into(), ..fifo };
        let err = make_nodes(&LinuxSyscall, &root, &[inner], false).unwrap_err();
        assert_eq!((err.call, err.errno), ("openat2", Errno::ELOOP), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing made outside");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn links_and_ptmx() {
        let sys = Recording::default();
        make_links(&sys, &root(), true).unwrap();
        let link = |target: &str, path: &str| Call::Symlink { target: target.into(), path: path.into() };
        assert_eq!(
            sys.calls(),
            vec![
                Call::OpenDir { path: "/dev".into() },
                link("/proc/self/fd", "/dev/fd"),
                link("/proc/self/fd/0", "/dev/stdin"),
                link("/proc/self/fd/1", "/dev/stdout"),
                link("/proc/self/fd/2", "/dev/stderr"),
                link("/proc/kcore", "/dev/core"),
                Call::Unlink { path: "/dev/ptmx".into() },
                link("pts/ptmx", "/dev/ptmx"),
            ]
        );
    }
}
