//! The Task ttrpc service containerd calls: one shim serves every container
//! of its group, kept in a map by id, with a pid map for the reaper.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use containerd_shim::api;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::well_known_types::empty::Empty;
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::shim::oci::ProcessDetails;
use containerd_shim::protos::types::task::ProcessInfo;
use containerd_shim::{ExitSignal, TtrpcContext, TtrpcResult};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::container::Container;
use crate::error::{Error, Result};
use crate::events::{timestamp, Publisher};
use crate::helper::{self, Kind};
use crate::io;
use crate::mount::MountSpec;
use crate::io::Stdio;
use crate::process::{ExitCell, ExitStatus, Process, Status};

/// How long Delete waits for a killed, never-started init to be reaped.
const DELETE_EXIT_WAIT: Duration = Duration::from_secs(2);
/// How long a reaped process's exit waits for its output to reach containerd
/// (longer only if a process it left behind still holds its stdout).
const OUTPUT_DRAIN_WAIT: Duration = Duration::from_secs(1);
/// How long Delete gives a process's output to end before closing it, as
/// containerd's runc shim does: its clients wait for EOF on the FIFOs.
const OUTPUT_CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How long an init's exit waits for the exits of its container's execs.
const EXECS_EXIT_WAIT: Duration = Duration::from_secs(5);

pub struct TaskService {
    shared: Arc<Shared>,
}

pub struct Shared {
    root: PathBuf,
    events: Publisher,
    exit_signal: Arc<ExitSignal>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    containers: HashMap<String, Container>,
    /// Live pid → (container id, exec id).
    pids: HashMap<i32, (String, String)>,
    /// Helpers in flight: exits of unknown pids are kept meanwhile, since
    /// one may be of a process whose pid the helper has not told us yet.
    spawning: usize,
    early_exits: Vec<(i32, ExitStatus)>,
    /// Creates in flight (Shutdown must not exit under them).
    creating: usize,
}

fn no_container(id: &str) -> Error {
    Error::NoContainer(id.to_string())
}

fn no_process(id: &str, exec_id: &str) -> Error {
    Error::NoProcess { id: id.to_string(), exec_id: exec_id.to_string() }
}

impl Shared {
    pub fn new(root: PathBuf, events: Publisher, exit_signal: Arc<ExitSignal>) -> Arc<Shared> {
        Arc::new(Shared { root, events, exit_signal, inner: Mutex::new(Inner::default()) })
    }

    /// Waits (bounded) until containerd took the queued events; how many it has not.
    pub fn flush_events(&self, within: std::time::Duration) -> usize {
        self.events.flush(within)
    }

