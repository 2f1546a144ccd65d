//! The library's front door: a state root and how cgroups are driven,
//! which creates containers and hands out handles on them.

use std::path::{Path, PathBuf};

use crate::container::Container;
use crate::container_dir::ContainerDir;
use crate::create::CreateOptions;
use crate::run::RunMode;
use crate::engine_bundle::Bundle;
use crate::error::Result;
use crate::state::State;

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
        let bundle = crate::engine_bundle::load(&opts.bundle)?;
        self.create_from(id, &bundle, opts)
    }

    /// `create` for a bundle the caller has already loaded.
    pub fn create_from(&self, id: &str, bundle: &Bundle, opts: CreateOptions) -> Result<Container> {
        let mut opts = opts;
        opts.systemd_cgroup |= self.systemd_cgroup;
        let engine = crate::create::create_from(&self.root, id, bundle, opts)?;
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
        crate::list::list(&self.root)
    }

    /// Deletes container `id`, also one whose create died half-way and left
    /// no state to load.
    pub fn delete(&self, id: &str, force: bool) -> Result<()> {
        crate::delete::delete(&self.root, id, force)
    }

    /// `run`: create and start; in the foreground also wait, delete (unless
    /// `mode.keep`), and return the exit code.
    pub fn run(&self, id: &str, opts: CreateOptions, mode: RunMode) -> Result<i32> {
        let mut opts = opts;
        opts.systemd_cgroup |= self.systemd_cgroup;
        crate::run::run(&self.root, id, opts, mode)
    }

    /// Restores container `id` from criu's images (see `restore`): its exit
    /// code in the foreground, 0 once restored with `opts.detach`.
    pub fn restore(&self, id: &str, opts: crate::restore::RestoreOptions) -> Result<i32> {
        let mut opts = opts;
        opts.systemd_cgroup |= self.systemd_cgroup;
        crate::restore::restore(&self.root, id, &opts)
    }
}
