//! `checkpoint`: dumps a running (or paused) container's process tree with
//! criu into an image directory, as runc does: external mounts and joined
//! namespaces declared, the cgroup's freezer used, the init's stdio
//! recorded for restore. Without `leave_running` criu ends the tree; the
//! CLI then destroys the container as runc does (`Container::checkpoint`),
//! the shim leaves that to containerd's Delete.

use std::os::fd::AsRawFd;
use std::path::PathBuf;

use libcontainer::container::{Container, ContainerStatus};
use oci_spec::runtime::Spec;

use crate::engine::container_dir::ContainerDir;
use crate::engine::criu::{self, CriuOptions, DESCRIPTORS_FILE};
use crate::error::{Error, Result};

const DUMP_LOG: &str = "dump.log";

#[derive(Debug, Clone, Default)]
pub struct CheckpointOptions {
    pub criu: CriuOptions,
    /// Keep the container running after the dump.
    pub leave_running: bool,
}

pub(crate) fn dump(dir: &ContainerDir, engine: &mut Container, opts: &CheckpointOptions) -> Result<()> {
    engine
        .refresh_status()
        .map_err(|e| Error::engine("load state of", &dir.id, &e))?;
    let pid = running_init(dir, engine)?;
    criu::require_usable("checkpoint", &opts.criu.criu_path)?;
    let spec = crate::engine::engine_bundle::parse_config(&dir.config_path())?;
    let images = criu::open_dir("create image directory", &opts.criu.image_path, true)?;
    let work = criu::open_dir("create work directory", opts.criu.work_dir(), true)?;
    write_descriptors(&opts.criu.image_path.join(DESCRIPTORS_FILE), pid)?;
    let mut client = criu::client(&opts.criu, DUMP_LOG)?;
    client.set_images_dir_fd(images.as_raw_fd());
    client.set_work_dir_fd(work.as_raw_fd());
    client.set_pid(pid);
    client.set_root(rootfs(dir, &spec)?.display().to_string());
    client.set_leave_running(opts.leave_running);
    if let Some(freezer) = freezer_cgroup(engine, pid) {
        client.set_freeze_cgroup(freezer.display().to_string());
    }
    criu::dump_mounts(&mut client, &spec, pid);
    criu::dump_external_namespaces(&mut client, &spec)?;
    client
        .dump()
        .map_err(|e| criu::failed("dump", &e, &opts.criu.work_dir().join(DUMP_LOG)))
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
    spec.root()
        .as_ref()
        .map(|r| r.path().clone())
        .ok_or_else(|| Error::Invalid(format!("checkpoint {}: the spec has no root", dir.id)))
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
        .map(|n| {
            std::fs::read_link(format!("/proc/{pid}/fd/{n}"))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "/dev/null".into())
        })
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
