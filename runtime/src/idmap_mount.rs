//! Idmapped bind mounts (a mount's `uidMappings`/`gidMappings`, or its
//! `idmap`/`ridmap` option): libcontainer 0.7 drops the mapping and would
//! bind the source unmapped, so `create` takes these mounts out of the
//! engine's spec, makes each one here on the host side as runc does
//! (`open_tree(OPEN_TREE_CLONE)`, `mount_setattr(MOUNT_ATTR_IDMAP)` with a
//! user namespace carrying the mapping), and hands the detached mounts to
//! our createContainer step, which moves each onto its destination inside
//! the rootfs (`openat2(RESOLVE_IN_ROOT)`) before pivot_root.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use oci_spec::runtime::{LinuxIdMapping, LinuxNamespaceType, Mount, Spec};

use crate::{idmap_userns, in_root};

/// argv[0] by which our binaries recognise the createContainer step.
pub const HOOK_ARG0: &str = "rustpod-idmap";

/// Options an idmapped mount may carry: ours, the bind's, and the flags we
/// set with mount_setattr. Propagation options are applied by `rootfs_hook`.
const ATTRS: &[(&str, u64)] = &[
    ("ro", libc::MOUNT_ATTR_RDONLY),
    ("nosuid", libc::MOUNT_ATTR_NOSUID),
    ("nodev", libc::MOUNT_ATTR_NODEV),
    ("noexec", libc::MOUNT_ATTR_NOEXEC),
    ("noatime", libc::MOUNT_ATTR_NOATIME),
    ("nodiratime", libc::MOUNT_ATTR_NODIRATIME),
    ("strictatime", libc::MOUNT_ATTR_STRICTATIME),
    ("relatime", libc::MOUNT_ATTR_RELATIME),
];
const NO_OPS: &[&str] = &["bind", "rbind", "idmap", "ridmap", "rw", "suid", "dev", "exec", "atime", "diratime"];

/// One idmapped mount as planned from the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub index: usize,
    pub destination: PathBuf,
    pub source: PathBuf,
    /// `rbind`: the submounts of the source come along.
    pub rbind: bool,
    /// `ridmap`: the mapping applies to those submounts too.
    pub ridmap: bool,
    pub attrs: u64,
    pub mapping: Mapping,
}

/// Where an idmapped mount's mapping comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    Explicit { uid: Vec<LinuxIdMapping>, gid: Vec<LinuxIdMapping> },
    /// The container joins this user namespace; use it as is.
    JoinedUserns(PathBuf),
}

/// Whether `mount` asks for an idmapped mount.
pub fn is_idmapped(mount: &Mount) -> bool {
    mount.uid_mappings().is_some()
        || mount.gid_mappings().is_some()
        || mount.options().as_deref().unwrap_or_default().iter().any(|o| o == "idmap" || o == "ridmap")
}

/// The idmapped mounts of `spec` (the user's, with bind sources resolved),
/// checked as runc ≥ 1.2 checks them; each refusal is one line naming the
/// mount, the field and why.
pub fn plan(spec: &Spec) -> Result<Vec<Planned>, String> {
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    let mut planned = Vec::new();
    for (index, mount) in mounts.iter().enumerate().filter(|(_, m)| is_idmapped(m)) {
        let bad = |field: &str, why: &str| format!("mounts[{index}] ({}): {field}: {why}", mount.destination().display());
        planned.push(plan_one(spec, index, mount, &bad)?);
        check_order(mounts, index, mount).map_err(|later| bad("destination", &later))?;
    }
    if !planned.is_empty() && !nix::unistd::geteuid().is_root() {
        return Err(format!(
            "mounts[{}] ({}): idmapped mounts need CAP_SYS_ADMIN in the initial user namespace: not supported rootless",
            planned[0].index,
            planned[0].destination.display()
        ));
    }
    Ok(planned)
}

