//! The steps every process we start in a container takes, the init and an
//! exec'd one alike (runc's standard and setns inits share them): its
//! session and process attributes first, and, once in its namespaces and
//! root, its confinement from `noNewPrivileges` to the exec. The engine's
//! public pieces do what they do well (memory policy, AppArmor, seccomp,
//! the capability sets but the bounding one, setresuid, the executor);
//! libcontainer's own init reads all 41 bounding capabilities before it
//! drops any, and loads seccomp after the capabilities are gone when
//! `noNewPrivileges` is given as false.

use std::convert::Infallible;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};

use caps::CapSet;
use libcontainer::capabilities::CapabilityExt;
use libcontainer::config::PersonalityDomain;
use libcontainer::process::args::ContainerArgs;
use libcontainer::process::channel::MainSender;
use libcontainer::syscall::Syscall as EngineSyscall;
use nix::errno::Errno;
use nix::unistd::{Gid, Uid};
use oci_spec::runtime::{
    IOPriorityClass, LinuxCapabilities, LinuxPersonalityDomain, LinuxSchedulerFlag, LinuxSchedulerPolicy, Process, Scheduler, Spec,
};

use crate::sys::process_attrs::{self, SchedAttr};

/// Why a container process stopped before its exec. The words reach the
/// runtime through the engine's channel.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A call of ours: the step, the call and its errno.
    #[error("{step}: {call}: {errno}")]
    Call { step: &'static str, call: String, errno: Errno },
    /// A piece of the engine's, in its words.
    #[error("{step}: {words}")]
    Step { step: &'static str, words: String },
    /// Words already as runc says them (the rootfs's `error mounting …`,
    /// the executor's `exec: "x": …`), which clients parse.
    #[error("{0}")]
    Said(String),
}

pub fn call(step: &'static str, call: impl Into<String>) -> impl FnOnce(Errno) -> InitError {
    let call = call.into();
    move |errno| InitError::Call { step, call, errno }
}

pub fn step<E: std::fmt::Display>(step: &'static str) -> impl FnOnce(E) -> InitError {
    move |e| InitError::Step { step, words: e.to_string() }
}

pub fn said<E: std::fmt::Display>(e: E) -> InitError {
    InitError::Said(e.to_string())
}

pub fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// The spec's process and linux sections, which every step reads.
pub fn sections(spec: &Spec) -> Result<(&Process, &oci_spec::runtime::Linux), InitError> {
    let process = spec.process().as_ref().ok_or(InitError::Said("the spec has no process".into()))?;
    let linux = spec.linux().as_ref().ok_or(InitError::Said("the spec has no linux section".into()))?;
    Ok((process, linux))
}

/// A session of its own, the process's I/O priority, scheduler and memory
/// policy, and the caller's stdio when there is no console.
pub fn begin(args: &ContainerArgs, engine: &dyn EngineSyscall) -> Result<(), InitError> {
    let (process, linux) = sections(&args.spec)?;
    nix::unistd::setsid().map_err(call("a session of its own", "setsid"))?;
    set_io_priority(process, engine)?;
    set_scheduler(process)?;
    libcontainer::process::memory_policy::setup_memory_policy(linux.memory_policy(), engine).map_err(step("linux.memoryPolicy"))?;
    if args.console_socket.is_none() {
        take_stdio(args)?;
    }
    Ok(())
}

/// What the startContainer hooks need from `create`.
pub struct StartHooks<'a> {
    /// The bundle their state names, as the user gave it.
    pub bundle: &'a std::path::Path,
    /// Where `start` waits to learn they passed (`start_report`).
    pub report: Option<BorrowedFd<'a>>,
}

/// What runs between the wait for `start` and the exec.
pub enum AtStart<'a> {
    Nothing,
    /// The spec's startContainer hooks (an init's).
    StartContainerHooks(&'a StartHooks<'a>),
}

