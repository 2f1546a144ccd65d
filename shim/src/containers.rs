//! The containers one shim serves (its group), by id, and what each task
//! request does to them: the logic behind the Task service (task.rs only
//! translates ttrpc). A pid map tells the reaper's exits apart; exits are
//! buffered while a helper may not have named its pid yet, and each exit
//! goes out after its output and, for an init, after its execs' exits.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::types::task::Status as TaskStatus;
use containerd_shim::ExitSignal;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::container::Container;
use crate::error::{Error, Result};
use crate::events::Publisher;
use crate::helper::{self, Job};
use crate::io::{self, Stdio};
use crate::mount::MountSpec;
use crate::process::{Event, ExitCell, ExitStatus, Process, State};

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

/// The shim's containers under one state root, with the event queue they
/// publish to; shared by the Task service, the reaper and the server.
pub struct Containers {
    root: PathBuf,
    events: Publisher,
    exit_signal: Arc<ExitSignal>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    containers: HashMap<String, Container>,
    /// Live pid → (container id, exec id: None for the init).
    pids: HashMap<i32, (String, Option<String>)>,
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

impl Containers {
    pub fn new(root: PathBuf, events: Publisher, exit_signal: Arc<ExitSignal>) -> Arc<Containers> {
        Arc::new(Containers { root, events, exit_signal, inner: Mutex::new(Inner::default()) })
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
            Some((cid, None)) => self.init_exited(inner, cid, exit),
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
            return self.exited(inner, cid, None, exit);
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
            shared.exited(shared.lock(), thread_cid, None, exit);
        });
        if let Err(e) = spawned {
            log::warn!("container {cid}: handle its init's exit: {e}");
            self.exited(self.lock(), cid, None, exit);
        }
    }

    /// Runs `call` on container `id`'s library handle, one call at a time,
    /// without holding the shim's lock (a call may wait, e.g. on a freeze).
    /// The handle is loaded on first use and kept; once we reaped the init
    /// it says stopped, as we know it is.
    fn with_handle<T>(&self, id: &str, call: impl FnOnce(&mut rustpod::Container) -> rustpod::Result<T>) -> Result<rustpod::Result<T>> {
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
    fn exited(self: &Arc<Self>, mut inner: MutexGuard<'_, Inner>, cid: String, eid: Option<String>, exit: ExitStatus) {
        let output = inner
            .containers
            .get(&cid)
            .and_then(|c| c.process(eid.as_deref()))
            .and_then(|p| p.io.as_ref())
            .map(|io| io.output())
            .filter(|copiers| !copiers.all_ended());
        let Some(output) = output else {
            return inner.process_exited(&cid, eid.as_deref(), exit, &self.events);
        };
        drop(inner);
        let (shared, thread_cid, thread_eid) = (Arc::clone(self), cid.clone(), eid.clone());
        let spawned = std::thread::Builder::new().name("exit-drain".into()).stack_size(64 * 1024).spawn(move || {
            output.wait_ended(OUTPUT_DRAIN_WAIT);
            shared.lock().process_exited(&thread_cid, thread_eid.as_deref(), exit, &shared.events);
        });
        // A thread that never started ran nothing: record the exit here.
        if let Err(e) = spawned {
            log::warn!("wait for output of a process that exited: {e}");
            self.lock().process_exited(&cid, eid.as_deref(), exit, &self.events);
        }
    }
}

impl Inner {
    fn container(&mut self, id: &str) -> Result<&mut Container> {
        self.containers.get_mut(id).ok_or_else(|| no_container(id))
    }

    fn process_exited(&mut self, cid: &str, eid: Option<&str>, exit: ExitStatus, events: &Publisher) {
        let Some(c) = self.containers.get_mut(cid) else { return };
        c.flush_oom();
        let Some(p) = c.process_mut(eid) else { return };
        if p.set_exited(exit) {
            p.exit_published = true;
            events.task_exit(cid, eid, p.pid, exit);
        }
    }

