//! What checkpoint and restore share in talking to criu (its RPC over
//! `criu swrk`: rust-criu's client for restore, a request of our own,
//! `criu_swrk`, for the dumps): whether criu works on this host, the options
//! both take, the mounts criu must treat as external (as runc declares
//! them), and errors that name criu's log.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use libcgroups::common::CgroupSetup;
use oci_spec::runtime::{LinuxNamespaceType, Spec};
use rust_criu::rust_criu_protobuf::rpc::{Criu_cg_mode, Criu_opts, Ext_mount_map};
use rust_criu::{CgMode, Criu};

use crate::error::{Error, Result};

/// Where the init's stdio is recorded (runc's name and shape: three paths).
pub const DESCRIPTORS_FILE: &str = "descriptors.json";

/// The options `checkpoint` and `restore` share, as runc's flags name them.
#[derive(Debug, Clone, Default)]
pub struct CriuOptions {
    /// The criu binary (runc's global `--criu`).
    pub criu_path: String,
    pub image_path: PathBuf,
    /// criu's log and work files; the image path when unset.
    pub work_path: Option<PathBuf>,
    pub tcp_established: bool,
    pub ext_unix_sk: bool,
    pub shell_job: bool,
    pub file_locks: bool,
    /// `soft`, `full`, `strict` or `ignore`; criu's default when unset.
    pub manage_cgroups_mode: Option<String>,
    /// runc's `--lazy-pages`: the dump serves the memory pages from its page
    /// server until `criu lazy-pages` has fetched them for a restore that
    /// takes them on demand (userfaultfd).
    pub lazy_pages: bool,
}

impl CriuOptions {
    pub fn work_dir(&self) -> &Path {
        self.work_path.as_deref().unwrap_or(&self.image_path)
    }
}

/// The devices every container gets (runc's and the engine's defaults):
/// criu must take them, like a spec's devices, as the host's.
const DEFAULT_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

/// Why `criu check` says no; `Display` is the reason as `require_usable`
/// has always worded it.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// criu could not be started at all (not installed, not executable).
    #[error("execve {criu_path} check: {err}")]
    Exec { criu_path: String, err: std::io::Error },
    /// criu ran and refused: its last `Error` line (or last line).
    #[error("{criu_path} check failed ({status}): {line}")]
    Failed { criu_path: String, status: ExitStatus, line: String },
}

/// `criu check`, run each time (a kernel or criu upgrade changes the
/// answer): Ok, or the reason in criu's own words.
pub fn check(criu_path: &str) -> std::result::Result<(), CheckError> {
    let out = Command::new(criu_path).arg("check").output().map_err(|err| CheckError::Exec { criu_path: criu_path.to_string(), err })?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    let line = text.lines().rfind(|l| l.contains("Error")).or_else(|| text.lines().rfind(|l| !l.trim().is_empty())).unwrap_or("no output");
    Err(CheckError::Failed { criu_path: criu_path.to_string(), status: out.status, line: line.trim().to_string() })
}

/// Refuses to go on (before anything is made) where criu cannot work.
pub fn require_usable(op: &'static str, criu_path: &str) -> Result<()> {
    check(criu_path).map_err(|reason| Error::Invalid(format!("{op}: criu cannot run here: {reason}")))
}

/// What both requests carry, as runc sets it: the cgroup mode, criu's log
/// (level 4) and the flags. A dump's request (ours) takes them as is; the
/// restore's rust-criu client copies them (`client`).
pub fn request_options(opts: &CriuOptions, log_file: &str) -> Result<Criu_opts> {
    let mode = opts.manage_cgroups_mode.as_deref().map(cgroups_mode).transpose()?;
    Ok(Criu_opts {
        log_file: Some(log_file.to_string()),
        log_level: Some(4),
        manage_cgroups: Some(true),
        manage_cgroups_mode: mode.map(Into::into),
        tcp_established: Some(opts.tcp_established),
        ext_unix_sk: Some(opts.ext_unix_sk),
        shell_job: Some(opts.shell_job),
        file_locks: Some(opts.file_locks),
        orphan_pts_master: Some(true),
        lazy_pages: Some(opts.lazy_pages),
        ..Default::default()
    })
}

