//! rustpod: the container operations behind the `rustpod` CLI and the
//! containerd shim, built on youki's libcontainer with our own fixes for the
//! places where it falls short of the OCI spec or runc's behaviour.
//!
//! A [`Runtime`] (a state root and its cgroup driver) creates containers and
//! hands out [`Container`] handles, which carry every operation.

mod container;
mod runtime;

pub use container::Container;
pub use create::CreateOptions;
pub use engine::process::console::ConsoleSocket;
pub use engine::process::process_io::Stdio;
pub use engine::process::wait::wait_readable;
pub use engine::state::State;
pub use engine::cgroup::stats::ContainerStats;
pub use error::{Error, Result};
pub use exec::{ExecOptions, ProcessArgs};
pub use libcontainer::container::ContainerStatus;
pub use run::RunMode;
pub use runtime::Runtime;
pub use start::Starting;
pub use update::{parse_resources, parse_size, ResourceFlags};

/// Where container state lives unless `--root` says otherwise.
pub const DEFAULT_ROOT: &str = "/run/rustpod";

// What the binaries need beside the handles: their entry steps (hook runs,
// the sealed binary, SIGPIPE), parsers and documents of the CLI, and the
// pieces the shim reads cgroups and mounts with.
pub use engine::cgroup::{fs as cgroup_fs, pressure, stats};
pub use engine::mount::propagation as mount_propagation;
pub use engine::process::sealed_exe;
pub use engine::{container_dir, engine_bundle, self_exec, signal, validate};
pub use sys::{inherited_fds, sigpipe, spawn_signals};

pub mod error;
pub mod features;
pub mod spec;

mod engine;
mod sys;

mod create;
mod delete;
mod events;
mod exec;
mod kill;
mod list;
mod pause;
mod ps;
mod resume;
mod run;
mod start;
mod update;