    /// Records a new process's pid; returns the exit already reaped for it, if any.
    fn register(&mut self, pid: i32, cid: &str, eid: Option<&str>) -> Option<ExitStatus> {
        self.pids.insert(pid, (cid.to_string(), eid.map(str::to_string)));
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
            events.task_exit(cid, p.exec_id.as_deref(), p.pid, exit);
        }
    }
}

/// A container to create, as containerd asked for it.
pub struct NewContainer {
    pub id: String,
    pub bundle: String,
    pub stdio: Stdio,
    /// containerd's rootfs mounts for `<bundle>/rootfs` (none: the bundle has one).
    pub rootfs: Vec<MountSpec>,
    pub systemd_cgroup: bool,
    /// runc's NoPivotRoot (`runc create --no-pivot`).
    pub no_pivot: bool,
    /// runc's IoUid/IoGid: who must own the stdio pipes (a userns root).
    pub io_owner: Option<(u32, u32)>,
    /// The checkpoint its Start restores instead of starting a created init.
    pub restore: Option<crate::checkpoint::Restore>,
}

impl NewContainer {
    /// `<bundle>/rootfs` if containerd's rootfs mounts go there.
    fn rootfs_target(&self) -> Option<PathBuf> {
        (!self.rootfs.is_empty()).then(|| Path::new(&self.bundle).join("rootfs"))
    }

    /// What we keep of it, with its init.
    fn record(&self, init: Process, mounted_rootfs: Option<PathBuf>) -> Container {
        Container {
            handle: Arc::default(),
            kill_all_on_exit: crate::container::kill_all_on_exit(Path::new(&self.bundle)),
            bundle: self.bundle.clone(),
            mounted_rootfs,
            init,
            execs: HashMap::new(),
            metrics: None,
            io_owner: self.io_owner,
            restore_job: None,
            oom: None,
        }
    }
}

/// One process as State reports it.
pub struct ProcessView {
    /// The exec id, or the container id for the init.
    pub id: String,
    pub bundle: String,
    pub pid: i32,
    pub status: TaskStatus,
    pub stdio: Stdio,
    pub exit: Option<ExitStatus>,
}

impl Containers {
    /// Sets up stdio (pipes, or a console socket), runs the helper, and
    /// wires the pty if any. Returns the pid and the process's io.
    /// `what` names the request in errors.
    fn spawn(&self, what: &str, mut req: helper::Request, stdio: &Stdio) -> Result<(i32, io::ProcessIo)> {
        crate::cgroup_warmup::start();
        if stdio.terminal {
            let console = rustpod::ConsoleSocket::bind(&self.root.join("pty")).map_err(Error::runtime(what))?;
            req.console_socket = Some(console.path().to_path_buf());
            let pid = helper::run(&req, rustpod::Stdio::default()).map_err(Error::helper(what))?;
            let master = console.receive_master().map_err(Error::runtime(what))?;
            return Ok((pid, io::attach_console(stdio, master).map_err(Error::stdio(what))?));
        }
        let namespace = self.root.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let (pio, child) = io::open_pipes(stdio, (&req.id, namespace)).map_err(Error::stdio(what))?;
        if let Some(owner) = req.io_owner {
            io::chown_pipes(&child, owner).map_err(Error::stdio(what))?;
        }
        req.stdio = [child.stdin.is_some(), child.stdout.is_some(), child.stderr.is_some()];
        let pid = helper::run(&req, child).map_err(Error::helper(what))?;
        Ok((pid, pio))
    }

    /// Mounts its rootfs and creates the container in a helper; its pid,
    /// io and mounted rootfs.
    fn create_container(&self, req: &NewContainer) -> Result<(i32, io::ProcessIo, Option<PathBuf>)> {
        let bundle = PathBuf::from(&req.bundle);
        let mounted = req.rootfs_target();
        let job = Job::Create { bundle, rootfs_mounts: req.rootfs.clone(), systemd_cgroup: req.systemd_cgroup, no_pivot: req.no_pivot };
        let hreq = self.helper_request(&req.id, job, req.io_owner);
        let (pid, pio) = self.spawn(&format!("create {}", req.id), hreq, &req.stdio)?;
        Ok((pid, pio, mounted))
    }

