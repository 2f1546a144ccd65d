//! An exec'd process's steps, from the container's namespaces to its exec,
//! in the order of runc's nsexec and setns init: every namespace of the
//! init opened (by the parent, which then checks that the init still holds
//! its pid), the user one joined and the rlimits set, the session and
//! attributes every process takes, the other namespaces joined, the
//! console, then the same confinement as the init (`confine`).
//!
//! It replaces libcontainer's init as a tenant, which read all 41 bounding
//! capabilities before dropping any (85 prctl per exec), read
//! /proc/self/setgroups through a newly checked procfs for additionalGids,
//! and loaded seccomp after the capabilities were gone when
//! `noNewPrivileges` was given as false, so such an exec failed where
//! runc's runs.

use std::convert::Infallible;
use std::fs::File;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use libcontainer::process::args::ContainerArgs;
use libcontainer::process::channel::MainSender;
use nix::sched::CloneFlags;
use nix::unistd::{Gid, Uid};
use oci_spec::runtime::{LinuxNamespace, LinuxNamespaceType};

use crate::engine::process::confine::{self, call, io_errno, step, AtStart, InitError};
use crate::engine::process::init_launch::clone_flag;

/// Runs the exec'd process's steps and execs its program; returns only on
/// failure. The caller has put it in the container's cgroups; the parent
/// joined the pid namespace for its children and opened the others
/// (`Namespaces::open`).
/// `notify`: its end of the socket a seccomp notify filter's fd goes to `exec` on.
pub fn run(
    args: &ContainerArgs,
    namespaces: &Namespaces,
    notify: Option<BorrowedFd>,
    main_sender: &mut MainSender,
) -> Result<Infallible, InitError> {
    let engine = args.syscall.create_syscall();
    let engine = engine.as_ref();
    let (process, _) = confine::sections(&args.spec)?;
    let Namespaces { user, joins } = namespaces;
    if let Some(user) = user {
        join(user)?;
        engine.set_id(Uid::from_raw(0), Gid::from_raw(0)).map_err(step("setresuid(0) in the user namespace"))?;
    }
    for rlimit in process.rlimits().iter().flatten() {
        engine.set_rlimit(rlimit).map_err(step("process.rlimits"))?;
    }
    confine::begin(args, engine)?;
    for ns in joins {
        join(ns)?;
    }
    if let Some(socket) = args.console_socket {
        libcontainer::tty::setup_console(engine, socket, false).map_err(step("the console"))?;
    }
    confine::to_exec(args, engine, main_sender, AtStart::Nothing, notify)
}

fn join(ns: &Join) -> Result<(), InitError> {
    nix::sched::setns(&ns.file, ns.flag).map_err(call("joining the container's namespaces", format!("setns {}", ns.path.display())))
}

/// A namespace to join, opened.
struct Join {
    file: File,
    flag: CloneFlags,
    path: PathBuf,
}

/// The namespaces an exec'd process joins, opened before any is joined:
/// the user one apart (it comes first), the others in the spec's order.
pub struct Namespaces {
    user: Option<Join>,
    joins: Vec<Join>,
}

impl Namespaces {
    /// Opens each namespace `spec` joins but the pid one (the parent's to
    /// join), as runc does: as the host's root, which may open every one
    /// (inside the container's user namespace the kernel may refuse:
    /// EACCES), and while /proc is the host's.
    pub fn open(spec: &oci_spec::runtime::Spec) -> Result<Self, InitError> {
        let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
        let (user, joins) = open_namespaces(listed.map(Vec::as_slice).unwrap_or_default())?;
        Ok(Namespaces { user, joins })
    }
}

fn open_namespaces(listed: &[LinuxNamespace]) -> Result<(Option<Join>, Vec<Join>), InitError> {
    let mut user = None;
    let mut joins = Vec::new();
    for ns in listed.iter().filter(|ns| ns.typ() != LinuxNamespaceType::Pid) {
        let Some(path) = ns.path() else {
            return Err(InitError::Said(format!("an exec'd process makes no {:?} namespace of its own", ns.typ())));
        };
        let flag = clone_flag(ns.typ()).ok_or(InitError::Said(format!("joining a {:?} namespace on the direct route", ns.typ())))?;
        let file =
            File::open(path).map_err(|e| call("joining the container's namespaces", format!("open {}", path.display()))(io_errno(&e)))?;
        let join = Join { file, flag, path: path.clone() };
        match ns.typ() {
            LinuxNamespaceType::User => user = Some(join),
            _ => joins.push(join),
        }
    }
    Ok((user, joins))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::LinuxNamespaceBuilder;

    fn ns(typ: LinuxNamespaceType, path: Option<&str>) -> LinuxNamespace {
        let mut b = LinuxNamespaceBuilder::default().typ(typ);
        if let Some(p) = path {
            b = b.path(p);
        }
        b.build().unwrap()
    }

    /// Every namespace is opened before the first setns, in the spec's
    /// order; the pid one is the parent's.
    #[test]
    fn opens_each_namespace_but_pid_before_joining_any_the_user_one_apart() {
        use LinuxNamespaceType::*;
        let own = format!("/proc/{}/ns", std::process::id());
        let listed: Vec<_> =
            [(User, "user"), (Ipc, "ipc"), (Uts, "uts"), (Network, "net"), (Pid, "pid"), (Mount, "mnt"), (Cgroup, "cgroup")]
                .iter()
                .map(|(typ, name)| ns(*typ, Some(&format!("{own}/{name}"))))
                .collect();
        let (user, joins) = open_namespaces(&listed).unwrap();
        assert_eq!(user.map(|u| u.flag), Some(CloneFlags::CLONE_NEWUSER));
        let flags: Vec<_> = joins.iter().map(|j| j.flag).collect();
        assert_eq!(
            flags,
            [
                CloneFlags::CLONE_NEWIPC,
                CloneFlags::CLONE_NEWUTS,
                CloneFlags::CLONE_NEWNET,
                CloneFlags::CLONE_NEWNS,
                CloneFlags::CLONE_NEWCGROUP
            ]
        );
    }

    #[test]
    fn a_namespace_that_cannot_be_opened_names_the_path_and_errno() {
        let listed = [ns(LinuxNamespaceType::Network, Some("/proc/0/ns/net"))];
        let err = open_namespaces(&listed).err().unwrap();
        assert_eq!(err.to_string(), "joining the container's namespaces: open /proc/0/ns/net: ENOENT: No such file or directory");
    }

    #[test]
    fn a_new_namespace_is_refused_and_a_time_one_is_joined() {
        let new = [ns(LinuxNamespaceType::Network, None)];
        assert!(open_namespaces(&new).err().unwrap().to_string().contains("makes no Network namespace"));
        let time = [ns(LinuxNamespaceType::Time, Some("/proc/self/ns/time"))];
        let (_, joins) = open_namespaces(&time).unwrap();
        assert_eq!(joins.iter().map(|j| j.flag.bits()).collect::<Vec<_>>(), [libc::CLONE_NEWTIME]);
    }
}
