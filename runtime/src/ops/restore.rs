//! `restore`: brings a checkpointed container back from criu's images as
//! container `id` of a bundle, as runc does: criu restores the tree as our
//! sibling (so as our child) under the rootfs bind-mounted on a private
//! root, with the bundle's bind mounts, devices and joined namespaces
//! handed in; then the container is recorded running with its new pid, in
//! its cgroup, and `state`, `kill` and `delete` work on it.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use libcgroups::common::{CgroupManager, ControllerOpt};
use libcontainer::config::YoukiConfig;
use libcontainer::container::{Container, ContainerStatus};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::unistd::Pid;
use oci_spec::runtime::Spec;
use rust_criu::rust_criu_protobuf::rpc::Criu_notify;

use crate::engine::cgroup::fs::Hierarchy;
use crate::engine::container_dir::{ContainerDir, Metadata};
use crate::engine::criu::{self, CriuOptions, DESCRIPTORS_FILE};
use crate::engine::engine_bundle::{self, Bundle, EngineOptions};
use crate::error::{Error, Result};

const RESTORE_LOG: &str = "restore.log";
/// Where the rootfs is bind-mounted for criu (it needs a mount point whose
/// parent is not overmounted), inside the container's state directory.
const CRIU_ROOT: &str = "criu-root";

#[derive(Debug, Default)]
pub struct RestoreOptions {
    pub criu: CriuOptions,
    pub bundle: PathBuf,
    pub detach: bool,
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub systemd_cgroup: bool,
    /// The restored init's stdin, stdout and stderr where the image's were
    /// pipes (a shim's pipes); ours for those not given, as runc hands criu
    /// its own.
    pub stdio: crate::engine::process::process_io::Stdio,
}

/// The restored init's pid, from criu's post-restore notification (the
/// RPC's callback is a plain fn; one restore runs per process).
static RESTORED_PID: AtomicI32 = AtomicI32::new(0);

fn on_notify(script: &str, notify: &Criu_notify, _fd: Option<std::os::fd::RawFd>) -> i32 {
    if script == "post-restore" {
        RESTORED_PID.store(notify.pid(), Ordering::SeqCst);
    }
    0
}

/// Restores container `id`: the restored init's pid. (In the foreground,
/// `Runtime::restore` then waits and deletes, as `run` does.)
pub(crate) fn restore(root: &Path, id: &str, opts: &RestoreOptions) -> Result<i32> {
    let dir = ContainerDir::new(root, id)?;
    criu::require_usable("restore", &opts.criu.criu_path)?;
    let images = criu::open_dir("open image path", &opts.criu.image_path, false)?;
    let stdio_keys = read_descriptors(&opts.criu.image_path.join(DESCRIPTORS_FILE))?;
    let bundle = engine_bundle::load(&opts.bundle)?;
    check_terminal(&bundle.spec, opts)?;
    crate::engine::container_dir::ensure_root(root)?;
    dir.claim()?;
    let cgroups = crate::engine::cgroup::fs::hierarchies();
    restore_claimed(&cgroups, &dir, &bundle, opts, &images, &stdio_keys).inspect_err(|_| {
        let _ = crate::engine::teardown::remove_leftovers(&cgroups, &dir);
    })
}

