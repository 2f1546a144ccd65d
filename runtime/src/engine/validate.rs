//! Checks of config.json that the engine does late (in the init, with an
//! error that names nothing) or not at all (a `cgroupsPath` with `..`
//! escapes the cgroup root). Each error names the field.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Component, Path};

use oci_spec::runtime::{Hook, LinuxNamespaceType, Process, Spec, User};

use crate::error::{Error, Result};

/// Every check below, for the config at `config` (used in the messages).
pub fn check(config: &Path, spec: &Spec) -> Result<()> {
    let bad = |reason: String| Error::Config { path: config.to_path_buf(), reason };
    root_path(spec).map_err(bad)?;
    hooks(spec).map_err(bad)?;
    crate::engine::spec_support::check_mounts(spec).map_err(|e| bad(e.to_string()))?;
    if let Some(process) = spec.process() {
        check_process(process).map_err(|reason| bad(format!("process.{reason}")))?;
    }
    let Some(linux) = spec.linux() else {
        return Ok(());
    };
    cgroups_path(linux).map_err(bad)?;
    duplicate_namespaces(linux).map_err(bad)?;
    if let Some(process) = spec.process() {
        user_mapped(linux, process.user()).map_err(bad)?;
    }
    mount_ids_mapped(linux, spec.mounts().as_deref().unwrap_or_default()).map_err(bad)?;
    namespaces(linux).map_err(bad)?;
    mount_namespace(linux).map_err(bad)?;
    joined_mount_with_new_user(linux).map_err(bad)?;
    time_offsets(linux).map_err(bad)?;
    devices(linux).map_err(bad)?;
    intel_rdt(linux).map_err(bad)?;
    seccomp_flags(linux).map_err(bad)?;
    seccomp_listener(linux).map_err(bad)?;
    net_devices(linux).map_err(bad)?;
    seccomp_archs(linux).map_err(bad)?;
    memory(linux).map_err(bad)?;
    mount_label(linux).map_err(bad)?;
    hugepage_limits(linux).map_err(bad)?;
    pids(linux).map_err(bad)
}

/// The checks that look into the rootfs (at `rootfs`): where each mount
/// would land once the image's symlinks are followed, and the device nodes
/// the engine would make in the image's own /dev.
pub fn check_in_rootfs(config: &Path, spec: &Spec, rootfs: &Path) -> Result<()> {
    let bad = |reason: String| Error::Config { path: config.to_path_buf(), reason };
    proc_mounts(spec, rootfs).map_err(bad)?;
    crate::engine::mount::dev_nodes::check(spec, rootfs).map_err(|e| bad(e.to_string()))
}

/// The checks of a process an exec runs (`--process FILE`, or argv with
/// `--user`, `--additional-gids`, `--env`, `--cwd`), as for the config's.
pub fn exec_process(process: &Process) -> Result<()> {
    check_process(process).map_err(|reason| Error::Invalid(format!("process.{reason}")))
}

/// A process's user, env and cwd; the error starts with the field (below
/// `process.`) and ends with runc's words.
pub fn check_process(process: &Process) -> Check {
    check_user(process.user())?;
    env(process.env().as_deref().unwrap_or_default())?;
    cwd(process.cwd())
}

/// Id -1 (4294967295) is `setresuid(2)`'s "leave it unchanged": given it, a
/// process would stay root. The kernel refuses it to setuid, setgid and
/// setgroups (EINVAL: no id maps to it), where runc >= 1.2 fails in the words
/// below; every other id goes to the kernel as it is, as in runc >= 1.2 (runc
/// 1.1 refused all above 2147483647).
pub const UNCHANGED_ID: u32 = u32::MAX;

/// uid, gid and additional gids are not the "unchanged" id -1; checked in
/// the order runc's init calls setgroups, setgid and setuid.
pub fn check_user(user: &User) -> Check {
    let id = UNCHANGED_ID;
    let gids = user.additional_gids().as_deref().unwrap_or_default();
    if let Some(index) = gids.iter().position(|gid| *gid == id) {
        return Err(format!("user.additionalGids[{index}] {id}: setgroups: invalid argument (EINVAL: gid {id} is unmapped)"));
    }
    if user.gid() == id {
        return Err(format!("user.gid {id}: setgid: EINVAL: cannot setgid to unmapped gid {id} in user namespace"));
    }
    if user.uid() == id {
        return Err(format!("user.uid {id}: setuid: EINVAL: cannot setuid to unmapped uid {id} in user namespace"));
    }
    Ok(())
}

/// Every entry is `NAME=value` with a non-empty name (runc's init refuses
/// the others; the engine would pass them on to execve as they are).
fn env(env: &[String]) -> Check {
    for (index, entry) in env.iter().enumerate() {
        let field = format!("env[{index}]");
        match entry.split_once('=') {
            None => return Err(format!("{field} {entry:?}: invalid environment variable: missing '='")),
            Some(("", _)) => return Err(format!("{field} {entry:?}: invalid environment variable: name cannot be empty")),
            Some(_) => {}
        }
    }
    Ok(())
}

