//! The last step of a child we forked into a container: the engine's init
//! steps, or ours (`init_steps` on our rootfs route, `exec_steps` for an
//! exec'd process), from namespaces to the exec; or, if they or the steps
//! before them fail, the failure told to the parent through the engine's
//! channel, as its intermediate would.

use std::os::fd::BorrowedFd;

use libcontainer::process::args::{ContainerArgs, ContainerType};
use libcontainer::process::channel::{InitReceiver, MainSender};
use nix::unistd::Pid;

use crate::engine::process::exec_steps;
use crate::engine::process::init_steps::{self, Init};

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
        Ok(()) => {
            libcontainer::process::init::process::container_init_process(args, main_sender, init_receiver).err().map(|e| e.to_string())
        }
    };
    leave(args, main_sender, failed)
}

/// [`run`] for an init whose rootfs our steps make: after `before`, our
/// own init steps (`init_steps`), from its namespaces to its exec.
pub fn run_own_rootfs<E: std::fmt::Display>(
    init: &Init,
    main_sender: &mut MainSender,
    init_receiver: &mut InitReceiver,
    before: impl FnOnce() -> Result<(), E>,
) -> ! {
    let failed = match before() {
        Err(e) => e.to_string(),
        Ok(()) => match init_steps::run(init, main_sender, init_receiver) {
            Err(e) => e.to_string(),
            Ok(never) => match never {},
        },
    };
    leave(init.args, main_sender, Some(failed))
}

/// [`run`] for an exec'd process: after `before`, our own steps
/// (`exec_steps`), from the container's namespaces to the exec.
pub fn run_exec<E: std::fmt::Display>(
    args: &ContainerArgs,
    namespaces: &exec_steps::Namespaces,
    notify: Option<BorrowedFd>,
    main_sender: &mut MainSender,
    before: impl FnOnce() -> Result<(), E>,
) -> ! {
    let failed = match before() {
        Err(e) => e.to_string(),
        Ok(()) => match exec_steps::run(args, namespaces, notify, main_sender) {
            Err(e) => e.to_string(),
            Ok(never) => match never {},
        },
    };
    leave(args, main_sender, Some(failed))
}

/// Tells the parent why the init failed, if it did, and leaves.
fn leave(args: &ContainerArgs, main_sender: &mut MainSender, failed: Option<String>) -> ! {
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