    /// The library's handle on our state root.
    fn runtime(&self) -> rustpod::Runtime {
        rustpod::Runtime::new(&self.root)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The reaper's entry: a child of ours exited.
    pub fn on_exit(self: &Arc<Self>, pid: i32, exit: ExitStatus) {
        let mut inner = self.lock();
        match inner.pids.remove(&pid) {
            Some((cid, eid)) if eid.is_empty() => self.init_exited(inner, cid, exit),
            Some((cid, eid)) => self.exited(inner, cid, eid, exit),
            None if inner.spawning > 0 => inner.early_exits.push((pid, exit)),
            None => {}
        }
    }

    /// The pids of the container processes we know (the reaper's during a hold).
    pub fn known_pids(&self) -> Vec<i32> {
        self.lock().pids.keys().copied().collect()
    }

    /// An init exited. As containerd's runc shim does, the rest of its
    /// container is killed when it has no PID namespace of its own (the
    /// kernel does that otherwise), and the init's exit goes out after those
    /// of its execs, so that it is the container's last.
    fn init_exited(self: &Arc<Self>, inner: MutexGuard<'_, Inner>, cid: String, exit: ExitStatus) {
        let Some(c) = inner.containers.get(&cid) else { return };
        let kill_all = c.kill_all_on_exit;
        let execs: Vec<Arc<ExitCell>> =
            c.execs.values().filter(|p| p.pid != 0 && p.exited().is_none()).map(|p| Arc::clone(&p.exit)).collect();
        if !kill_all && execs.is_empty() {
            return self.exited(inner, cid, String::new(), exit);
        }
        drop(inner);
        let (shared, thread_cid) = (Arc::clone(self), cid.clone());
        // Off the reaper thread: killing freezes the cgroup, and the execs'
        // exits are the reaper's to take.
        let spawned = std::thread::Builder::new().name("init-exit".into()).stack_size(128 * 1024).spawn(move || {
            if kill_all {
                shared.kill_rest(&thread_cid);
            }
            let deadline = Instant::now() + EXECS_EXIT_WAIT;
            for cell in execs {
                cell.wait_timeout(deadline.saturating_duration_since(Instant::now()));
            }
            shared.exited(shared.lock(), thread_cid, String::new(), exit);
        });
        if let Err(e) = spawned {
            log::warn!("container {cid}: handle its init's exit: {e}");
            self.exited(self.lock(), cid, String::new(), exit);
        }
    }

    /// Runs `call` on container `id`'s library handle, one call at a time,
    /// without holding the shim's lock (a call may wait, e.g. on a freeze).
    /// The handle is loaded on first use and kept; once we reaped the init
    /// it says stopped, as we know it is.
    fn with_handle<T>(
        &self,
        id: &str,
        call: impl FnOnce(&mut rustpod::Container) -> rustpod::Result<T>,
    ) -> Result<rustpod::Result<T>> {
        let (handle, init_exited) = self.handle_of(id)?;
        let mut slot = handle.lock().unwrap_or_else(|p| p.into_inner());
        Ok(self.loaded(id, &mut slot).and_then(|c| {
            c.settle(init_exited)?;
            call(c)
        }))
    }

    /// Container `id`'s handle slot, and whether we reaped its init.
    fn handle_of(&self, id: &str) -> Result<(Arc<Mutex<Option<rustpod::Container>>>, bool)> {
        let mut inner = self.lock();
        let c = inner.container(id)?;
        Ok((Arc::clone(&c.handle), c.init.exited().is_some()))
    }

    /// The kept handle, or one loaded now (after create, which ran in a helper).
    fn loaded<'a>(&self, id: &str, slot: &'a mut Option<rustpod::Container>) -> rustpod::Result<&'a mut rustpod::Container> {
        if slot.is_none() {
            *slot = Some(self.runtime().load(id)?);
        }
        Ok(slot.as_mut().expect("loaded above"))
    }

    /// Deletes container `id` (force) through its handle, taking it out for
    /// good; without one (its state never loaded) by id, which also clears a
    /// create that died half-way.
    fn delete_container(&self, id: &str) -> Result<rustpod::Result<()>> {
        let (handle, init_exited) = self.handle_of(id)?;
        let mut slot = handle.lock().unwrap_or_else(|p| p.into_inner());
        Ok(match slot.take() {
            Some(mut c) => c.settle(init_exited).and_then(|()| c.delete(true)),
            None => self.runtime().delete(id, true),
        })
    }

    /// SIGKILLs every process left in container `cid`'s cgroup.
    fn kill_rest(&self, cid: &str) {
        let killed = self.with_handle(cid, |c| c.kill(Signal::SIGKILL, true));
        if let Ok(Err(e)) = killed {
            log::warn!("container {cid}: kill the processes its init left: {e}");
        }
    }

    /// Records and publishes process (cid, eid)'s exit once its output has
    /// been passed to containerd, waiting for that (bounded) on a thread of
    /// its own: containerd's clients stop reading a process's FIFOs once they
    /// see it exit, so output still in our pipes then would be lost.
    fn exited(self: &Arc<Self>, mut inner: MutexGuard<'_, Inner>, cid: String, eid: String, exit: ExitStatus) {
        let output = inner
            .containers
            .get(&cid)
            .and_then(|c| c.process(&eid))
            .and_then(|p| p.io.as_ref())
            .map(|io| io.output())
            .filter(|copiers| !copiers.all_ended());
        let Some(output) = output else {
            return inner.process_exited(&cid, &eid, exit, &self.events);
        };
        drop(inner);
        let (shared, thread_cid, thread_eid) = (Arc::clone(self), cid.clone(), eid.clone());
        let spawned = std::thread::Builder::new().name("exit-drain".into()).stack_size(64 * 1024).spawn(move || {
            output.wait_ended(OUTPUT_DRAIN_WAIT);
            shared.lock().process_exited(&thread_cid, &thread_eid, exit, &shared.events);
        });
        // A thread that never started ran nothing: record the exit here.
        if let Err(e) = spawned {
            log::warn!("wait for output of a process that exited: {e}");
            self.lock().process_exited(&cid, &eid, exit, &self.events);
        }
    }
}

