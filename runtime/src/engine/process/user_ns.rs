//! The container's user namespace on our init's route, without
//! libcontainer's intermediate process.
//! - A new one is made by the init's own clone (`CLONE_NEWUSER` with the
//!   other new namespaces, which it then owns: the kernel makes the user
//!   namespace first); the parent writes its maps while the init waits at
//!   its go signal, then the init becomes root in it before any other step.
//! - One joined by path (a `hostUsers: false` pod's containers join the
//!   sandbox's) must own what is made after it, the pid namespace too, and
//!   only a setns(2) followed by a fork gets that: the first child joins
//!   it, becomes root there and clones the init as a child of ours
//!   (`CLONE_PARENT`) in the new pid, network and IPC namespaces, hands
//!   its pid over and exits. That is the one fork the kernel asks for.
//! - A new one with other namespaces given by path (the host's, so joined
//!   before the user namespace exists, in runc's order): the first child
//!   joins those, unshares the user namespace, is mapped by the parent,
//!   becomes root and clones the init the same way.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::sched::CloneFlags;
use nix::unistd::Pid;
use oci_spec::runtime::{LinuxNamespaceType, Spec};

use crate::engine::idmap::userns::{write_map, UsernsError};
use crate::engine::process::confine::{call, io_errno, InitError};
use crate::sys::clone3::{self, Forked};

/// What the init's start does about `spec`'s user namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    None,
    /// Made by the init's clone.
    New,
    /// Made by the first child after it joined the namespaces given by
    /// path, which then clones the init.
    NewAfterJoins,
    /// Joined by the first child at this path, which then clones the init.
    Join(PathBuf),
}

impl Plan {
    pub fn of(spec: &Spec) -> Self {
        let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
        match listed.into_iter().flatten().find(|ns| ns.typ() == LinuxNamespaceType::User) {
            None => Plan::None,
            Some(ns) => match ns.path() {
                Some(path) => Plan::Join(path.clone()),
                None if crate::engine::process::init_steps::joins_by_path(spec) => Plan::NewAfterJoins,
                None => Plan::New,
            },
        }
    }

    /// A first child starts the init (it joins or makes the user namespace).
    pub fn first_child(&self) -> bool {
        matches!(self, Plan::Join(_) | Plan::NewAfterJoins)
    }
}

/// The parent's step: `spec`'s uid and gid maps written for `pid`'s new
/// user namespace.
pub fn write_maps(spec: &Spec, pid: Pid) -> Result<(), UsernsError> {
    let linux = spec.linux().as_ref();
    let uid = linux.and_then(|l| l.uid_mappings().as_deref()).unwrap_or_default();
    let gid = linux.and_then(|l| l.gid_mappings().as_deref()).unwrap_or_default();
    write_map(pid.as_raw(), "uid_map", uid)?;
    write_map(pid.as_raw(), "gid_map", gid)
}

/// The first child's step for a joined user namespace: setns(2) into it.
pub fn join(path: &Path) -> Result<(), InitError> {
    let step = "joining the user namespace";
    let file = File::open(path).map_err(|e| call(step, format!("open {}", path.display()))(io_errno(&e)))?;
    nix::sched::setns(file.as_fd(), CloneFlags::CLONE_NEWUSER).map_err(call(step, format!("setns {}", path.display())))
}

/// The first child's steps for [`Plan::NewAfterJoins`]: the namespaces
/// `spec` gives by path joined, then a new user namespace, announced on
/// `handoff`; returns once the parent says on `go` that it is mapped.
pub fn make_after_joins(spec: &Spec, handoff: &OwnedFd, go: &OwnedFd) -> Result<(), InitError> {
    crate::engine::process::init_steps::join_by_path(spec)?;
    let step = "making the user namespace";
    nix::sched::unshare(CloneFlags::CLONE_NEWUSER).map_err(call(step, "unshare(CLONE_NEWUSER)"))?;
    nix::unistd::write(handoff, b"u").map_err(call(step, "write to the parent"))?;
    let mut mapped = [0u8; 1];
    match nix::unistd::read(go.as_raw_fd(), &mut mapped) {
        Ok(1) if mapped == *b"m" => Ok(()),
        // The parent failed and kills us: nothing to report.
        // SAFETY: a forked child leaves without its parent's exit hooks.
        _ => unsafe { libc::_exit(255) },
    }
}

/// The parent's end of [`make_after_joins`]: whether the first child made
/// its user namespace (else it left, and said why on the engine's channel).
pub fn made(handoff: &OwnedFd) -> bool {
    let mut byte = [0u8; 1];
    matches!(nix::unistd::read(handoff.as_raw_fd(), &mut byte), Ok(1) if byte == *b"u")
}

/// The first child clones the init in `namespaces` as a child of its own
/// parent, writes the init's pid to `handoff` and exits; returns in the
/// init.
pub fn clone_init(namespaces: CloneFlags, handoff: &OwnedFd) -> Result<(), InitError> {
    let step = "starting the init in the user namespace";
    // SAFETY: this child is single-threaded: its own child runs on as it would.
    let forked = unsafe { clone3::fork(namespaces | CloneFlags::CLONE_PARENT, None) };
    match forked.map_err(call(step, format!("clone3({:?})", namespaces | CloneFlags::CLONE_PARENT)))? {
        Forked::Child => {
            // Only the first child's copy may keep the parent from EOF.
            let _ = nix::unistd::close(handoff.as_raw_fd());
            Ok(())
        }
        Forked::Parent(init) => {
            if nix::unistd::write(handoff, &init.as_raw().to_ne_bytes()) != Ok(4) {
                // The parent would never learn of it: it must not live on.
                let _ = nix::sys::signal::kill(init, nix::sys::signal::Signal::SIGKILL);
                // SAFETY: this child leaves without its parent's exit hooks.
                unsafe { libc::_exit(1) }
            }
            // SAFETY: this child's work is done; the init is the parent's.
            unsafe { libc::_exit(0) }
        }
    }
}