fn plan_one(spec: &Spec, index: usize, mount: &Mount, bad: &dyn Fn(&str, &str) -> String) -> Result<Planned, String> {
    if !crate::engine_bundle::is_bind(mount) {
        return Err(bad("type", "id-mapped mounts are only supported for bind mounts"));
    }
    let dest = mount.destination();
    if dest.starts_with("/proc") || dest.starts_with("/sys") {
        return Err(bad("destination", "an idmapped mount over /proc or /sys is refused"));
    }
    let source = mount.source().clone().ok_or_else(|| bad("source", "a bind mount needs a source"))?;
    if !source.is_absolute() {
        return Err(bad("source", "an idmapped mount's source must be absolute"));
    }
    let options = mount.options().as_deref().unwrap_or_default();
    let mut attrs = 0;
    for option in options {
        if let Some((_, attr)) = ATTRS.iter().find(|(name, _)| name == option) {
            attrs |= attr;
        } else if !NO_OPS.contains(&option.as_str()) && crate::mount_propagation::propagation_flags(option).is_none() {
            return Err(bad("options", &format!("{option:?} is not supported on an idmapped mount")));
        }
    }
    let has = |o: &str| options.iter().any(|x| x == o);
    Ok(Planned {
        index,
        destination: dest.clone(),
        source,
        rbind: has("rbind"),
        ridmap: has("ridmap"),
        attrs,
        mapping: mapping_of(spec, mount, bad)?,
    })
}

/// runc-spec 1.2: explicit mappings are used as given (both are needed);
/// `idmap`/`ridmap` alone take the container's user namespace's.
fn mapping_of(spec: &Spec, mount: &Mount, bad: &dyn Fn(&str, &str) -> String) -> Result<Mapping, String> {
    match (mount.uid_mappings(), mount.gid_mappings()) {
        (Some(uid), Some(gid)) => {
            check_ranges(uid).map_err(|why| bad("uidMappings", &why))?;
            check_ranges(gid).map_err(|why| bad("gidMappings", &why))?;
            Ok(Mapping::Explicit { uid: uid.clone(), gid: gid.clone() })
        }
        (Some(_), None) => Err(bad("gidMappings", "id-mapped mounts must have both uid and gid mappings specified")),
        (None, Some(_)) => Err(bad("uidMappings", "id-mapped mounts must have both uid and gid mappings specified")),
        (None, None) => container_mapping(spec).ok_or_else(|| {
            bad("options", "idmap without uidMappings/gidMappings takes the container's user namespace mappings, but the container has no user namespace")
        }),
    }
}

fn container_mapping(spec: &Spec) -> Option<Mapping> {
    let linux = spec.linux().as_ref()?;
    let userns = linux.namespaces().as_deref()?.iter().find(|n| n.typ() == LinuxNamespaceType::User)?;
    if let Some(path) = userns.path() {
        return Some(Mapping::JoinedUserns(path.clone()));
    }
    let uid = linux.uid_mappings().clone().filter(|m| !m.is_empty())?;
    let gid = linux.gid_mappings().clone().filter(|m| !m.is_empty())?;
    Some(Mapping::Explicit { uid, gid })
}

/// What the kernel would refuse with a bare EINVAL, said plainly.
fn check_ranges(ranges: &[LinuxIdMapping]) -> Result<(), String> {
    if ranges.is_empty() {
        return Err("empty: needs at least one range".into());
    }
    for (i, r) in ranges.iter().enumerate() {
        if r.size() == 0 {
            return Err(format!("[{i}]: size 0"));
        }
        let end_c = u64::from(r.container_id()) + u64::from(r.size());
        let end_h = u64::from(r.host_id()) + u64::from(r.size());
        if end_c > u64::from(u32::MAX) || end_h > u64::from(u32::MAX) {
            return Err(format!("[{i}]: range past 4294967295"));
        }
    }
    Ok(())
}

/// Our mounts go on after all of the engine's: a later mount at, above or
/// beneath this destination would be stacked in the wrong order, so refuse.
fn check_order(mounts: &[Mount], index: usize, mount: &Mount) -> Result<(), String> {
    let dest = mount.destination();
    for (later_index, later) in mounts.iter().enumerate().skip(index + 1) {
        let other = later.destination();
        if !is_idmapped(later) && (other.starts_with(dest) || dest.starts_with(other)) {
            return Err(format!(
                "mounts[{later_index}] ({}) comes later and overlaps it; list the idmapped mount after it",
                other.display()
            ));
        }
    }
    Ok(())
}