    /// Creates container `req.id` (its init created, not started); the init's pid.
    pub fn create(self: &Arc<Self>, req: NewContainer) -> Result<i32> {
        {
            let mut inner = self.lock();
            if inner.containers.contains_key(&req.id) {
                return Err(Error::AlreadyExists(format!("container {}", req.id)));
            }
            inner.creating += 1;
            if req.restore.is_none() {
                inner.spawning += 1;
            }
        }
        if let Some(from) = &req.restore {
            let mounted = self.mount_rootfs(&req);
            let mut inner = self.lock();
            inner.creating -= 1;
            return mounted.map(|mounted| self.record_for_restore(&mut inner, &req, from, mounted));
        }
        let result = self.create_container(&req);
        let mut inner = self.lock();
        inner.creating -= 1;
        let outcome = result.map(|(pid, pio, mounted_rootfs)| {
            self.events.task_create(&req.id, &req.bundle, pid, &req.stdio, "");
            let mut init = Process::new(None, req.stdio.clone());
            init.pid = pid;
            init.io = Some(pio);
            inner.containers.insert(req.id.clone(), req.record(init, mounted_rootfs));
            pid
        });
        self.finish_spawn(inner, &req.id, None, &outcome);
        let pid = outcome?;
        self.watch_oom(&req.id, pid);
        Ok(pid)
    }

    /// Mounts containerd's rootfs at `<bundle>/rootfs` in a helper (idmapped
    /// layers need a child in a user namespace); where, if anything was.
    fn mount_rootfs(&self, req: &NewContainer) -> Result<Option<PathBuf>> {
        let Some(target) = req.rootfs_target() else { return Ok(None) };
        let job = Job::Mount { bundle: PathBuf::from(&req.bundle), rootfs_mounts: req.rootfs.clone() };
        helper::run(&self.helper_request(&req.id, job, None), rustpod::Stdio::default())
            .map_err(Error::helper(format!("create {}: mount its rootfs", req.id)))?;
        Ok(Some(target))
    }

    /// A Create with a checkpoint, as containerd's runc shim takes it: the
    /// rootfs is mounted (containerd applies the checkpoint's rootfs diff
    /// there before Start) and nothing runs yet; the container is recorded
    /// created, its init with no pid (0 in TaskCreate), and its Start
    /// restores it.
    fn record_for_restore(
        &self,
        inner: &mut Inner,
        req: &NewContainer,
        from: &crate::checkpoint::Restore,
        mounted: Option<PathBuf>,
    ) -> i32 {
        self.events.task_create(&req.id, &req.bundle, 0, &req.stdio, &from.image_path.to_string_lossy());
        let mut c = req.record(Process::new(None, req.stdio.clone()), mounted);
        c.restore_job = Some(Job::Restore { bundle: PathBuf::from(&req.bundle), systemd_cgroup: req.systemd_cgroup, from: from.clone() });
        inner.containers.insert(req.id.clone(), c);
        0
    }

    /// Ends a helper's spawn of process (id, eid): its pid registered if it
    /// runs, and an exit the reaper already took for it published.
    fn finish_spawn(self: &Arc<Self>, mut inner: MutexGuard<'_, Inner>, id: &str, eid: Option<&str>, outcome: &Result<i32>) {
        let early_exit = outcome.as_ref().ok().and_then(|&pid| inner.register(pid, id, eid));
        inner.end_spawn();
        match early_exit {
            Some(exit) => self.exited(inner, id.to_string(), eid.map(str::to_string), exit),
            None => drop(inner),
        }
    }

    /// Adds exec `exec_id` to container `id`, to run `spec` once started.
    pub fn add_exec(&self, id: &str, exec_id: &str, stdio: Stdio, spec: Box<oci_spec::runtime::Process>) -> Result<()> {
        let mut inner = self.lock();
        let c = inner.container(id)?;
        if c.execs.contains_key(exec_id) {
            return Err(Error::AlreadyExists(format!("exec {exec_id} in {id}")));
        }
        if c.init.exited().is_some() {
            return Err(Error::WrongState(format!("container {id} is stopped")));
        }
        let mut p = Process::new(Some(exec_id), stdio);
        p.spec = Some(spec);
        c.execs.insert(exec_id.to_string(), p);
        self.events.exec_added(id, exec_id);
        Ok(())
    }