impl Inner {
    fn container(&mut self, id: &str) -> Result<&mut Container> {
        self.containers.get_mut(id).ok_or_else(|| no_container(id))
    }

    fn process_exited(&mut self, cid: &str, eid: &str, exit: ExitStatus, events: &Publisher) {
        let Some(p) = self.containers.get_mut(cid).and_then(|c| c.process_mut(eid)) else { return };
        if p.set_exited(exit) {
            p.exit_published = true;
            events.task_exit(cid, eid, p.pid, exit);
        }
    }

    /// Records a new process's pid; returns the exit already reaped for it, if any.
    fn register(&mut self, pid: i32, cid: &str, eid: &str) -> Option<ExitStatus> {
        self.pids.insert(pid, (cid.to_string(), eid.to_string()));
        let i = self.early_exits.iter().position(|(p, _)| *p == pid)?;
        let (_, exit) = self.early_exits.remove(i);
        self.pids.remove(&pid);
        Some(exit)
    }

    fn end_spawn(&mut self) {
        self.spawning -= 1;
        if self.spawning == 0 {
            self.early_exits.clear();
        }
    }
}

/// Publishes an exit that was held back while a start was in flight.
fn flush_exit(p: &mut Process, cid: &str, events: &Publisher) {
    if let Some(exit) = p.exited() {
        if !p.exit_published {
            p.exit_published = true;
            events.task_exit(cid, &p.exec_id, p.pid, exit);
        }
    }
}

fn stdio_of(terminal: bool, stdin: &str, stdout: &str, stderr: &str) -> Stdio {
    Stdio { stdin: stdin.to_string(), stdout: stdout.to_string(), stderr: stderr.to_string(), terminal }
}

impl TaskService {
    pub fn new(shared: Arc<Shared>) -> TaskService {
        TaskService { shared }
    }

    /// Sets up stdio (pipes, or a console socket), runs the helper, and
    /// wires the pty if any. Returns the pid and the process's io.
    fn spawn(&self, kind: Kind, mut req: helper::Request, stdio: &Stdio) -> std::result::Result<(i32, io::ProcessIo), String> {
        crate::cgroup_warmup::start();
        if stdio.terminal {
            let console = rustpod::ConsoleSocket::bind(&self.shared.root.join("pty")).map_err(|e| e.to_string())?;
            req.console_socket = Some(console.path().to_path_buf());
            let pid = helper::run(kind, &req, rustpod::Stdio::default())?;
            let master = console.receive_master().map_err(|e| e.to_string())?;
            return Ok((pid, io::attach_console(stdio, master)?));
        }
        let namespace = self.shared.root.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let (pio, child) = io::open_pipes(stdio, (&req.id, namespace))?;
        if let Some(owner) = req.io_owner {
            io::chown_pipes(&child, owner)?;
        }
        req.stdio = [child.stdin.is_some(), child.stdout.is_some(), child.stderr.is_some()];
        let pid = helper::run(kind, &req, child)?;
        Ok((pid, pio))
    }

    fn create_container(&self, req: &api::CreateTaskRequest) -> std::result::Result<(i32, io::ProcessIo, Option<PathBuf>), String> {
        crate::runtime_options::refuse_unsupported(&req.options)?;
        let stdio = stdio_of(req.terminal, &req.stdin, &req.stdout, &req.stderr);
        let mounts: Vec<MountSpec> = req
            .rootfs
            .iter()
            .map(|m| MountSpec { typ: m.type_.clone(), source: m.source.clone(), options: m.options.clone() })
            .collect();
        let bundle = PathBuf::from(&req.bundle);
        let mounted = (!mounts.is_empty()).then(|| bundle.join("rootfs"));
        let hreq = helper::Request {
            root: self.shared.root.clone(),
            id: req.id.clone(),
            bundle,
            rootfs_mounts: mounts,
            systemd_cgroup: crate::runtime_options::systemd_cgroup(&req.options)?,
            process: None,
            console_socket: None,
            stdio: [false; 3],
            io_owner: crate::runtime_options::io_owner(&req.options)?,
        };
        let (pid, pio) = self.spawn(Kind::Create, hreq, &stdio)?;
        Ok((pid, pio, mounted))
    }

