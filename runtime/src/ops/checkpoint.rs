//! `checkpoint`: dumps a running (or paused) container's process tree with
//! criu into an image directory, as runc does: external mounts and joined
//! namespaces declared, the cgroup's freezer used, the init's stdio
//! recorded for restore. Without `leave_running` criu ends the tree; the
//! CLI then destroys the container as runc does (`Container::checkpoint`),
//! the shim leaves that to containerd's Delete. A pre-dump (runc's
//! `--pre-dump`) writes only memory and leaves the tree running, criu
//! tracking what changes after; a dump with `parent_path` writes only what
//! changed since those images (runc's iterative migration); with a page
//! server the pages go to it instead of the image directory; a lazy dump
//! serves them until a lazy restore has fetched them. The requests
//! are our own (`criu_swrk`): rust-criu's client cannot ask criu to track
//! memory.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use libcontainer::container::{Container, ContainerStatus};
use oci_spec::runtime::Spec;
use rust_criu::rust_criu_protobuf::rpc::{Criu_features, Criu_opts, Criu_page_server_info, Criu_req, Criu_req_type};

use crate::engine::container_dir::ContainerDir;
use crate::engine::criu::{self, CriuOptions, DESCRIPTORS_FILE};
use crate::engine::criu_swrk;
use crate::error::{Error, Result};

const DUMP_LOG: &str = "dump.log";

#[derive(Debug, Default)]
pub struct CheckpointOptions {
    pub criu: CriuOptions,
    /// Keep the container running after the dump.
    pub leave_running: bool,
    /// Dump only memory and leave the container running, criu tracking the
    /// pages written after (runc's `--pre-dump`).
    pub pre_dump: bool,
    /// Earlier (pre-dump) images, relative to the image path (runc's
    /// `--parent-path`): this dump writes only the pages changed since.
    pub parent_path: Option<PathBuf>,
    /// A criu page server (`criu page-server`) the memory pages go to
    /// instead of the image directory (runc's `--page-server`).
    pub page_server: Option<PageServer>,
    /// With `criu.lazy_pages`: a byte 0 is written here once the pages are
    /// ready to be fetched (runc's `--status-fd`, from criu's status-ready
    /// notification).
    pub status_fd: Option<std::fs::File>,
}

/// Where a criu page server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageServer {
    pub address: String,
    pub port: i32,
}

pub(crate) fn dump(dir: &ContainerDir, engine: &mut Container, opts: &CheckpointOptions) -> Result<()> {
    engine.refresh_status().map_err(|e| Error::engine("load state of", &dir.id, &e))?;
    let pid = running_init(dir, engine)?;
    criu::require_usable("checkpoint", &opts.criu.criu_path)?;
    check_parent_is_relative(opts.parent_path.as_deref())?;
    let spec = crate::engine::engine_bundle::parse_config(&dir.config_path())?;
    let images = ImageDir::make(&opts.criu.image_path)?;
    images.undo_on_error(check_before_criu(&images, opts))?;
    let work = criu::open_dir("create work directory", opts.criu.work_dir(), true)?;
    let mut request = criu::request_options(&opts.criu, DUMP_LOG)?;
    request.images_dir_fd = Some(images.file.as_raw_fd());
    request.work_dir_fd = Some(work.as_raw_fd());
    request.pid = Some(pid);
    request.root = Some(rootfs(dir, &spec)?.display().to_string());
    request.leave_running = Some(opts.leave_running);
    if let Some(freezer) = freezer_cgroup(engine, pid) {
        request.freeze_cgroup = Some(freezer.display().to_string());
    }
    criu::dump_external_namespaces(&mut request, &spec)?;
    migration_options(&mut request, opts);
    // As runc: a pre-dump needs neither the mounts nor the stdio record.
    if !opts.pre_dump {
        criu::dump_mounts(&mut request, &spec, pid);
        write_descriptors(&opts.criu.image_path.join(DESCRIPTORS_FILE), pid)?;
    }
    let kind = if opts.pre_dump { Criu_req_type::PRE_DUMP } else { Criu_req_type::DUMP };
    send(opts, kind, request)
}