/// The process's confinement, in runc's order, then the wait for `start`
/// and the exec; returns only on failure.
/// `notify`: where a seccomp notify filter's fd goes (the init's socket to
/// `create`); without one such a filter is refused.
pub fn to_exec(
    args: &ContainerArgs,
    engine: &dyn EngineSyscall,
    main_sender: &mut MainSender,
    at_start: AtStart,
    notify: Option<BorrowedFd>,
) -> Result<Infallible, InitError> {
    let spec = args.spec.as_ref();
    let (process, linux) = sections(spec)?;
    let nnp = process.no_new_privileges() == Some(true);
    if nnp {
        nix::sys::prctl::set_no_new_privs().map_err(call("process.noNewPrivileges", "prctl(PR_SET_NO_NEW_PRIVS)"))?;
    }
    set_personality(linux, engine)?;
    if let Some(profile) = process.apparmor_profile() {
        libcontainer::apparmor::apply_profile(profile).map_err(step("process.apparmorProfile"))?;
    }
    if let Some(umask) = process.user().umask() {
        let mode = nix::sys::stat::Mode::from_bits(umask).ok_or(InitError::Said(format!("process.user.umask {umask:o}: invalid umask")))?;
        nix::sys::stat::umask(mode);
    }
    // Before the ids change, as runc: the runtime may reach a cwd the
    // user cannot; one it may not reach is tried again as the user.
    let cwd = process.cwd();
    let chdir_as_user = match nix::unistd::chdir(cwd) {
        Ok(()) => false,
        Err(Errno::EPERM | Errno::EACCES) => true,
        Err(errno) => return Err(call("process.cwd", format!("chdir {}", cwd.display()))(errno)),
    };
    set_groups(process)?;
    let (uid, gid) = (process.user().uid(), process.user().gid());
    engine.set_id(Uid::from_raw(uid), Gid::from_raw(gid)).map_err(step("setresgid/setresuid of process.user"))?;

    let mut envs = libcontainer::utils::parse_env(process.env().as_deref().unwrap_or_default());
    let listen = listen_fds(std::env::var("LISTEN_FDS").ok().as_deref());
    if listen > 0 {
        envs.insert("LISTEN_FDS".into(), listen.to_string());
        envs.insert("LISTEN_PID".into(), "1".into());
    }
    // Every descriptor past stdio and those passed on closes at the exec
    // (CVE-2024-21626); the channels are still needed until then.
    engine.close_range(args.preserve_fds + listen).map_err(step("marking inherited descriptors close-on-exec"))?;

    // Without no_new_privs, loading a filter needs CAP_SYS_ADMIN: before
    // the capabilities go. With it, as late as may be.
    if !nnp {
        load_seccomp(linux, notify)?;
    }
    confine_capabilities(process, engine)?;
    if chdir_as_user {
        nix::unistd::chdir(cwd).map_err(call("process.cwd", format!("chdir {}", cwd.display())))?;
    }
    verify_cwd()?;
    if nnp {
        load_seccomp(linux, notify)?;
    }

    // HOME is in the spec's env already: create and exec set it (`home_env`).
    let start_env = envs.clone();
    args.executor.validate(spec).map_err(said)?;
    args.executor.setup_envs(envs).map_err(said)?;
    main_sender.init_ready().map_err(step("telling the runtime the process is ready"))?;
    main_sender.close().map_err(step("closing the channel to the runtime"))?;
    args.notify_listener.wait_for_container_start().map_err(step("waiting for start"))?;
    args.notify_listener.close().map_err(step("waiting for start"))?;
    if let (AtStart::StartContainerHooks(start), Some(hooks)) = (at_start, spec.hooks()) {
        run_start_container_hooks(args, start, hooks.start_container().as_ref(), &start_env)?;
    }
    args.executor.exec(spec).map_err(said)?;
    Err(InitError::Said("the executor returned without exec".into()))
}

/// The startContainer hooks, as runc's init runs them: their state is the
/// container created, with the user's bundle and the init's pid as the
/// container sees it. Then `start` learns they passed.
fn run_start_container_hooks(
    args: &ContainerArgs,
    start: &StartHooks,
    hooks: Option<&Vec<oci_spec::runtime::Hook>>,
    env: &std::collections::HashMap<String, String>,
) -> Result<(), InitError> {
    let mut state =
        args.container.as_ref().map(|c| c.state.clone()).ok_or(InitError::Said("startContainer hooks: no container state".into()))?;
    state.status = libcontainer::container::ContainerStatus::Created;
    state.bundle = start.bundle.to_path_buf();
    libcontainer::hooks::run_hooks(hooks, Some(&state), None, Some(nix::unistd::getpid()), Some(env))
        .map_err(step("startContainer hooks"))?;
    if let Some(report) = start.report {
        crate::engine::start_report::report_passed(report);
    }
    Ok(())
}

/// The stdio the caller gave, when there is no console.
fn take_stdio(args: &ContainerArgs) -> Result<(), InitError> {
    for (fd, to) in [(args.stdin, 0), (args.stdout, 1), (args.stderr, 2)] {
        if let Some(fd) = fd {
            nix::unistd::dup2(fd, to).map_err(call("the process's stdio", format!("dup2({fd}, {to})")))?;
            nix::unistd::close(fd).map_err(call("the process's stdio", format!("close({fd})")))?;
        }
    }
    Ok(())
}

/// ioprio_set(2)'s class number for `class`.
fn io_class(class: IOPriorityClass) -> i64 {
    match class {
        IOPriorityClass::IoprioClassRt => 1,
        IOPriorityClass::IoprioClassBe => 2,
        IOPriorityClass::IoprioClassIdle => 3,
    }
}