    fn start_init(&self, id: &str) -> Result<api::StartResponse> {
        {
            let mut inner = self.shared.lock();
            let c = inner.container(id)?;
            if c.init.status() != Status::Created || c.init.starting {
                return Err(Error::WrongState(format!("container {id} is not in the created state")));
            }
            c.init.starting = true;
        }
        // start waits for its poststart hooks: keep their status from the reaper.
        let hold = crate::reaper::hold();
        // Only the release holds the handle: the wait for the startContainer
        // hooks (the image's code, which may never end) must not keep Kill,
        // Delete, Update or Pids waiting.
        let result = self
            .shared
            .with_handle(id, |c| c.release())
            .and_then(|r| r.and_then(rustpod::Starting::finish).map_err(Error::runtime(format!("start {id}"))));
        drop(hold);
        let mut inner = self.shared.lock();
        let c = inner.container(id)?;
        c.init.starting = false;
        let pid = c.init.pid;
        if result.is_ok() {
            c.init.started = true;
            self.shared.events.task_start(id, pid);
        }
        flush_exit(&mut c.init, id, &self.shared.events);
        result?;
        Ok(api::StartResponse { pid: pid as u32, ..Default::default() })
    }

    fn start_exec(&self, id: &str, exec_id: &str) -> Result<api::StartResponse> {
        let (hreq, stdio) = {
            let mut inner = self.shared.lock();
            let c = inner.container(id)?;
            if c.init.status() != Status::Running {
                return Err(Error::WrongState(format!("container {id} init process is not running")));
            }
            let p = c.execs.get_mut(exec_id).ok_or_else(|| no_process(id, exec_id))?;
            if p.started || p.starting || p.exited().is_some() {
                return Err(Error::WrongState(format!("exec {exec_id} of {id} was already started")));
            }
            p.starting = true;
            let hreq = helper::Request {
                root: self.shared.root.clone(),
                id: id.to_string(),
                bundle: PathBuf::new(),
                rootfs_mounts: Vec::new(),
                systemd_cgroup: false,
                process: Some(String::from_utf8_lossy(&p.spec).into_owned()),
                console_socket: None,
                stdio: [false; 3],
                io_owner: c.io_owner,
            };
            let stdio = p.stdio.clone();
            inner.spawning += 1;
            (hreq, stdio)
        };
        let result = self.spawn(Kind::Exec, hreq, &stdio);
        let mut inner = self.shared.lock();
        let events = &self.shared.events;
        let outcome = match inner.container(id).ok().and_then(|c| c.execs.get_mut(exec_id)) {
            None => Err(no_process(id, exec_id)),
            Some(p) => {
                p.starting = false;
                match result {
                    Ok((pid, pio)) => {
                        p.pid = pid;
                        p.io = Some(pio);
                        p.started = true;
                        events.exec_started(id, exec_id, pid);
                        Ok(pid)
                    }
                    Err(e) => {
                        release_waiters(p);
                        Err(Error::Failed(format!("exec {exec_id} in {id}: {e}")))
                    }
                }
            }
        };
        let early_exit = outcome.as_ref().ok().and_then(|&pid| inner.register(pid, id, exec_id));
        inner.end_spawn();
        if let Some(exit) = early_exit {
            self.shared.exited(inner, id.to_string(), exec_id.to_string(), exit);
        }
        let pid = outcome?;
        Ok(api::StartResponse { pid: pid as u32, ..Default::default() })
    }

    fn delete_exec(&self, id: &str, exec_id: &str) -> Result<api::DeleteResponse> {
        let mut inner = self.shared.lock();
        let c = inner.container(id)?;
        let p = c.execs.get(exec_id).ok_or_else(|| no_process(id, exec_id))?;
        if p.status() == Status::Running || p.starting {
            return Err(Error::WrongState(format!("exec {exec_id} of {id} is still running")));
        }
        let p = c.execs.remove(exec_id).expect("checked above");
        drop(inner);
        release_waiters(&p);
        if let Some(pio) = &p.io {
            pio.finish_output(Instant::now() + OUTPUT_CLOSE_WAIT);
        }
        Ok(delete_response(&p, p.exited()))
    }