/// With the id claimed: the state written, criu run, the container
/// recorded running. The caller removes what is left on error.
fn restore_claimed(
    cgroups: &[Hierarchy],
    dir: &ContainerDir,
    bundle: &Bundle,
    opts: &RestoreOptions,
    images: &std::fs::File,
    stdio_keys: &[String],
) -> Result<i32> {
    let spec =
        engine_bundle::engine_spec(&dir.id, bundle, &EngineOptions { systemd_cgroup: opts.systemd_cgroup, cgroups, own_rootfs: false })?;
    dir.write_config(&spec)?;
    YoukiConfig::from_spec(&spec, &dir.id)
        .and_then(|config| config.save(dir.path()))
        .map_err(|e| Error::engine("record the config of", &dir.id, &e))?;
    let work = criu::open_dir("create work directory", opts.criu.work_dir(), true)?;
    crate::engine::mount::restore_mountpoints::make(&bundle.rootfs, &spec)?;
    let criu_root = CriuRoot::mount(&dir.path().join(CRIU_ROOT), &bundle.rootfs)?;
    let mut client = criu::client(&opts.criu, RESTORE_LOG)?;
    client.set_images_dir_fd(images.as_raw_fd());
    client.set_work_dir_fd(work.as_raw_fd());
    client.set_root(criu_root.path.display().to_string());
    client.set_rst_sibling(true);
    client.set_notify_scripts(true);
    client.set_notify_cb(on_notify);
    criu::restore_mounts(&mut client, &spec);
    let _namespaces: Vec<OwnedFd> = criu::restore_external_namespaces(&mut client, &spec)?;
    let _inherited = inherit_stdio_pipes(&mut client, stdio_keys, &opts.stdio)?;
    RESTORED_PID.store(0, Ordering::SeqCst);
    client.restore().map_err(|e| criu::failed("restore", &e, &opts.criu.work_dir().join(RESTORE_LOG)))?;
    let master = client.take_orphan_pts_master_fd();
    drop(criu_root);
    let pid = RESTORED_PID.load(Ordering::SeqCst);
    if pid <= 0 {
        return Err(Error::Invalid(format!("restore {}: criu reported no restored pid", dir.id)));
    }
    join_cgroup(cgroups, dir, &spec, opts.systemd_cgroup, pid)?;
    record_running(dir, bundle, &spec, opts, pid)?;
    if let (Some(socket), Some(master)) = (&opts.console_socket, master) {
        send_console(socket, master)?;
    }
    if let Some(path) = &opts.pid_file {
        crate::sys::pid_file::write(path, Pid::from_raw(pid))?;
    }
    Ok(pid)
}

/// A terminal container's pty master goes to `--console-socket`, as with
/// create; there must be one.
fn check_terminal(spec: &Spec, opts: &RestoreOptions) -> Result<()> {
    let terminal = spec.process().as_ref().and_then(|p| p.terminal()).unwrap_or(false);
    crate::engine::process::init::check_terminal(terminal, opts.console_socket.is_some())
}

/// runc's descriptors.json: where the init's stdin, stdout and stderr led.
fn read_descriptors(path: &Path) -> Result<Vec<String>> {
    let data = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
    serde_json::from_slice(&data).map_err(|e| Error::Config { path: path.to_path_buf(), reason: e.to_string() })
}

/// The init's stdio that were pipes at checkpoint become the given ones
/// (else ours), as runc hands them over. criu swrk inherits descriptors by
/// number and gets /dev/null as its stdin, so each goes as a copy without
/// close-on-exec, kept open (the returned handles) until criu is done.
fn inherit_stdio_pipes(
    client: &mut rust_criu::Criu,
    keys: &[String],
    stdio: &crate::engine::process::process_io::Stdio,
) -> Result<Vec<OwnedFd>> {
    let given = [&stdio.stdin, &stdio.stdout, &stdio.stderr];
    let mut copies = Vec::new();
    for (n, key) in keys.iter().enumerate().take(3) {
        if !key.contains("pipe:") {
            continue;
        }
        // SAFETY: fds 0-2 stay open for the whole call (the process's own stdio).
        let source = given[n].as_ref().map_or_else(|| unsafe { BorrowedFd::borrow_raw(n as i32) }, |fd| fd.as_fd());
        let copy = inheritable_copy(source).map_err(|e| Error::io("copy for criu (fcntl F_DUPFD)", format!("stdio fd {n}"), e))?;
        client.add_inherit_fd(copy.as_raw_fd(), key.clone()).map_err(|e| Error::Invalid(format!("criu inherit fd {n} as {key}: {e}")))?;
        copies.push(copy);
    }
    Ok(copies)
}

/// A copy of `fd` that a child inherits (no close-on-exec), above stdio.
fn inheritable_copy(fd: BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    let raw = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_DUPFD(3)).map_err(std::io::Error::from)?;
    // SAFETY: the kernel just gave us this descriptor.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) })
}

/// The rootfs bind-mounted where criu may pivot into it; unmounted (lazily)
/// and removed when dropped.
struct CriuRoot {
    path: PathBuf,
}

impl CriuRoot {
    fn mount(path: &Path, rootfs: &Path) -> Result<Self> {
        std::fs::create_dir(path).map_err(|e| Error::io("create directory", path, e))?;
        let root = CriuRoot { path: path.to_path_buf() };
        let flags = MsFlags::MS_BIND | MsFlags::MS_REC;
        mount(Some(rootfs), path, None::<&str>, flags, None::<&str>)
            .map_err(|e| Error::io("bind mount rootfs on", path, std::io::Error::from(e)))?;
        Ok(root)
    }
}

