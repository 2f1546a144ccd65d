//! `create`: set up a container from a bundle and leave its init waiting
//! for `start`. On any failure nothing is left: no state, cgroup or process.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use libcontainer::container::Container;

use crate::container_dir::{ContainerDir, Metadata};
use crate::engine_builder::{self, ProcessIo};
use crate::engine_bundle::{self, EngineOptions};
use crate::error::{Error, Result};
use crate::home_env;

/// Standard streams to give the container instead of inheriting ours.
#[derive(Debug, Default)]
pub struct Stdio {
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

#[derive(Debug, Default)]
pub struct CreateOptions {
    pub bundle: PathBuf,
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub no_pivot: bool,
    /// Accepted for runc compatibility; the engine never joins a new
    /// session keyring, so there is nothing to turn off.
    pub no_new_keyring: bool,
    pub preserve_fds: i32,
    pub systemd_cgroup: bool,
    pub stdio: Stdio,
    /// Make the init a child of our parent instead of ours (for a shim that
    /// forks a helper to create).
    pub as_sibling: bool,
}

pub fn create(root: &Path, id: &str, opts: CreateOptions) -> Result<Container> {
    let bundle = engine_bundle::load(&opts.bundle)?;
    create_from(root, id, &bundle, opts)
}

/// `create` for a bundle the caller has already loaded.
pub fn create_from(
    root: &Path,
    id: &str,
    bundle: &engine_bundle::Bundle,
    opts: CreateOptions,
) -> Result<Container> {
    let dir = ContainerDir::new(root, id)?;
    ensure_root(root)?;
    if dir.path().exists() {
        return Err(Error::AlreadyExists(id.to_string()));
    }
    if opts.systemd_cgroup {
        check_systemd()?;
    }
    set_oom_score_adj(bundle)?;
    claim(&dir)?;
    debug_pause("claimed");
    let result = build(&dir, bundle, opts);
    match result {
        Ok(container) => Ok(container),
        Err(err) => {
            let _ = crate::delete::remove_leftovers(&dir);
            Err(err)
        }
    }
}

fn build(dir: &ContainerDir, bundle: &engine_bundle::Bundle, opts: CreateOptions) -> Result<Container> {
    let engine_opts = EngineOptions {
        systemd_cgroup: opts.systemd_cgroup,
    };
    let (engine_dir, start_hooks) = engine_bundle::write_engine_bundle(dir, bundle, &engine_opts)?;
    let io = ProcessIo {
        pid_file: opts.pid_file,
        console_socket: opts.console_socket,
        preserve_fds: opts.preserve_fds,
        stdio: opts.stdio,
    };
    let builder = engine_builder::builder(dir, io, "create")?;
    // Shared: a delete removing the default cgroup parent waits for us.
    let _cgroup_guard = std::fs::File::open(dir.engine_root())
        .ok()
        .and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockShared).ok());
    let container = builder
        .as_init(&engine_dir)
        .with_systemd(opts.systemd_cgroup)
        .with_detach(true)
        .with_no_pivot(opts.no_pivot)
        .as_sibling(opts.as_sibling)
        .build()
        .map_err(|e| Error::engine("create", &dir.id, &e))?;
    // Before `start` lets the user's program run; a failure fails create.
    let pid = container.pid().ok_or_else(|| Error::Invalid(format!("create {}: the engine gave no init pid", dir.id)))?;
    crate::device_filter::apply(&bundle.spec, pid.as_raw())?;
    debug_pause("engine-created");

    let user_env = bundle.spec.process().as_ref().and_then(|p| p.env().as_deref()).unwrap_or_default();
    dir.save_metadata(&Metadata {
        bundle: bundle.path.clone(),
        rootfs: bundle.rootfs.clone(),
        poststart: start_hooks.poststart,
        start_container: start_hooks.start_container,
        added_home: !home_env::has_home(user_env),
    })?;
    Ok(container)
}

/// The engine writes `process.oomScoreAdj` to our own oom_score_adj before
/// it forks (children inherit it) but reports a failure only as "io error".
/// Do that step first so the error names the setting and the likely cause.
fn set_oom_score_adj(bundle: &engine_bundle::Bundle) -> Result<()> {
    let Some(value) = bundle.spec.process().as_ref().and_then(|p| p.oom_score_adj()) else {
        return Ok(());
    };
    let path = Path::new("/proc/self/oom_score_adj");
    fs::write(path, value.to_string()).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied && value < 0 {
            " (lowering oom_score_adj needs CAP_SYS_RESOURCE)"
        } else {
            ""
        };
        Error::Invalid(format!("process.oomScoreAdj {value}: write oom_score_adj: {e}{hint}"))
    })
}

/// Fault injection for the reliability tests: with
/// `RUSTPOD_DEBUG_PAUSE=<point>` the process stops itself (SIGSTOP) at that
/// named point of `create`, so a test can SIGKILL it exactly there. Points:
/// `claimed` (the id is claimed, nothing else exists yet) and
/// `engine-created` (the engine has forked the init, made the cgroup and
/// written its state; our metadata is not written yet).
fn debug_pause(point: &str) {
    if std::env::var_os("RUSTPOD_DEBUG_PAUSE").is_some_and(|p| p == point) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    }
}

/// As runc: the systemd cgroup driver needs a running systemd.
fn check_systemd() -> Result<()> {
    if Path::new("/run/systemd/system").is_dir() {
        return Ok(());
    }
    Err(Error::Invalid(
        "systemd not running on this host, cannot use --systemd-cgroup".into(),
    ))
}

fn ensure_root(root: &Path) -> Result<()> {
    fs::create_dir_all(root).map_err(|e| Error::io("create state root", root, e))
}

/// Creating the engine bundle directory is our exclusive claim on the id:
/// of two concurrent creates with one id, exactly one gets past here.
fn claim(dir: &ContainerDir) -> Result<()> {
    let engine = dir.engine_bundle();
    if let Some(parent) = engine.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io("create directory", parent, e))?;
    }
    match fs::create_dir(&engine) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(Error::AlreadyExists(dir.id.clone()))
        }
        Err(e) => Err(Error::io("create directory", engine, e)),
    }
}