/// Takes the idmapped mounts out of the spec the engine runs, makes them,
/// and puts our step moving them in first among the createContainer hooks
/// (before `rootfs_hook`, which applies their propagation options).
pub fn install(
    spec: &mut Spec,
    bundle: &crate::engine_bundle::Bundle,
    planned: &[Planned],
    min_fd: RawFd,
) -> crate::error::Result<Installed> {
    if planned.is_empty() {
        return Ok(Installed::default());
    }
    let config_error = |reason| crate::error::Error::Config {
        path: bundle.path.join("config.json"),
        reason,
    };
    make_destinations_on_rootfs(spec, &bundle.rootfs, planned).map_err(config_error)?;
    if let Some(mounts) = spec.mounts_mut() {
        mounts.retain(|m| !is_idmapped(m));
    }
    let mounts = make_all(planned, min_fd).map_err(config_error)?;
    let (errors, errors_w) = error_pipe(min_fd).map_err(config_error)?;
    let hook = hook(&bundle.rootfs, errors_w.as_raw_fd(), &mounts);
    crate::engine_bundle::prepend_create_container(spec, hook);
    Ok(Installed { _mounts: mounts, errors: Some((errors, errors_w)) })
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
fn error_pipe(min_fd: RawFd) -> Result<(OwnedFd, OwnedFd), String> {
    let flags = nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK;
    let (read, write) = nix::unistd::pipe2(flags).map_err(|e| format!("pipe2: {e}"))?;
    let write = inheritable_above(&write, min_fd).map_err(|e| format!("fcntl(F_DUPFD): {e}"))?;
    Ok((read, write))
}

/// Makes the missing destinations that lie on the rootfs itself (under no
/// other mount of the spec) from here, as the host's root: in a user
/// namespace our hook may not write the image. The rest are made by the hook.
fn make_destinations_on_rootfs(spec: &Spec, rootfs: &Path, planned: &[Planned]) -> Result<(), String> {
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    let root = in_root::open(None, rootfs, libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| format!("open rootfs {}: {}", rootfs.display(), idmap_userns::errno_of(&e)))?;
    for p in planned {
        let covered = mounts.iter().any(|m| !is_idmapped(m) && p.destination.starts_with(m.destination()));
        if covered {
            continue;
        }
        let is_dir = std::fs::metadata(&p.source).map(|m| m.is_dir()).unwrap_or(true);
        ensure_destination(&root, &p.destination, is_dir)
            .map_err(|e| format!("mounts[{}] ({}): {e}", p.index, p.destination.display()))?;
    }
    Ok(())
}

/// A detached, mapped mount ready to be moved into the rootfs; the fd is
/// inheritable (our createContainer step runs in a child of the init).
#[derive(Debug)]
pub struct Detached {
    pub destination: PathBuf,
    pub fd: OwnedFd,
    pub is_dir: bool,
}

/// Makes every planned mount, in order; the first failure names the mount,
/// the syscall and the errno. `min_fd` keeps the fds above `--preserve-fds`.
pub fn make_all(planned: &[Planned], min_fd: RawFd) -> Result<Vec<Detached>, String> {
    planned.iter().map(|p| make(p, min_fd)).collect()
}

fn make(p: &Planned, min_fd: RawFd) -> Result<Detached, String> {
    let at = |what: String| format!("mounts[{}] ({}): {what}", p.index, p.destination.display());
    let userns = match &p.mapping {
        Mapping::Explicit { uid, gid } => idmap_userns::with_mappings(uid, gid).map_err(at)?,
        Mapping::JoinedUserns(path) => std::fs::File::open(path)
            .map(OwnedFd::from)
            .map_err(|e| at(format!("open {}: {}", path.display(), idmap_userns::errno_of(&e))))?,
    };
    let tree = open_tree(&p.source, p.rbind).map_err(|e| at(format!("open_tree({}): {e}", p.source.display())))?;
    set_attr(&tree, libc::MOUNT_ATTR_IDMAP, Some(&userns), p.ridmap)
        .map_err(|e| at(format!("mount_setattr(MOUNT_ATTR_IDMAP) of {}: {e}", p.source.display())))?;
    if p.attrs != 0 {
        set_attr(&tree, p.attrs, None, false).map_err(|e| at(format!("mount_setattr({:#x}): {e}", p.attrs)))?;
    }
    let is_dir = std::fs::metadata(&p.source).map(|m| m.is_dir()).unwrap_or(true);
    let fd = inheritable_above(&tree, min_fd).map_err(|e| at(format!("fcntl(F_DUPFD): {e}")))?;
    Ok(Detached { destination: p.destination.clone(), fd, is_dir })
}

fn open_tree(source: &Path, recursive: bool) -> Result<OwnedFd, Errno> {
    let path = std::ffi::CString::new(source.as_os_str().as_encoded_bytes()).map_err(|_| Errno::EINVAL)?;
    let mut flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC;
    if recursive {
        flags |= libc::AT_RECURSIVE as u32;
    }
    // SAFETY: a valid C string; the kernel returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: the kernel just gave us this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn set_attr(tree: &OwnedFd, attr_set: u64, userns: Option<&OwnedFd>, recursive: bool) -> Result<(), Errno> {
    let attr = libc::mount_attr {
        attr_set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.map_or(0, |u| u.as_raw_fd() as u64),
    };
    let flags = libc::AT_EMPTY_PATH | if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: a valid fd, an empty C string and a mount_attr of the size given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const libc::mount_attr,
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
fn inheritable_above(fd: &OwnedFd, min_fd: RawFd) -> Result<OwnedFd, Errno> {
    let new = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_DUPFD(min_fd))?;
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
    let tmpfs = ["/dev/shm", "/run"].into_iter().map(Path::new).find(|p| {
        nix::sys::statfs::statfs(*p).is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
    });
    let Some(tmpfs) = tmpfs else { return true };
    let probe = oci_spec::runtime::LinuxIdMappingBuilder::default().container_id(0u32).host_id(65536u32).size(1u32).build();
    let Ok(range) = probe else { return false };
    let mapped = |userns: OwnedFd| {
        let tree = open_tree(tmpfs, false).ok()?;
        set_attr(&tree, libc::MOUNT_ATTR_IDMAP, Some(&userns), false).ok()
    };
    idmap_userns::with_mappings(std::slice::from_ref(&range), std::slice::from_ref(&range))
        .ok()
        .and_then(mapped)
        .is_some()
}

/// The createContainer hook moving `mounts` into `rootfs`, in order, and
/// writing why it failed to `errors`.
pub fn hook(rootfs: &Path, errors: RawFd, mounts: &[Detached]) -> oci_spec::runtime::Hook {
    let mut args = vec![HOOK_ARG0.to_string(), rootfs.display().to_string(), errors.to_string()];
    for m in mounts {
        args.push(m.fd.as_raw_fd().to_string());
        args.push(if m.is_dir { "dir" } else { "file" }.to_string());
        args.push(m.destination.display().to_string());
    }
    crate::rootfs_hook::self_exec_hook(args)
}

/// The hook's body: `<rootfs> <error fd> (<fd> <dir|file> <destination>)…`;
/// returns the exit code. The reason of a failure goes to create through
/// the error fd (one line there), else to stderr.
pub fn main(args: Vec<OsString>) -> i32 {
    let errors: Option<RawFd> = args.get(1).and_then(|a| a.to_str()?.parse().ok());
    let rest = args.iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, a)| a.clone()).collect();
    match move_all(rest) {
        Ok(()) => 0,
        Err(err) => {
            let reported = errors.is_some_and(|fd| {
                // SAFETY: create passed this descriptor to us for this one use.
                let pipe = unsafe { OwnedFd::from_raw_fd(fd) };
                nix::unistd::write(&pipe, format!("idmapped mount: {err}").as_bytes()).is_ok()
            });
            if !reported {
                eprintln!("rustpod: idmapped mount: {err}");
            }
            1
        }
    }
}