    /// What State reports of the init (None) or an exec.
    pub fn state(&self, id: &str, exec_id: Option<&str>) -> Result<ProcessView> {
        let mut inner = self.lock();
        let c = inner.container(id)?;
        let p = c.process(exec_id).ok_or_else(|| no_process(id, exec_id.unwrap_or_default()))?;
        Ok(ProcessView {
            id: p.exec_id.clone().unwrap_or_else(|| id.to_string()),
            bundle: c.bundle.clone(),
            pid: p.pid,
            status: c.task_status(p),
            stdio: p.stdio.clone(),
            exit: p.exited(),
        })
    }

    /// The pids in container `id`, each with its exec id if it is an exec.
    pub fn pids(&self, id: &str) -> Result<Vec<(i32, Option<String>)>> {
        let pids = self.with_handle(id, |c| c.processes())?.map_err(Error::runtime(format!("pids of {id}")))?;
        let mut inner = self.lock();
        let c = inner.container(id)?;
        let exec_of: HashMap<i32, &String> = c.execs.iter().map(|(exec_id, p)| (p.pid, exec_id)).collect();
        Ok(pids.into_iter().map(|pid| (pid, exec_of.get(&pid).map(|e| e.to_string()))).collect())
    }

    /// Signals the init (with `all`, every process of the container) or an exec.
    pub fn kill(&self, id: &str, exec_id: Option<&str>, signal: Signal, all: bool) -> Result<()> {
        if let Some(exec_id) = exec_id {
            return self.signal_exec(id, exec_id, signal);
        }
        if self.lock().container(id)?.init.exited().is_some() && !all {
            return Err(Error::Finished(format!("container {id}")));
        }
        let killed = self.with_handle(id, |c| c.kill(signal, all))?;
        killed.map_err(|e| match e {
            // runc's "container not running": the Go shim says NotFound.
            rustpod::Error::WrongStatus { .. } => Error::Finished(format!("container {id}")),
            e => Error::runtime(format!("kill {id}"))(e),
        })
    }

    pub fn resize_pty(&self, id: &str, exec_id: Option<&str>, width: u32, height: u32) -> Result<()> {
        let mut inner = self.lock();
        let c = inner.container(id)?;
        let p = c.process(exec_id).ok_or_else(|| no_process(id, exec_id.unwrap_or_default()))?;
        // Not started yet: no terminal to resize, as in containerd's runc shim.
        let Some(pio) = p.io.as_ref() else { return Ok(()) };
        pio.resize(width, height).map_err(Error::stdio(format!("resize {id}")))
    }

    pub fn close_stdin(&self, id: &str, exec_id: Option<&str>) -> Result<()> {
        let mut inner = self.lock();
        let c = inner.container(id)?;
        let p = c.process(exec_id).ok_or_else(|| no_process(id, exec_id.unwrap_or_default()))?;
        if let Some(pio) = &p.io {
            pio.close_stdin();
        }
        Ok(())
    }

    pub fn update(&self, id: &str, resources: oci_spec::runtime::LinuxResources) -> Result<()> {
        let flags = rustpod::ResourceFlags::default();
        self.with_handle(id, |c| c.update(Some(resources), &flags))?.map_err(Error::runtime(format!("update {id}")))
    }

    /// Waits for the init (None) or an exec to exit.
    pub fn wait(&self, id: &str, exec_id: Option<&str>) -> Result<ExitStatus> {
        let cell = {
            let mut inner = self.lock();
            let c = inner.container(id)?;
            let p = c.process(exec_id).ok_or_else(|| no_process(id, exec_id.unwrap_or_default()))?;
            Arc::clone(&p.exit)
        };
        Ok(cell.wait())
    }

