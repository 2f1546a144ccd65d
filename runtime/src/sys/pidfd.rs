//! A process held by a pidfd. A pid names a process only until it is
//! reaped, when the kernel may give the pid to another; a pidfd keeps
//! naming the one process it was opened for, and says once it is reaped.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::errno::Errno;

/// One process, by a pidfd.
#[derive(Debug)]
pub struct PidFd {
    fd: OwnedFd,
    pid: i32,
}

impl PidFd {
    /// pidfd_open(2) of `pid`: ESRCH once no process has it.
    pub fn open(pid: i32) -> Result<Self, Errno> {
        // SAFETY: plain syscall with integer arguments.
        let fd = Errno::result(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
        // SAFETY: the kernel just returned this descriptor to us.
        Ok(PidFd { fd: unsafe { OwnedFd::from_raw_fd(fd as i32) }, pid })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// pidfd_send_signal(2) of `signal` (0: only whether it may be sent).
    pub fn signal(&self, signal: i32) -> Result<(), Errno> {
        // SAFETY: a valid pidfd; no siginfo; no flags.
        Errno::result(unsafe {
            libc::syscall(libc::SYS_pidfd_send_signal, self.fd.as_raw_fd(), signal, std::ptr::null::<libc::siginfo_t>(), 0)
        })
        .map(drop)
    }

    /// Whether the process still holds its pid: true until it is reaped
    /// (a zombie keeps its pid, and no other process can have it yet).
    pub fn holds_its_pid(&self) -> bool {
        self.signal(0) != Err(Errno::ESRCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::wait::waitpid;
    use nix::unistd::{fork, ForkResult, Pid};

    /// A child that exits at once, not reaped yet.
    fn exited_child() -> Pid {
        // SAFETY: the child only calls _exit.
        match unsafe { fork() }.expect("fork") {
            ForkResult::Child => unsafe { libc::_exit(0) },
            ForkResult::Parent { child } => child,
        }
    }

    #[test]
    fn a_zombie_holds_its_pid_and_a_reaped_process_does_not() {
        let child = exited_child();
        let held = PidFd::open(child.as_raw()).expect("pidfd_open of our child");
        // Waits until it has exited, leaving it a zombie (WNOWAIT).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid(2) writes only `info`.
        let waited = unsafe { libc::waitid(libc::P_PID, child.as_raw() as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
        assert_eq!(waited, 0, "waitid: {}", Errno::last());
        assert!(held.holds_its_pid(), "a zombie's pid is not free yet");
        waitpid(child, None).expect("reap");
        assert!(!held.holds_its_pid(), "a reaped process's pid may be anyone's");
        assert_eq!(held.signal(0), Err(Errno::ESRCH));
    }

    #[test]
    fn a_pid_no_process_has_is_esrch() {
        let child = exited_child();
        waitpid(child, None).expect("reap");
        // Nothing can take the pid between the reap and the open unless
        // the kernel's pids wrap around in that moment.
        assert_eq!(PidFd::open(child.as_raw()).err(), Some(Errno::ESRCH));
    }
}