/// criu's DUMP or PRE_DUMP with `request`; a failure quotes criu's log.
fn send(opts: &CheckpointOptions, kind: Criu_req_type, request: Criu_opts) -> Result<()> {
    let mut req = Criu_req::new();
    req.set_type(kind);
    req.opts = protobuf::MessageField::some(request);
    let op = if kind == Criu_req_type::PRE_DUMP { "pre-dump" } else { "dump" };
    let mut on_notify = |script: &str| {
        if script == "status-ready" {
            report_ready(opts.status_fd.as_ref());
        }
    };
    criu_swrk::request_notifying(&opts.criu.criu_path, &req, &mut on_notify)
        .map(drop)
        .map_err(|e| criu::failed(op, &e, &opts.criu.work_dir().join(DUMP_LOG)))
}

/// The lazy dump's pages can be fetched: byte 0 to the status fd, as runc
/// writes it (a reader gone is no reason to fail the dump: runc warns).
fn report_ready(status: Option<&std::fs::File>) {
    use std::io::Write;
    if let Some(mut file) = status {
        if let Err(e) = file.write_all(&[0]) {
            tracing::warn!("write 0 to the status fd: {e}");
        }
    }
}

/// What a migration's flags add, as runc sets them: a pre-dump and a dump
/// on a parent's images have criu track memory (soft-dirty bits); the page
/// server; a lazy dump says when its pages are ready through criu's
/// notifications.
fn migration_options(request: &mut Criu_opts, opts: &CheckpointOptions) {
    if let Some(parent) = &opts.parent_path {
        request.parent_img = Some(parent.display().to_string());
    }
    if opts.pre_dump || opts.parent_path.is_some() {
        request.track_mem = Some(true);
    }
    if let Some(server) = &opts.page_server {
        let info = Criu_page_server_info { address: Some(server.address.clone()), port: Some(server.port), ..Default::default() };
        request.ps = protobuf::MessageField::some(info);
    }
    request.notify_scripts = Some(opts.criu.lazy_pages);
}

/// runc's first refusal of a `--parent-path`, before anything is made.
fn check_parent_is_relative(parent: Option<&Path>) -> Result<()> {
    match parent {
        Some(p) if p.is_absolute() => Err(Error::Invalid("--parent-path must be relative".into())),
        _ => Ok(()),
    }
}

/// What can be refused once the image directory is there and before criu
/// runs: a parent that is not a directory there, a criu or kernel that
/// cannot track memory for a pre-dump or serve lazy pages (runc's
/// FEATURE_CHECK).
fn check_before_criu(images: &ImageDir, opts: &CheckpointOptions) -> Result<()> {
    if let Some(parent) = &opts.parent_path {
        check_parent_dir(images, parent)?;
    }
    if opts.pre_dump {
        require_features("--pre-dump", &opts.criu.criu_path, Criu_features { mem_track: Some(true), ..Default::default() })?;
    }
    if opts.criu.lazy_pages {
        require_features("--lazy-pages", &opts.criu.criu_path, Criu_features { lazy_pages: Some(true), ..Default::default() })?;
    }
    Ok(())
}

/// criu's FEATURE_CHECK for what `flag` needs, refused in runc's words
/// (Go's %v of a list) when missing.
fn require_features(flag: &str, criu_path: &str, features: Criu_features) -> Result<()> {
    let missing = criu_swrk::missing_features(criu_path, features)
        .map_err(|e| Error::Invalid(format!("checkpoint {flag}: CRIU feature check failed: {e}")))?;
    if !missing.is_empty() {
        return Err(Error::Invalid(format!("checkpoint {flag}: criu is missing features: [{}]", missing.join(" "))));
    }
    Ok(())
}

/// The parent, resolved from the image directory's handle, must be a
/// directory (runc's "invalid --parent-path").
fn check_parent_dir(images: &ImageDir, parent: &Path) -> Result<()> {
    use nix::sys::stat::{fstatat, SFlag};
    let shown = images.path.join(parent);
    let stat = fstatat(Some(images.file.as_raw_fd()), parent, nix::fcntl::AtFlags::empty())
        .map_err(|e| Error::io("invalid --parent-path: stat", &shown, e.into()))?;
    if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFDIR {
        return Err(Error::io("invalid --parent-path: stat", &shown, nix::errno::Errno::ENOTDIR.into()));
    }
    Ok(())
}

/// The image directory, open, and whether this checkpoint made it: a
/// refusal before criu runs takes a directory it made away again.
struct ImageDir {
    path: PathBuf,
    file: std::fs::File,
    made: bool,
}

