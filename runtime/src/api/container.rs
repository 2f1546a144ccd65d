//! A handle on one container: what was loaded of it (the engine's state,
//! its directory), and every operation on it, so a caller that keeps the
//! handle (the shim, between requests) does not read the state again.

use std::io::Write;
use std::time::Duration;

use libcgroups::common::AnyCgroupManager;
use libcontainer::container::{Container as EngineContainer, ContainerStatus};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use oci_spec::runtime::LinuxResources;

use crate::engine::cgroup::stats::ContainerStats;
use crate::engine::container_dir::ContainerDir;
use crate::engine::state::State;
use crate::error::{Error, Result};
use crate::ops::exec::ExecOptions;
use crate::ops::update::ResourceFlags;

pub struct Container {
    dir: ContainerDir,
    engine: EngineContainer,
}

impl Container {
    pub(crate) fn new(dir: ContainerDir, engine: EngineContainer) -> Self {
        Container { dir, engine }
    }

    pub fn id(&self) -> &str {
        &self.dir.id
    }

    /// The init's pid (as the host numbers it), while it has one.
    pub fn pid(&self) -> Option<i32> {
        self.engine.pid().map(|p| p.as_raw())
    }

    pub fn status(&self) -> ContainerStatus {
        self.engine.status()
    }

    /// runc's `state` of the container, as last loaded or refreshed.
    pub fn state(&self) -> State {
        crate::engine::state::describe(&self.dir, &self.engine)
    }

    /// The caller reaped the init (a subreaper holding the handle): the
    /// container is stopped, whatever a process that took its pid since
    /// would make `refresh` say. Kept in memory only.
    fn set_stopped(&mut self) {
        self.engine.set_status(ContainerStatus::Stopped);
    }

    /// Brings a kept handle's status up to date before an operation, for a
    /// caller that reaps the init itself: stopped once it reaped it, else as
    /// the init is now (an earlier `kill` leaves the handle saying stopped
    /// while a TERM-ignoring init still runs).
    pub fn settle(&mut self, init_reaped: bool) -> Result<()> {
        if init_reaped {
            self.set_stopped();
            Ok(())
        } else {
            self.refresh()
        }
    }

    /// Looks again at whether the init still runs.
    pub fn refresh(&mut self) -> Result<()> {
        self.engine.refresh_status().map_err(|e| Error::engine("load state of", &self.dir.id, &e))?;
        self.dir.forget_a_reused_pid(&mut self.engine);
        Ok(())
    }

    /// Lets the init run its startContainer hooks and exec the program.
    pub fn start(&mut self) -> Result<()> {
        crate::ops::start::start(&self.dir, &mut self.engine)
    }

    /// `start` in two halves: this one, under whatever serialises calls on
    /// the handle, releases the init; [`Starting::finish`] then waits for
    /// the container's startContainer hooks without the handle, so that a
    /// hook that hangs blocks no kill or delete.
    pub fn release(&mut self) -> Result<crate::ops::start::Starting> {
        crate::ops::start::release(&self.dir, &mut self.engine)
    }

    /// Signals the init, or with `all` every process of the container.
    pub fn kill(&mut self, signal: Signal, all: bool) -> Result<()> {
        crate::ops::kill::kill(&self.dir, &mut self.engine, signal, all)
    }

    /// Starts another process in the container; it is our child.
    pub fn exec(&self, opts: ExecOptions) -> Result<Pid> {
        crate::ops::exec::spawn(&self.dir, &self.engine, opts)
    }

    /// `exec` as the CLI runs it: in the foreground the process's exit code
    /// (a pty proxied for a terminal), detached 0.
    pub fn exec_and_wait(&self, opts: ExecOptions) -> Result<i32> {
        crate::ops::exec::exec(&self.dir, &self.engine, opts)
    }

    pub fn pause(&mut self) -> Result<()> {
        crate::ops::pause::pause(&self.dir, &mut self.engine)
    }

    pub fn resume(&mut self) -> Result<()> {
        crate::ops::resume::resume(&self.dir, &mut self.engine)
    }

    /// Changes the cgroup resources: `base` with `flags` over it (see
    /// `ops::update`).
    pub fn update(&self, base: Option<LinuxResources>, flags: &ResourceFlags) -> Result<()> {
        crate::ops::update::update(&self.dir, &self.engine, base, flags)
    }

    /// The pids of every process in the container, sorted.
    pub fn processes(&self) -> Result<Vec<i32>> {
        crate::ops::ps::pids(&self.dir, &self.engine)
    }

    pub fn stats(&self) -> Result<ContainerStats> {
        crate::engine::cgroup::stats::read(&self.engine)
    }

    /// The container's cgroup manager, for a caller that reads it often.
    pub fn cgroup_manager(&self) -> Result<AnyCgroupManager> {
        crate::engine::cgroup::manager::manager_for(&self.engine)
    }

    /// Writes `stats` events in runc's shape: once, or every `interval`
    /// while the container runs.
    pub fn events(&mut self, interval: Duration, once: bool, out: &mut dyn Write) -> Result<()> {
        crate::ops::events::events(&self.dir, &mut self.engine, interval, once, out)
    }

    /// Dumps the container with criu; without `leave_running` criu ends
    /// its processes and the state stays for `delete` (the shim's way).
    pub fn dump(&mut self, opts: &crate::ops::checkpoint::CheckpointOptions) -> Result<()> {
        crate::ops::checkpoint::dump(&self.dir, &mut self.engine, opts)
    }

    /// `dump`, then without `leave_running` (or `pre_dump`) the container
    /// is gone, as runc's checkpoint destroys it (the CLI's way).
    pub fn checkpoint(mut self, opts: &crate::ops::checkpoint::CheckpointOptions) -> Result<()> {
        self.dump(opts)?;
        if opts.leave_running || opts.pre_dump {
            return Ok(());
        }
        self.engine.set_status(libcontainer::container::ContainerStatus::Stopped);
        crate::ops::delete::delete_loaded(&crate::engine::cgroup::fs::hierarchies(), &self.dir, self.engine, true)
    }

    /// Removes the container: a stopped or created one, or with `force` any.
    pub fn delete(self, force: bool) -> Result<()> {
        crate::ops::delete::delete_loaded(&crate::engine::cgroup::fs::hierarchies(), &self.dir, self.engine, force)
    }
}