fn cwd(cwd: &Path) -> Check {
    if cwd.is_relative() {
        return Err(format!("cwd {}: Cwd must be an absolute path", cwd.display()));
    }
    Ok(())
}

type Check = std::result::Result<(), String>;

/// A relative `root.path` must stay inside the bundle (`../../..` would
/// make the host's `/` the rootfs).
fn root_path(spec: &Spec) -> Check {
    let Some(root) = spec.root() else { return Ok(()) };
    let path = root.path();
    if path.is_relative() && escapes(path) {
        return Err(format!("root.path {}: escapes the bundle directory", path.display()));
    }
    Ok(())
}

/// `path`, read lexically, climbs above where it starts.
fn escapes(path: &Path) -> bool {
    let mut depth: i64 = 0;
    for component in path.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// `..` in `cgroupsPath` would put the container's cgroup outside the
/// cgroup root (`/sys/fs/cgroup/<controller>/../../x`).
fn cgroups_path(linux: &oci_spec::runtime::Linux) -> Check {
    let Some(path) = linux.cgroups_path() else { return Ok(()) };
    let text = path.to_string_lossy();
    if text.split(['/', ':']).any(|part| part == "..") {
        return Err(format!("linux.cgroupsPath {text:?}: must not contain \"..\""));
    }
    Ok(())
}

/// One entry per namespace type, as runc ("duplicated ns"); the engine
/// would silently use one of them.
fn duplicate_namespaces(linux: &oci_spec::runtime::Linux) -> Check {
    let namespaces = linux.namespaces().as_deref().unwrap_or_default();
    for (index, ns) in namespaces.iter().enumerate() {
        if namespaces[..index].iter().any(|earlier| earlier.typ() == ns.typ()) {
            // The spec's name ("mount", "network"), quoted.
            let typ = serde_json::to_string(&ns.typ()).unwrap_or_default();
            return Err(format!("linux.namespaces[{index}]: malformed spec file: duplicated ns {typ}"));
        }
    }
    Ok(())
}

/// Device nodes are made under /dev (the engine makes them nowhere else,
/// and fails with a bare "failed to prepare rootfs"); `..` would be clamped
/// to some other place in the rootfs, so it is refused.
fn devices(linux: &oci_spec::runtime::Linux) -> Check {
    for (index, device) in linux.devices().iter().flatten().enumerate() {
        let path = device.path();
        let field = format!("linux.devices[{index}].path {}", path.display());
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(format!("{field}: must not contain \"..\""));
        }
        if !path.starts_with("/dev") || path == Path::new("/dev") {
            return Err(format!("{field}: must be below /dev"));
        }
    }
    Ok(())
}

/// A namespace `path` must be a namespace file of the declared type;
/// otherwise the init's setns fails with a bare EINVAL or ENOENT.
/// In a user namespace with mappings, container id 0 and the process's uid and gid must be
/// mapped, as runc checks (else the init fails with a bare EINVAL, "intermediate process
/// error"): a pod whose userns_options leave container id 0 unmapped gets here (containerd 2.1
/// passes it on). runc's words.
fn user_mapped(linux: &oci_spec::runtime::Linux, user: &User) -> Check {
    let userns = linux.namespaces().iter().flatten().any(|n| n.typ() == LinuxNamespaceType::User);
    if !userns {
        return Ok(());
    }
    let gids = [0, user.gid()].into_iter().chain(user.additional_gids().iter().flatten().copied());
    let checks: [(&str, Vec<u32>, &str, _); 2] = [
        ("uid", vec![0, user.uid()], "linux.uidMappings", linux.uid_mappings()),
        ("gid", gids.collect(), "linux.gidMappings", linux.gid_mappings()),
    ];
    for (kind, ids, field, maps) in checks {
        let Some(maps) = maps.as_deref().filter(|m| !m.is_empty()) else { continue };
        if let Some(id) = ids.into_iter().find(|id| !is_mapped(*id, maps)) {
            return Err(format!("{field}: user namespaces enabled, but no mapping found for {kind} {id}"));
        }
    }
    Ok(())
}

fn is_mapped(id: u32, maps: &[oci_spec::runtime::LinuxIdMapping]) -> bool {
    maps.iter().any(|m| id >= m.container_id() && u64::from(id) < u64::from(m.container_id()) + u64::from(m.size()))
}