fn move_all(args: Vec<OsString>) -> Result<(), String> {
    let (rootfs, rest) = args.split_first().ok_or("missing rootfs argument")?;
    if rest.len() % 3 != 0 {
        return Err("arguments must be fd/kind/destination triples".into());
    }
    let root = in_root::open(None, Path::new(rootfs), libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| format!("open rootfs {rootfs:?}: {}", idmap_userns::errno_of(&e)))?;
    for triple in rest.chunks(3) {
        let fd: RawFd = triple[0].to_str().and_then(|s| s.parse().ok()).ok_or("bad fd argument")?;
        // SAFETY: create passed this descriptor to us for this one use.
        let tree = unsafe { OwnedFd::from_raw_fd(fd) };
        let dest = Path::new(&triple[2]);
        let target = ensure_destination(&root, dest, triple[1] == "dir")?;
        move_mount(&tree, &target).map_err(|e| format!("move_mount onto {}: {e}", dest.display()))?;
    }
    Ok(())
}

/// Opens the destination inside the rootfs (a symlink resolves inside it,
/// never out to the host), making it and its parents when missing.
fn ensure_destination(root: &OwnedFd, dest: &Path, is_dir: bool) -> Result<OwnedFd, String> {
    match in_root::open(Some(root), dest, libc::O_PATH) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(format!("openat2({}, RESOLVE_IN_ROOT): {}", dest.display(), idmap_userns::errno_of(&e))),
    }
    let parent_path = dest.parent().ok_or_else(|| format!("{}: no parent", dest.display()))?;
    let parent = match parent_path == Path::new("/") {
        true => in_root::open(Some(root), parent_path, libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| format!("openat2(/): {}", idmap_userns::errno_of(&e)))?,
        false => ensure_destination(root, parent_path, true)?,
    };
    let name = dest.file_name().ok_or_else(|| format!("{}: no file name", dest.display()))?;
    let made = if is_dir {
        nix::sys::stat::mkdirat(Some(parent.as_raw_fd()), name, nix::sys::stat::Mode::from_bits_truncate(0o755))
    } else {
        let flags = nix::fcntl::OFlag::O_CREAT | nix::fcntl::OFlag::O_EXCL | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC;
        nix::fcntl::openat(Some(parent.as_raw_fd()), name, flags, nix::sys::stat::Mode::from_bits_truncate(0o644)).map(|fd| {
            let _ = nix::unistd::close(fd);
        })
    };
    made.map_err(|e| format!("{}({}): {e}", if is_dir { "mkdirat" } else { "openat(O_CREAT)" }, dest.display()))?;
    in_root::open(Some(root), dest, libc::O_PATH)
        .map_err(|e| format!("openat2({}, RESOLVE_IN_ROOT): {}", dest.display(), idmap_userns::errno_of(&e)))
}