    fn delete_init(&self, id: &str) -> Result<api::DeleteResponse> {
        let (cell, was_created) = {
            let mut inner = self.shared.lock();
            let c = inner.container(id)?;
            match c.init.status() {
                Status::Running => {
                    return Err(Error::WrongState(format!("container {id} is running: kill it before delete")))
                }
                _ if c.init.starting => return Err(Error::WrongState(format!("container {id} is starting"))),
                status => (Arc::clone(&c.init.exit), status == Status::Created),
            }
        };
        // Force: a created init is killed, and a half-dead container goes.
        // delete waits for the poststop hooks: keep their status from the reaper.
        let hold = crate::reaper::hold();
        let deleted = self.shared.delete_container(id)?;
        drop(hold);
        let exit = if was_created { cell.wait_timeout(DELETE_EXIT_WAIT) } else { cell.get() };
        let mut inner = self.shared.lock();
        let c = inner.containers.remove(id).ok_or_else(|| no_container(id))?;
        inner.pids.retain(|_, (cid, _)| cid != id);
        drop(inner);
        let deadline = Instant::now() + OUTPUT_CLOSE_WAIT;
        for p in std::iter::once(&c.init).chain(c.execs.values()) {
            release_waiters(p);
            if let Some(pio) = &p.io {
                pio.close_stdin();
                pio.finish_output(deadline);
            }
        }
        let unmounted = c.mounted_rootfs.as_deref().map_or(Ok(()), crate::mount::unmount_all);
        self.shared.events.task_delete(id, c.init.pid, exit);
        deleted.map_err(Error::runtime(format!("delete {id}")))?;
        unmounted?;
        Ok(delete_response(&c.init, exit))
    }

    fn signal_exec(&self, id: &str, exec_id: &str, signal: Signal) -> Result<()> {
        let mut inner = self.shared.lock();
        let c = inner.container(id)?;
        let p = c.execs.get(exec_id).ok_or_else(|| no_process(id, exec_id))?;
        if p.pid == 0 {
            return Err(Error::WrongState(format!("exec {exec_id} of {id} is not started")));
        }
        if p.exited().is_some() {
            return Err(Error::Finished(format!("exec {exec_id} of {id}")));
        }
        nix::sys::signal::kill(Pid::from_raw(p.pid), signal)
            .map_err(|e| Error::Failed(format!("signal exec {exec_id} of {id} (pid {}): kill: {e}", p.pid)))
    }

    /// Pause (freeze) or resume container `id`, then publish it. Not under
    /// the shim's lock: a freeze can wait on the container's tasks, and the
    /// reaper needs that lock meanwhile.
    fn set_frozen(&self, id: &str, frozen: bool) -> Result<()> {
        let (what, call): (_, fn(&mut rustpod::Container) -> rustpod::Result<()>) = match frozen {
            true => ("pause", rustpod::Container::pause),
            false => ("resume", rustpod::Container::resume),
        };
        self.shared.with_handle(id, call)?.map_err(Error::runtime(format!("{what} {id}")))?;
        if let Some(c) = self.shared.lock().containers.get_mut(id) {
            c.paused = frozen;
        }
        match frozen {
            true => self.shared.events.paused(id),
            false => self.shared.events.resumed(id),
        }
        Ok(())
    }

    fn shutdown_if_idle(&self) {
        let inner = self.shared.lock();
        if inner.containers.is_empty() && inner.creating == 0 {
            self.shared.exit_signal.signal();
        }
    }
}

/// A process that will never run (its start failed, or it is deleted
/// unstarted) still ends every Wait on it, as containerd's runc shim does;
/// its status is the runtime's "could not run" 255. No exit event goes out.
fn release_waiters(p: &Process) {
    if p.exited().is_none() {
        p.exit.set(ExitStatus { code: 255, at: SystemTime::now() });
    }
}

fn delete_response(p: &Process, exit: Option<ExitStatus>) -> api::DeleteResponse {
    api::DeleteResponse {
        pid: p.pid as u32,
        exit_status: exit.map_or(0, |e| e.code),
        exited_at: MessageField::from_option(exit.map(|e| timestamp(e.at))),
        ..Default::default()
    }
}

