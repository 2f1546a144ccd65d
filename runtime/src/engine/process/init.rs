//! Starts a container's init from a spec value, with libcontainer's public
//! pieces. The engine's builder reads the spec from a bundle directory,
//! records that directory as the bundle, and hides why its init failed
//! behind an error with no source; here the caller's spec, the user's
//! bundle and the init's own words are kept.

use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::rc::Rc;

use libcontainer::config::YoukiConfig;
use libcontainer::container::{Container, ContainerStatus};
use libcontainer::notify_socket::{NotifyListener, NOTIFY_FILE};
use libcontainer::process::args::{ContainerArgs, ContainerType};
use libcontainer::syscall::syscall::SyscallType;
use libcontainer::user_ns::UserNamespaceConfig;
use oci_spec::runtime::Spec;

use crate::engine::container_dir::ContainerDir;
use crate::engine::process::init_launch::{self, Route};
use crate::engine::process::init_steps::{OwnInit, StartHooks};
use crate::engine::process::process_io::ProcessIo;
use crate::engine::process::rootfs_failure::{self, Capture};
use crate::error::{Error, Result};

/// How the init is to be run, besides its spec.
#[derive(Debug, Default)]
pub struct InitOptions<'a> {
    pub io: ProcessIo,
    pub systemd_cgroup: bool,
    pub no_pivot: bool,
    /// The host's cgroup hierarchies, as the command read them.
    pub cgroups: &'a [crate::engine::cgroup::fs::Hierarchy],
    /// Set when our steps make the rootfs (`engine::rootfs::own`).
    pub rootfs: Option<crate::engine::rootfs::prepare::Rootfs>,
    /// Where our init answers `start` once its startContainer hooks passed
    /// (`engine::start_report`); only with `rootfs`.
    pub start_report: Option<std::os::fd::OwnedFd>,
}

/// Starts `spec`'s init for `dir` (whose directory the caller made) and
/// leaves it waiting for `start`; the state records `bundle`. On error the
/// caller removes what was made.
pub fn spawn(dir: &ContainerDir, bundle: &Path, spec: Spec, opts: InitOptions) -> Result<Container> {
    let engine_err = |op: &'static str| move |e: &(dyn std::error::Error + 'static)| Error::engine(op, &dir.id, e);
    validate(&spec).map_err(|e| engine_err("create")(&e))?;
    let terminal = spec.process().as_ref().and_then(|p| p.terminal()).unwrap_or(false);
    check_terminal(terminal, opts.io.console_socket.is_some())?;
    let mut container =
        Container::new(&dir.id, ContainerStatus::Creating, None, bundle, &dir.path()).map_err(|e| engine_err("record the state of")(&e))?;
    container.set_systemd(opts.systemd_cgroup).set_annotations(spec.annotations().clone());
    container.save().map_err(|e| engine_err("record the state of")(&e))?;

    let rootfs = spec.root().as_ref().map(|r| r.path().clone()).ok_or_else(|| Error::Invalid("the spec has no root".into()))?;
    let console = match &opts.io.console_socket {
        Some(path) => Some(
            libcontainer::tty::setup_console_socket(&dir.path(), path, "console-socket")
                .map_err(|e| engine_err("connect the console socket of")(&e))?,
        ),
        None => None,
    };
    YoukiConfig::from_spec(&spec, &dir.id)
        .and_then(|config| config.save(dir.path()))
        .map_err(|e| engine_err("record the config of")(&e))?;
    let notify_listener = NotifyListener::new(&dir.path().join(NOTIFY_FILE)).map_err(|e| engine_err("create")(&e))?;
    let linux = spec.linux().as_ref().ok_or_else(|| Error::Invalid("the spec has no linux section".into()))?;
    let cgroup_config = libcgroups::common::CgroupConfig {
        cgroup_path: libcontainer::utils::get_cgroup_path(linux.cgroups_path(), &dir.id),
        systemd_cgroup: systemd_driver(&spec, opts.systemd_cgroup, opts.rootfs.is_some()),
        container_name: dir.id.clone(),
    };
    if linux.namespaces().is_some() {
        crate::sys::process_setup::make_undumpable()?;
    }
    let route = match opts.rootfs {
        None => init_launch::needs_our_init(&spec).map_or(Route::Direct, Route::Engine),
        Some(_) => Route::Direct,
    };
    // Only the engine's intermediate maps a new user namespace from this;
    // our parent writes the maps itself, as runc does, so the engine's
    // newuidmap requirement for more than one range is not ours.
    let user_ns_config = match route {
        Route::Engine(_) => UserNamespaceConfig::new(&spec).map_err(|e| engine_err("create")(&e))?,
        Route::Direct => None,
    };
    // Kept open until the init has joined them.
    let (spec, _joined) = match crate::engine::process::namespace_fds::hold(&spec, opts.io.preserve_fds)? {
        Some((held_spec, fds)) => (held_spec, fds),
        None => (spec, Vec::new()),
    };
    let raw = |fd: &Option<std::os::fd::OwnedFd>| fd.as_ref().map(|f| f.as_raw_fd());
    let args = ContainerArgs {
        container_type: ContainerType::InitContainer,
        syscall: SyscallType::default(),
        rootfs,
        console_socket: console.as_ref().map(|fd| fd.as_raw_fd()),
        notify_listener,
        preserve_fds: opts.io.preserve_fds,
        container: Some(container.clone()),
        user_ns_config,
        cgroup_config,
        detached: true,
        executor: Box::new(crate::engine::process::executor::RuncWordsExecutor::default()),
        no_pivot: opts.no_pivot,
        stdin: raw(&opts.io.stdio.stdin),
        stdout: raw(&opts.io.stdio.stdout),
        stderr: raw(&opts.io.stdio.stderr),
        as_sibling: false,
        pid_file: None,
        spec: Rc::new(spec),
    };
    let cgroup_config = args.cgroup_config.clone();
    let cgroups = opts.cgroups;
    // Held across the fork only: the init must not inherit our caller's CPUs.
    let all_cpus = crate::engine::process::cpu_affinity::all_cpus_for_children()?;
    let capture = Capture::new().map_err(|e| Error::sys("pipe2 for the init's rootfs errors", e))?;
    let spawned = capture.during(|| match route {
        Route::Direct => {
            let own = opts.rootfs.as_ref().map(|rootfs| OwnInit {
                rootfs,
                start_hooks: StartHooks { bundle, report: opts.start_report.as_ref().map(|fd| fd.as_fd()) },
            });
            init_launch::spawn(&args, &dir.id, cgroups, own.as_ref())
        }
        Route::Engine(why) => {
            tracing::debug!("create through the engine's intermediate process: {why}");
            let pid = libcontainer::process::container_main_process::container_main_process(&args).map_err(|e| engine_err("create")(&e))?;
            let resources = args.spec.linux().as_ref().and_then(|l| l.resources().as_ref());
            crate::engine::cgroup::v1_setup::take_back_console(cgroups, resources, pid)
                .inspect_err(|_| crate::engine::process::child_init::kill_and_reap(pid))
                .map(|()| pid)
        }
    });
    drop(all_cpus);
    let pid = match spawned {
        Ok(pid) => pid,
        Err(e) => {
            remove_cgroup(cgroup_config);
            return Err(with_rootfs_detail(e, capture));
        }
    };
    container
        .set_status(ContainerStatus::Created)
        .set_creator(nix::unistd::geteuid().as_raw())
        .set_pid(pid.as_raw())
        .save()
        .map_err(|e| engine_err("record the state of")(&e))?;
    Ok(container)
}

