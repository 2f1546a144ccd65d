//! Starts a container's init as one child of ours, with no intermediate
//! process. libcontainer forks an intermediate that joins the cgroups,
//! unshares the pid namespace and forks the init. Here the init is cloned
//! straight into a new pid namespace (`clone3(CLONE_NEWPID)`; a pid
//! namespace given by path is joined for our children first): on cgroup v2
//! born in its cgroup, made and limited first (`CLONE_INTO_CGROUP`); on v1
//! it waits while we put it in its cgroups and apply the resources. Then
//! it runs the init's steps: ours on our rootfs route (`init_steps`), else
//! the engine's, as the engine's init would. Its new
//! network and IPC namespaces are made by the same clone (see
//! [`born_namespaces`]).
//!
//! The engine's intermediate starts it only where the engine makes the
//! rootfs and the spec needs our init's steps ([`needs_our_init`]); create
//! refuses systemd's driver on a v1 host, which the engine's intermediate
//! served before. A new user namespace is made by the init's clone
//! with the others, mapped by us while the init waits; one joined by path,
//! or a new one with other namespaces given by path (joined before it is
//! made), is joined or made by a first child, which clones the init as our
//! child (`user_ns`). On our rootfs route the
//! init makes a new time namespace itself (`time_ns`), sends a seccomp
//! notify filter's fd to us on a socket pair of its own (`seccomp_notify`),
//! and finds the network devices we moved into its namespace before it
//! went on (`net_devices`); the engine's init would need the engine's
//! intermediate or main process for each.
//!
//! Where systemd places the cgroup (its driver on v2) the scope does not
//! exist before its first process: the init is cloned where we are, and
//! we ask systemd to start the scope with its pid (libcgroups' manager,
//! which waits until it is there) while it waits at its go signal, as
//! the engine's intermediate asks it for itself.

use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::rc::Rc;

use libcgroups::common::{CgroupManager, ControllerOpt};
use libcontainer::process::args::ContainerArgs;
use libcontainer::process::channel::{self, ChannelError};
use nix::sched::CloneFlags;
use nix::unistd::Pid;
use oci_spec::runtime::{ContainerState, LinuxNamespaceType, Spec};

use crate::engine::cgroup::fs::Hierarchy;
use crate::engine::cgroup::{manager, v1_setup, v2_setup};
use crate::engine::process::child_init;
use crate::engine::process::confine::{step, InitError};
use crate::engine::process::init_steps::{Init, OwnInit};
use crate::engine::process::{net_devices, seccomp_notify, user_ns};
use crate::error::{Error, Result};
use crate::sys::children_pid_ns;
use crate::sys::clone3::{self, Forked};

/// Which path starts the init.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Direct,
    /// The engine's intermediate process, and why.
    Engine(&'static str),
}

/// What of `spec` only our own init steps serve without the engine's
/// intermediate or main process: a seccomp notify filter (its fd comes to
/// us on a socket pair), network devices (moved in before the init goes
/// on) and a time namespace (the init makes or joins it). Where the engine
/// makes the rootfs its init runs instead, so such a spec takes the
/// engine's route there; this names why.
pub fn needs_our_init(spec: &Spec) -> Option<&'static str> {
    let linux = spec.linux().as_ref()?;
    if user_ns::Plan::of(spec) != user_ns::Plan::None {
        return Some("a user namespace where the engine makes the rootfs");
    }
    if seccomp_notify::filter(spec).is_some() {
        return Some("a seccomp notify filter where the engine makes the rootfs");
    }
    if net_devices::listed(spec).is_some() {
        return Some("network devices where the engine makes the rootfs");
    }
    let time = linux.namespaces().iter().flatten().any(|ns| ns.typ() == LinuxNamespaceType::Time);
    time.then_some("a time namespace where the engine makes the rootfs")
}

