//! The shim server: a child subreaper in its own session, serving the task
//! API on the socket containerd chose, under both task API names
//! (containerd 1.6 calls `containerd.task.v2`, 2.x `containerd.task.v3`),
//! until Shutdown finds no container left.

use std::collections::HashMap;
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use containerd_shim::protos::shim_sync::{create_task, Task};
use containerd_shim::{util, ExitSignal, Flags};
use signal_hook::consts::{SIGCHLD, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::events::Publisher;

/// How long the server may take to finish its requests once asked to exit.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long the exiting server waits for containerd to take its last events: more than the
/// events thread's longest retry pause (2 s), so a containerd that is back gets them.
const EVENTS_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
use crate::containers::{state_root, Containers};
use crate::task::TaskService;

/// Why the server could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("-socket is required")]
    NoSocket,
    /// prctl(PR_SET_CHILD_SUBREAPER).
    #[error("become a subreaper: {0}")]
    Subreaper(#[source] std::io::Error),
    #[error("set up signals: {0}")]
    Signals(#[source] std::io::Error),
    #[error("getcwd: {0}")]
    Getcwd(#[source] std::io::Error),
    #[error("chdir /: {0}")]
    Chdir(#[source] std::io::Error),
    /// The state root, or the socket's mode.
    #[error(transparent)]
    Runtime(#[from] rustpod::Error),
    #[error("start reaper thread: {0}")]
    Reaper(#[source] std::io::Error),
    #[error("create {}: {source}", path.display())]
    SocketDir { path: PathBuf, source: std::io::Error },
    /// bind(2) on the socket.
    #[error("listen on {}: {source}", path.display())]
    Listen { path: PathBuf, source: std::io::Error },
    /// Writing `address` for containerd.
    #[error(transparent)]
    Address(#[from] containerd_shim::Error),
    #[error("serve {socket}: {source}")]
    Serve { socket: String, source: ttrpc::Error },
    #[error("start server on {socket}: {source}")]
    Start { socket: String, source: ttrpc::Error },
}

pub fn serve(flags: &Flags) -> Result<(), ServeError> {
    if flags.socket.is_empty() {
        return Err(ServeError::NoSocket);
    }
    // Out of containerd's process group and session: nothing aimed at
    // containerd reaches us.
    let _ = nix::unistd::setsid();
    set_subreaper()?;
    limit_malloc_arenas();
    // Before any thread exists, so that every thread has the handlers.
    let signals = Signals::new([SIGCHLD, SIGTERM, SIGINT]).map_err(ServeError::Signals)?;
    crate::logger::init(flags.debug);
    std::panic::set_hook(Box::new(|info| log::error!("shim panicked: {info}")));

    let exit = Arc::new(ExitSignal::default());
    let events = Publisher::start(std::env::var("TTRPC_ADDRESS").unwrap_or_default(), flags.namespace.clone());
    // The server starts in the bundle of the container that started it.
    let bundle = std::env::current_dir().map_err(ServeError::Getcwd)?;
    let root = state_root(&flags.namespace, &bundle);
    // Also narrows a root an older shim left world-readable.
    rustpod::container_dir::ensure_root(&root)?;
    let shared = Containers::new(root, events, Arc::clone(&exit));
    let (reaped, known, flushed) = (Arc::clone(&shared), Arc::clone(&shared), Arc::clone(&shared));
    crate::reaper::start(signals, move || known.known_pids(), move |pid, status| reaped.on_exit(pid, status))
        .map_err(ServeError::Reaper)?;

    let Some(listener) = listen(&flags.socket)? else {
        // Another server took the socket first: it serves this group.
        util::write_address(&flags.socket)?;
        signal_started();
        return Ok(());
    };
    leave_bundle_dir()?;
    // A Create is on its way: have the kernel's cgroup wait start now.
    crate::cgroup_warmup::start();
    let service: Arc<dyn Task + Send + Sync> = Arc::new(TaskService::new(shared));
    // Idle handler threads per connection: fewer than ttrpc's 3 (up to 5);
    // a busy one (a blocking Wait) still gets a fresh idle one beside it.
    let mut server = ttrpc::Server::new()
        .set_thread_count_min(1)
        .set_thread_count_default(2)
        .set_thread_count_max(3)
        .add_listener(listener.into_raw_fd())
        .map_err(|source| ServeError::Serve { socket: flags.socket.clone(), source })?
        .register_service(task_methods(&service));
    server.start().map_err(|source| ServeError::Start { socket: flags.socket.clone(), source })?;
    signal_started();
    log::info!("serving {} for namespace {}", flags.socket, flags.namespace);

    exit.wait();
    let _ = std::fs::remove_file(socket_path(&flags.socket));
    shut_down(server);
    // containerd's Delete queued /tasks/delete (and maybe the exit) just before its Shutdown:
    // what is still queued when we exit is lost.
    let undelivered = flushed.flush_events(EVENTS_FLUSH_WAIT);
    if undelivered > 0 {
        log::warn!("exiting with {undelivered} events containerd did not take");
    }
    Ok(())
}

/// The server starts in the bundle of the container that started it, which
/// containerd removes with that container while the server goes on serving
/// the rest of its group. Its helpers inherit the working directory, and the
/// engine asks for it: a removed one fails their creates. The server opens
/// nothing relative to it after start-up (`./log` is already open).
fn leave_bundle_dir() -> Result<(), ServeError> {
    std::env::set_current_dir("/").map_err(ServeError::Chdir)
}

/// Lets ttrpc answer the requests in flight (the Shutdown reply among them),
/// but gives up after a while: a handler still blocked then must not keep
/// the shim alive.
fn shut_down(server: ttrpc::Server) {
    let (done, finished) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("shutdown".into()).spawn(move || {
        server.shutdown();
        let _ = done.send(());
    });
    if spawned.is_ok() && finished.recv_timeout(SHUTDOWN_WAIT).is_err() {
        log::warn!("requests still in flight after {SHUTDOWN_WAIT:?}: exiting anyway");
    }
}

/// The task service under the v3 names the crate generates and the v2
/// names containerd 1.6 calls (the messages are the same).
fn task_methods(service: &Arc<dyn Task + Send + Sync>) -> HashMap<String, Box<dyn ttrpc::MethodHandler + Send + Sync>> {
    let mut methods = create_task(Arc::clone(service));
    let v2 = create_task(Arc::clone(service))
        .into_iter()
        .map(|(name, handler)| (name.replace("/containerd.task.v3.", "/containerd.task.v2."), handler));
    methods.extend(v2);
    methods
}

/// The socket path of a `unix://` address (containerd's form) or a path.
pub fn socket_path(address: &str) -> &str {
    address.strip_prefix("unix://").unwrap_or(address)
}

/// Whether a shim answers at `address`: the socket takes a connection and
/// the process listening on it is not exiting. A SIGKILLed shim closes its
/// descriptors one by one: containerd sees its connection close and runs
/// `delete` while the dying shim's listener may still take connections.
pub fn serving(address: &str) -> bool {
    let Ok(stream) = std::os::unix::net::UnixStream::connect(socket_path(address)) else {
        return false;
    };
    match nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials) {
        // A listener in another PID namespace shows as pid 0: it is alive.
        Ok(peer) if peer.pid() > 0 => !exiting(peer.pid()),
        _ => true,
    }
}

/// Whether process `pid` is gone, dead or exiting.
fn exiting(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| stat_says_exiting(&stat))
}

/// The kernel's PF_EXITING task flag: set in do_exit, before any descriptor
/// of the process is closed.
const PF_EXITING: u64 = 0x4;

/// Whether a /proc/PID/stat line shows a zombie, a dead task or PF_EXITING.
fn stat_says_exiting(stat: &str) -> bool {
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let Some((_, fields)) = stat.rsplit_once(')') else {
        return false;
    };
    let fields: Vec<&str> = fields.split_whitespace().collect();
    let dead = matches!(fields.first(), Some(&("Z" | "X" | "x")));
    let flags = fields.get(6).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    dead || flags & PF_EXITING != 0
}

/// Binds the socket; None if a live server already has it.
fn listen(address: &str) -> Result<Option<UnixListener>, ServeError> {
    let path = Path::new(socket_path(address));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| ServeError::SocketDir { path: parent.to_path_buf(), source })?;
    }
    let listen_failed = |source| ServeError::Listen { path: path.to_path_buf(), source };
    match UnixListener::bind(path) {
        Ok(l) => owner_only(path).map(|()| Some(l)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            if serving(address) {
                return Ok(None);
            }
            let _ = std::fs::remove_file(path);
            let listener = UnixListener::bind(path).map_err(listen_failed)?;
            owner_only(path).map(|()| Some(listener))
        }
        Err(e) => Err(listen_failed(e)),
    }
}

/// The socket takes containerd's every task request: 0600, as containerd's
/// Go shim makes it, whatever the umask.
fn owner_only(socket: &Path) -> Result<(), ServeError> {
    Ok(rustpod::container_dir::set_mode(socket, 0o600)?)
}

/// A long-lived shim per pod: keep glibc from giving each of its threads a
/// malloc arena of its own (up to 8 per core), which costs resident memory
/// for no gain at this allocation rate.
fn limit_malloc_arenas() {
    // SAFETY: mallopt only sets an allocator parameter.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
}

fn set_subreaper() -> Result<(), ServeError> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } < 0 {
        return Err(ServeError::Subreaper(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// `start` reads our stdout until it closes: close it (point it at stderr).
fn signal_started() {
    // SAFETY: dup2 between our own standard descriptors.
    unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Unimplemented;
    impl Task for Unimplemented {}

    #[test]
    fn stat_lines_say_which_process_is_exiting() {
        let line = |state: &str, flags: u64| format!("4242 (shim (a) b) {state} 1 4242 4242 0 -1 {flags} 120 0 0 0");
        assert!(!stat_says_exiting(&line("S", 0x40_0140)));
        assert!(!stat_says_exiting(&line("R", 0x40_0000)));
        assert!(stat_says_exiting(&line("R", 0x40_0144)), "PF_EXITING");
        assert!(stat_says_exiting(&line("D", 0x4)), "PF_EXITING");
        assert!(stat_says_exiting(&line("Z", 0)));
        assert!(stat_says_exiting(&line("X", 0)));
    }

    /// On the kernel: this process's own listener serves; once closed, the
    /// socket left behind does not; a dead process's pid counts as exiting.
    #[test]
    fn a_live_listener_serves_and_a_closed_one_does_not() {
        let dir = std::env::temp_dir().join(format!("rustpod-serving-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let address = format!("unix://{}", path.display());
        let listener = UnixListener::bind(&path).unwrap();
        assert!(serving(&address));
        drop(listener);
        assert!(path.exists() && !serving(&address));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(exiting(pid), "a reaped child's pid");
        assert!(!exiting(std::process::id() as i32));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// containerd 2.x (and 2.3's `BootstrapResult` version 3) calls
    /// `containerd.task.v3`, 1.6 `containerd.task.v2`: every method under both.
    #[test]
    fn task_methods_answer_to_v2_and_v3_names() {
        let service: Arc<dyn Task + Send + Sync> = Arc::new(Unimplemented);
        let methods = task_methods(&service);
        for method in ["Create", "Start", "Delete", "Exec", "Kill", "Pause", "Resume", "Stats", "Wait", "State", "Connect", "Shutdown"] {
            for version in ["v2", "v3"] {
                let name = format!("/containerd.task.{version}.Task/{method}");
                assert!(methods.contains_key(&name), "{name} is not registered");
            }
        }
        let v3 = methods.keys().filter(|k| k.starts_with("/containerd.task.v3.Task/")).count();
        let v2 = methods.keys().filter(|k| k.starts_with("/containerd.task.v2.Task/")).count();
        assert_eq!(v2, v3, "{methods:?}", methods = methods.keys().collect::<Vec<_>>());
        assert_eq!(crate::bootstrap::TASK_API_VERSION, 3, "what start tells 2.3 must be served");
    }
}