    /// Container `id`'s cgroup statistics, as containerd's metrics type.
    pub fn stats(&self, id: &str) -> Result<Any> {
        let cached = self.lock().container(id)?.metrics.clone();
        let source = match cached {
            Some(source) => source,
            None => {
                let source = self.with_handle(id, |c| Ok(crate::metrics::Source::open(c)));
                let source = Arc::new(source?.map_err(Error::runtime(format!("stats of {id}")))??);
                if source.cacheable() {
                    if let Some(c) = self.lock().containers.get_mut(id) {
                        c.metrics = Some(Arc::clone(&source));
                    }
                }
                source
            }
        };
        Ok(source.collect()?)
    }

    /// The init's pid, 0 if container `id` is not ours.
    pub fn init_pid(&self, id: &str) -> i32 {
        self.lock().containers.get(id).map_or(0, |c| c.init.pid)
    }

    /// Starts the init (None) or an exec; its pid.
    pub fn start(self: &Arc<Self>, id: &str, exec_id: Option<&str>) -> Result<i32> {
        match exec_id {
            None => self.start_init(id),
            Some(exec_id) => self.start_exec(id, exec_id),
        }
    }

    fn start_init(self: &Arc<Self>, id: &str) -> Result<i32> {
        let restore = {
            let mut inner = self.lock();
            let c = inner.container(id)?;
            c.init.apply(Event::Start, &format!("container {id}"))?;
            let restore = c.restore_job.clone().map(|job| (self.helper_request(id, job, c.io_owner), c.init.stdio.clone()));
            if restore.is_some() {
                inner.spawning += 1;
            }
            restore
        };
        if let Some((hreq, stdio)) = restore {
            return self.start_restore(id, hreq, &stdio);
        }
        // start waits for its poststart hooks: keep their status from the reaper.
        let hold = crate::reaper::hold();
        // Only the release holds the handle: the wait for the startContainer
        // hooks (the image's code, which may never end) must not keep Kill,
        // Delete, Update or Pids waiting.
        let result = self
            .with_handle(id, |c| c.release())
            .and_then(|r| r.and_then(rustpod::Starting::finish).map_err(Error::runtime(format!("start {id}"))));
        drop(hold);
        let mut inner = self.lock();
        let c = inner.container(id)?;
        c.init.finish_start(result.is_ok());
        let pid = c.init.pid;
        if result.is_ok() {
            self.events.task_start(id, pid);
        }
        c.flush_oom();
        flush_exit(&mut c.init, id, &self.events);
        result?;
        Ok(pid)
    }

    /// The Start of a container created from a checkpoint, as containerd's
    /// runc shim restores it then: a helper restores the init with its pipes;
    /// a failure leaves it created, to be deleted (or started again).
    fn start_restore(self: &Arc<Self>, id: &str, hreq: helper::Request, stdio: &Stdio) -> Result<i32> {
        let result = self.spawn(&format!("restore {id}"), hreq, stdio);
        let mut inner = self.lock();
        let outcome = inner.container(id).and_then(|c| match result {
            Ok((pid, pio)) => {
                c.init.pid = pid;
                c.init.io = Some(pio);
                c.restore_job = None;
                c.init.finish_start(true);
                self.events.task_start(id, pid);
                Ok(pid)
            }
            Err(e) => {
                c.init.finish_start(false);
                Err(Error::Restore(Box::new(e)))
            }
        });
        self.finish_spawn(inner, id, None, &outcome);
        let pid = outcome?;
        self.watch_oom(id, pid);
        Ok(pid)
    }

    /// A helper's request to do `job` in container `id`.
    fn helper_request(&self, id: &str, job: Job, io_owner: Option<(u32, u32)>) -> helper::Request {
        helper::Request { root: self.root.clone(), id: id.to_string(), job, console_socket: None, stdio: [false; 3], io_owner }
    }

