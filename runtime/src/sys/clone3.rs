//! clone3(2) used as fork(2): the child may be born in new namespaces
//! (`CLONE_NEWPID`: it is their pid 1, with no process in between) and
//! inside a cgroup v2 directory (`CLONE_INTO_CGROUP`: never outside the
//! container's limits, and no write to `cgroup.procs`).

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::unistd::Pid;

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` up to `cgroup` (CLONE_ARGS_SIZE_VER2, Linux 5.7).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Which side of the clone the caller is on.
#[derive(Debug, PartialEq, Eq)]
pub enum Forked {
    Parent(Pid),
    Child,
}

/// Forks a child in new namespaces of `namespaces` (`CLONE_NEW*` flags,
/// and `CLONE_PARENT` for a child of our own parent, which signals it as
/// it would us) that starts in the cgroup `cgroup` is open on (a directory
/// fd of a cgroup2 filesystem), if given.
///
/// # Safety
/// As for fork(2) in a process that may have threads: until it execs or
/// exits, the child runs only what the calling code knows to be safe there.
pub unsafe fn fork(namespaces: nix::sched::CloneFlags, cgroup: Option<BorrowedFd<'_>>) -> nix::Result<Forked> {
    let mut args = CloneArgs {
        flags: namespaces.bits() as u64 | cgroup.map_or(0, |_| CLONE_INTO_CGROUP),
        // clone3 wants none with CLONE_PARENT: the child takes ours.
        exit_signal: if namespaces.contains(nix::sched::CloneFlags::CLONE_PARENT) { 0 } else { libc::SIGCHLD as u64 },
        cgroup: cgroup.map_or(0, |fd| fd.as_raw_fd() as u64),
        ..Default::default()
    };
    let size = std::mem::size_of::<CloneArgs>();
    let ret = libc::syscall(libc::SYS_clone3, &mut args as *mut CloneArgs, size);
    match ret {
        -1 => Err(Errno::last()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(Pid::from_raw(pid as i32))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_args_is_the_kernels_version_2_layout() {
        assert_eq!(std::mem::size_of::<CloneArgs>(), 88);
    }
}
