//! Starts an exec'd process as one child of ours, with no intermediate
//! process. libcontainer's tenant path forks an intermediate that builds a
//! cgroup manager (14 parses of mountinfo on v1) to write one pid, joins
//! the pid namespace and forks again. Here the pid namespace is joined for
//! our children before the fork, the cgroups are joined by descriptor
//! (`CLONE_INTO_CGROUP` on v2; on v1 the child writes "0" to each
//! `cgroup.procs` before it joins any namespace), and the child then runs
//! our exec steps (`exec_steps`), from the namespaces to the exec.
//!
//! Where the kernel or the engine needs the intermediate, [`route`] says so
//! and the engine's path runs: systemd's cgroups where the caller found no
//! scope's directory to join (on v1, or an init outside its scope). The
//! child joins the container's time namespace itself (setns(2) of one needs
//! a single-threaded caller, which a forked child is), and sends a seccomp
//! notify filter's fd to us on a socket pair of its own (`seccomp_notify`).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use libcontainer::process::args::ContainerArgs;
use libcontainer::process::channel::{self, ChannelError, MainSender};
use nix::fcntl::{open, OFlag};
use nix::sched::CloneFlags;
use nix::sys::stat::Mode;
use nix::unistd::Pid;
use oci_spec::runtime::{ContainerState, LinuxNamespaceType, Spec};

use crate::engine::cgroup::fs::{self as cgroup_fs, Hierarchy};
use crate::engine::process::{child_init, exec_steps, seccomp_notify};
use crate::error::{Error, Result};
use crate::sys::children_pid_ns;
use crate::sys::clone3::{self, Forked};
use crate::sys::pidfd::PidFd;

/// How an exec'd process gets into the container's cgroup.
#[derive(Debug, PartialEq, Eq)]
pub enum CgroupJoin {
    /// Born in this cgroup2 directory.
    Unified(PathBuf),
    /// Writes itself into each of these `cgroup.procs` files (v1).
    Legacy(Vec<PathBuf>),
}

/// Which path starts the process.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Direct(CgroupJoin),
    /// The engine's intermediate process, and why.
    Engine(&'static str),
}

/// Decides how to start the tenant `spec` (its engine spec) whose cgroup
/// is `cgroup_path` (relative to each hierarchy's root), among the host's
/// `cgroups`; `systemd` is the container's cgroup driver.
pub fn route(spec: &Spec, systemd: bool, cgroups: &[Hierarchy], cgroup_path: &Path) -> Route {
    if spec.linux().is_none() {
        return Route::Engine("no linux section");
    }
    if systemd || crate::engine::cgroup::manager::is_systemd_form(cgroup_path) {
        return Route::Engine("systemd places the cgroup");
    }
    let relative = cgroup_path.to_string_lossy();
    if let Some(unified) = cgroups.iter().find(|h| h.unified && h.mount_point == Path::new("/sys/fs/cgroup")) {
        return Route::Direct(CgroupJoin::Unified(cgroup_fs::join(&unified.mount_point, &relative)));
    }
    let mut procs: Vec<PathBuf> = cgroups
        .iter()
        .filter(|h| !h.unified && crate::engine::cgroup::v1_setup::CONTROLLERS.iter().any(|c| h.has(c)))
        .map(|h| cgroup_fs::join(&h.mount_point, &relative).join("cgroup.procs"))
        .collect();
    procs.dedup();
    if procs.is_empty() {
        return Route::Engine("no cgroup hierarchy found in mountinfo");
    }
    Route::Direct(CgroupJoin::Legacy(procs))
}

/// The cgroup descriptors the parent opens: a directory for
/// `CLONE_INTO_CGROUP`, or `cgroup.procs` files the child writes.
enum CgroupFds {
    Unified(OwnedFd),
    Legacy(Vec<OwnedFd>),
}