    fn start_exec(self: &Arc<Self>, id: &str, exec_id: &str) -> Result<i32> {
        let (hreq, stdio) = {
            let mut inner = self.lock();
            let c = inner.container(id)?;
            if c.init.state() != State::Running {
                return Err(Error::WrongState(format!("container {id} is {}: cannot start an exec in it", c.init.state().word())));
            }
            let p = c.execs.get_mut(exec_id).ok_or_else(|| no_process(id, exec_id))?;
            p.apply(Event::Start, &format!("exec {exec_id} of {id}"))?;
            // Exec always leaves one; a start takes it.
            let Some(process) = p.spec.take() else {
                p.finish_start(false);
                return Err(Error::WrongState(format!("exec {exec_id} of {id} has no process to start")));
            };
            let hreq = self.helper_request(id, Job::Exec { process }, c.io_owner);
            let stdio = p.stdio.clone();
            inner.spawning += 1;
            (hreq, stdio)
        };
        let result = self.spawn(&format!("exec {exec_id} in {id}"), hreq, &stdio);
        let mut inner = self.lock();
        let events = &self.events;
        let outcome = match inner.container(id).ok().and_then(|c| c.execs.get_mut(exec_id)) {
            None => Err(no_process(id, exec_id)),
            Some(p) => match result {
                Ok((pid, pio)) => {
                    p.pid = pid;
                    p.io = Some(pio);
                    p.finish_start(true);
                    events.exec_started(id, exec_id, pid);
                    Ok(pid)
                }
                Err(e) => {
                    // It will never run: its waiters end with 255 and it is stopped.
                    release_waiters(p);
                    p.finish_start(false);
                    Err(e)
                }
            },
        };
        self.finish_spawn(inner, id, Some(exec_id), &outcome);
        outcome
    }

    /// Deletes the container (None: its init) or an exec; the pid and exit
    /// of the process deleted.
    pub fn delete(&self, id: &str, exec_id: Option<&str>) -> Result<(i32, Option<ExitStatus>)> {
        match exec_id {
            None => self.delete_init(id),
            Some(exec_id) => self.delete_exec(id, exec_id),
        }
    }

    fn delete_exec(&self, id: &str, exec_id: &str) -> Result<(i32, Option<ExitStatus>)> {
        let mut inner = self.lock();
        let c = inner.container(id)?;
        let p = c.execs.get_mut(exec_id).ok_or_else(|| no_process(id, exec_id))?;
        p.apply(Event::Delete, &format!("exec {exec_id} of {id}"))?;
        let p = c.execs.remove(exec_id).expect("found above");
        drop(inner);
        release_waiters(&p);
        if let Some(pio) = &p.io {
            pio.finish_output(Instant::now() + OUTPUT_CLOSE_WAIT);
        }
        Ok((p.pid, p.exited()))
    }

    fn delete_init(&self, id: &str) -> Result<(i32, Option<ExitStatus>)> {
        let (cell, was_created) = {
            let mut inner = self.lock();
            let c = inner.container(id)?;
            // An init never restored has no process to wait for.
            let was_created = c.init.state() == State::Created && c.restore_job.is_none();
            // From here on nothing starts, pauses or deletes it again.
            c.init.apply(Event::Delete, &format!("container {id}"))?;
            (Arc::clone(&c.init.exit), was_created)
        };
        // Force: a created init is killed, and a half-dead container goes.
        // delete waits for the poststop hooks: keep their status from the reaper.
        let hold = crate::reaper::hold();
        let deleted = self.delete_container(id)?;
        drop(hold);
        let exit = if was_created { cell.wait_timeout(DELETE_EXIT_WAIT) } else { cell.get() };
        let mut inner = self.lock();
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
        self.events.task_delete(id, c.init.pid, exit);
        deleted.map_err(Error::runtime(format!("delete {id}")))?;
        unmounted.map_err(|source| Error::Unmount { id: id.to_string(), source })?;
        Ok((c.init.pid, exit))
    }