fn move_mount(tree: &OwnedFd, target: &OwnedFd) -> Result<(), Errno> {
    // SAFETY: two valid fds and empty C strings.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(mounts: serde_json::Value, linux: serde_json::Value) -> Spec {
        serde_json::from_value(json!({"ociVersion": "1.2.0", "mounts": mounts, "linux": linux})).unwrap()
    }

    fn userns() -> serde_json::Value {
        json!({"namespaces": [{"type": "user"}, {"type": "mount"}],
               "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
               "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}]})
    }

    #[test]
    fn idmap_alone_takes_the_containers_mapping_and_needs_a_userns() {
        let m = json!([{"destination": "/d", "type": "bind", "source": "/tmp", "options": ["rbind", "ridmap", "ro"]}]);
        let planned = plan(&spec(m.clone(), userns())).unwrap();
        assert_eq!(planned.len(), 1);
        assert!(planned[0].rbind && planned[0].ridmap);
        assert_eq!(planned[0].attrs, libc::MOUNT_ATTR_RDONLY);
        assert!(matches!(&planned[0].mapping, Mapping::Explicit { uid, .. } if uid[0].host_id() == 100000));
        let err = plan(&spec(m, json!({"namespaces": [{"type": "mount"}]}))).unwrap_err();
        assert!(err.starts_with("mounts[0] (/d): options:") && err.contains("no user namespace"), "{err}");
    }

    #[test]
    fn refusals_name_the_mount_and_field() {
        let cases = [
            (json!({"destination": "/d", "type": "tmpfs", "source": "tmpfs", "options": ["idmap"]}), "type"),
            (json!({"destination": "/proc/x", "type": "bind", "source": "/tmp", "options": ["idmap"]}), "destination"),
            (json!({"destination": "/d", "type": "bind", "source": "/tmp", "options": ["bind"],
                    "uidMappings": [{"containerID": 0, "hostID": 1, "size": 1}]}), "gidMappings"),
            (json!({"destination": "/d", "type": "bind", "source": "/tmp", "options": ["bind", "idmap", "rro"]}), "options"),
        ];
        for (mount, field) in cases {
            let err = plan(&spec(json!([mount]), userns())).unwrap_err();
            assert!(err.starts_with(&format!("mounts[0] (/d")) || err.starts_with("mounts[0] (/proc/x)"), "{err}");
            assert!(err.contains(&format!(": {field}:")), "{field}: {err}");
        }
    }

    #[test]
    fn a_later_overlapping_mount_is_refused() {
        let m = json!([{"destination": "/d", "type": "bind", "source": "/tmp", "options": ["bind", "idmap"]},
                       {"destination": "/d/sub", "type": "tmpfs", "source": "tmpfs"}]);
        let err = plan(&spec(m, userns())).unwrap_err();
        assert!(err.contains("mounts[1] (/d/sub) comes later"), "{err}");
    }
}