fn open_cgroup(join: &CgroupJoin) -> Result<CgroupFds> {
    let open_one = |path: &Path, flags: OFlag| {
        open(path, flags | OFlag::O_CLOEXEC, Mode::empty())
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
            .map_err(|err| Error::Cgroup { path: path.to_path_buf(), reason: format!("openat: {err}") })
    };
    Ok(match join {
        CgroupJoin::Unified(dir) => CgroupFds::Unified(open_one(dir, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?),
        CgroupJoin::Legacy(files) => CgroupFds::Legacy(files.iter().map(|f| open_one(f, OFlag::O_WRONLY)).collect::<Result<_>>()?),
    })
}

/// Forks the process `args` describes into the container and returns its
/// pid once the engine's init steps are done (or the init's own words).
/// The container's namespaces are opened here, and `init` (held since its
/// start time was checked) must hold its pid after that: else the
/// `/proc/<pid>/ns` files may have been another process's, and nothing
/// is forked.
pub fn spawn(args: &ContainerArgs, join: &CgroupJoin, id: &str, init: &PidFd) -> Result<Pid> {
    let cgroup = open_cgroup(join)?;
    let channel_err = |e: ChannelError| Error::engine("exec in", id, &e);
    let (mut main_sender, mut main_receiver) = channel::main_channel().map_err(channel_err)?;
    let (init_sender, init_receiver) = channel::init_channel().map_err(channel_err)?;
    let pid_ns = match joined_path(args, LinuxNamespaceType::Pid) {
        Some(path) => Some(children_pid_ns::enter(&path).map_err(|e| Error::Invalid(format!("exec: {e}")))?),
        None => None,
    };
    // In the words the child's own failure would have had.
    let namespaces = exec_steps::Namespaces::open(&args.spec).map_err(|e| Error::Engine {
        op: "exec in",
        id: id.to_string(),
        reason: format!("unable to start container process: {e}"),
    })?;
    init_still_holds_its_pid(init, id)?;
    // Our exec steps send a notify filter's fd on it; `exec`'s end first.
    let notify = match seccomp_notify::filter(&args.spec) {
        Some(_) => Some(seccomp_notify::pair().map_err(|e| Error::Invalid(format!("exec in {id}: {e}")))?),
        None => None,
    };
    let forked = match &cgroup {
        // SAFETY: the child only runs our exec steps and exits or
        // execs, as the engine's own forked children do.
        CgroupFds::Unified(dir) => unsafe { clone3::fork(CloneFlags::empty(), Some(dir.as_fd())) },
        // glibc's fork(2): it also resets malloc's locks in the child.
        CgroupFds::Legacy(_) => unsafe { nix::unistd::fork() }.map(|f| match f {
            nix::unistd::ForkResult::Parent { child } => Forked::Parent(child),
            nix::unistd::ForkResult::Child => Forked::Child,
        }),
    };
    match forked {
        Ok(Forked::Child) => {
            let mut inherited: Vec<RawFd> = pid_ns.iter().map(|ns| ns.own_fd().as_raw_fd()).collect();
            let _ = main_receiver.close();
            let _ = init_sender.close();
            if let CgroupFds::Unified(dir) = &cgroup {
                inherited.push(dir.as_raw_fd());
            }
            let procs: Vec<RawFd> = match &cgroup {
                CgroupFds::Legacy(files) => files.iter().map(|f| f.as_raw_fd()).collect(),
                CgroupFds::Unified(_) => Vec::new(),
            };
            // Our exec steps need nothing from the parent before the exec.
            let _ = init_receiver.close();
            if let Some((ours, _)) = &notify {
                inherited.push(ours.as_raw_fd());
            }
            let notify = notify.as_ref().map(|(_, theirs)| theirs.as_fd());
            child(args, &namespaces, &procs, &inherited, notify, &mut main_sender)
        }
        Ok(Forked::Parent(pid)) => {
            drop(namespaces);
            drop(pid_ns);
            drop(cgroup);
            let _ = main_sender.close();
            let _ = init_receiver.close();
            let _ = init_sender.close();
            if let Some((ours, theirs)) = notify {
                drop(theirs);
                if let Err(e) = seccomp_notify::serve(args, id, ContainerState::Running, pid.as_raw(), &ours) {
                    child_init::kill_and_reap(pid);
                    return Err(Error::Invalid(format!("exec in {id}: {e}")));
                }
            }
            let ready = main_receiver.wait_for_init_ready();
            let _ = main_receiver.close();
            if let Err(err) = ready {
                child_init::kill_and_reap(pid);
                return Err(Error::engine("exec in", id, &err));
            }
            Ok(pid)
        }
        Err(err) => Err(Error::sys("fork into the container's pid namespace and cgroup", err)),
    }
}

/// The path of the namespace of `typ` the tenant spec joins, if any.
fn joined_path(args: &ContainerArgs, typ: LinuxNamespaceType) -> Option<PathBuf> {
    let linux = args.spec.linux().as_ref()?;
    linux.namespaces().iter().flatten().find(|n| n.typ() == typ)?.path().clone()
}

/// The child: its cgroups and CPU affinity (what the engine's intermediate
/// did), then our exec steps, from the namespaces to the exec. Never
/// returns.
fn child(
    args: &ContainerArgs,
    namespaces: &exec_steps::Namespaces,
    procs: &[RawFd],
    inherited: &[RawFd],
    notify: Option<BorrowedFd>,
    main_sender: &mut MainSender,
) -> ! {
    for fd in inherited {
        let _ = nix::unistd::close(*fd);
    }
    child_init::run_exec(args, namespaces, notify, main_sender, || join_cgroups(args, procs))
}

/// Refuses the exec when the init was reaped after its start time was
/// checked (`ops::exec`): its pid may be another process's by now, whose
/// namespaces were opened as the container's.
pub fn init_still_holds_its_pid(init: &PidFd, id: &str) -> Result<()> {
    if init.holds_its_pid() {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "exec in {id}: cannot exec in a stopped container (its init, pid {}, exited as the exec began)",
        init.pid()
    )))
}