    fn signal_exec(&self, id: &str, exec_id: &str, signal: Signal) -> Result<()> {
        let mut inner = self.lock();
        let c = inner.container(id)?;
        let p = c.execs.get(exec_id).ok_or_else(|| no_process(id, exec_id))?;
        match p.state() {
            State::Running | State::Paused if p.exited().is_none() => {}
            State::Created | State::Starting => return Err(Error::WrongState(format!("exec {exec_id} of {id} is not started"))),
            _ => return Err(Error::Finished(format!("exec {exec_id} of {id}"))),
        }
        nix::sys::signal::kill(Pid::from_raw(p.pid), signal).map_err(|errno| match errno {
            // It exited and is not reaped yet: as for an exited process.
            nix::errno::Errno::ESRCH => Error::Finished(format!("exec {exec_id} of {id}")),
            errno => Error::Signal { what: format!("signal exec {exec_id} of {id} (pid {})", p.pid), errno },
        })
    }

    /// Pause (freeze) or resume container `id`, then publish it. Not under
    /// the shim's lock: a freeze can wait on the container's tasks, and the
    /// reaper needs that lock meanwhile.
    pub fn set_frozen(&self, id: &str, frozen: bool) -> Result<()> {
        let (what, event, call): (_, _, fn(&mut rustpod::Container) -> rustpod::Result<()>) = match frozen {
            true => ("pause", Event::Pause, rustpod::Container::pause),
            false => ("resume", Event::Resume, rustpod::Container::resume),
        };
        let container = format!("container {id}");
        {
            let mut inner = self.lock();
            inner.container(id)?.init.check(event, &container)?;
        }
        self.with_handle(id, call)?.map_err(Error::runtime(format!("{what} {id}")))?;
        if let Ok(c) = self.lock().container(id) {
            // It may have exited meanwhile: then it stays stopped.
            let _ = c.init.apply(event, &container);
        }
        match frozen {
            true => self.events.paused(id),
            false => self.events.resumed(id),
        }
        Ok(())
    }

    /// criu dumps container `id` (its state stays for containerd's Delete).
    pub fn checkpoint(&self, id: &str, opts: &rustpod::CheckpointOptions) -> Result<()> {
        // `criu check` and `criu swrk` are children we wait for ourselves.
        let _hold = crate::reaper::hold();
        self.with_handle(id, |c| c.dump(opts))?.map_err(Error::runtime(format!("checkpoint {id}")))
    }

    pub fn shutdown_if_idle(&self) {
        let inner = self.lock();
        if inner.containers.is_empty() && inner.creating == 0 {
            self.exit_signal.signal();
        }
    }
}

impl Containers {
    fn watch_oom(self: &Arc<Self>, id: &str, pid: i32) {
        // Weak: the container keeps its watch, and the registry keeps the container.
        let shared = Arc::downgrade(self);
        let cid = id.to_string();
        let on_oom = move || {
            if let Some(shared) = shared.upgrade() {
                shared.events.oom(&cid);
            }
        };
        match crate::oom::watch(pid, on_oom) {
            Ok(watch) => {
                if let Some(c) = self.lock().containers.get_mut(id) {
                    c.oom = Some(watch);
                }
            }
            Err(e) => log::warn!("container {id}: no OOM events: {e}"),
        }
    }
}

/// A process that will never run (its start failed, or it is deleted
/// unstarted) still ends every Wait on it, as containerd's runc shim does;
/// its status is the runtime's "could not run" 255. No exit event goes out.
fn release_waiters(p: &Process) {
    match p.exited() {
        None => p.exit.set(ExitStatus { code: 255, at: SystemTime::now() }),
        Some(_) => p.exit.release(),
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
    containerd_state_dir(namespace, bundle).unwrap_or_else(|| PathBuf::from(DEFAULT_CONTAINERD_STATE)).join("rustpod").join(namespace)
}

/// `<state>` of a bundle `<state>/io.containerd.runtime.v2.task/<ns>/<id>`.
fn containerd_state_dir(namespace: &str, bundle: &Path) -> Option<PathBuf> {
    let ns_dir = bundle.parent()?;
    let bundles = ns_dir.parent()?;
    let named = |dir: &Path, name: &str| dir.file_name().is_some_and(|n| n == name);
    (named(ns_dir, namespace) && named(bundles, TASK_BUNDLES_DIR)).then(|| bundles.parent().map(Path::to_path_buf))?
}

#[cfg(test)]
#[path = "containers_tests.rs"]
mod tests;