/// A mount's `uid=`/`gid=` option in a new user namespace must name a
/// mapped id: the kernel refuses an unmapped one with a bare EINVAL.
fn mount_ids_mapped(linux: &oci_spec::runtime::Linux, mounts: &[oci_spec::runtime::Mount]) -> Check {
    let new_userns = linux.namespaces().iter().flatten().any(|n| n.typ() == LinuxNamespaceType::User && n.path().is_none());
    if !new_userns {
        return Ok(());
    }
    for (index, mount) in mounts.iter().enumerate() {
        for option in mount.options().iter().flatten() {
            let (field, maps) = match option.split_once('=') {
                Some(("uid", _)) => ("linux.uidMappings", linux.uid_mappings()),
                Some(("gid", _)) => ("linux.gidMappings", linux.gid_mappings()),
                _ => continue,
            };
            let Some(maps) = maps.as_deref().filter(|m| !m.is_empty()) else { continue };
            let value = &option[4..];
            let mapped = value.parse::<u32>().is_ok_and(|id| is_mapped(id, maps));
            if !mapped {
                return Err(format!("mounts[{index}].options {option:?}: not an id {field} maps"));
            }
        }
    }
    Ok(())
}

fn namespaces(linux: &oci_spec::runtime::Linux) -> Check {
    for (index, ns) in linux.namespaces().iter().flatten().enumerate() {
        let Some(path) = ns.path() else { continue };
        let field = format!("linux.namespaces[{index}].path {}", path.display());
        namespace_file(path, ns.typ()).map_err(|reason| format!("{field}: {reason}"))?;
    }
    Ok(())
}

/// No mount namespace: the rootfs's mounts (/proc, /dev, the spec's, the
/// rootfs's own bind) would be made in the host's mount namespace and
/// outlive the container, as runc's do (it refuses only masked or
/// read-only paths there, which every client's spec has). Refused before
/// anything is made.
fn mount_namespace(linux: &oci_spec::runtime::Linux) -> Check {
    match linux.namespaces().iter().flatten().any(|ns| ns.typ() == LinuxNamespaceType::Mount) {
        true => Ok(()),
        false => Err("linux.namespaces: no mount namespace: the rootfs's mounts would be made in the host's mount namespace and \
left there after the container; add {\"type\": \"mount\"}"
            .into()),
    }
}