/// The parent's end of [`clone_init`]: the init's pid, once the first
/// child gave it; None when it left without one (it said why on the
/// engine's channel).
pub fn receive_init(handoff: &OwnedFd) -> Option<Pid> {
    let mut bytes = [0u8; 4];
    match nix::unistd::read(handoff.as_raw_fd(), &mut bytes) {
        Ok(4) => Some(Pid::from_raw(i32::from_ne_bytes(bytes))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(user: serde_json::Value) -> Spec {
        serde_json::from_value(serde_json::json!({"ociVersion": "1.2.0", "linux": {"namespaces": [{"type": "pid"}, user]}})).unwrap()
    }

    #[test]
    fn the_plan_follows_the_user_namespace_the_spec_lists() {
        assert_eq!(Plan::of(&spec(serde_json::json!({"type": "mount"}))), Plan::None);
        assert_eq!(Plan::of(&spec(serde_json::json!({"type": "user"}))), Plan::New);
        let joined = spec(serde_json::json!({"type": "user", "path": "/proc/7/ns/user"}));
        assert_eq!(Plan::of(&joined), Plan::Join("/proc/7/ns/user".into()));
        let with_net: Spec = serde_json::from_value(serde_json::json!({"ociVersion": "1.2.0", "linux": {"namespaces":
            [{"type": "pid"}, {"type": "user"}, {"type": "network", "path": "/var/run/netns/n"}]}}))
        .unwrap();
        assert_eq!(Plan::of(&with_net), Plan::NewAfterJoins, "the host's network namespace is joined first");
        assert!(Plan::of(&with_net).first_child() && !Plan::of(&spec(serde_json::json!({"type": "user"}))).first_child());
    }

    /// A joined user namespace owns what the first child's clone makes: a
    /// pid namespace made after the setns(2) is the joined one's, which is
    /// what lets the container mount its procfs.
    #[test]
    fn on_the_kernel_the_init_is_our_child_in_a_pid_namespace_of_the_joined_user_namespace() {
        if !nix::unistd::geteuid().is_root() {
            return eprintln!("SKIP: making and joining a user namespace needs root");
        }
        // In a process of its own: it forks, and the test harness has threads.
        let name = "engine::process::user_ns::tests::joined_child";
        let (passed, text) = crate::engine::rootfs::in_child(name, "RUSTPOD_USERNS_CHILD");
        assert!(passed, "{text}");
    }

    /// Run by the test above in its own process; returns at once otherwise.
    #[test]
    fn joined_child() {
        if std::env::var_os("RUSTPOD_USERNS_CHILD").is_none() {
            return;
        }
        let map = |c: u32, h: u32, s: u32| {
            oci_spec::runtime::LinuxIdMappingBuilder::default().container_id(c).host_id(h).size(s).build().unwrap()
        };
        let userns = crate::engine::idmap::userns::with_mappings(&[map(0, 100000, 65536)], &[map(0, 100000, 65536)]).unwrap();
        let path = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&userns)));
        let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (report_rd, report_wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        // SAFETY: the child only makes syscalls and leaves with _exit.
        let first = match unsafe { clone3::fork(CloneFlags::empty(), None) }.unwrap() {
            Forked::Child => {
                let ok = join(&path).is_ok() && clone_init(CloneFlags::CLONE_NEWPID, &wr).is_ok();
                // Here only in the init: pid 1 of a pid namespace whose owner
                // (ioctl NS_GET_USERNS) is the joined user namespace.
                let pidns = File::open("/proc/self/ns/pid").unwrap();
                // SAFETY: NS_GET_USERNS takes no argument and returns a new fd.
                let owner = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&pidns), 0xb701) };
                let owner = std::fs::read_link(format!("/proc/self/fd/{owner}")).map(|l| l.display().to_string()).unwrap_or_default();
                let report = format!("{ok} {} {owner}", nix::unistd::getpid());
                let _ = nix::unistd::write(&report_wr, report.as_bytes());
                // SAFETY: a forked child leaves without its parent's exit hooks.
                unsafe { libc::_exit(0) }
            }
            Forked::Parent(pid) => pid,
        };
        drop(wr);
        drop(report_wr);
        let init = receive_init(&rd).expect("the first child hands the init's pid over");
        assert_eq!(nix::sys::wait::waitpid(first, None).unwrap(), nix::sys::wait::WaitStatus::Exited(first, 0));
        let mut report = [0u8; 128];
        let n = nix::unistd::read(report_rd.as_raw_fd(), &mut report).unwrap();
        let report = String::from_utf8_lossy(&report[..n]).to_string();
        let want_userns = std::fs::read_link(&path).unwrap().display().to_string();
        assert_eq!(report, format!("true 1 {want_userns}"), "pid 1 of a pid namespace the joined user namespace owns");
        assert!(
            matches!(nix::sys::wait::waitpid(init, None).unwrap(), nix::sys::wait::WaitStatus::Exited(p, 0) if p == init),
            "the init is our child"
        );
    }
}