fn set_io_priority(process: &Process, engine: &dyn EngineSyscall) -> Result<(), InitError> {
    let Some(prio) = process.io_priority() else { return Ok(()) };
    engine.set_io_priority(io_class(prio.class()), prio.priority()).map_err(step("process.ioPriority"))
}

/// sched_setattr(2)'s attributes for `sc`.
fn sched_attr(sc: &Scheduler) -> SchedAttr {
    let policy = match sc.policy() {
        LinuxSchedulerPolicy::SchedOther => 0,
        LinuxSchedulerPolicy::SchedFifo => 1,
        LinuxSchedulerPolicy::SchedRr => 2,
        LinuxSchedulerPolicy::SchedBatch => 3,
        LinuxSchedulerPolicy::SchedIso => 4,
        LinuxSchedulerPolicy::SchedIdle => 5,
        LinuxSchedulerPolicy::SchedDeadline => 6,
    };
    let flags = sc.flags().iter().flatten().fold(0u64, |bits, flag| {
        bits | match flag {
            LinuxSchedulerFlag::SchedResetOnFork => 0x01,
            LinuxSchedulerFlag::SchedFlagReclaim => 0x02,
            LinuxSchedulerFlag::SchedFlagDLOverrun => 0x04,
            LinuxSchedulerFlag::SchedFlagKeepPolicy => 0x08,
            LinuxSchedulerFlag::SchedFlagKeepParams => 0x10,
            LinuxSchedulerFlag::SchedFlagUtilClampMin => 0x20,
            LinuxSchedulerFlag::SchedFlagUtilClampMax => 0x40,
        }
    });
    SchedAttr {
        size: SchedAttr::SIZE,
        policy,
        flags,
        nice: sc.nice().unwrap_or(0),
        priority: sc.priority().unwrap_or(0) as u32,
        runtime: sc.runtime().unwrap_or(0),
        deadline: sc.deadline().unwrap_or(0),
        period: sc.period().unwrap_or(0),
        ..SchedAttr::default()
    }
}

fn set_scheduler(process: &Process) -> Result<(), InitError> {
    let Some(sc) = process.scheduler() else { return Ok(()) };
    process_attrs::sched_setattr(&sched_attr(sc)).map_err(call("process.scheduler", "sched_setattr"))
}

fn set_personality(linux: &oci_spec::runtime::Linux, engine: &dyn EngineSyscall) -> Result<(), InitError> {
    let Some(personality) = linux.personality() else { return Ok(()) };
    if personality.flags().as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(InitError::Said("linux.personality.flags: not supported".into()));
    }
    let domain = match personality.domain() {
        LinuxPersonalityDomain::PerLinux => PersonalityDomain::Linux,
        LinuxPersonalityDomain::PerLinux32 => PersonalityDomain::Linux32,
    };
    engine.personality(domain).map_err(step("linux.personality"))
}

/// process.user.additionalGids. In a user namespace whose setgroups is
/// "deny" the kernel answers EPERM, which the error names.
fn set_groups(process: &Process) -> Result<(), InitError> {
    let gids = process.user().additional_gids().as_deref().unwrap_or_default();
    if gids.is_empty() {
        return Ok(());
    }
    let gids: Vec<Gid> = gids.iter().map(|g| Gid::from_raw(*g)).collect();
    nix::unistd::setgroups(&gids).map_err(call("process.user.additionalGids", "setgroups"))
}

/// The value LISTEN_FDS passes on (systemd's socket activation); a
/// malformed one passes none, as the engine reads it.
fn listen_fds(value: Option<&str>) -> i32 {
    value.and_then(|v| v.parse::<i32>().ok()).filter(|n| *n > 0).unwrap_or(0)
}

fn load_seccomp(linux: &oci_spec::runtime::Linux, notify: Option<BorrowedFd>) -> Result<(), InitError> {
    let Some(seccomp) = linux.seccomp() else { return Ok(()) };
    let Some(fd) = libcontainer::seccomp::initialize_seccomp(seccomp).map_err(step("linux.seccomp"))? else {
        return Ok(());
    };
    // SAFETY: the filter's listener, just made for us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // The routes keep a notify filter off a path with no socket for it.
    let socket = notify.ok_or(InitError::Said("linux.seccomp: a notify filter with nowhere to send its fd".into()))?;
    crate::engine::process::seccomp_notify::hand_over(socket, fd)
        .map_err(call("linux.seccomp.listenerPath", "sending the notify fd to the runtime"))
}

/// One of the spec's capability sets.
type SetOf = fn(&LinuxCapabilities) -> &Option<oci_spec::runtime::Capabilities>;