/// A rust-criu client carrying `request_options`.
pub fn client(opts: &CriuOptions, log_file: &str) -> Result<Criu> {
    let shared = request_options(opts, log_file)?;
    let mut criu = Criu::new_with_criu_path(opts.criu_path.clone()).map_err(|e| Error::Invalid(format!("criu {}: {e}", opts.criu_path)))?;
    criu.set_log_file(shared.log_file().to_string());
    criu.set_log_level(shared.log_level());
    criu.set_manage_cgroups(shared.manage_cgroups());
    if shared.has_manage_cgroups_mode() {
        criu.cgroups_mode(CgMode::from(shared.manage_cgroups_mode() as i32));
    }
    criu.set_tcp_established(shared.tcp_established());
    criu.set_ext_unix_sk(shared.ext_unix_sk());
    criu.set_shell_job(shared.shell_job());
    criu.set_file_locks(shared.file_locks());
    criu.set_orphan_pts_master(shared.orphan_pts_master());
    criu.set_lazy_pages(shared.lazy_pages());
    Ok(criu)
}

/// runc's `--manage-cgroups-mode` words.
pub fn cgroups_mode(mode: &str) -> Result<Criu_cg_mode> {
    match mode {
        "soft" => Ok(Criu_cg_mode::SOFT),
        "full" => Ok(Criu_cg_mode::FULL),
        "strict" => Ok(Criu_cg_mode::STRICT),
        "ignore" => Ok(Criu_cg_mode::IGNORE),
        _ => {
            Err(Error::Invalid(format!("--manage-cgroups-mode {mode:?}: invalid manage cgroups mode (want soft, full, strict or ignore)")))
        }
    }
}

/// Opens a directory criu works in, making it 0700 first if it is not there.
pub fn open_dir(op: &'static str, path: &Path, create: bool) -> Result<std::fs::File> {
    if create {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path) {
            Ok(()) => {}
            Err(e) => return Err(Error::io(op, path, e)),
        }
    }
    std::fs::File::open(path).map_err(|e| Error::io(op, path, e))
}

/// A failed criu request, in one line: criu's first error from its log
/// (the cause; the last is only "Dumping FAILED."), and where the log is.
pub fn failed(op: &'static str, err: &dyn std::fmt::Display, log: &Path) -> Error {
    let first = std::fs::read_to_string(log)
        .ok()
        .and_then(|text| text.lines().find(|l| l.contains("Error") && !l.contains("FAILED.")).map(|l| l.trim().to_string()));
    let reason = match first {
        Some(line) => format!("{err}: {line}"),
        None => err.to_string(),
    };
    Error::Invalid(format!("criu {op} failed: {reason} (log: {})", log.display()))
}

/// The mounts criu must leave to us when dumping, keyed by where they are
/// in the container, as runc declares them: bind mounts, cgroup v1
/// hierarchies without a cgroup namespace, masked files (host /dev/null)
/// and devices.
pub fn dump_mounts(opts: &mut Criu_opts, spec: &Spec, init_pid: i32) {
    let same = |key: String| (key.clone(), key);
    let masked = masked_files(spec, init_pid).into_iter().map(|path| (path, "/dev/null".to_string()));
    let mounts = bind_mounts(spec)
        .into_iter()
        .chain(cgroup_v1_mounts(spec))
        .map(|(key, _)| same(key))
        .chain(masked)
        .chain(devices(spec).into_iter().map(same));
    for (key, val) in mounts {
        let mut map = Ext_mount_map::new();
        map.set_key(key);
        map.set_val(val);
        opts.ext_mnt.push(map);
    }
}

/// The same mounts for restore: each key to the host path to mount there.
pub fn restore_mounts(criu: &mut Criu, spec: &Spec) {
    for (key, source) in bind_mounts(spec) {
        criu.set_external_mount(key, source);
    }
    for (key, source) in cgroup_v1_mounts(spec) {
        criu.set_external_mount(key, source);
    }
    let masks = spec.linux().as_ref().and_then(|l| l.masked_paths().as_ref()).is_some_and(|m| !m.is_empty());
    if masks {
        criu.set_external_mount("/dev/null".into(), "/dev/null".into());
    }
    for path in devices(spec) {
        criu.set_external_mount(path.clone(), path);
    }
}

/// (destination, source) of each bind mount.
fn bind_mounts(spec: &Spec) -> Vec<(String, String)> {
    spec.mounts()
        .iter()
        .flatten()
        .filter(|m| crate::engine::engine_bundle::is_bind(m))
        .map(|m| {
            let source = m.source().as_ref().map(|s| s.display().to_string()).unwrap_or_default();
            (m.destination().display().to_string(), source)
        })
        .collect()
}