/// Clones the init `args` describes and returns its pid once the engine's
/// init steps are done and it waits for `start`.
/// With `own`, our init steps run, our rootfs steps make the rootfs
/// (`engine::rootfs::own`).
pub fn spawn(args: &ContainerArgs, id: &str, cgroups: &[Hierarchy], own: Option<&OwnInit>) -> Result<Pid> {
    let channel_err = |e: ChannelError| Error::engine("create", id, &e);
    let (mut main_sender, mut main_receiver) = channel::main_channel().map_err(channel_err)?;
    let (mut init_sender, mut init_receiver) = channel::init_channel().map_err(channel_err)?;
    let (go_read, go_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::sys("pipe2 for the init's start", e))?;
    let pid_ns = pid_namespace(args);
    let (flags, joined) = match pid_ns {
        PidNs::New => (CloneFlags::CLONE_NEWPID, None),
        PidNs::Join(path) => (CloneFlags::empty(), Some(children_pid_ns::enter(path).map_err(|e| Error::Invalid(format!("create: {e}")))?)),
        PidNs::Host => (CloneFlags::empty(), None),
    };
    let config = &args.cgroup_config;
    let by_systemd = manager::placed_by_systemd(&config.cgroup_path, config.systemd_cgroup, cgroups);
    let born_in = match v2_setup::unified_root(cgroups) {
        Some(root) if !by_systemd => Some(v2_setup::prepare(root, config, resources(args))?),
        _ => None,
    };
    let user = match own {
        Some(_) => user_ns::Plan::of(&args.spec),
        None => user_ns::Plan::None,
    };
    // A new user namespace comes first in the clone and owns the others.
    let born = born_namespaces(&args.spec) | if user == user_ns::Plan::New { CloneFlags::CLONE_NEWUSER } else { CloneFlags::empty() };
    // A joined one owns only what is made after the join: the first child
    // joins it, then clones the init in these and hands its pid over.
    let (first, then) = match user.first_child() {
        true => (CloneFlags::empty(), flags | born),
        false => (flags | born, CloneFlags::empty()),
    };
    let handoff = match user.first_child() {
        true => Some(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::sys("pipe2 for the init's pid", e))?),
        false => None,
    };
    // The mount, cgroup and UTS namespaces our init steps make: unshared by
    // the init itself once it is in its cgroup.
    let unshared = own.map_or(CloneFlags::empty(), |_| own_namespaces(&args.spec));
    // The engine's init steps need a spec without the namespaces the clone
    // made; ours read the spec as the command made it.
    let engine_spec = match own {
        Some(_) => None,
        None => (!born.is_empty()).then(|| without(&args.spec, born)),
    };
    // Our init steps send a notify filter's fd on it; `create`'s end first.
    let notify = match (own, seccomp_notify::filter(&args.spec)) {
        (Some(_), Some(_)) => Some(seccomp_notify::pair().map_err(|e| Error::Invalid(format!("create {id}: {e}")))?),
        _ => None,
    };
    // SAFETY: the child only runs the engine's init steps and exits or
    // execs, as the engine's own forked children do.
    let forked = unsafe { clone3::fork(first, born_in.as_ref().map(|fd| fd.as_fd())) };
    match forked {
        Ok(Forked::Child) => {
            // Never dropped (the child execs or exits): a cloned
            // NotifyListener shares the parent's fd and would close it.
            let with_spec = engine_spec.map(|spec| ManuallyDrop::new(ContainerArgs { spec: Rc::new(spec), ..args.clone() }));
            let args = with_spec.as_deref().unwrap_or(args);
            if let Some(ns) = &joined {
                let _ = nix::unistd::close(ns.own_fd().as_raw_fd());
            }
            if let Some(dir) = &born_in {
                let _ = nix::unistd::close(dir.as_raw_fd());
            }
            let _ = main_receiver.close();
            let _ = init_sender.close();
            drop(go_write);
            if let Some((read, _)) = &handoff {
                let _ = nix::unistd::close(read.as_raw_fd());
            }
            let paths_joined = user == user_ns::Plan::NewAfterJoins;
            let first_child = handoff.as_ref().map(|(_, handoff)| FirstChild { then, handoff });
            let before = || before_init(args, go_read, &user, first_child);
            if let Some((ours, _)) = &notify {
                let _ = nix::unistd::close(ours.as_raw_fd());
            }
            let seccomp_notify = notify.as_ref().map(|(_, theirs)| theirs.as_fd());
            match own {
                Some(own) => {
                    let init = Init { args, own, unshare: unshared, paths_joined, seccomp_notify };
                    child_init::run_own_rootfs(&init, &mut main_sender, &mut init_receiver, before)
                }
                None => child_init::run(args, &mut main_sender, &mut init_receiver, before),
            }
        }
        Ok(Forked::Parent(pid)) => {
            drop(joined);
            let cgroups = if born_in.is_some() { None } else { Some(cgroups) };
            drop(go_read);
            let _ = main_sender.close();
            let _ = init_receiver.close();
            let notify = notify.map(|(ours, _)| ours);
            let start = Start { go: go_write, user: &user, handoff: handoff.map(|(read, _)| read) };
            let mut init = pid;
            let result = serve(args, cgroups, id, &mut init, start, notify, &mut main_receiver, &mut init_sender);
            let _ = init_sender.close();
            let _ = main_receiver.close();
            if result.is_err() {
                child_init::kill_and_reap(init);
            }
            result.map(|()| init)
        }
        Err(err) => Err(Error::sys("clone3 of the container's init", err)),
    }
}