/// Why the child could not get as far as our exec steps; its text is what
/// the caller reports.
#[derive(Debug, thiserror::Error)]
enum ChildSetupError {
    #[error("the exec spec has no {0} section")]
    Missing(&'static str),
    #[error("execCPUAffinity.{which}: {source}")]
    Affinity { which: &'static str, source: libcontainer::process::cpu_affinity::CPUAffinityError },
    #[error("write 0 to the container's cgroup.procs: {0}")]
    JoinCgroup(nix::Error),
}

/// `execCPUAffinity.initial`, the container's v1 cgroups (before any
/// namespace is joined), then `execCPUAffinity.final`, as runc.
fn join_cgroups(args: &ContainerArgs, procs: &[RawFd]) -> std::result::Result<(), ChildSetupError> {
    use libcontainer::process::cpu_affinity::set_cpuset_affinity_from_string;
    let affinity = |which, cpus: &str| {
        set_cpuset_affinity_from_string(Pid::from_raw(0), cpus).map_err(|source| ChildSetupError::Affinity { which, source })
    };
    let process = args.spec.process().as_ref().ok_or(ChildSetupError::Missing("process"))?;
    let exec_affinity = process.exec_cpu_affinity().as_ref();
    if let Some(initial) = exec_affinity.and_then(|a| a.initial().as_deref()) {
        affinity("initial", initial)?;
    }
    for fd in procs {
        // SAFETY: the parent opened it and the child owns its copy.
        let file = unsafe { OwnedFd::from_raw_fd(*fd) };
        nix::unistd::write(&file, b"0").map_err(ChildSetupError::JoinCgroup)?;
    }
    if let Some(last) = exec_affinity.and_then(|a| a.cpu_affinity_final().as_deref()) {
        affinity("final", last)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{
        LinuxBuilder, LinuxNamespaceBuilder, LinuxSeccompAction, LinuxSeccompBuilder, LinuxSyscallBuilder, SpecBuilder,
    };

    const HYBRID: &str = "\
35 25 0:30 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw
37 35 0:32 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd
40 35 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 - cgroup cgroup rw,cpu,cpuacct
41 35 0:36 / /sys/fs/cgroup/memory rw,nosuid shared:16 - cgroup cgroup rw,memory
42 35 0:37 / /sys/fs/cgroup/rdma rw,nosuid shared:17 - cgroup cgroup rw,rdma
";
    const UNIFIED: &str = "35 25 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n";

    fn spec(namespaces: &[LinuxNamespaceType], notify: bool) -> Spec {
        let namespaces: Vec<_> =
            namespaces.iter().map(|t| LinuxNamespaceBuilder::default().typ(*t).path("/proc/9/ns/x").build().unwrap()).collect();
        let mut linux = LinuxBuilder::default().namespaces(namespaces);
        if notify {
            let rule =
                LinuxSyscallBuilder::default().names(vec!["mkdir".to_string()]).action(LinuxSeccompAction::ScmpActNotify).build().unwrap();
            linux = linux.seccomp(LinuxSeccompBuilder::default().syscalls(vec![rule]).build().unwrap());
        }
        SpecBuilder::default().linux(linux.build().unwrap()).build().unwrap()
    }

    #[test]
    fn on_v1_writes_each_engine_controllers_procs_file_once() {
        let cgroups = cgroup_fs::parse_mountinfo(HYBRID);
        let got = route(&spec(&[LinuxNamespaceType::Pid], false), false, &cgroups, Path::new("/pods/c1"));
        assert_eq!(
            got,
            Route::Direct(CgroupJoin::Legacy(vec![
                PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/pods/c1/cgroup.procs"),
                PathBuf::from("/sys/fs/cgroup/memory/pods/c1/cgroup.procs"),
            ]))
        );
    }

    #[test]
    fn on_v2_is_born_in_the_cgroup_directory() {
        let cgroups = cgroup_fs::parse_mountinfo(UNIFIED);
        let got = route(&spec(&[], false), false, &cgroups, Path::new("/pods/c1/probe"));
        assert_eq!(got, Route::Direct(CgroupJoin::Unified(PathBuf::from("/sys/fs/cgroup/pods/c1/probe"))));
    }

    /// The exec'd process sends a notify filter's fd to us (`seccomp_notify`).
    #[test]
    fn a_seccomp_notify_filter_needs_no_intermediate() {
        let cgroups = cgroup_fs::parse_mountinfo(UNIFIED);
        let got = route(&spec(&[], true), false, &cgroups, Path::new("/pods/c1"));
        assert_eq!(got, Route::Direct(CgroupJoin::Unified(PathBuf::from("/sys/fs/cgroup/pods/c1"))));
    }

    #[test]
    fn keeps_the_engines_intermediate_where_it_is_needed() {
        let cgroups = cgroup_fs::parse_mountinfo(UNIFIED);
        let path = Path::new("/pods/c1");
        let engine = |r: Route| matches!(r, Route::Engine(_));
        assert!(matches!(route(&spec(&[LinuxNamespaceType::Time], false), false, &cgroups, path), Route::Direct(_)), "the child joins it");
        assert!(engine(route(&spec(&[], false), true, &cgroups, path)));
        assert!(engine(route(&spec(&[], false), false, &cgroups, Path::new("system.slice:rp:c1"))));
        assert!(engine(route(&spec(&[], false), false, &[], path)));
    }
}
