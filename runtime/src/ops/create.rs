//! `create`: set up a container from a bundle and leave its init waiting
//! for `start`. On any failure nothing is left: no state, cgroup or process.

use std::path::{Path, PathBuf};

use libcontainer::container::Container;

use crate::engine::cgroup::fs::Hierarchy;
use crate::engine::container_dir::{ContainerDir, Metadata};
use crate::engine::engine_bundle::{self, EngineOptions};
use crate::engine::process::home_env;
use crate::engine::process::init::InitOptions;
use crate::engine::process::process_io::ProcessIo;
use crate::error::{Error, Result};

pub use crate::engine::process::process_io::Stdio;

#[derive(Debug, Default)]
pub struct CreateOptions {
    pub bundle: PathBuf,
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub no_pivot: bool,
    pub preserve_fds: i32,
    pub systemd_cgroup: bool,
    pub stdio: Stdio,
}

/// `create` for a bundle the caller has already loaded; `cgroups` are the
/// host's hierarchies, read once for the whole command.
pub fn create_from(cgroups: &[Hierarchy], root: &Path, id: &str, bundle: &engine_bundle::Bundle, opts: CreateOptions) -> Result<Container> {
    let dir = ContainerDir::new(root, id)?;
    crate::engine::container_dir::ensure_root(root)?;
    if dir.path().exists() {
        return Err(Error::AlreadyExists(id.to_string()));
    }
    let mut opts = opts;
    let cgroups_path = bundle.spec.linux().as_ref().and_then(|l| l.cgroups_path().clone());
    if let Some(path) = cgroups_path.filter(|p| crate::engine::cgroup::manager::is_systemd_form(p)) {
        if !opts.systemd_cgroup && !systemd_running() {
            return Err(Error::Invalid(format!(
                "linux.cgroupsPath {}: systemd's slice:prefix:name form, but systemd is not running on this host",
                path.display()
            )));
        }
        opts.systemd_cgroup = true;
    }
    if opts.systemd_cgroup && !systemd_running() {
        return Err(Error::Invalid("systemd not running on this host, cannot use --systemd-cgroup".into()));
    }
    if opts.systemd_cgroup && !crate::engine::cgroup::fs::is_unified(cgroups) {
        return Err(Error::Invalid(SYSTEMD_ON_V1.into()));
    }
    let idmapped = crate::engine::idmap::plan::plan(&bundle.spec)
        .map_err(|e| Error::Config { path: bundle.path.join("config.json"), reason: e.to_string() })?;
    if opts.no_pivot {
        let propagation = bundle.spec.linux().as_ref().and_then(|l| l.rootfs_propagation().as_deref());
        crate::engine::rootfs::move_root::refuse(propagation)
            .map_err(|reason| Error::Config { path: bundle.path.join("config.json"), reason })?;
    }
    // Claimed first: a create racing us for the id must fail on the id, not
    // on our processes, which it would find in the cgroup it checks.
    dir.claim()?;
    if let Err(err) = check(cgroups, id, bundle, opts.systemd_cgroup) {
        // Nothing else is ours yet: the cgroup may hold others' processes.
        let _ = dir.remove_all();
        return Err(err);
    }
    crate::sys::debug_pause::at("claimed");
    let result = build(cgroups, &dir, bundle, opts, &idmapped);
    match result {
        Ok(container) => Ok(container),
        Err(err) => {
            let _ = crate::engine::teardown::remove_leftovers(cgroups, &dir);
            Err(err)
        }
    }
}

/// systemd's driver is ours on cgroup v2 only. On v1 the engine's cgroupfs
/// manager would take `slice:prefix:name` as a directory at each
/// hierarchy's root, outside the pod's slice and its limits, and tell
/// systemd nothing; runc starts a scope over D-Bus there instead.
const SYSTEMD_ON_V1: &str = "systemd's cgroup driver (--systemd-cgroup, or a cgroupsPath of its slice:prefix:name form) \
is not supported on a cgroup v1 host: the container's cgroups would be made outside its slice, at each hierarchy's root; \
use the cgroupfs driver or cgroup v2";

/// What must hold before anything is made: capabilities and rlimits we can
/// grant, the OOM score written, no supplementary group of our caller's, a
/// cgroup of the container's own.
fn check(cgroups: &[Hierarchy], id: &str, bundle: &engine_bundle::Bundle, systemd_cgroup: bool) -> Result<()> {
    crate::engine::process::caps_check::check(bundle.spec.process().as_ref())?;
    crate::engine::process::caps_check::check_rlimits(bundle.spec.process().as_ref())?;
    crate::sys::process_setup::write_oom_score_adj(bundle.spec.process().as_ref())?;
    crate::sys::process_setup::drop_supplementary_groups()?;
    crate::engine::cgroup::manager::check_new(
        cgroups,
        bundle.spec.linux().as_ref().and_then(|l| l.cgroups_path().as_deref()),
        id,
        systemd_cgroup,
    )
    .map_err(|e| Error::Config { path: bundle.path.join("config.json"), reason: e.to_string() })
}