/// The namespaces the init is cloned in besides its pid namespace: the
/// network and IPC namespaces the spec lists without a path. Made by the
/// clone, in our process's cgroup, they are not charged to the container's
/// memory limit on v1 or under systemd's driver (a network namespace is
/// ~80 KiB of kernel memory; the scope starts after the clone; on v2 with
/// cgroupfs the init is born in its cgroup either way), as crun's are not. The
/// others stay the engine's: it pivots only in a mount namespace it was
/// told of, sets the hostname only in a UTS one, and a cgroup namespace
/// must be made after the cgroup is joined.
fn born_namespaces(spec: &Spec) -> CloneFlags {
    new_namespaces(spec) & (CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWIPC)
}

/// The new mount, cgroup and UTS namespaces of `spec`, which the init
/// unshares itself on our rootfs route (a cgroup namespace after it is in
/// its cgroup, so that the container's cgroup is its root).
fn own_namespaces(spec: &Spec) -> CloneFlags {
    new_namespaces(spec) & (CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWCGROUP | CloneFlags::CLONE_NEWUTS)
}

/// The namespaces `spec` lists without a path, as clone flags.
fn new_namespaces(spec: &Spec) -> CloneFlags {
    let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    listed
        .into_iter()
        .flatten()
        .filter(|ns| ns.path().is_none())
        .filter_map(|ns| clone_flag(ns.typ()))
        .fold(CloneFlags::empty(), |flags, flag| flags | flag)
}

/// The clone flag of a namespace type.
pub fn clone_flag(typ: LinuxNamespaceType) -> Option<CloneFlags> {
    match typ {
        LinuxNamespaceType::Network => Some(CloneFlags::CLONE_NEWNET),
        LinuxNamespaceType::Ipc => Some(CloneFlags::CLONE_NEWIPC),
        LinuxNamespaceType::Uts => Some(CloneFlags::CLONE_NEWUTS),
        LinuxNamespaceType::Cgroup => Some(CloneFlags::CLONE_NEWCGROUP),
        LinuxNamespaceType::Mount => Some(CloneFlags::CLONE_NEWNS),
        LinuxNamespaceType::Pid => Some(CloneFlags::CLONE_NEWPID),
        LinuxNamespaceType::User => Some(CloneFlags::CLONE_NEWUSER),
        LinuxNamespaceType::Time => Some(crate::engine::process::time_ns::flag()),
    }
}

/// `spec` without the new namespaces in `made_by_us`, which the engine's
/// init steps would otherwise make again.
fn without(spec: &Spec, made_by_us: CloneFlags) -> Spec {
    let made =
        |ns: &oci_spec::runtime::LinuxNamespace| ns.path().is_none() && clone_flag(ns.typ()).is_some_and(|flag| made_by_us.contains(flag));
    let mut spec = spec.clone();
    if let Some(listed) = spec.linux_mut().as_mut().and_then(|l| l.namespaces_mut().as_mut()) {
        listed.retain(|ns| !made(ns));
    }
    spec
}