/// A mount namespace joined by path with a new user namespace: the init is
/// root only in its new user namespace, which cannot own the joined one,
/// so its mounts and pivot_root there would fail EPERM (runc's do). Refused
/// before anything is made.
fn joined_mount_with_new_user(linux: &oci_spec::runtime::Linux) -> Check {
    let listed = |typ| linux.namespaces().iter().flatten().find(|ns| ns.typ() == typ);
    match (listed(LinuxNamespaceType::User).map(|ns| ns.path().is_none()), listed(LinuxNamespaceType::Mount).and_then(|ns| ns.path().as_deref())) {
        (Some(true), Some(path)) => Err(format!(
            "linux.namespaces: the mount namespace {} is joined by path, and a new user namespace holds no capability over it: mount(2) there would fail EPERM",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// `linux.timeOffsets` go into a new time namespace: refused without one
/// (runc's words), for one joined by path (its offsets were fixed when its
/// first process entered), and for a clock the kernel does not offset.
fn time_offsets(linux: &oci_spec::runtime::Linux) -> Check {
    let Some(offsets) = linux.time_offsets().as_ref() else { return Ok(()) };
    let time = linux.namespaces().iter().flatten().find(|ns| ns.typ() == LinuxNamespaceType::Time);
    match time.map(|ns| ns.path().as_deref()) {
        None => return Err("linux.timeOffsets: time namespace offsets specified, but time namespace isn't enabled in the config".into()),
        Some(Some(path)) => {
            return Err(format!("linux.timeOffsets: the time namespace {} is joined, and its offsets are fixed", path.display()))
        }
        Some(None) => {}
    }
    crate::engine::process::time_ns::offset_lines(offsets).map(drop).map_err(|e| e.to_string())
}

const NSFS_MAGIC: i64 = 0x6e73_6673;
/// `NS_GET_NSTYPE`: `_IO(0xb7, 0x3)`.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
const CLONE_NEWTIME: i32 = 0x80;

fn namespace_file(path: &Path, typ: LinuxNamespaceType) -> Check {
    // statfs does not open the file, so a FIFO here cannot block us.
    let fs = nix::sys::statfs::statfs(path).map_err(|e| e.desc().to_string())?;
    if fs.filesystem_type().0 as i64 != NSFS_MAGIC {
        return Err("not a namespace file".into());
    }
    let file = File::open(path).map_err(|e| e.to_string())?;
    // SAFETY: NS_GET_NSTYPE takes no argument and only reads the fd.
    let kind = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE) };
    let wanted = match typ {
        LinuxNamespaceType::Mount => libc::CLONE_NEWNS,
        LinuxNamespaceType::Cgroup => libc::CLONE_NEWCGROUP,
        LinuxNamespaceType::Uts => libc::CLONE_NEWUTS,
        LinuxNamespaceType::Ipc => libc::CLONE_NEWIPC,
        LinuxNamespaceType::User => libc::CLONE_NEWUSER,
        LinuxNamespaceType::Pid => libc::CLONE_NEWPID,
        LinuxNamespaceType::Network => libc::CLONE_NEWNET,
        LinuxNamespaceType::Time => CLONE_NEWTIME,
    };
    if kind >= 0 && kind != wanted {
        return Err(format!("not a {typ:?} namespace"));
    }
    Ok(())
}

/// `linux.intelRdt` is never applied: the engine sets up resctrl groups only
/// in its own builder, which we do not use. Refused rather than ignored, in
/// runc ≥ 1.2's words where the host has no resctrl.
fn intel_rdt(linux: &oci_spec::runtime::Linux) -> Check {
    if linux.intel_rdt().is_none() {
        return Ok(());
    }
    if !resctrl_mounted() {
        return Err("linux.intelRdt: intelRdt is specified in config, but Intel RDT is not supported or enabled".into());
    }
    Err("linux.intelRdt: not supported by rustpod (it makes no resctrl group); remove it".into())
}

/// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV needs libseccomp ≥ 2.6; the one
/// this build links (Debian 12's 2.5.4) fails it in the init, where the
/// error names no field.
fn seccomp_flags(linux: &oci_spec::runtime::Linux) -> Check {
    use oci_spec::runtime::LinuxSeccompFilterFlag::SeccompFilterFlagWaitKillableRecv;
    let flags = linux.seccomp().as_ref().and_then(|s| s.flags().clone()).unwrap_or_default();
    if let Some(index) = flags.iter().position(|f| *f == SeccompFilterFlagWaitKillableRecv) {
        return Err(format!(
            "linux.seccomp.flags[{index}] SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: not supported by the libseccomp rustpod is built with (needs 2.6)"
        ));
    }
    Ok(())
}

/// A notify action's fd goes to the listener: without one, the init would
/// load the filter and only then fail, so it is refused before anything
/// is made.
fn seccomp_listener(linux: &oci_spec::runtime::Linux) -> Check {
    let Some(seccomp) = linux.seccomp() else { return Ok(()) };
    let listener = seccomp.listener_path().as_deref().filter(|p| !p.as_os_str().is_empty());
    if libcontainer::seccomp::is_notify(seccomp) && listener.is_none() {
        return Err("linux.seccomp.listenerPath: an SCMP_ACT_NOTIFY action needs a listener to send the filter's fd to".into());
    }
    Ok(())
}

/// `linux.netDevices`, before anything is made: the container has a
/// network namespace to move them into, each is a link of ours, and each
/// new name is one the kernel takes (`dev_valid_name`).
fn net_devices(linux: &oci_spec::runtime::Linux) -> Check {
    let Some(devices) = linux.net_devices().as_ref().filter(|d| !d.is_empty()) else { return Ok(()) };
    if !linux.namespaces().iter().flatten().any(|ns| ns.typ() == LinuxNamespaceType::Network) {
        return Err("linux.netDevices: unable to move network devices without a private NET namespace".into());
    }
    let mut names: Vec<_> = devices.iter().collect();
    names.sort_by(|a, b| a.0.cmp(b.0));
    for (name, device) in names {
        let index = std::ffi::CString::new(name.as_str())
            // SAFETY: a NUL-terminated name; if_nametoindex only reads it.
            .map(|c| unsafe { libc::if_nametoindex(c.as_ptr()) })
            .unwrap_or(0);
        if index == 0 {
            return Err(format!("linux.netDevices[{name:?}]: if_nametoindex: {}", nix::errno::Errno::last()));
        }
        let new = device.name().as_deref().filter(|n| !n.is_empty()).unwrap_or(name);
        if !is_link_name(new) {
            return Err(format!(
                "linux.netDevices[{name:?}].name {new:?}: not a name the kernel gives a link (1 to 15 bytes, not . or .., no '/', ':' or white space)"
            ));
        }
    }
    Ok(())
}

/// The kernel's `dev_valid_name`.
fn is_link_name(name: &str) -> bool {
    !name.is_empty() && name.len() < 16 && name != "." && name != ".." && !name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace())
}

/// Only the architectures `features` lists: libseccomp fails the others
/// (another byte order than the native one, or too new for 2.5) in the init
/// with "failed to add arch to seccomp", naming none.
fn seccomp_archs(linux: &oci_spec::runtime::Linux) -> Check {
    let archs = linux.seccomp().as_ref().and_then(|s| s.architectures().clone()).unwrap_or_default();
    for (index, arch) in archs.iter().enumerate() {
        let name = serde_json::to_value(arch).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        // The native architecture is in every filter anyway.
        if name != "SCMP_ARCH_NATIVE" && !crate::engine::seccomp::SECCOMP_ARCHS.contains(&name.as_str()) {
            return Err(format!(
                "linux.seccomp.architectures[{index}] {name}: a seccomp filter here cannot hold it (features lists those it can)"
            ));
        }
    }
    Ok(())
}

/// A resctrl filesystem is mounted on this host (runc's test for RDT).
fn resctrl_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|text| text.lines().any(|line| line.split(" - ").nth(1).is_some_and(|fs| fs.starts_with("resctrl "))))
}