/// Whether systemd places the container's cgroup. The engine's builder
/// takes any user namespace for a rootless container under systemd (where
/// the engine makes the rootfs, as it always has here); on our rootfs route
/// only `--systemd-cgroup` does.
fn systemd_driver(spec: &Spec, systemd_cgroup: bool, own_rootfs: bool) -> bool {
    let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    let user_ns = listed.into_iter().flatten().any(|ns| ns.typ() == oci_spec::runtime::LinuxNamespaceType::User);
    systemd_cgroup || (user_ns && !own_rootfs)
}

/// The engine's bare "failed to prepare rootfs", completed with what the
/// init said about it (the mount, the call and the errno).
fn with_rootfs_detail(err: Error, capture: Capture) -> Error {
    const BARE: &str = "unable to start container process: failed to prepare rootfs";
    match (err, capture.said()) {
        (Error::Engine { op, id, reason }, Some(said)) if reason == BARE => {
            Error::Engine { op, id, reason: format!("{reason}: {}", rootfs_failure::describe(&said)) }
        }
        (err, _) => err,
    }
}

/// After a failed init, as the engine's builder does: its cgroup goes, with
/// whatever of the half-made container is still in it (create refused a
/// cgroup that held anything, so that is ours).
fn remove_cgroup(config: libcgroups::common::CgroupConfig) {
    use libcgroups::common::CgroupManager;
    match libcgroups::common::create_cgroup_manager(config) {
        Ok(manager) => {
            if let Err(e) = manager.remove() {
                tracing::warn!("remove the cgroup of a failed init: {e}");
            }
        }
        Err(e) => tracing::warn!("remove the cgroup of a failed init: {e}"),
    }
}

/// The checks the engine's builder makes before it makes anything.
fn validate(spec: &Spec) -> std::result::Result<(), libcontainer::error::LibcontainerError> {
    use libcontainer::error::ErrInvalidSpec;
    libcontainer::validator::Validator::validate_spec(spec)?;
    if spec.process().as_ref().and_then(|p| p.apparmor_profile().as_ref()).is_some()
        && !libcontainer::apparmor::is_enabled().map_err(libcontainer::error::LibcontainerError::OtherIO)?
    {
        Err(ErrInvalidSpec::AppArmorNotEnabled)?;
    }
    if let Some(mounts) = spec.mounts() {
        libcontainer::utils::validate_mount_options(mounts)?;
    }
    // A user namespace's mappings are checked by `engine::validate` (ids and
    // mount options mapped) and, on the engine's route, by its
    // UserNamespaceConfig; its rootless rules do not apply to root.
    Ok(())
}

/// A terminal needs a console socket to send the pty to, and a console
/// socket is only for a terminal (runc's words).
pub(crate) fn check_terminal(terminal: bool, has_console_socket: bool) -> Result<()> {
    match (terminal, has_console_socket) {
        (true, false) => Err(Error::Invalid("cannot allocate tty if runc will detach without setting console socket".into())),
        (false, true) => Err(Error::Invalid("cannot use console socket if runc will not detach or allocate tty".into())),
        _ => Ok(()),
    }
}