/// The setns(2) type of a namespace the init joins by path on the rootfs
/// route: all but pid, which our children enter, and user and mount, which
/// that route does not take.
pub fn joined_by_init(typ: LinuxNamespaceType) -> Option<CloneFlags> {
    let joined = CloneFlags::CLONE_NEWNET
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWCGROUP
        | crate::engine::process::time_ns::flag();
    clone_flag(typ).filter(|flag| joined.contains(*flag))
}

enum PidNs<'a> {
    New,
    Join(&'a Path),
    Host,
}

fn pid_namespace(args: &ContainerArgs) -> PidNs<'_> {
    let pid = args
        .spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .and_then(|ns| ns.iter().find(|n| n.typ() == LinuxNamespaceType::Pid));
    match pid.map(|n| n.path().as_deref()) {
        Some(Some(path)) => PidNs::Join(path),
        Some(None) => PidNs::New,
        None => PidNs::Host,
    }
}

/// How the child we cloned is let go.
struct Start<'a> {
    /// Its go signal, once it is in its cgroup; for `Plan::NewAfterJoins`
    /// a second one once its user namespace is mapped.
    go: OwnedFd,
    user: &'a user_ns::Plan,
    /// Where a first child hands over the init's pid.
    handoff: Option<OwnedFd>,
}