fn build(
    cgroups: &[Hierarchy],
    dir: &ContainerDir,
    bundle: &engine_bundle::Bundle,
    opts: CreateOptions,
    idmapped: &[crate::engine::idmap::plan::Planned],
) -> Result<Container> {
    let thread_cgroups = crate::engine::cgroup::fs::ThreadCgroups::default();
    let request = crate::engine::rootfs::own::Request {
        id: &dir.id,
        cgroups,
        thread_cgroups: &thread_cgroups,
        systemd_cgroup: opts.systemd_cgroup,
        no_pivot: opts.no_pivot,
    };
    let mut own_rootfs = match crate::engine::rootfs::own::decide(bundle, &request) {
        Ok(rootfs) => Some(rootfs),
        Err(why) => {
            tracing::debug!("the engine makes the rootfs: {why}");
            crate::engine::spec_support::check_engine_mounts(&bundle.spec, why)
                .map_err(|e| Error::Config { path: bundle.path.join("config.json"), reason: e.to_string() })?;
            None
        }
    };
    let engine_order;
    let idmapped = match own_rootfs {
        Some(_) => idmapped,
        None => {
            engine_order = crate::engine::idmap::plan::keep_engine_order(&bundle.spec, idmapped.to_vec());
            crate::engine::idmap::plan::refuse_out_of_order(&bundle.spec, &engine_order)
                .map_err(|e| Error::Config { path: bundle.path.join("config.json"), reason: e.to_string() })?;
            &engine_order
        }
    };
    let engine_opts = EngineOptions { systemd_cgroup: opts.systemd_cgroup, cgroups, own_rootfs: own_rootfs.is_some() };
    let mut spec = engine_bundle::engine_spec(&dir.id, bundle, &engine_opts)?;
    // Made here, moved in by the init at their place in the spec's order on
    // our route, else by our first createContainer step; the fds close when
    // this function returns (the init's copies at its exec).
    let min_fd = 3 + opts.preserve_fds;
    let (idmap, _detached) = match own_rootfs.as_mut() {
        Some(rootfs) => (Default::default(), crate::engine::idmap::detached::install_for_init(rootfs, bundle, idmapped, min_fd)?),
        None => (crate::engine::idmap::detached::install(&mut spec, bundle, idmapped, min_fd)?, Vec::new()),
    };
    let poststart = engine_bundle::take_poststart(&mut spec);
    let start_hooks = engine_bundle::has_start_container_hooks(&spec);
    let (start_barrier, start_report) = (start_hooks && own_rootfs.is_none(), start_hooks && own_rootfs.is_some());
    // Our init holds it until its exec; ours closes once the init is made.
    let start_report_socket = if start_report { Some(crate::engine::start_report::listen(&dir.path())?) } else { None };
    dir.write_config(&spec)?;
    let init_opts = InitOptions {
        io: ProcessIo { console_socket: opts.console_socket, preserve_fds: opts.preserve_fds, stdio: opts.stdio },
        systemd_cgroup: opts.systemd_cgroup,
        no_pivot: opts.no_pivot,
        cgroups,
        rootfs: own_rootfs,
        start_report: start_report_socket,
    };
    // Shared: a delete removing the default cgroup parent waits for us.
    let _cgroup_guard = std::fs::File::open(&dir.root).ok().and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockShared).ok());
    let named = crate::engine::cgroup::named::join_for(cgroups, &thread_cgroups, &dir.id, &spec, opts.systemd_cgroup)?;
    let container = crate::engine::process::init::spawn(dir, &bundle.path, spec, init_opts);
    drop(named);
    let container = container.map_err(|e| idmap.explain(e))?;
    // Before `start` lets the user's program run; a failure fails create.
    let pid = container.pid().ok_or_else(|| Error::Invalid(format!("create {}: the engine gave no init pid", dir.id)))?;
    crate::engine::cgroup::device_filter::apply(&bundle.spec, pid.as_raw())?;
    if bundle.pids_init_only {
        crate::engine::cgroup::pids_zero::apply(cgroups, pid.as_raw())?;
    }
    crate::sys::debug_pause::at("engine-created");
    dir.restrict_engine_files()?;
    if let (Some(path), Some(pid)) = (&opts.pid_file, container.pid()) {
        crate::sys::pid_file::write(path, pid)?;
    }

    let user_env = bundle.spec.process().as_ref().and_then(|p| p.env().as_deref()).unwrap_or_default();
    dir.save_metadata(&Metadata {
        bundle: bundle.path.clone(),
        rootfs: bundle.rootfs.clone(),
        poststart,
        start_barrier,
        start_report,
        added_home: !home_env::has_home(user_env),
        mount_ns: own_mount_ns(&bundle.spec, &container),
        own_pid_ns: crate::engine::stop::leads_pid_ns(&bundle.spec),
        init_start: crate::sys::proc_stat::read(pid.as_raw()).map(|s| s.start_time),
    })?;
    Ok(container)
}

/// The init's mount namespace, if the container has a new one of its own.
fn own_mount_ns(spec: &oci_spec::runtime::Spec, container: &Container) -> Option<crate::engine::stop::FileId> {
    let namespaces = spec.linux().as_ref()?.namespaces().as_ref()?;
    let own = namespaces.iter().any(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::Mount && n.path().is_none());
    own.then(|| crate::engine::stop::FileId::mount_ns(container.pid()?.as_raw()))?
}

// Fault points (`sys::debug_pause`) of create: `claimed` (the id is claimed,
// nothing else exists yet) and `engine-created` (the engine has forked the
// init, made the cgroup and written its state; our metadata is not written
// yet). The reliability tests SIGKILL create exactly there.

/// As runc: the systemd cgroup driver needs a running systemd.
fn systemd_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
}