impl ImageDir {
    fn make(path: &Path) -> Result<Self> {
        use std::io::ErrorKind;
        use std::os::unix::fs::DirBuilderExt;
        let made = match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => true,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => false,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                // Its own parents are missing: made all the way down (as runc's MkdirAll).
                criu::open_dir("create image directory", path, true)?;
                true
            }
            Err(e) => return Err(Error::io("create image directory", path, e)),
        };
        let file = criu::open_dir("open image directory", path, false)?;
        Ok(ImageDir { path: path.to_path_buf(), file, made })
    }

    fn undo_on_error<T>(&self, result: Result<T>) -> Result<T> {
        if result.is_err() && self.made {
            let _ = std::fs::remove_dir(&self.path);
        }
        result
    }
}

/// The init's pid, if the container is one criu can dump (running or
/// paused, as runc allows).
fn running_init(dir: &ContainerDir, engine: &Container) -> Result<i32> {
    let status = engine.status();
    let pid = engine.pid().map(|p| p.as_raw());
    match (status, pid) {
        (ContainerStatus::Running | ContainerStatus::Paused, Some(pid)) => Ok(pid),
        _ => Err(Error::WrongStatus {
            id: dir.id.clone(),
            op: "checkpoint",
            status: crate::engine::state::status_word(status).to_string(),
            wanted: "running or paused",
        }),
    }
}

/// The rootfs criu sees the container's root at (our metadata's absolute
/// one, else the spec's).
fn rootfs(dir: &ContainerDir, spec: &Spec) -> Result<PathBuf> {
    if let Some(meta) = dir.metadata() {
        return Ok(meta.rootfs);
    }
    spec.root().as_ref().map(|r| r.path().clone()).ok_or_else(|| Error::Invalid(format!("checkpoint {}: the spec has no root", dir.id)))
}

/// The container's freezer, so criu freezes the tree through its cgroup
/// rather than ptrace (as runc passes it). A tree containerd has paused
/// before the dump (its client does) cannot be seized by ptrace: criu would
/// wait on it for ever. Under systemd's driver the cgroup is the unit's, so
/// it is read off the init's /proc/PID/cgroup.
fn freezer_cgroup(engine: &Container, pid: i32) -> Option<PathBuf> {
    let unified = matches!(libcgroups::common::get_cgroup_setup().ok()?, libcgroups::common::CgroupSetup::Unified);
    let root = if unified { PathBuf::from("/sys/fs/cgroup") } else { PathBuf::from("/sys/fs/cgroup/freezer") };
    let path = if engine.systemd() {
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        freezer_line(&cgroups, unified)?
    } else {
        engine.spec().ok()?.cgroup_path
    };
    Some(root.join(path.strip_prefix("/").unwrap_or(&path)))
}

/// The freezer's path in a /proc/PID/cgroup: the unified line on v2, the
/// freezer hierarchy's on v1.
fn freezer_line(cgroups: &str, unified: bool) -> Option<PathBuf> {
    cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let ours = if unified { controllers.is_empty() } else { controllers.split(',').any(|c| c == "freezer") };
        ours.then(|| PathBuf::from(path))
    })
}

/// Records where the init's stdin, stdout and stderr lead (runc's
/// descriptors.json), so restore can hand pipes back to criu.
fn write_descriptors(path: &std::path::Path, pid: i32) -> Result<()> {
    let fds: Vec<String> = (0..3)
        .map(|n| std::fs::read_link(format!("/proc/{pid}/fd/{n}")).map(|p| p.display().to_string()).unwrap_or_else(|_| "/dev/null".into()))
        .collect();
    let data = serde_json::to_vec(&fds).map_err(|e| Error::Invalid(e.to_string()))?;
    crate::sys::atomic_file::write(path, &data, crate::engine::container_dir::FILE_MODE)
}

#[cfg(test)]
mod tests {
    use super::freezer_line;
    use std::path::PathBuf;

    #[test]
    fn the_freezer_is_the_unified_line_on_v2_and_the_freezer_hierarchy_on_v1() {
        let v2 = "0::/kubepods.slice/cri-containerd-x.scope\n";
        assert_eq!(freezer_line(v2, true), Some(PathBuf::from("/kubepods.slice/cri-containerd-x.scope")));
        let v1 = "5:cpu,cpuacct:/a\n4:freezer:/system.slice/x.scope\n0::/b\n";
        assert_eq!(freezer_line(v1, false), Some(PathBuf::from("/system.slice/x.scope")));
        assert_eq!(freezer_line("5:cpu:/a\n", false), None);
    }
}