/// The parent's part, what the engine's main process does for an init:
/// the cgroup (before the child may go on; `cgroups` None when it was born
/// in it), the maps of its new user namespace, the init's pid where the
/// child clones it (`init` is then the init's), network devices, the
/// prestart and createRuntime hooks when it asks, a seccomp notify
/// filter's fd to its listener (on `notify`), then its readiness.
#[allow(clippy::too_many_arguments)]
fn serve(
    args: &ContainerArgs,
    cgroups: Option<&[Hierarchy]>,
    id: &str,
    init: &mut Pid,
    start: Start<'_>,
    notify: Option<OwnedFd>,
    main_receiver: &mut channel::MainReceiver,
    init_sender: &mut channel::InitSender,
) -> Result<()> {
    let engine_err = |e: &(dyn std::error::Error + 'static)| Error::engine("create", id, e);
    if let Some(cgroups) = cgroups {
        join_cgroup(args, cgroups, *init)?;
    }
    if *start.user == user_ns::Plan::New {
        user_ns::write_maps(&args.spec, *init).map_err(|e| Error::Invalid(format!("create {id}: user namespace: {e}")))?;
    }
    nix::unistd::write(&start.go, b"g").map_err(|e| Error::sys("write to the init's start pipe", e))?;
    // A first child that leaves early said why on the channel, as a failed init does.
    let left = |main_receiver: &mut channel::MainReceiver| match main_receiver.wait_for_init_ready() {
        Err(e) => engine_err(&e),
        Ok(()) => Error::Invalid(format!("create {id}: the init's first child left without starting it")),
    };
    if let Some(handoff) = &start.handoff {
        let first = *init;
        if *start.user == user_ns::Plan::NewAfterJoins {
            if !user_ns::made(handoff) {
                return Err(left(main_receiver));
            }
            user_ns::write_maps(&args.spec, first).map_err(|e| Error::Invalid(format!("create {id}: user namespace: {e}")))?;
            nix::unistd::write(&start.go, b"m").map_err(|e| Error::sys("write to the init's start pipe", e))?;
        }
        *init = user_ns::receive_init(handoff).ok_or_else(|| left(main_receiver))?;
        let _ = nix::sys::wait::waitpid(first, None);
    }
    drop(start.go);
    let pid = *init;
    if let Some(devices) = net_devices::listed(&args.spec) {
        let addrs = net_devices::move_in(&args.spec, devices, pid.as_raw()).map_err(|e| Error::Invalid(format!("create {id}: {e}")))?;
        init_sender.move_network_device(addrs).map_err(|e| engine_err(&e))?;
    }
    if let Some(hooks) = args.spec.hooks() {
        main_receiver.wait_for_hook_request().map_err(|e| engine_err(&e))?;
        let state = args.container.as_ref().map(|c| &c.state);
        for list in [hooks.prestart(), hooks.create_runtime()] {
            libcontainer::hooks::run_hooks(list.as_ref(), state, None, Some(pid), None).map_err(|e| engine_err(&e))?;
        }
        init_sender.hook_done().map_err(|e| engine_err(&e))?;
    }
    if let Some(socket) = notify {
        seccomp_notify::serve(args, id, ContainerState::Creating, pid.as_raw(), &socket)
            .map_err(|e| Error::Invalid(format!("create {id}: {e}")))?;
    }
    main_receiver.wait_for_init_ready().map_err(|e| engine_err(&e))
}

/// The init into its cgroup, with the resources applied, as the engine's
/// intermediate does it for itself: on v1 from the command's hierarchies
/// (`v1_setup`), else through libcgroups' manager (systemd's: the scope
/// started with the init's pid, then its properties set), whose v1 device
/// list is then corrected.
fn join_cgroup(args: &ContainerArgs, cgroups: &[Hierarchy], pid: Pid) -> Result<()> {
    let resources = resources(args);
    let path = &args.cgroup_config.cgroup_path;
    if v1_setup::applies(cgroups, resources) {
        return v1_setup::join_and_limit(cgroups, path, pid, resources);
    }
    let cgroup_err = |e: &dyn std::fmt::Display| Error::Cgroup { path: path.clone(), reason: e.to_string() };
    let manager = libcgroups::common::create_cgroup_manager(args.cgroup_config.clone()).map_err(|e| cgroup_err(&e))?;
    manager.add_task(pid).map_err(|e| cgroup_err(&e))?;
    if let Some(resources) = resources {
        let disable_oom_killer = resources.memory().as_ref().and_then(|m| m.disable_oom_killer()).unwrap_or(false);
        let opts = ControllerOpt { resources, freezer_state: None, oom_score_adj: None, disable_oom_killer };
        manager.apply(&opts).map_err(|e| cgroup_err(&e))?;
    }
    v1_setup::take_back_console(cgroups, resources, pid)
}

fn resources(args: &ContainerArgs) -> Option<&oci_spec::runtime::LinuxResources> {
    args.spec.linux().as_ref().and_then(|l| l.resources().as_ref())
}

/// A first child's clone of the init: in `then`, its pid handed over on
/// `handoff` (`user_ns::clone_init`).
#[derive(Clone, Copy)]
struct FirstChild<'a> {
    then: CloneFlags,
    handoff: &'a OwnedFd,
}

