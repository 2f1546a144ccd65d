//! Killing a container's processes, and only its own, for `delete` and for
//! `kill KILL` without a PID namespace of the container's own: the engine
//! SIGKILLs everything in the container's cgroup, which may be shared with
//! the host.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::engine::cgroup::fs::Hierarchy;
use crate::engine::cgroup::manager as cgroup;
use crate::error::{Error, Result};
use crate::sys::pidfd::PidFd;

/// A file's identity (st_dev, st_ino): of a namespace or a root directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub fn of(path: &Path) -> Option<FileId> {
        let meta = std::fs::metadata(path).ok()?;
        Some(FileId { dev: meta.dev(), ino: meta.ino() })
    }

    /// The mount namespace of `pid`: every process started in a container
    /// (its init's descendants and its execs) shares it, and nothing else does.
    pub fn mount_ns(pid: i32) -> Option<FileId> {
        FileId::of(Path::new(&format!("/proc/{pid}/ns/mnt")))
    }
}

/// How to tell this container's processes among those in its cgroup.
#[derive(Debug, Clone, Default)]
pub struct Members {
    /// The init, while it is alive.
    pub init: Option<i32>,
    /// The container's own mount namespace, when it has one.
    pub mount_ns: Option<FileId>,
    /// Else its root directory (a create that died before we recorded more).
    pub rootfs: Option<FileId>,
    /// The init leads a PID namespace made for it. When such an init exits,
    /// the kernel kills every other process in the namespace and waits for
    /// them before the init turns zombie (`zap_pid_ns_processes`), so a
    /// gone init means no process of the container is left: runc's destroy
    /// relies on the same.
    pub own_pid_ns: bool,
}

/// Whether `spec` gives the init a new PID namespace (one without a path).
pub fn leads_pid_ns(spec: &oci_spec::runtime::Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| ns.iter().any(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::Pid && n.path().is_none()))
}

impl Members {
    /// Whether `pid`, found in the container's cgroup, is the container's.
    /// With a mount namespace of its own, every process in its cgroup is,
    /// except those in the host's mount namespace (PID 1's, or ours): a
    /// process started inside the container cannot re-enter that one
    /// (setns(2) needs CAP_SYS_ADMIN over the host's user namespace and a
    /// handle on it, which pivot_root and the masked /proc leave it
    /// without), so what is there was put in the cgroup from the host. A
    /// process that unshared a new mount namespace (`unshare -Urm`) is
    /// still the container's: runc kills it too.
    fn contains(&self, pid: i32, host_mount_ns: &[FileId]) -> bool {
        if let Some(ns) = self.mount_ns {
            return FileId::mount_ns(pid).is_some_and(|theirs| theirs == ns || !host_mount_ns.contains(&theirs));
        }
        self.rootfs.is_some_and(|root| FileId::of(Path::new(&format!("/proc/{pid}/root"))) == Some(root))
    }
}

/// The host's mount namespaces: PID 1's and the caller's (a shim may have
/// one of its own).
fn host_mount_namespaces() -> Vec<FileId> {
    [FileId::mount_ns(1), FileId::of(Path::new("/proc/self/ns/mnt"))].into_iter().flatten().collect()
}

/// SIGKILLs the init and every process of the container left in `cgroup`
/// (those of a container with its own PID namespace go with its init),
/// thawing a frozen cgroup so the signal lands, and waits until they are gone.
pub fn kill_members(cgroups: &[Hierarchy], members: &Members, cgroup_path: Option<&Path>, thaw: &dyn Fn()) -> Result<()> {
    if let Some(init) = members.init.and_then(|pid| PidFd::open(pid).ok()) {
        send_sigkill(&init);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        thaw();
        let init_alive = members.init.is_some_and(crate::sys::proc_stat::alive);
        let left = if members.own_pid_ns { Vec::new() } else { members_in(cgroups, members, cgroup_path) };
        if left.is_empty() && !init_alive {
            return Ok(());
        }
        if Instant::now() > deadline {
            let pids: Vec<i32> = left.iter().map(|(pid, _)| *pid).collect();
            return Err(Error::Invalid(format!(
                "container processes still running after SIGKILL: init alive: {init_alive}, others: {pids:?}"
            )));
        }
        left.iter().for_each(|(_, fd)| send_sigkill(fd));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The container's processes in its cgroup, each held by a pidfd opened
/// before the check, so a pid reused since is never signalled.
fn members_in(cgroups: &[Hierarchy], members: &Members, cgroup_path: Option<&Path>) -> Vec<(i32, PidFd)> {
    let host = host_mount_namespaces();
    cgroup_path
        .map(|path| cgroup::pids(cgroups, path))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| {
            let fd = PidFd::open(pid).ok()?;
            members.contains(pid, &host).then_some((pid, fd))
        })
        .collect()
}

/// SIGKILL through the pidfd; ESRCH: it is gone already.
fn send_sigkill(pidfd: &PidFd) {
    let _ = pidfd.signal(libc::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(pid: Option<Option<&str>>) -> oci_spec::runtime::Spec {
        let mut spec = oci_spec::runtime::Spec::default();
        let mut namespaces: Vec<_> = spec.linux().as_ref().unwrap().namespaces().clone().unwrap_or_default();
        namespaces.retain(|n| n.typ() != oci_spec::runtime::LinuxNamespaceType::Pid);
        if let Some(path) = pid {
            let mut ns = oci_spec::runtime::LinuxNamespace::default();
            ns.set_typ(oci_spec::runtime::LinuxNamespaceType::Pid).set_path(path.map(Into::into));
            namespaces.push(ns);
        }
        spec.linux_mut().as_mut().unwrap().set_namespaces(Some(namespaces));
        spec
    }

    #[test]
    fn only_a_pid_namespace_made_for_the_init_is_led_by_it() {
        assert!(leads_pid_ns(&spec_with(Some(None))));
        // Joined (a pod's shared namespace): other processes outlive the init.
        assert!(!leads_pid_ns(&spec_with(Some(Some("/proc/1/ns/pid")))));
        assert!(!leads_pid_ns(&spec_with(None)));
    }
}
