//! The init's steps on our rootfs route, from its namespaces to its exec,
//! in runc's order: our rootfs steps between the session and attributes
//! every process takes and the confinement it ends with (`confine`). The
//! engine's init cannot be split around a rootfs of ours: its console is
//! set up where ours must already be masked, and it runs startContainer
//! hooks only for a rootfs of its own (docs/rootfs-plan.md, step 9).

use std::convert::Infallible;
use std::os::fd::BorrowedFd;

use libcontainer::process::args::ContainerArgs;
use libcontainer::process::channel::{InitReceiver, MainSender};
use libcontainer::syscall::Syscall as EngineSyscall;
use nix::sched::CloneFlags;
use oci_spec::runtime::{LinuxNamespaceType, Spec};

pub use crate::engine::process::confine::InitError;
pub use crate::engine::process::confine::StartHooks;
use crate::engine::process::confine::{self, call, io_errno, said, step, AtStart};
use crate::engine::rootfs::prepare::Rootfs;
use crate::sys::procfs::ProcFd;
use crate::sys::syscall::LinuxSyscall;

/// What `create` gives our init beyond the engine's arguments.
pub struct OwnInit<'a> {
    pub rootfs: &'a Rootfs,
    pub start_hooks: StartHooks<'a>,
}

/// What the init is given.
pub struct Init<'a> {
    /// Its spec is the command's: the namespaces the clone made are
    /// listed too, and those given by path are joined here.
    pub args: &'a ContainerArgs,
    pub own: &'a OwnInit<'a>,
    /// The namespaces the init makes itself once in its cgroup (mount, and
    /// cgroup and UTS when new).
    pub unshare: CloneFlags,
    /// Those given by path were joined before its clone (by the first
    /// child, before it made the user namespace).
    pub paths_joined: bool,
    /// Its end of the socket a seccomp notify filter's fd goes to `create` on.
    pub seccomp_notify: Option<BorrowedFd<'a>>,
}

/// Runs the init's steps and execs its program; returns only on failure.
pub fn run(init: &Init, main_sender: &mut MainSender, init_receiver: &mut InitReceiver) -> Result<Infallible, InitError> {
    let args = init.args;
    let engine = args.syscall.create_syscall();
    let engine = engine.as_ref();

    enter_namespaces(init)?;
    if let Some(devices) = crate::engine::process::net_devices::listed(&args.spec) {
        let addrs = init_receiver.wait_for_move_network_device().map_err(step("waiting for linux.netDevices"))?;
        crate::engine::process::net_devices::set_up(devices, &addrs).map_err(said)?;
    }
    confine::begin(args, engine)?;
    if init.unshare.contains(CloneFlags::CLONE_NEWUTS) {
        set_host_names(&args.spec, engine)?;
    }
    make_rootfs(init, engine, main_sender, init_receiver)?;
    confine::to_exec(args, engine, main_sender, AtStart::StartContainerHooks(&init.own.start_hooks), init.seccomp_notify)
}

/// setns(2) into each namespace the spec gives by path that the init
/// joins itself, while the host's /proc still names them; the mount
/// namespace last, as every path before it is the host's; then the new
/// ones it makes.
fn enter_namespaces(init: &Init) -> Result<(), InitError> {
    if !init.paths_joined {
        join_by_path(&init.args.spec)?;
    }
    let listed = init.args.spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    let linux = init.args.spec.linux().as_ref();
    if listed.into_iter().flatten().any(|ns| ns.typ() == LinuxNamespaceType::Time && ns.path().is_none()) {
        crate::engine::process::time_ns::make_and_enter(linux.and_then(|l| l.time_offsets().as_ref())).map_err(said)?;
    }
    // Our rootfs steps then run in it, as runc's do (the bundle's rootfs
    // is found there; its pivot_root changes that namespace's root).
    if let Some(path) = listed.into_iter().flatten().find(|ns| ns.typ() == LinuxNamespaceType::Mount).and_then(|ns| ns.path().as_deref()) {
        join(path, CloneFlags::CLONE_NEWNS)?;
    }
    nix::sched::unshare(init.unshare).map_err(call("new namespaces", format!("unshare({:?})", init.unshare)))
}