fn parse_signal(raw: u32) -> Result<Signal> {
    Signal::try_from(raw as i32).map_err(|_| Error::InvalidArgument(format!("invalid signal {raw}")))
}

impl containerd_shim::Task for TaskService {
    fn create(&self, _ctx: &TtrpcContext, req: api::CreateTaskRequest) -> TtrpcResult<api::CreateTaskResponse> {
        if !req.checkpoint.is_empty() {
            return Err(Error::Unimplemented("restoring from a checkpoint is not supported".into()).into());
        }
        {
            let mut inner = self.shared.lock();
            if inner.containers.contains_key(&req.id) {
                return Err(Error::AlreadyExists(format!("container {}", req.id)).into());
            }
            inner.creating += 1;
            inner.spawning += 1;
        }
        let result = self.create_container(&req);
        let mut inner = self.shared.lock();
        inner.creating -= 1;
        let events = &self.shared.events;
        let io_owner = crate::runtime_options::io_owner(&req.options).ok().flatten();
        let outcome = result.map(|(pid, pio, mounted_rootfs)| {
            let stdio = stdio_of(req.terminal, &req.stdin, &req.stdout, &req.stderr);
            events.task_create(&req.id, &req.bundle, pid, &stdio);
            let mut init = Process::new("", stdio);
            init.pid = pid;
            init.io = Some(pio);
            let c = Container {
                handle: Arc::default(),
                kill_all_on_exit: crate::container::kill_all_on_exit(Path::new(&req.bundle)),
                bundle: req.bundle.clone(),
                mounted_rootfs,
                init,
                execs: HashMap::new(),
                paused: false,
                metrics: None,
                io_owner,
            };
            inner.containers.insert(req.id.clone(), c);
            pid
        });
        let early_exit = outcome.as_ref().ok().and_then(|&pid| inner.register(pid, &req.id, ""));
        inner.end_spawn();
        match early_exit {
            Some(exit) => self.shared.exited(inner, req.id.clone(), String::new(), exit),
            None => drop(inner),
        }
        let pid = outcome.map_err(|e| Error::Failed(format!("create {}: {e}", req.id)))?;
        self.watch_oom(&req.id, pid);
        Ok(api::CreateTaskResponse { pid: pid as u32, ..Default::default() })
    }

    fn start(&self, _ctx: &TtrpcContext, req: api::StartRequest) -> TtrpcResult<api::StartResponse> {
        Ok(if req.exec_id.is_empty() { self.start_init(&req.id) } else { self.start_exec(&req.id, &req.exec_id) }?)
    }

    fn delete(&self, _ctx: &TtrpcContext, req: api::DeleteRequest) -> TtrpcResult<api::DeleteResponse> {
        Ok(if req.exec_id.is_empty() { self.delete_init(&req.id) } else { self.delete_exec(&req.id, &req.exec_id) }?)
    }

    fn state(&self, _ctx: &TtrpcContext, req: api::StateRequest) -> TtrpcResult<api::StateResponse> {
        let mut inner = self.shared.lock();
        let c = inner.container(&req.id)?;
        let p = c.process(&req.exec_id).ok_or_else(|| no_process(&req.id, &req.exec_id))?;
        let exit = p.exited();
        Ok(api::StateResponse {
            id: if req.exec_id.is_empty() { req.id.clone() } else { req.exec_id.clone() },
            bundle: c.bundle.clone(),
            pid: p.pid as u32,
            status: c.task_status(p).into(),
            stdin: p.stdio.stdin.clone(),
            stdout: p.stdio.stdout.clone(),
            stderr: p.stdio.stderr.clone(),
            terminal: p.stdio.terminal,
            exit_status: exit.map_or(0, |e| e.code),
            exited_at: MessageField::from_option(exit.map(|e| timestamp(e.at))),
            exec_id: req.exec_id.clone(),
            ..Default::default()
        })
    }

