//! setns(2) into a pid namespace for the caller's future children only:
//! the kernel moves `pid_ns_for_children`, never the caller. So an exec'd
//! process can be forked straight into a container's pid namespace,
//! without a process in between that joins it and forks again.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{open, OFlag};
use nix::sched::{setns, CloneFlags};
use nix::sys::stat::Mode;

/// While this lives, the calling thread's children are born in the joined
/// namespace; dropping it returns them to the thread's own.
#[derive(Debug)]
pub struct ChildrenPidNs {
    own: OwnedFd,
}

#[derive(Debug, thiserror::Error)]
pub enum PidNsError {
    #[error("open {path}: {errno}")]
    Open { path: String, errno: nix::Error },
    #[error("setns {path} CLONE_NEWPID: {errno}")]
    Setns { path: String, errno: nix::Error },
}

/// Joins the pid namespace at `target` (a `/proc/PID/ns/pid`) for the
/// calling thread's children.
pub fn enter(target: &Path) -> Result<ChildrenPidNs, PidNsError> {
    let own_path = "/proc/thread-self/ns/pid";
    let own = open_ns(Path::new(own_path))?;
    let joined = open_ns(target)?;
    setns(joined.as_fd(), CloneFlags::CLONE_NEWPID).map_err(|errno| PidNsError::Setns { path: target.display().to_string(), errno })?;
    Ok(ChildrenPidNs { own })
}

impl ChildrenPidNs {
    /// The descriptor of our own namespace, which a child must close.
    pub fn own_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.own.as_fd()
    }
}

fn open_ns(path: &Path) -> Result<OwnedFd, PidNsError> {
    open(path, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty())
        .map(|fd| unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
        .map_err(|errno| PidNsError::Open { path: path.display().to_string(), errno })
}

impl Drop for ChildrenPidNs {
    fn drop(&mut self) {
        if let Err(err) = setns(self.own.as_fd(), CloneFlags::CLONE_NEWPID) {
            tracing::warn!("setns back to our own pid namespace: {err}");
        }
    }
}
