//! Idmapped mounts, the host side of `create`: each planned mount made as
//! runc does (`open_tree(OPEN_TREE_CLONE)`, `mount_setattr(MOUNT_ATTR_IDMAP)`
//! with a user namespace carrying the mapping), detached and inheritable,
//! taken out of the engine's spec and handed to our createContainer step
//! (`idmap_hook`); also whether this kernel can do it at all.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::MsFlags;
use oci_spec::runtime::Spec;

use crate::engine::idmap::hook::{ensure_destination, hook, HookError};
use crate::engine::idmap::plan::{Mapping, Planned};
use crate::engine::idmap::userns::{self as idmap_userns, UsernsError};
use crate::sys::in_root;
use crate::sys::io_errno::errno_of;

/// Why an idmapped mount could not be made: which mount, then the path,
/// the syscall and the errno.
#[derive(Debug, thiserror::Error)]
pub enum DetachedError {
    #[error("mounts[{index}] ({}): {err}", destination.display())]
    Mount { index: usize, destination: PathBuf, err: Box<DetachedError> },
    #[error("{call}: {errno}")]
    Call { call: &'static str, errno: Errno },
    #[error("open rootfs {}: {errno}", rootfs.display())]
    OpenRootfs { rootfs: PathBuf, errno: Errno },
    #[error("open {}: {errno}", path.display())]
    OpenUserns { path: PathBuf, errno: Errno },
    #[error("open_tree({}): {errno}", from.display())]
    OpenTree { from: PathBuf, errno: Errno },
    #[error("mount_setattr(MOUNT_ATTR_IDMAP) of {}: {errno}", from.display())]
    Idmap { from: PathBuf, errno: Errno },
    #[error("mount_setattr({attrs:#x}): {errno}")]
    SetAttr { attrs: u64, errno: Errno },
    #[error("mount_setattr(propagation {propagation:#x}) of {}: {errno}", from.display())]
    Propagation { from: PathBuf, propagation: u64, errno: Errno },
    #[error("open({}, O_PATH): {errno}", target.display())]
    OpenTarget { target: PathBuf, errno: Errno },
    #[error("move_mount({} to {}): {errno}", from.display(), target.display())]
    MoveMount { from: PathBuf, target: PathBuf, errno: Errno },
    #[error(transparent)]
    Userns(#[from] UsernsError),
    #[error(transparent)]
    Destination(#[from] HookError),
}

impl DetachedError {
    /// This error, said of `mounts[index]` at `destination`.
    fn of(self, index: usize, destination: &Path) -> Self {
        DetachedError::Mount { index, destination: destination.to_path_buf(), err: Box::new(self) }
    }
}

/// Takes the idmapped mounts out of the spec the engine runs, makes them,
/// and puts our step moving them in first among the createContainer hooks
/// (before `rootfs_hook`, which applies their propagation options).
pub fn install(
    spec: &mut Spec,
    bundle: &crate::engine::engine_bundle::Bundle,
    planned: &[Planned],
    min_fd: RawFd,
) -> crate::error::Result<Installed> {
    if planned.is_empty() {
        return Ok(Installed::default());
    }
    let config_error = |err: DetachedError| crate::error::Error::Config { path: bundle.path.join("config.json"), reason: err.to_string() };
    make_destinations_on_rootfs(spec, &bundle.rootfs, planned).map_err(config_error)?;
    if let Some(mounts) = spec.mounts_mut() {
        let mut index = 0;
        mounts.retain(|_| {
            index += 1;
            !planned.iter().any(|p| p.index == index - 1)
        });
    }
    let mounts = make_all(planned, receiving(&bundle.spec), min_fd, Inherit::Yes).map_err(config_error)?;
    let (errors, errors_w) = error_pipe(min_fd).map_err(config_error)?;
    let hook = hook(&bundle.rootfs, errors_w.as_raw_fd(), &mounts);
    crate::engine::engine_bundle::prepend_create_container(spec, hook);
    Ok(Installed { _mounts: mounts, errors: Some((errors, errors_w)) })
}

/// For our own rootfs steps: makes the idmapped mounts here and hands each
/// fd to `rootfs`, where the init moves it in at its place in the spec's
/// order. The mounts stay in the spec; no hook, no error pipe. Hold the
/// result until the init is cloned.
pub fn install_for_init(
    rootfs: &mut crate::engine::rootfs::prepare::Rootfs,
    bundle: &crate::engine::engine_bundle::Bundle,
    planned: &[Planned],
    min_fd: RawFd,
) -> crate::error::Result<Vec<Detached>> {
    let config_error = |err: DetachedError| crate::error::Error::Config { path: bundle.path.join("config.json"), reason: err.to_string() };
    if rootfs.in_userns {
        // The container's root may not write a root-owned image.
        make_destinations_on_rootfs(&bundle.spec, &bundle.rootfs, planned).map_err(config_error)?;
    }
    let mounts = make_all(planned, receiving(&bundle.spec), min_fd, Inherit::No).map_err(config_error)?;
    for m in &mounts {
        if !rootfs.attach_detached(m.index, m.fd.as_raw_fd()) {
            return Err(crate::error::Error::Invalid(format!(
                "mounts[{}] ({}): an idmapped mount the rootfs steps did not plan",
                m.index,
                m.destination.display()
            )));
        }
    }
    Ok(mounts)
}

/// What `install` made, held until the init has run our hook: the detached
/// mounts, and the pipe on which the hook reports why it failed.
#[derive(Debug, Default)]
pub struct Installed {
    _mounts: Vec<Detached>,
    errors: Option<(OwnedFd, OwnedFd)>,
}

impl Installed {
    /// The hook's own one-line reason in place of the engine's "failed to
    /// run hooks", when it gave one.
    pub fn explain(self, err: crate::error::Error) -> crate::error::Error {
        let Some((read, write)) = self.errors else { return err };
        drop(write);
        let mut buf = [0u8; 4096];
        match nix::unistd::read(read.as_raw_fd(), &mut buf) {
            Ok(n) if n > 0 => crate::error::Error::Invalid(String::from_utf8_lossy(&buf[..n]).trim().to_string()),
            _ => err,
        }
    }
}

/// A pipe: our non-blocking read end, and an inheritable write end at or
/// above `min_fd` for the hook.
fn error_pipe(min_fd: RawFd) -> Result<(OwnedFd, OwnedFd), DetachedError> {
    let flags = nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK;
    let (read, write) = nix::unistd::pipe2(flags).map_err(|errno| DetachedError::Call { call: "pipe2", errno })?;
    let write = inheritable_above(&write, min_fd)?;
    Ok((read, write))
}

/// Makes the missing destinations that lie on the rootfs itself (under no
/// other mount of the spec) from here, as the host's root: in a user
/// namespace our hook may not write the image. The rest are made by the hook.
fn make_destinations_on_rootfs(spec: &Spec, rootfs: &Path, planned: &[Planned]) -> Result<(), DetachedError> {
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    let root = in_root::open(None, rootfs, libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| DetachedError::OpenRootfs { rootfs: rootfs.to_path_buf(), errno: errno_of(&e) })?;
    for p in planned {
        let ours = |i: usize| planned.iter().any(|q| q.index == i);
        let covered = mounts.iter().enumerate().any(|(i, m)| !ours(i) && p.destination.starts_with(m.destination()));
        if covered {
            continue;
        }
        let is_dir = std::fs::metadata(&p.source).map(|m| m.is_dir()).unwrap_or(true);
        ensure_destination(&root, &p.destination, is_dir).map_err(|e| DetachedError::from(e).of(p.index, &p.destination))?;
    }
    Ok(())
}

/// A detached, mapped mount ready to be moved into the rootfs; for the
/// engine's route the fd is inheritable (our createContainer step runs in a
/// child of the init), for our own rootfs steps close-on-exec (the init
/// itself moves it in).
#[derive(Debug)]
pub struct Detached {
    /// Its place in the spec's `mounts`.
    pub index: usize,
    pub destination: PathBuf,
    pub fd: OwnedFd,
    pub is_dir: bool,
}

/// The propagation a detached mount gets before it leaves the host's side:
/// what the container's other mounts get from `rootfsPropagation` once
/// its mount namespace is made (slave by default; 0 for shared: left a
/// peer). A clone of a shared host mount is a peer of it, so without this
/// a mount the container makes beneath the volume would appear on the
/// host (kubelet's `/var/lib/kubelet` is rshared).
pub fn receiving(spec: &Spec) -> u64 {
    let root = spec.linux().as_ref().and_then(|l| l.rootfs_propagation().as_deref()).filter(|r| !r.is_empty());
    let flags = root.and_then(crate::engine::mount::propagation::propagation_flags).unwrap_or(MsFlags::MS_SLAVE);
    if flags.contains(MsFlags::MS_SHARED) {
        0
    } else if flags.contains(MsFlags::MS_PRIVATE) {
        libc::MS_PRIVATE
    } else {
        libc::MS_SLAVE
    }
}

/// Whether a detached mount's fd survives an exec: yes for the engine's
/// route (our createContainer step runs in a child of the init), no for
/// our own rootfs steps (the init itself moves it in; no hook and no
/// program of the container gets one).
#[derive(Clone, Copy)]
enum Inherit {
    Yes,
    No,
}

/// Makes every planned mount, in order; the first failure names the mount,
/// the syscall and the errno. `min_fd` keeps the fds above `--preserve-fds`.
fn make_all(planned: &[Planned], propagation: u64, min_fd: RawFd, inherit: Inherit) -> Result<Vec<Detached>, DetachedError> {
    planned.iter().map(|p| make(p, propagation, min_fd, inherit).map_err(|e| e.of(p.index, &p.destination))).collect()
}

fn make(p: &Planned, propagation: u64, min_fd: RawFd, inherit: Inherit) -> Result<Detached, DetachedError> {
    let userns = match &p.mapping {
        Mapping::Explicit { uid, gid } => Some(idmap_userns::with_mappings(uid, gid)?),
        Mapping::JoinedUserns(path) => Some(
            std::fs::File::open(path)
                .map(OwnedFd::from)
                .map_err(|e| DetachedError::OpenUserns { path: path.clone(), errno: errno_of(&e) })?,
        ),
        Mapping::Unmapped => None,
    };
    let tree = open_tree(&p.source, p.rbind)?;
    if let Some(userns) = &userns {
        set_idmap(&tree, &p.source, userns, 0, p.ridmap)?;
    }
    if p.attrs != 0 {
        set_attr(&tree, p.attrs, None, false).map_err(|errno| DetachedError::SetAttr { attrs: p.attrs, errno })?;
    }
    if propagation != 0 {
        set_propagation(&tree, propagation, p.rbind).map_err(|errno| DetachedError::Propagation {
            from: p.source.clone(),
            propagation,
            errno,
        })?;
    }
    let is_dir = std::fs::metadata(&p.source).map(|m| m.is_dir()).unwrap_or(true);
    let fd = match inherit {
        Inherit::Yes => inheritable_above(&tree, min_fd)?,
        Inherit::No => dup_above(&tree, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(min_fd), "fcntl(F_DUPFD_CLOEXEC)")?,
    };
    Ok(Detached { index: p.index, destination: p.destination.clone(), fd, is_dir })
}

/// mount_setattr(MOUNT_ATTR_IDMAP | `attrs`) with `userns`'s mapping on the
/// tree cloned from `source`.
fn set_idmap(tree: &OwnedFd, source: &Path, userns: &OwnedFd, attrs: u64, recursive: bool) -> Result<(), DetachedError> {
    set_attr(tree, libc::MOUNT_ATTR_IDMAP | attrs, Some(userns), recursive)
        .map_err(|errno| DetachedError::Idmap { from: source.to_path_buf(), errno })
}

/// Mounts a copy of `source` on the directory `target`, idmapped with the mapping of `userns`
/// and with the `attrs` (MOUNT_ATTR_*) set: the shim's view of containerd's rootfs layers.
pub fn mount_idmapped(source: &Path, target: &Path, userns: &OwnedFd, attrs: u64) -> Result<(), DetachedError> {
    let tree = open_tree(source, false)?;
    set_idmap(&tree, source, userns, attrs, false)?;
    let flags = nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC;
    let dir = nix::fcntl::open(target, flags, nix::sys::stat::Mode::empty())
        .map_err(|errno| DetachedError::OpenTarget { target: target.to_path_buf(), errno })?;
    // SAFETY: open just gave us this descriptor.
    let dir = unsafe { OwnedFd::from_raw_fd(dir) };
    crate::sys::mount_api::move_mount(&tree, &dir).map_err(|errno| DetachedError::MoveMount {
        from: source.to_path_buf(),
        target: target.to_path_buf(),
        errno,
    })
}

/// open_tree(OPEN_TREE_CLONE) of `source`, with its submounts when `recursive`.
fn open_tree(source: &Path, recursive: bool) -> Result<OwnedFd, DetachedError> {
    open_tree_at(source, recursive).map_err(|errno| DetachedError::OpenTree { from: source.to_path_buf(), errno })
}

fn open_tree_at(source: &Path, recursive: bool) -> Result<OwnedFd, Errno> {
    crate::sys::mount_api::open_tree_clone(source, recursive).map_err(|e| errno_of(&e))
}

fn set_attr(tree: &OwnedFd, attr_set: u64, userns: Option<&OwnedFd>, recursive: bool) -> Result<(), Errno> {
    let attr = libc::mount_attr { attr_set, attr_clr: 0, propagation: 0, userns_fd: userns.map_or(0, |u| u.as_raw_fd() as u64) };
    setattr(tree, &attr, recursive)
}

/// mount_setattr(propagation) of the detached `tree`, its submounts too when `recursive`.
fn set_propagation(tree: &OwnedFd, propagation: u64, recursive: bool) -> Result<(), Errno> {
    let attr = libc::mount_attr { attr_set: 0, attr_clr: 0, propagation, userns_fd: 0 };
    setattr(tree, &attr, recursive)
}

fn setattr(tree: &OwnedFd, attr: &libc::mount_attr, recursive: bool) -> Result<(), Errno> {
    let flags = libc::AT_EMPTY_PATH | if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: a valid fd, an empty C string and a mount_attr of the size given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            flags,
            attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

/// A copy of `fd` at `min_fd` or above, without close-on-exec.
fn inheritable_above(fd: &OwnedFd, min_fd: RawFd) -> Result<OwnedFd, DetachedError> {
    dup_above(fd, nix::fcntl::FcntlArg::F_DUPFD(min_fd), "fcntl(F_DUPFD)")
}

/// A copy of `fd` made by `dup`, F_DUPFD or F_DUPFD_CLOEXEC (`call`).
fn dup_above(fd: &OwnedFd, dup: nix::fcntl::FcntlArg, call: &'static str) -> Result<OwnedFd, DetachedError> {
    let new = nix::fcntl::fcntl(fd.as_raw_fd(), dup).map_err(|errno| DetachedError::Call { call, errno })?;
    // SAFETY: fcntl just made this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Whether this kernel can make the idmapped mounts Kubernetes asks for,
/// tmpfs ones included (6.3; Debian 12's 6.1 maps ext4 but not tmpfs): as
/// root, by idmapping a detached copy of a tmpfs mount (`/dev/shm` or
/// `/run`); else by whether mount_setattr exists (5.12).
pub fn kernel_supports() -> bool {
    // SAFETY: an invalid fd and null attr: the kernel only checks arguments.
    let rc = unsafe { libc::syscall(libc::SYS_mount_setattr, -1, c"".as_ptr(), 0, std::ptr::null::<u8>(), 0) };
    if rc != 0 && Errno::last() == Errno::ENOSYS {
        return false;
    }
    if !nix::unistd::geteuid().is_root() {
        return true;
    }
    let tmpfs = ["/dev/shm", "/run"]
        .into_iter()
        .map(Path::new)
        .find(|p| nix::sys::statfs::statfs(*p).is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC));
    let Some(tmpfs) = tmpfs else { return true };
    let probe = oci_spec::runtime::LinuxIdMappingBuilder::default().container_id(0u32).host_id(65536u32).size(1u32).build();
    let Ok(range) = probe else { return false };
    let mapped = |userns: OwnedFd| {
        let tree = open_tree_at(tmpfs, false).ok()?;
        set_attr(&tree, libc::MOUNT_ATTR_IDMAP, Some(&userns), false).ok()
    };
    idmap_userns::with_mappings(std::slice::from_ref(&range), std::slice::from_ref(&range)).ok().and_then(mapped).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_mount_is_named_then_its_call_and_errno() {
        let err = DetachedError::Idmap { from: "/src".into(), errno: Errno::EINVAL }.of(2, Path::new("/k"));
        assert_eq!(err.to_string(), "mounts[2] (/k): mount_setattr(MOUNT_ATTR_IDMAP) of /src: EINVAL: Invalid argument");
        let err = DetachedError::SetAttr { attrs: libc::MOUNT_ATTR_RDONLY, errno: Errno::EPERM };
        assert_eq!(err.to_string(), "mount_setattr(0x1): EPERM: Operation not permitted");
    }

    #[test]
    fn a_detached_mount_receives_as_the_containers_other_mounts_do() {
        let spec = |root: serde_json::Value| -> Spec {
            serde_json::from_value(serde_json::json!({"ociVersion": "1.2.0", "linux": root})).unwrap()
        };
        assert_eq!(receiving(&spec(serde_json::json!({}))), libc::MS_SLAVE, "runc's default root is rslave");
        for (root, want) in [("rslave", libc::MS_SLAVE), ("private", libc::MS_PRIVATE), ("rshared", 0), ("runbindable", libc::MS_SLAVE)] {
            assert_eq!(receiving(&spec(serde_json::json!({"rootfsPropagation": root}))), want, "{root}");
        }
    }

    #[test]
    fn a_missing_source_names_open_tree_and_enoent() {
        let err = open_tree(Path::new("/nonexistent/rustpod-idmap-source"), false).unwrap_err();
        assert!(matches!(err, DetachedError::OpenTree { errno: Errno::ENOENT, .. }), "{err}");
        assert_eq!(err.to_string(), "open_tree(/nonexistent/rustpod-idmap-source): ENOENT: No such file or directory");
    }
}