impl Drop for CriuRoot {
    fn drop(&mut self) {
        let _ = umount2(&self.path, MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// The restored init in the container's cgroup, with the bundle's
/// resources: criu puts the tree back in the cgroups it was dumped from,
/// which are these when the bundle's cgroupsPath is unchanged; when it is
/// not, the rest of the tree follows the init (`restored_tree`).
fn join_cgroup(cgroups: &[Hierarchy], dir: &ContainerDir, spec: &Spec, systemd: bool, pid: i32) -> Result<()> {
    let path = YoukiConfig::from_spec(spec, &dir.id).map_err(|e| Error::engine("read cgroup of", &dir.id, &e))?.cgroup_path;
    let manager = crate::engine::cgroup::manager::manager(path.clone(), systemd, &dir.id)?;
    let cgroup_err = |e: &dyn std::error::Error| Error::Cgroup { path: path.clone(), reason: crate::error::one_line_chain(e) };
    let dumped = crate::engine::cgroup::restored_tree::dir_of(pid);
    manager.add_task(Pid::from_raw(pid)).map_err(|e| cgroup_err(&e))?;
    if let Some(dumped) = &dumped {
        crate::engine::cgroup::restored_tree::gather(pid, dumped)?;
    }
    let resources = spec.linux().as_ref().and_then(|l| l.resources().clone());
    if let Some(resources) = &resources {
        let disable_oom_killer = resources.memory().as_ref().and_then(|m| m.disable_oom_killer()).unwrap_or(false);
        let opt = ControllerOpt { resources, disable_oom_killer, oom_score_adj: None, freezer_state: None };
        manager.apply(&opt).map_err(|e| cgroup_err(&e))?;
    }
    // libcgroups' own v1 device list allows the host's console.
    crate::engine::cgroup::v1_setup::take_back_console(cgroups, resources.as_ref(), Pid::from_raw(pid))
}

/// The engine's state and our metadata for a container that runs `pid`.
fn record_running(dir: &ContainerDir, bundle: &Bundle, spec: &Spec, opts: &RestoreOptions, pid: i32) -> Result<()> {
    let engine_err = |e: libcontainer::error::LibcontainerError| Error::engine("record the state of", &dir.id, &e);
    let mut container = Container::new(&dir.id, ContainerStatus::Created, Some(pid), &bundle.path, &dir.path()).map_err(engine_err)?;
    container
        .set_systemd(opts.systemd_cgroup)
        .set_annotations(spec.annotations().clone())
        .set_creator(nix::unistd::geteuid().as_raw())
        .set_status(ContainerStatus::Created)
        .set_status(ContainerStatus::Running);
    container.save().map_err(engine_err)?;
    dir.restrict_engine_files()?;
    let user_env = bundle.spec.process().as_ref().and_then(|p| p.env().as_deref()).unwrap_or_default();
    dir.save_metadata(&Metadata {
        bundle: bundle.path.clone(),
        rootfs: bundle.rootfs.clone(),
        poststart: Vec::new(),
        start_barrier: false,
        start_report: false,
        added_home: !crate::engine::process::home_env::has_home(user_env),
        mount_ns: crate::engine::stop::FileId::mount_ns(pid),
        own_pid_ns: crate::engine::stop::leads_pid_ns(spec),
        init_start: crate::sys::proc_stat::read(pid).map(|s| s.start_time),
    })
}

/// Sends the restored pty master to `--console-socket`, as create does.
fn send_console(socket: &Path, master: OwnedFd) -> Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let stream = std::os::unix::net::UnixStream::connect(socket).map_err(|e| Error::io("connect console socket", socket, e))?;
    let fds = [master.as_raw_fd()];
    let name = b"/dev/ptmx";
    let iov = [std::io::IoSlice::new(name)];
    sendmsg::<()>(stream.as_raw_fd(), &iov, &[ControlMessage::ScmRights(&fds)], MsgFlags::empty(), None)
        .map_err(|e| Error::io("send pty master to", socket, std::io::Error::from(e)))?;
    Ok(())
}