/// The files under /proc that runc ≥ 1.2 lets a mount cover (lxcfs emulates
/// them); every other place inside /proc is refused.
pub(crate) const PROC_FILES_LXCFS_EMULATES: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/diskstats",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/swaps",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/slabinfo",
    "/proc/net/dev",
    "/proc/sys/kernel/ns_last_pid",
    "/proc/sys/crypto/fips_enabled",
];

/// runc ≥ 1.2's checkProcMount: no mount inside /proc (a container that can
/// write through one over /proc/sys or /proc/sysrq-trigger changes the
/// host, CVE-2025-52565's class) but the files lxcfs emulates, and on /proc
/// itself only a procfs. Judged where the mount would land: the destination
/// with the symlinks followed inside the rootfs, through the image and what
/// the mounts before it show (a bind's source).
fn proc_mounts(spec: &Spec, rootfs: &Path) -> Check {
    let mut layers = Vec::new();
    for (index, mount) in spec.mounts().iter().flatten().enumerate() {
        let dest = mount.destination();
        let field = format!("mounts[{index}].destination {}", dest.display());
        let landing = crate::engine::mount::rootfs_path::resolve(rootfs, &layers, dest).map_err(|e| format!("{field}: {e}"))?;
        let source = crate::engine::engine_bundle::is_bind(mount).then(|| mount.source().clone()).flatten();
        layers.push(crate::engine::mount::rootfs_path::Layer { at: landing.clone(), source });
        let Err(why) = proc_mount(mount, &landing) else { continue };
        let via = if landing != crate::engine::mount::rootfs_path::lexical(dest) {
            format!(" (symlinks on the way lead it to {})", landing.display())
        } else {
            String::new()
        };
        let host = crate::engine::mount::rootfs_path::on_host(rootfs, &landing);
        return Err(format!("{field}{via}: {:?} cannot be mounted because {why}", host.display().to_string()));
    }
    Ok(())
}

/// Why `mount` may not land at `landing` (absolute, resolved), if it may not.
fn proc_mount(mount: &oci_spec::runtime::Mount, landing: &Path) -> Check {
    let Ok(inside) = landing.strip_prefix("/proc") else { return Ok(()) };
    if inside.as_os_str().is_empty() {
        return if is_procfs(mount)? { Ok(()) } else { Err("it is not of type proc".into()) };
    }
    if PROC_FILES_LXCFS_EMULATES.iter().any(|file| Path::new(file) == landing) {
        return Ok(());
    }
    Err("it is inside /proc".into())
}

