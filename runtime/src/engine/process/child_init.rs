//! The last step of a child we forked into a container: the engine's init
//! steps (namespaces, rootfs for an init, confinement, exec), or, if they or
//! our own steps before them fail, the failure told to the parent in the
//! engine's words, as the engine's intermediate process would.

use std::os::fd::BorrowedFd;

use libcontainer::process::args::{ContainerArgs, ContainerType};
use libcontainer::process::channel::{InitReceiver, MainSender};
use nix::unistd::Pid;

/// Runs `before`, then the engine's init steps; never returns. A failure
/// reaches the parent as text only (the engine's channel carries words).
pub fn run<E: std::fmt::Display>(
    args: &ContainerArgs,
    main_sender: &mut MainSender,
    init_receiver: &mut InitReceiver,
    before: impl FnOnce() -> Result<(), E>,
) -> ! {
    let failed = match before() {
        Err(e) => Some(e.to_string()),
        Ok(()) => libcontainer::process::init::process::container_init_process(args, main_sender, init_receiver)
            .err()
            .map(|e| e.to_string()),
    };
    if let Some(words) = failed {
        let _ = main_sender.exec_failed(words.clone());
        if let ContainerType::TenantContainer { exec_notify_fd } = args.container_type {
            // SAFETY: the caller's pipe, open in this child until its exec.
            let _ = nix::unistd::write(unsafe { BorrowedFd::borrow_raw(exec_notify_fd) }, words.as_bytes());
        }
    }
    // SAFETY: a forked child leaves without running its parent's exit hooks.
    unsafe { libc::_exit(255) }
}

/// A child that failed its setup, or whose parent failed serving it: it
/// is not returned to the caller, so it is killed and reaped here.
pub fn kill_and_reap(pid: Pid) {
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(pid, None);
}
