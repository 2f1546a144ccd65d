//! The last step of a child we forked into a container: the engine's init
//! steps (namespaces, rootfs for an init, confinement, exec), or, if they or
//! our own steps before them fail, the failure told to the parent in the
//! engine's words, as the engine's intermediate process would.

use std::mem::ManuallyDrop;
use std::os::fd::BorrowedFd;

use libcontainer::process::args::{ContainerArgs, ContainerType};
use libcontainer::process::channel::{InitReceiver, MainSender};
use nix::sched::CloneFlags;
use nix::unistd::Pid;

use crate::engine::rootfs::prepare::Rootfs;
use crate::sys::procfs::ProcFd;
use crate::sys::syscall::LinuxSyscall;

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
    leave(args, main_sender, failed)
}

/// [`run`] for an init whose rootfs our steps make: after `before`, it
/// joins the namespaces `original` (its spec as the command made it) gives
/// by path, unshares its mount (and cgroup) namespace, takes its stdio, makes the
/// rootfs (the hooks between, as the engine's init runs them), then runs
/// the engine's init steps as for a process joining a container, which
/// leave the rootfs, masked and read-only paths alone and do the rest:
/// namespaces, confinement, the wait for `start`, the exec.
pub fn run_own_rootfs<E: std::fmt::Display>(
    args: &ContainerArgs,
    original: &oci_spec::runtime::Spec,
    rootfs: &Rootfs,
    unshare: CloneFlags,
    main_sender: &mut MainSender,
    init_receiver: &mut InitReceiver,
    before: impl FnOnce() -> Result<(), E>,
) -> ! {
    let failed = match before().map_err(|e| e.to_string()).and_then(|()| own_rootfs(args, original, rootfs, unshare, main_sender, init_receiver)) {
        Err(words) => Some(words),
        Ok(()) => {
            // Never dropped (this process execs or exits): a cloned
            // NotifyListener shares the fd the wait for `start` reads.
            let tenant = ManuallyDrop::new(ContainerArgs {
                container_type: ContainerType::TenantContainer { exec_notify_fd: -1 },
                stdin: None,
                stdout: None,
                stderr: None,
                ..args.clone()
            });
            libcontainer::process::init::process::container_init_process(&tenant, main_sender, init_receiver)
                .err()
                .map(|e| e.to_string())
        }
    };
    leave(args, main_sender, failed)
}

/// The init's steps for our rootfs, in runc's order.
fn own_rootfs(
    args: &ContainerArgs,
    original: &oci_spec::runtime::Spec,
    rootfs: &Rootfs,
    unshare: CloneFlags,
    main_sender: &mut MainSender,
    init_receiver: &mut InitReceiver,
) -> Result<(), String> {
    join_by_path(original).map_err(|e| e.to_string())?;
    nix::sched::unshare(unshare).map_err(|e| format!("unshare({unshare:?}): {e}"))?;
    take_stdio(args).map_err(|e| format!("dup2 of the init's stdio: {e}"))?;
    let root = rootfs.before_hooks(&LinuxSyscall).map_err(|e| e.to_string())?;
    if let Some(hooks) = args.spec.hooks() {
        main_sender.hook_request().map_err(|e| e.to_string())?;
        init_receiver.wait_for_hook_request_done().map_err(|e| e.to_string())?;
        let state = args.container.as_ref().map(|c| &c.state);
        libcontainer::hooks::run_hooks(hooks.create_container().as_ref(), state, None, None, None)
            .map_err(|e| format!("createContainer hooks: {e}"))?;
    }
    let proc = match rootfs.sysctl.is_empty() {
        true => None,
        false => Some(ProcFd::new().map_err(|e| e.to_string())?),
    };
    rootfs.after_hooks(&LinuxSyscall, root, proc.as_ref()).map_err(|e| e.to_string())?;
    reopen_dev_null().map_err(|e| format!("reopen /dev/null: {e}"))
}

/// setns(2) into each namespace `spec` gives by path that the engine's
/// steps would otherwise join, before pivot_root hides the host's /proc.
fn join_by_path(spec: &oci_spec::runtime::Spec) -> Result<(), String> {
    let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    for ns in listed.into_iter().flatten() {
        let (Some(path), Some(flag)) = (ns.path(), crate::engine::process::init_launch::joined_by_init(ns.typ())) else {
            continue;
        };
        let file = std::fs::File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?;
        nix::sched::setns(file, flag).map_err(|e| format!("setns {}: {e}", path.display()))?;
    }
    Ok(())
}

/// The stdio the caller gave, as the engine's init takes it (this route
/// has no console).
fn take_stdio(args: &ContainerArgs) -> nix::Result<()> {
    for (fd, to) in [(args.stdin, 0), (args.stdout, 1), (args.stderr, 2)] {
        if let Some(fd) = fd {
            nix::unistd::dup2(fd, to)?;
            nix::unistd::close(fd)?;
        }
    }
    Ok(())
}

/// Stdio that is the host's /dev/null becomes the container's, as runc's
/// init does after pivot_root.
fn reopen_dev_null() -> nix::Result<()> {
    use nix::fcntl::OFlag;
    let null = nix::fcntl::open("/dev/null", OFlag::O_RDWR | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty())?;
    let null_rdev = nix::sys::stat::fstat(null)?.st_rdev;
    for fd in 0..3 {
        let Ok(st) = nix::sys::stat::fstat(fd) else { continue };
        if st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == null_rdev {
            nix::unistd::dup2(null, fd)?;
        }
    }
    nix::unistd::close(null)
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