/// A fresh procfs, or a bind of a path on a procfs.
fn is_procfs(mount: &oci_spec::runtime::Mount) -> std::result::Result<bool, String> {
    if !crate::engine::engine_bundle::is_bind(mount) {
        return Ok(mount.typ().as_deref() == Some("proc"));
    }
    let Some(source) = mount.source() else { return Ok(false) };
    let fs = nix::sys::statfs::statfs(source).map_err(|e| format!("statfs {}: {e}", source.display()))?;
    Ok(fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
}

/// `linux.mountLabel` labels the container's new filesystems through
/// SELinux's `context=` option. Without SELinux no filesystem takes that
/// option: runc's mounts then fail with EINVAL, and the engine's with no
/// errno or path ("failed to mount path as masked"). Refused here instead,
/// before anything exists, naming why.
fn mount_label(linux: &oci_spec::runtime::Linux) -> Check {
    let Some(label) = linux.mount_label().as_deref().filter(|l| !l.is_empty()) else { return Ok(()) };
    const SELINUXFS: &str = "/sys/fs/selinux";
    // SELINUX_MAGIC, which nix does not name.
    const SELINUX_MAGIC: libc::c_long = 0xf97c_ff8c;
    let unlabelled = |why: String| Err(format!("linux.mountLabel {label:?}: SELinux is not enabled on this host: {why}"));
    match nix::sys::statfs::statfs(SELINUXFS) {
        Ok(fs) if fs.filesystem_type().0 as libc::c_long == SELINUX_MAGIC => Ok(()),
        Ok(_) => unlabelled(format!("{SELINUXFS} is no selinuxfs")),
        Err(errno) => unlabelled(format!("statfs {SELINUXFS}: {errno}")),
    }
}

/// Memory limits are byte counts, or -1 for unlimited; the kernel rejects
/// other negative values only when the engine writes them, mid-create.
fn memory(linux: &oci_spec::runtime::Linux) -> Check {
    let Some(memory) = linux.resources().as_ref().and_then(|r| *r.memory()) else {
        return Ok(());
    };
    let fields = [("limit", memory.limit()), ("reservation", memory.reservation()), ("swap", memory.swap())];
    for (name, value) in fields {
        if let Some(v) = value.filter(|v| *v < -1) {
            return Err(format!("linux.resources.memory.{name} {v}: must be -1 (unlimited) or a byte count"));
        }
    }
    match memory.swappiness() {
        Some(s) if s > 100 => Err(format!("linux.resources.memory.swappiness {s}: invalid memory swappiness value (valid range is 0-100)")),
        _ => Ok(()),
    }
}

/// A hugetlb page size names the kernel's files: a power of two and a
/// unit (`2MB`, `1GB`); anything else would fail mid-create on ENOENT.
fn hugepage_limits(linux: &oci_spec::runtime::Linux) -> Check {
    let limits = linux.resources().as_ref().and_then(|r| r.hugepage_limits().clone()).unwrap_or_default();
    for (i, limit) in limits.iter().enumerate() {
        let size = limit.page_size();
        let digits: String = size.chars().take_while(char::is_ascii_digit).collect();
        let unit = &size[digits.len()..];
        let power_of_two = digits.parse::<u64>().is_ok_and(u64::is_power_of_two);
        if !power_of_two || !["KB", "MB", "GB"].contains(&unit) {
            return Err(format!("linux.resources.hugepageLimits[{i}].pageSize {size:?}: want a power of two and KB, MB or GB, as 2MB"));
        }
    }
    Ok(())
}

/// A pids limit is a count, 0 (pids.max 1, see `pids_zero`) or -1 for
/// unlimited. runc 1.1 wrote `max` for any negative limit; runc 1.3 writes
/// the number and fails mid-create on the kernel's EINVAL: refused here, in
/// one line, before anything exists.
fn pids(linux: &oci_spec::runtime::Linux) -> Check {
    let limit = linux.resources().as_ref().and_then(|r| *r.pids()).map(|p| p.limit());
    match limit.filter(|l| *l < -1) {
        Some(l) => Err(format!("linux.resources.pids.limit {l}: must be -1 (unlimited), 0 or a count")),
        None => Ok(()),
    }
}

/// Hook paths must be absolute (spec); those run during create in the
/// runtime's namespaces must exist, or create would fail in a hook wrapper
/// whose error names no field.
fn hooks(spec: &Spec) -> Check {
    let Some(hooks) = spec.hooks() else { return Ok(()) };
    let lists: [(&str, &Option<Vec<Hook>>, bool); 6] = [
        ("prestart", hooks.prestart(), true),
        ("createRuntime", hooks.create_runtime(), true),
        ("createContainer", hooks.create_container(), true),
        ("startContainer", hooks.start_container(), false),
        ("poststart", hooks.poststart(), false),
        ("poststop", hooks.poststop(), false),
    ];
    for (kind, list, on_host_at_create) in lists {
        for (index, hook) in list.iter().flatten().enumerate() {
            let path = hook.path();
            let field = format!("hooks.{kind}[{index}].path {}", path.display());
            if !path.is_absolute() {
                return Err(format!("{field}: must be an absolute path"));
            }
            if on_host_at_create {
                std::fs::metadata(path).map_err(|e| format!("{field}: {e}"))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(dest: &str, typ: &str, source: &str) -> oci_spec::runtime::Mount {
        serde_json::from_value(serde_json::json!({"destination": dest, "type": typ, "source": source})).unwrap()
    }

    #[test]
    fn only_lxcfs_files_and_a_procfs_may_go_on_proc() {
        let inside = |dest: &str, typ: &str, source: &str| proc_mount(&mount(dest, typ, source), Path::new(dest));
        for dest in ["/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/proc/sys", "/proc/self"] {
            assert_eq!(inside(dest, "bind", "/etc/hostname"), Err("it is inside /proc".into()), "{dest}");
        }
        for dest in ["/proc/cpuinfo", "/proc/meminfo", "/proc/loadavg", "/proc/net/dev", "/procfs", "/etc/proc"] {
            assert_eq!(inside(dest, "bind", "/etc/hostname"), Ok(()), "{dest}");
        }
        assert_eq!(inside("/proc", "proc", "proc"), Ok(()));
        assert_eq!(inside("/proc", "bind", "/proc"), Ok(()));
        assert_eq!(inside("/proc", "tmpfs", "tmpfs"), Err("it is not of type proc".into()));
        assert_eq!(inside("/proc", "bind", "/etc"), Err("it is not of type proc".into()));
    }

    #[test]
    fn relative_paths_that_climb_out_escape() {
        assert!(escapes(Path::new("../../..")));
        assert!(escapes(Path::new("rootfs/../../x")));
        assert!(!escapes(Path::new("rootfs/../rootfs2")));
        assert!(!escapes(Path::new("rootfs")));
    }

    fn user(uid: u32, gid: u32, additional: &[u32]) -> User {
        let mut user = User::default();
        user.set_uid(uid);
        user.set_gid(gid);
        user.set_additional_gids(Some(additional.to_vec()));
        user
    }

    #[test]
    fn only_the_unchanged_id_is_refused() {
        let top = UNCHANGED_ID - 1;
        assert!(check_user(&user(top, top, &[top, 2147483648])).is_ok());
        let cases = [
            (user(u32::MAX, 0, &[]), "cannot setuid to unmapped uid 4294967295"),
            (user(0, u32::MAX, &[]), "cannot setgid to unmapped gid 4294967295"),
            (user(0, 0, &[5, u32::MAX]), "additionalGids[1] 4294967295: setgroups: invalid argument"),
        ];
        for (bad, words) in cases {
            let err = check_user(&bad).unwrap_err();
            assert!(err.contains(words), "{err}");
        }
    }

    #[test]
    fn a_user_namespace_must_map_the_process_ids() {
        let linux = |first: u32| -> oci_spec::runtime::Linux {
            serde_json::from_value(serde_json::json!({
                "namespaces": [{"type": "user"}],
                "uidMappings": [{"containerID": first, "hostID": 100000, "size": 65536}],
                "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}]}))
            .unwrap()
        };
        assert!(user_mapped(&linux(0), &user(0, 0, &[])).is_ok());
        let err = user_mapped(&linux(1), &user(1, 0, &[])).unwrap_err();
        assert_eq!(err, "linux.uidMappings: user namespaces enabled, but no mapping found for uid 0");
        assert!(user_mapped(&linux(0), &user(0, 65536, &[])).unwrap_err().ends_with("no mapping found for gid 65536"));
        let no_userns: oci_spec::runtime::Linux = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(user_mapped(&no_userns, &user(5, 5, &[])).is_ok());
        assert!(user_mapped(&linux(0), &user(0, 0, &[70000])).unwrap_err().ends_with("no mapping found for gid 70000"));
        let tmpfs = |option: &str| -> Vec<oci_spec::runtime::Mount> {
            serde_json::from_value(serde_json::json!([{"destination": "/t", "type": "tmpfs", "source": "tmpfs", "options": [option]}]))
                .unwrap()
        };
        assert_eq!(mount_ids_mapped(&linux(0), &tmpfs("gid=5")), Ok(()));
        let err = mount_ids_mapped(&linux(0), &tmpfs("uid=70000")).unwrap_err();
        assert_eq!(err, "mounts[0].options \"uid=70000\": not an id linux.uidMappings maps");
    }

    #[test]
    fn swappiness_and_hugepage_sizes_are_checked_before_anything_exists() {
        let linux = |resources: serde_json::Value| -> oci_spec::runtime::Linux {
            serde_json::from_value(serde_json::json!({"resources": resources})).unwrap()
        };
        assert!(memory(&linux(serde_json::json!({"memory": {"swappiness": 100}}))).is_ok());
        let err = memory(&linux(serde_json::json!({"memory": {"swappiness": 101}}))).unwrap_err();
        assert!(err.starts_with("linux.resources.memory.swappiness 101"), "{err}");
        for ok in ["2MB", "1GB", "64KB"] {
            assert!(hugepage_limits(&linux(serde_json::json!({"hugepageLimits": [{"pageSize": ok, "limit": 1}]}))).is_ok());
        }
        for bad in ["3MB", "MB", "2", "2TB"] {
            let err = hugepage_limits(&linux(serde_json::json!({"hugepageLimits": [{"pageSize": bad, "limit": 1}]}))).unwrap_err();
            assert!(err.starts_with("linux.resources.hugepageLimits[0].pageSize"), "{err}");
        }
    }

    #[test]
    fn a_joined_mount_namespace_is_refused_with_a_new_user_namespace_only() {
        let linux = |namespaces: serde_json::Value| -> oci_spec::runtime::Linux {
            serde_json::from_value(serde_json::json!({"namespaces": namespaces})).unwrap()
        };
        let mnt = serde_json::json!({"type": "mount", "path": "/proc/1/ns/mnt"});
        let refused = joined_mount_with_new_user(&linux(serde_json::json!([{"type": "user"}, mnt]))).unwrap_err();
        assert!(refused.contains("/proc/1/ns/mnt is joined by path") && refused.contains("EPERM"), "{refused}");
        let joined_user = serde_json::json!({"type": "user", "path": "/proc/1/ns/user"});
        assert!(joined_mount_with_new_user(&linux(serde_json::json!([joined_user, mnt]))).is_ok(), "a joined user namespace may own it");
        assert!(joined_mount_with_new_user(&linux(serde_json::json!([mnt]))).is_ok(), "the host's user namespace owns it");
        assert!(joined_mount_with_new_user(&linux(serde_json::json!([{"type": "user"}, {"type": "mount"}]))).is_ok());
    }

    #[test]
    fn a_container_needs_a_mount_namespace_new_or_joined() {
        let linux = |namespaces: serde_json::Value| -> oci_spec::runtime::Linux {
            serde_json::from_value(serde_json::json!({"namespaces": namespaces})).unwrap()
        };
        let refused = mount_namespace(&linux(serde_json::json!([{"type": "pid"}]))).unwrap_err();
        assert!(refused.starts_with("linux.namespaces: no mount namespace"), "{refused}");
        assert!(mount_namespace(&linux(serde_json::json!([{"type": "mount"}]))).is_ok());
        assert!(mount_namespace(&linux(serde_json::json!([{"type": "mount", "path": "/proc/1/ns/mnt"}]))).is_ok());
    }

    #[test]
    fn time_offsets_need_a_new_time_namespace_and_known_clocks() {
        let linux = |namespaces: serde_json::Value, offsets: serde_json::Value| -> oci_spec::runtime::Linux {
            serde_json::from_value(serde_json::json!({"namespaces": namespaces, "timeOffsets": offsets})).unwrap()
        };
        let monotonic = serde_json::json!({"monotonic": {"secs": 10}});
        assert_eq!(time_offsets(&linux(serde_json::json!([{"type": "time"}]), monotonic.clone())), Ok(()));
        let err = time_offsets(&linux(serde_json::json!([{"type": "pid"}]), monotonic.clone())).unwrap_err();
        assert!(err.contains("time namespace isn't enabled in the config"), "{err}");
        let err = time_offsets(&linux(serde_json::json!([{"type": "time", "path": "/proc/1/ns/time"}]), monotonic)).unwrap_err();
        assert!(err.contains("/proc/1/ns/time is joined"), "{err}");
        let err = time_offsets(&linux(serde_json::json!([{"type": "time"}]), serde_json::json!({"realtime": {"secs": 1}}))).unwrap_err();
        assert!(err.contains("\"realtime\" is no clock"), "{err}");
    }

    #[test]
    fn a_notify_filter_needs_a_listener_and_net_devices_a_namespace_a_link_and_a_name() {
        let linux = |value: serde_json::Value| -> oci_spec::runtime::Linux { serde_json::from_value(value).unwrap() };
        let notify = |listener: serde_json::Value| {
            linux(serde_json::json!({"seccomp": {"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": listener,
                "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}}))
        };
        assert_eq!(seccomp_listener(&notify(serde_json::json!("/run/agent.sock"))), Ok(()));
        assert!(seccomp_listener(&notify(serde_json::json!(""))).unwrap_err().starts_with("linux.seccomp.listenerPath: "));
        let net = |namespaces: serde_json::Value, devices: serde_json::Value| {
            linux(serde_json::json!({"namespaces": namespaces, "netDevices": devices}))
        };
        let own = serde_json::json!([{"type": "network"}]);
        assert_eq!(net(own.clone(), serde_json::json!({"lo": {"name": "eth7"}})).net_devices().as_ref().map(|d| d.len()), Some(1));
        assert_eq!(net_devices(&net(own.clone(), serde_json::json!({"lo": {"name": "eth7"}}))), Ok(()));
        let err = net_devices(&net(serde_json::json!([]), serde_json::json!({"lo": {}}))).unwrap_err();
        assert!(err.contains("without a private NET namespace"), "{err}");
        let err = net_devices(&net(own.clone(), serde_json::json!({"rustpod-nolink0": {}}))).unwrap_err();
        assert_eq!(err, "linux.netDevices[\"rustpod-nolink0\"]: if_nametoindex: ENODEV: No such device");
        // An empty name keeps the link's own (runtime-spec), so it is no bad name.
        for bad in ["a/b", "a b", "..", "sixteen-bytes-xx"] {
            let err = net_devices(&net(own.clone(), serde_json::json!({"lo": {"name": bad}}))).unwrap_err();
            assert!(err.contains(".name"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn pids_limits_below_minus_one_are_refused() {
        let linux_with = |limit: i64| {
            let pids = oci_spec::runtime::LinuxPidsBuilder::default().limit(limit).build().unwrap();
            let resources = oci_spec::runtime::LinuxResourcesBuilder::default().pids(pids).build().unwrap();
            oci_spec::runtime::LinuxBuilder::default().resources(resources).build().unwrap()
        };
        for ok in [-1, 0, 64] {
            assert!(pids(&linux_with(ok)).is_ok(), "{ok}");
        }
        assert!(pids(&linux_with(-2)).unwrap_err().starts_with("linux.resources.pids.limit -2"));
    }

    #[test]
    fn env_entries_need_a_name_and_an_equals_sign() {
        assert!(env(&["A=".into(), "B=c=d".into()]).is_ok());
        assert!(env(&["NOEQUALS".into()]).unwrap_err().contains("invalid environment variable: missing '='"));
        assert!(env(&["=x".into()]).unwrap_err().contains("invalid environment variable: name cannot be empty"));
    }
}