/// On cgroup v1 without a cgroup namespace the engine bind-mounts each host
/// hierarchy under a `cgroup` mount: (where in the container, host path).
fn cgroup_v1_mounts(spec: &Spec) -> Vec<(String, String)> {
    if has_namespace(spec, LinuxNamespaceType::Cgroup) {
        return Vec::new();
    }
    if !matches!(libcgroups::common::get_cgroup_setup(), Ok(CgroupSetup::Legacy | CgroupSetup::Hybrid)) {
        return Vec::new();
    }
    let hierarchies = libcgroups::v1::util::list_subsystem_mount_points().unwrap_or_default();
    let mut mounts = Vec::new();
    for m in spec.mounts().iter().flatten().filter(|m| m.typ().as_deref() == Some("cgroup")) {
        for host in &hierarchies {
            let Some(name) = host.file_name() else { continue };
            let inside = m.destination().join(name);
            mounts.push((inside.display().to_string(), host.display().to_string()));
        }
    }
    mounts
}

/// The masked paths that are files in the running container (runc skips
/// directories, which get a read-only tmpfs of their own).
fn masked_files(spec: &Spec, init_pid: i32) -> Vec<String> {
    let paths = spec.linux().as_ref().and_then(|l| l.masked_paths().clone()).unwrap_or_default();
    paths
        .into_iter()
        .filter(|p| {
            let inside = format!("/proc/{init_pid}/root/{}", p.trim_start_matches('/'));
            std::fs::metadata(inside).is_ok_and(|m| !m.is_dir())
        })
        .collect()
}

fn devices(spec: &Spec) -> Vec<String> {
    let mut paths: Vec<String> = DEFAULT_DEVICES.iter().map(|d| d.to_string()).collect();
    let own = spec.linux().as_ref().and_then(|l| l.devices().clone()).unwrap_or_default();
    for d in own {
        let path = d.path().display().to_string();
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

fn has_namespace(spec: &Spec, typ: LinuxNamespaceType) -> bool {
    spec.linux().as_ref().and_then(|l| l.namespaces().as_ref()).is_some_and(|ns| ns.iter().any(|n| n.typ() == typ))
}

/// The path of a namespace the container joins rather than makes.
fn joined_namespace(spec: &Spec, typ: LinuxNamespaceType) -> Option<PathBuf> {
    let namespaces = spec.linux().as_ref()?.namespaces().as_ref()?;
    namespaces.iter().find(|n| n.typ() == typ)?.path().clone()
}

/// The network and pid namespaces the container joined: criu records
/// them as external (`net[<inode>]:extRootNetNS`), as runc does, and
/// leaves them alone.
pub fn dump_external_namespaces(opts: &mut Criu_opts, spec: &Spec) -> Result<()> {
    for (typ, name) in [(LinuxNamespaceType::Network, "net"), (LinuxNamespaceType::Pid, "pid")] {
        let Some(path) = joined_namespace(spec, typ) else { continue };
        let meta = std::fs::metadata(&path).map_err(|e| Error::io("stat namespace", &path, e))?;
        use std::os::unix::fs::MetadataExt;
        opts.external.push(format!("{name}[{}]:{}", meta.ino(), rust_criu::criu_ns_to_key(name)));
    }
    Ok(())
}

/// At restore, the same namespaces handed to criu as inherited fds; the
/// fds must stay open (and inheritable) until criu is done.
pub fn restore_external_namespaces(criu: &mut Criu, spec: &Spec) -> Result<Vec<OwnedFd>> {
    let mut held = Vec::new();
    for (typ, name) in [(LinuxNamespaceType::Network, "net"), (LinuxNamespaceType::Pid, "pid")] {
        let Some(path) = joined_namespace(spec, typ) else { continue };
        let fd = open_inheritable(&path)?;
        criu.add_inherit_fd(fd.as_raw_fd(), rust_criu::criu_ns_to_key(name))
            .map_err(|e| Error::Invalid(format!("criu inherit {}: {e}", path.display())))?;
        held.push(fd);
    }
    Ok(held)
}

/// Opens `path` without O_CLOEXEC, so that `criu swrk` inherits it.
fn open_inheritable(path: &Path) -> Result<OwnedFd> {
    use nix::fcntl::{open, OFlag};
    use std::os::fd::FromRawFd;
    let fd = open(path, OFlag::O_RDONLY, nix::sys::stat::Mode::empty()).map_err(|e| Error::io("open", path, std::io::Error::from(e)))?;
    // SAFETY: `open` just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_criu_keeps_the_execve_words() {
        let err = check("/nonexistent/criu").unwrap_err();
        assert!(matches!(&err, CheckError::Exec { err, .. } if err.raw_os_error() == Some(libc::ENOENT)));
        assert_eq!(err.to_string(), "execve /nonexistent/criu check: No such file or directory (os error 2)");
    }
}