/// setns(2) into each namespace `spec` gives by path that the init joins
/// first (all but pid, user and mount).
pub fn join_by_path(spec: &Spec) -> Result<(), InitError> {
    let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    for ns in listed.into_iter().flatten() {
        if let (Some(path), Some(flag)) = (ns.path(), crate::engine::process::init_launch::joined_by_init(ns.typ())) {
            join(path, flag)?;
        }
    }
    Ok(())
}

/// setns(2) into the namespace of type `flag` at `path`.
fn join(path: &std::path::Path, flag: CloneFlags) -> Result<(), InitError> {
    let file = std::fs::File::open(path).map_err(|e| call("joining a namespace", format!("open {}", path.display()))(io_errno(&e)))?;
    nix::sched::setns(file, flag).map_err(call("joining a namespace", format!("setns {}", path.display())))
}

/// Whether `spec` gives a namespace by path that [`join_by_path`] joins.
pub fn joins_by_path(spec: &Spec) -> bool {
    let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    listed.into_iter().flatten().any(|ns| ns.path().is_some() && crate::engine::process::init_launch::joined_by_init(ns.typ()).is_some())
}

fn set_host_names(spec: &Spec, engine: &dyn EngineSyscall) -> Result<(), InitError> {
    if let Some(name) = spec.hostname() {
        engine.set_hostname(name).map_err(step("hostname"))?;
    }
    if let Some(name) = spec.domainname() {
        engine.set_domainname(name).map_err(step("domainname"))?;
    }
    Ok(())
}

/// The rootfs in runc's order: mounts, the createContainer hooks, pivot_root,
/// stdio that was the host's /dev/null, the console, then the confinement
/// of paths, which covers the console too.
fn make_rootfs(
    init: &Init,
    engine: &dyn EngineSyscall,
    main_sender: &mut MainSender,
    init_receiver: &mut InitReceiver,
) -> Result<(), InitError> {
    let args = init.args;
    let root = init.own.rootfs.before_hooks(&LinuxSyscall).map_err(said)?;
    if let Some(hooks) = args.spec.hooks() {
        main_sender.hook_request().map_err(step("asking for the prestart hooks"))?;
        init_receiver.wait_for_hook_request_done().map_err(step("waiting for the prestart hooks"))?;
        let state = args.container.as_ref().map(|c| &c.state);
        libcontainer::hooks::run_hooks(hooks.create_container().as_ref(), state, None, None, None)
            .map_err(step("createContainer hooks"))?;
    }
    // A procfs of the container's pid namespace, opened before pivot_root.
    let proc = match init.own.rootfs.sysctl.is_empty() {
        true => None,
        false => Some(ProcFd::new().map_err(said)?),
    };
    init.own.rootfs.pivot_into(&LinuxSyscall, root).map_err(said)?;
    reopen_dev_null()?;
    if let Some(socket) = args.console_socket {
        libcontainer::tty::setup_console(engine, socket, true).map_err(step("the console"))?;
    }
    init.own.rootfs.confine(&LinuxSyscall, proc.as_ref()).map_err(said)
}

/// Stdio that is the host's /dev/null becomes the container's, as runc's
/// init does after pivot_root.
fn reopen_dev_null() -> Result<(), InitError> {
    use nix::fcntl::OFlag;
    let fail = |c: &'static str| call("reopening /dev/null", c);
    let null =
        nix::fcntl::open("/dev/null", OFlag::O_RDWR | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty()).map_err(fail("open /dev/null"))?;
    let null_rdev = nix::sys::stat::fstat(null).map_err(fail("fstat /dev/null"))?.st_rdev;
    for fd in 0..3 {
        let Ok(st) = nix::sys::stat::fstat(fd) else { continue };
        if st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == null_rdev {
            nix::unistd::dup2(null, fd).map_err(fail("dup2"))?;
        }
    }
    nix::unistd::close(null).map_err(fail("close"))
}