    fn pids(&self, _ctx: &TtrpcContext, req: api::PidsRequest) -> TtrpcResult<api::PidsResponse> {
        let pids = self
            .shared
            .with_handle(&req.id, |c| c.processes())?
            .map_err(Error::runtime(format!("pids of {}", req.id)))?;
        let mut inner = self.shared.lock();
        let c = inner.container(&req.id)?;
        let exec_of: HashMap<i32, &str> = c.execs.values().map(|p| (p.pid, p.exec_id.as_str())).collect();
        let processes = pids
            .into_iter()
            .map(|pid| {
                let info = exec_of.get(&pid).and_then(|exec_id| {
                    let details = ProcessDetails { exec_id: exec_id.to_string(), ..Default::default() };
                    let value = details.write_to_bytes().ok()?;
                    Some(Any { type_url: "containerd.runc.v1.ProcessDetails".into(), value, ..Default::default() })
                });
                ProcessInfo { pid: pid as u32, info: MessageField::from_option(info), ..Default::default() }
            })
            .collect();
        Ok(api::PidsResponse { processes, ..Default::default() })
    }

    fn pause(&self, _ctx: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<Empty> {
        self.set_frozen(&req.id, true)?;
        Ok(Empty::new())
    }

    fn resume(&self, _ctx: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<Empty> {
        self.set_frozen(&req.id, false)?;
        Ok(Empty::new())
    }

    fn kill(&self, _ctx: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<Empty> {
        let signal = parse_signal(req.signal)?;
        if !req.exec_id.is_empty() {
            self.signal_exec(&req.id, &req.exec_id, signal)?;
            return Ok(Empty::new());
        }
        {
            let mut inner = self.shared.lock();
            let c = inner.container(&req.id)?;
            if c.init.exited().is_some() && !req.all {
                return Err(Error::Finished(format!("container {}", req.id)).into());
            }
        }
        let killed = self.shared.with_handle(&req.id, |c| c.kill(signal, req.all))?;
        killed.map_err(|e| match e {
            // runc's "container not running": the Go shim says NotFound.
            rustpod::Error::WrongStatus { .. } => Error::Finished(format!("container {}", req.id)),
            e => Error::runtime(format!("kill {}", req.id))(e),
        })?;
        Ok(Empty::new())
    }

    fn exec(&self, _ctx: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<Empty> {
        let mut inner = self.shared.lock();
        let c = inner.container(&req.id)?;
        if c.execs.contains_key(&req.exec_id) {
            return Err(Error::AlreadyExists(format!("exec {} in {}", req.exec_id, req.id)).into());
        }
        if c.init.exited().is_some() {
            return Err(Error::WrongState(format!("container {} is stopped", req.id)).into());
        }
        let spec = req.spec.as_ref().map(|s| s.value.clone()).unwrap_or_default();
        if spec.is_empty() {
            return Err(Error::InvalidArgument(format!("exec {} in {}: no process spec", req.exec_id, req.id)).into());
        }
        let mut p = Process::new(&req.exec_id, stdio_of(req.terminal, &req.stdin, &req.stdout, &req.stderr));
        p.spec = spec;
        c.execs.insert(req.exec_id.clone(), p);
        self.shared.events.exec_added(&req.id, &req.exec_id);
        Ok(Empty::new())
    }

    fn resize_pty(&self, _ctx: &TtrpcContext, req: api::ResizePtyRequest) -> TtrpcResult<Empty> {
        let mut inner = self.shared.lock();
        let c = inner.container(&req.id)?;
        let p = c.process(&req.exec_id).ok_or_else(|| no_process(&req.id, &req.exec_id))?;
        let pio = p.io.as_ref().ok_or_else(|| Error::WrongState(format!("resize {}: the process is not started", req.id)))?;
        pio.resize(req.width, req.height).map_err(Error::Failed)?;
        Ok(Empty::new())
    }

    fn close_io(&self, _ctx: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<Empty> {
        let mut inner = self.shared.lock();
        let c = inner.container(&req.id)?;
        let p = c.process(&req.exec_id).ok_or_else(|| no_process(&req.id, &req.exec_id))?;
        if req.stdin {
            if let Some(pio) = &p.io {
                pio.close_stdin();
            }
        }
        Ok(Empty::new())
    }

    fn update(&self, _ctx: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<Empty> {
        let value = req.resources.as_ref().map(|r| r.value.clone()).unwrap_or_default();
        let resources = rustpod::parse_resources(&value)
            .map_err(|e| Error::InvalidArgument(format!("update {}: {e}", req.id)))?;
        let flags = rustpod::ResourceFlags::default();
        self.shared
            .with_handle(&req.id, |c| c.update(Some(resources), &flags))?
            .map_err(Error::runtime(format!("update {}", req.id)))?;
        Ok(Empty::new())
    }

    fn wait(&self, _ctx: &TtrpcContext, req: api::WaitRequest) -> TtrpcResult<api::WaitResponse> {
        let cell = {
            let mut inner = self.shared.lock();
            let c = inner.container(&req.id)?;
            let p = c.process(&req.exec_id).ok_or_else(|| no_process(&req.id, &req.exec_id))?;
            Arc::clone(&p.exit)
        };
        let exit = cell.wait();
        Ok(api::WaitResponse {
            exit_status: exit.code,
            exited_at: MessageField::some(timestamp(exit.at)),
            ..Default::default()
        })
    }

    fn stats(&self, _ctx: &TtrpcContext, req: api::StatsRequest) -> TtrpcResult<api::StatsResponse> {
        let cached = self.shared.lock().container(&req.id)?.metrics.clone();
        let source = match cached {
            Some(source) => source,
            None => {
                let source = self.shared.with_handle(&req.id, |c| Ok(crate::metrics::Source::open(c)));
                let source = Arc::new(source?.map_err(Error::runtime(format!("stats of {}", req.id)))?.map_err(Error::Failed)?);
                if source.cacheable() {
                    if let Some(c) = self.shared.lock().containers.get_mut(&req.id) {
                        c.metrics = Some(Arc::clone(&source));
                    }
                }
                source
            }
        };
        let stats = source.collect().map_err(Error::Failed)?;
        Ok(api::StatsResponse { stats: MessageField::some(stats), ..Default::default() })
    }

    fn connect(&self, _ctx: &TtrpcContext, req: api::ConnectRequest) -> TtrpcResult<api::ConnectResponse> {
        let task_pid = self.shared.lock().containers.get(&req.id).map_or(0, |c| c.init.pid);
        Ok(api::ConnectResponse {
            shim_pid: std::process::id(),
            task_pid: task_pid as u32,
            version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        })
    }

    fn shutdown(&self, _ctx: &TtrpcContext, _req: api::ShutdownRequest) -> TtrpcResult<Empty> {
        self.shutdown_if_idle();
        Ok(Empty::new())
    }
}

impl TaskService {
    fn watch_oom(&self, id: &str, pid: i32) {
        let shared = Arc::clone(&self.shared);
        let cid = id.to_string();
        if let Err(e) = crate::oom::watch(pid, move || shared.events.oom(&cid)) {
            log::warn!("container {id}: no OOM events: {e}");
        }
    }
}

/// containerd's state dir when the bundle does not say (its default).
const DEFAULT_CONTAINERD_STATE: &str = "/run/containerd";
/// The directory containerd's shim v2 runtime keeps bundles in, under its
/// state dir: `<state>/io.containerd.runtime.v2.task/<namespace>/<id>`.
const TASK_BUNDLES_DIR: &str = "io.containerd.runtime.v2.task";

/// The state root for a namespace: `<containerd's state dir>/rustpod/<ns>`,
/// the state dir read off the bundle containerd gave us. containerd's runc
/// shim uses /run/containerd/runc/<ns> whatever containerd it serves, so
/// two containerds on one host share it; ours keeps each containerd's
/// containers apart (and is /run/containerd/rustpod/<ns> for the default).
pub fn state_root(namespace: &str, bundle: &Path) -> PathBuf {
    containerd_state_dir(namespace, bundle)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTAINERD_STATE))
        .join("rustpod")
        .join(namespace)
}

/// `<state>` of a bundle `<state>/io.containerd.runtime.v2.task/<ns>/<id>`.
fn containerd_state_dir(namespace: &str, bundle: &Path) -> Option<PathBuf> {
    let ns_dir = bundle.parent()?;
    let bundles = ns_dir.parent()?;
    let named = |dir: &Path, name: &str| dir.file_name().is_some_and(|n| n == name);
    (named(ns_dir, namespace) && named(bundles, TASK_BUNDLES_DIR)).then(|| bundles.parent().map(Path::to_path_buf))?
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
