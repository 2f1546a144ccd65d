//! The library's front door: a state root and how cgroups are driven,
//! which creates containers and hands out handles on them.

use std::path::{Path, PathBuf};

use crate::api::container::Container;
use crate::engine::cgroup::fs::{hierarchies, Hierarchy};
use crate::engine::container_dir::ContainerDir;
use crate::engine::engine_bundle::Bundle;
use crate::engine::state::State;
use crate::error::{Error, Result};
use crate::ops::create::CreateOptions;
use crate::ops::run::{self, RunMode};

#[derive(Debug, Clone)]
pub struct Runtime {
    root: PathBuf,
    systemd_cgroup: bool,
}

impl Runtime {
    /// Containers kept under `root` (runc's `--root`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Runtime { root: root.into(), systemd_cgroup: false }
    }

    /// Drive cgroups through systemd (`--systemd-cgroup`).
    pub fn with_systemd_cgroup(mut self, systemd: bool) -> Self {
        self.systemd_cgroup = systemd;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates container `id` from the bundle in `opts`; its init waits for
    /// `start`.
    pub fn create(&self, id: &str, opts: CreateOptions) -> Result<Container> {
        let bundle = crate::engine::engine_bundle::load(&opts.bundle)?;
        self.create_from(id, &bundle, opts)
    }

    /// `create` for a bundle the caller has already loaded.
    pub fn create_from(&self, id: &str, bundle: &Bundle, opts: CreateOptions) -> Result<Container> {
        self.create_with(&hierarchies(), id, bundle, opts)
    }

    /// `create_from` with the host's cgroup hierarchies already read (once
    /// per command: `run` passes the same to its delete).
    fn create_with(&self, cgroups: &[Hierarchy], id: &str, bundle: &Bundle, opts: CreateOptions) -> Result<Container> {
        let mut opts = opts;
        opts.systemd_cgroup |= self.systemd_cgroup;
        let engine = crate::ops::create::create_from(cgroups, &self.root, id, bundle, opts)?;
        Ok(Container::new(ContainerDir::new(&self.root, id)?, engine))
    }

    /// A handle on container `id`, with its state loaded.
    pub fn load(&self, id: &str) -> Result<Container> {
        let dir = ContainerDir::new(&self.root, id)?;
        let engine = dir.load()?;
        Ok(Container::new(dir, engine))
    }

    /// The state of every container (one being created is skipped).
    pub fn list(&self) -> Result<Vec<State>> {
        crate::ops::list::list(&self.root)
    }

    /// Deletes container `id`, also one whose create died half-way and left
    /// no state to load.
    pub fn delete(&self, id: &str, force: bool) -> Result<()> {
        crate::ops::delete::delete(&hierarchies(), &self.root, id, force)
    }

    /// `run`: create and start; in the foreground also wait, delete (unless
    /// `mode.keep`), and return the exit code. The operations compose here,
    /// where each is reached; `ops::run` adds the terminal and the wait.
    pub fn run(&self, id: &str, opts: CreateOptions, mode: RunMode) -> Result<i32> {
        let mut opts = opts;
        let bundle = crate::engine::engine_bundle::load(&opts.bundle)?;
        let console = run::console_for(&self.root, &bundle, mode, &mut opts.console_socket)?;
        let cgroups = hierarchies();
        let mut container = self.create_with(&cgroups, id, &bundle, opts)?;
        let started = console.as_ref().map(|c| c.receive_master()).transpose().and_then(|master| container.start().map(|_| master));
        let master = match started {
            Ok(master) => master,
            Err(err) => {
                let _ = crate::ops::delete::delete(&cgroups, &self.root, id, true);
                return Err(err);
            }
        };
        if mode.detach {
            return Ok(0);
        }
        let pid =
            container.pid().map(nix::unistd::Pid::from_raw).ok_or_else(|| Error::Invalid(format!("container {id} has no init pid")))?;
        let code = run::wait_foreground(master, pid);
        if mode.keep {
            return code;
        }
        let cleanup = crate::ops::delete::delete(&cgroups, &self.root, id, true);
        let code = code?;
        cleanup?;
        Ok(code)
    }

    /// Restores container `id` from criu's images (see `restore`): its exit
    /// code in the foreground, 0 once restored with `opts.detach`.
    pub fn restore(&self, id: &str, opts: crate::ops::restore::RestoreOptions) -> Result<i32> {
        let detach = opts.detach;
        let pid = self.restore_detached(id, opts)?;
        if detach {
            return Ok(0);
        }
        let code = crate::engine::process::wait::forward_signals_until_exit(nix::unistd::Pid::from_raw(pid));
        let cleanup = self.delete(id, true);
        let code = code?;
        cleanup?;
        Ok(code)
    }

    /// Restores container `id` and returns the restored init's pid at once
    /// (a shim's way: it reaps the init itself).
    pub fn restore_detached(&self, id: &str, opts: crate::ops::restore::RestoreOptions) -> Result<i32> {
        let mut opts = opts;
        opts.systemd_cgroup |= self.systemd_cgroup;
        crate::ops::restore::restore(&self.root, id, &opts)
    }
}