/// The child's steps before the init's: wait until it is in its cgroup,
/// its user namespace (`user`: it becomes root in a new or joined one),
/// the init's clone where it is a first child, then the rlimits (the
/// intermediate's last step).
fn before_init(args: &ContainerArgs, go: OwnedFd, user: &user_ns::Plan, first: Option<FirstChild>) -> std::result::Result<(), InitError> {
    let mut byte = [0u8; 1];
    match nix::unistd::read(go.as_fd().as_raw_fd(), &mut byte) {
        Ok(1) => {}
        // The parent failed and kills us: nothing to report.
        _ => unsafe { libc::_exit(255) },
    }
    let syscall = args.syscall.create_syscall();
    let root = |syscall: &dyn libcontainer::syscall::Syscall| {
        syscall.set_id(nix::unistd::Uid::from_raw(0), nix::unistd::Gid::from_raw(0)).map_err(step("setresuid(0) in the user namespace"))
    };
    match (user, first) {
        (user_ns::Plan::None, _) => {}
        (user_ns::Plan::New, _) => root(syscall.as_ref())?,
        (user_ns::Plan::Join(path), _) => {
            user_ns::join(path)?;
            root(syscall.as_ref())?;
        }
        (user_ns::Plan::NewAfterJoins, Some(first)) => {
            user_ns::make_after_joins(&args.spec, first.handoff, &go)?;
            root(syscall.as_ref())?;
        }
        (user_ns::Plan::NewAfterJoins, None) => return Err(InitError::Said("a new user namespace after joins needs a first child".into())),
    }
    if let Some(first) = first {
        user_ns::clone_init(first.then, first.handoff)?;
    }
    drop(go);
    let rlimits = args.spec.process().as_ref().and_then(|p| p.rlimits().clone()).unwrap_or_default();
    for rlimit in &rlimits {
        syscall.set_rlimit(rlimit).map_err(step("process.rlimits"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{LinuxBuilder, LinuxNamespaceBuilder, SpecBuilder};

    fn spec(namespaces: &[LinuxNamespaceType], cgroups_path: &str) -> Spec {
        let namespaces: Vec<_> = namespaces.iter().map(|t| LinuxNamespaceBuilder::default().typ(*t).build().unwrap()).collect();
        let linux = LinuxBuilder::default().namespaces(namespaces).cgroups_path(cgroups_path).build().unwrap();
        SpecBuilder::default().linux(linux).build().unwrap()
    }

    #[test]
    fn new_network_and_ipc_namespaces_are_made_by_the_clone() {
        use LinuxNamespaceType::*;
        let spec = spec(&[Pid, Mount, Network, Ipc, Uts, Cgroup], "/pods/c1");
        let born = born_namespaces(&spec);
        assert_eq!(born, CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWIPC);
        let left: Vec<_> = without(&spec, born).linux().as_ref().unwrap().namespaces().as_ref().unwrap().iter().map(|n| n.typ()).collect();
        assert_eq!(left, [Pid, Mount, Uts, Cgroup]);
    }

    #[test]
    fn namespaces_given_by_path_are_joined_by_the_engine() {
        use LinuxNamespaceType::*;
        let mut spec = spec(&[Pid, Mount, Ipc], "/pods/c1");
        let joined = LinuxNamespaceBuilder::default().typ(Network).path("/var/run/netns/pod").build().unwrap();
        spec.linux_mut().as_mut().unwrap().namespaces_mut().as_mut().unwrap().push(joined);
        let born = born_namespaces(&spec);
        assert_eq!(born, CloneFlags::CLONE_NEWIPC);
        let left: Vec<_> = without(&spec, born)
            .linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .as_ref()
            .unwrap()
            .iter()
            .map(|n| (n.typ(), n.path().is_some()))
            .collect();
        assert_eq!(left, [(Pid, false), (Mount, false), (Network, true)]);
    }

    /// A seccomp notify filter, network devices, a time namespace and a user
    /// namespace: our init steps serve them (`seccomp_notify`,
    /// `net_devices`, `time_ns`, `user_ns`); `needs_our_init` names each,
    /// for `init::spawn` to send the spec the engine's way where the engine
    /// makes the rootfs.
    #[test]
    fn what_only_our_init_serves_is_named() {
        let with = |field: &str, value: serde_json::Value| {
            let mut linux = serde_json::json!({"namespaces": [{"type": "pid"}, {"type": "network"}], "cgroupsPath": "/pods/c1"});
            linux[field] = value;
            serde_json::from_value::<Spec>(serde_json::json!({"ociVersion": "1.3.0", "linux": linux})).unwrap()
        };
        let notify = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/run/agent.sock",
            "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]});
        let cases = [
            (with("seccomp", notify), "seccomp notify"),
            (with("netDevices", serde_json::json!({"dummy0": {"name": "eth7"}})), "network devices"),
            (with("namespaces", serde_json::json!([{"type": "pid"}, {"type": "time"}])), "time namespace"),
            (with("namespaces", serde_json::json!([{"type": "pid"}, {"type": "user"}])), "user namespace"),
        ];
        for (spec, what) in &cases {
            assert!(needs_our_init(spec).is_some_and(|why| why.contains(what)), "{what}");
        }
        assert_eq!(needs_our_init(&with("sysctl", serde_json::json!({}))), None);
    }
}