/// The effective set reset to the permitted one, then the spec's sets:
/// the bounding set dropped by us, the others set by the engine's calls.
fn confine_capabilities(process: &Process, engine: &dyn EngineSyscall) -> Result<(), InitError> {
    libcontainer::capabilities::reset_effective(engine).map_err(step("resetting the effective capabilities"))?;
    let Some(sets) = process.capabilities() else { return Ok(()) };
    let keep: Vec<u8> = sets.bounding().iter().flatten().map(|c| c.to_cap().index()).collect();
    drop_bounding(&keep, process_attrs::bounding_drop)?;
    let others: [(CapSet, SetOf); 4] = [
        (CapSet::Effective, LinuxCapabilities::effective),
        (CapSet::Permitted, LinuxCapabilities::permitted),
        (CapSet::Inheritable, LinuxCapabilities::inheritable),
        (CapSet::Ambient, LinuxCapabilities::ambient),
    ];
    for (set, of) in others {
        if let Some(list) = of(sets) {
            let caps = list.iter().map(|c| c.to_cap()).collect();
            engine.set_capability(set, &caps).map_err(step("process.capabilities"))?;
        }
    }
    Ok(())
}

/// Drops every bounding capability not in `keep`, from 0 up to the last
/// the kernel knows (where it answers EINVAL), without reading the set
/// first.
fn drop_bounding(keep: &[u8], mut drop: impl FnMut(u8) -> Result<(), Errno>) -> Result<(), InitError> {
    for cap in 0..64u8 {
        if keep.contains(&cap) {
            continue;
        }
        match drop(cap) {
            Ok(()) => {}
            Err(Errno::EINVAL) => return Ok(()),
            Err(errno) => return Err(call("process.capabilities.bounding", format!("prctl(PR_CAPBSET_DROP, {cap})"))(errno)),
        }
    }
    Ok(())
}

/// The cwd is inside the container's root (CVE-2024-21626): getcwd(3)
/// fails, or answers a path that is not absolute, for one outside it.
fn verify_cwd() -> Result<(), InitError> {
    match nix::unistd::getcwd() {
        Ok(cwd) if cwd.is_absolute() => Ok(()),
        Ok(_) => Err(call("process.cwd", "getcwd")(Errno::ENOENT)),
        Err(errno) => Err(call("process.cwd", "getcwd")(errno)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounding_capabilities_are_dropped_up_to_the_kernels_last_without_a_read() {
        let mut dropped = Vec::new();
        let last = 40;
        let kernel = |cap: u8| {
            dropped.push(cap);
            if cap > last {
                Err(Errno::EINVAL)
            } else {
                Ok(())
            }
        };
        drop_bounding(&[0, 5, 40], kernel).unwrap();
        let expected: Vec<u8> = (1..=41).filter(|c| ![5, 40].contains(c)).collect();
        assert_eq!(dropped, expected, "one prctl per capability not kept, then the first past the kernel's last");
    }

    #[test]
    fn a_bounding_drop_the_kernel_refuses_names_the_capability_and_errno() {
        let err = drop_bounding(&[], |_| Err(Errno::EPERM)).unwrap_err();
        assert_eq!(err.to_string(), "process.capabilities.bounding: prctl(PR_CAPBSET_DROP, 0): EPERM: Operation not permitted");
    }

    #[test]
    fn scheduler_fields_map_to_the_kernels_numbers() {
        let sc: Scheduler = serde_json::from_value(serde_json::json!({
            "policy": "SCHED_DEADLINE", "nice": -3, "priority": 7, "flags": ["SCHED_RESET_ON_FORK", "SCHED_FLAG_RECLAIM"],
            "runtime": 10, "deadline": 20, "period": 30
        }))
        .unwrap();
        let attr = sched_attr(&sc);
        assert_eq!(
            attr,
            SchedAttr {
                size: 56,
                policy: 6,
                flags: 0x03,
                nice: -3,
                priority: 7,
                runtime: 10,
                deadline: 20,
                period: 30,
                util_min: 0,
                util_max: 0
            }
        );
    }

    #[test]
    fn io_priority_classes_are_ioprio_sets_numbers() {
        assert_eq!(io_class(IOPriorityClass::IoprioClassRt), 1);
        assert_eq!(io_class(IOPriorityClass::IoprioClassBe), 2);
        assert_eq!(io_class(IOPriorityClass::IoprioClassIdle), 3);
    }

    #[test]
    fn listen_fds_passes_on_only_a_positive_count() {
        assert_eq!(listen_fds(None), 0);
        assert_eq!(listen_fds(Some("3")), 3);
        assert_eq!(listen_fds(Some("0")), 0);
        assert_eq!(listen_fds(Some("-2")), 0);
        assert_eq!(listen_fds(Some("x")), 0);
    }
}
