//! `start`: run the startContainer hooks, let the init exec the user's
//! program, then run the poststart hooks once that program runs.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use libcontainer::container::{Container, ContainerStatus};

use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};
use crate::state::status_word;

pub fn start(root: &Path, id: &str) -> Result<()> {
    let dir = ContainerDir::new(root, id)?;
    let mut container = dir.load()?;
    let status = container.status();
    if status != ContainerStatus::Created {
        return Err(Error::WrongStatus {
            id: id.to_string(),
            op: "start",
            status: status_word(status).to_string(),
            wanted: "created",
        });
    }
    let meta = dir.metadata();
    let hooks = meta.as_ref().map(|m| m.poststart.clone()).unwrap_or_default();
    if let (Some(meta), Some(pid)) = (&meta, container.pid()) {
        if !meta.start_container.is_empty() {
            run_start_container_hooks(&mut container, meta, pid.as_raw())?;
        }
    }
    // What the waiting init runs now (our binary, or its sealed copy).
    let init_exe = container.pid().and_then(|p| exe_identity(p.as_raw()));
    release_init(container.root.as_path())?;
    container
        .set_status(ContainerStatus::Running)
        .save()
        .map_err(|e| Error::engine("start", id, &e))?;
    if !hooks.is_empty() {
        if let (Some(pid), Some(exe)) = (container.pid(), init_exe) {
            wait_for_exec(pid.as_raw(), exe, Duration::from_secs(10));
        }
        run_poststart(&container, &hooks);
    }
    Ok(())
}

/// Tells the init, waiting on the container's notify socket, to exec the
/// user's program. libcontainer's own `Container::start` reaches the socket
/// by changing the process's working directory and back, which races with
/// any other thread of a shim serving several containers (and fails once the
/// directory it returns to is gone). Here the socket is reached through a
/// descriptor of its directory, which also keeps the path within
/// `sun_path`'s 108 bytes however deep the state root is.
fn release_init(container_root: &Path) -> Result<()> {
    let dir = std::fs::File::open(container_root)
        .map_err(|e| Error::io("open container state dir", container_root, e))?;
    let socket = format!(
        "/proc/self/fd/{}/{}",
        dir.as_raw_fd(),
        libcontainer::notify_socket::NOTIFY_FILE
    );
    let path = container_root.join(libcontainer::notify_socket::NOTIFY_FILE);
    let mut stream = UnixStream::connect(&socket)
        .map_err(|e| Error::io("connect to the init's notify socket", &path, e))?;
    stream
        .write_all(b"start container")
        .map_err(|e| Error::io("signal the init through", &path, e))
}

/// A failing startContainer hook fails `start` and stops the container, as
/// the spec says.
fn run_start_container_hooks(
    container: &mut Container,
    meta: &crate::container_dir::Metadata,
    init_pid: i32,
) -> Result<()> {
    let state = serde_json::json!({
        "ociVersion": container.state.oci_version,
        "id": container.id(),
        "status": "created",
        "pid": crate::start_hooks::pid_in_container(init_pid),
        "bundle": meta.bundle,
        "annotations": container.state.annotations.clone().unwrap_or_default(),
    });
    let result = crate::start_hooks::run(&meta.start_container, &state, init_pid);
    if result.is_err() {
        let _ = container.kill(nix::sys::signal::Signal::SIGKILL, true);
    }
    result
}

/// The spec runs poststart after the user's program started; a failing
/// poststart hook is logged and does not fail `start`.
fn run_poststart(container: &Container, hooks: &[oci_spec::runtime::Hook]) {
    let hooks = hooks.to_vec();
    if let Err(err) = libcontainer::hooks::run_hooks(Some(&hooks), Some(&container.state), None, None, None) {
        tracing::warn!("poststart hook failed: {}", crate::error::one_line_chain(&err));
    }
}

/// The (device, inode) of the program `pid` runs.
fn exe_identity(pid: i32) -> Option<(u64, u64)> {
    std::fs::metadata(format!("/proc/{pid}/exe"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Waits until `pid` no longer runs `before` (the init has exec'd the
/// user's program) or has gone; bounded by `limit`.
fn wait_for_exec(pid: i32, before: (u64, u64), limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if exe_identity(pid) != Some(before) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
