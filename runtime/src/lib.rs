//! rustpod: the container operations behind the `rustpod` CLI and the
//! containerd shim, built on youki's libcontainer with our own fixes for the
//! places where it falls short of the OCI spec or runc's behaviour.
//!
//! A [`Runtime`] (a state root and its cgroup driver) creates containers and
//! hands out [`Container`] handles, which carry every operation.

mod container;
mod runtime;

pub use console::ConsoleSocket;
pub use container::Container;
pub use create::CreateOptions;
pub use error::{Error, Result};
pub use exec::{ExecOptions, ProcessArgs};
pub use libcontainer::container::ContainerStatus;
pub use process_io::Stdio;
pub use runtime::Runtime;
pub use state::State;
pub use stats::ContainerStats;
pub use update::{parse_resources, parse_size, ResourceFlags};
pub use wait::wait_readable;

/// Where container state lives unless `--root` says otherwise.
pub const DEFAULT_ROOT: &str = "/run/rustpod";

// What the binaries need beside the handles: their entry steps (hook runs,
// the sealed binary, SIGPIPE), parsers and documents of the CLI, and the
// pieces the shim reads cgroups and mounts with.
pub mod cgroup_fs;
pub mod container_dir;
pub mod engine_bundle;
pub mod error;
pub mod features;
pub mod mount_propagation;
pub mod pressure;
pub mod sealed_exe;
pub mod self_exec;
pub mod signal;
pub mod sigpipe;
pub mod spec;
pub mod stats;
pub mod validate;

mod atomic_file;
mod caps_check;
mod cgroup;
mod cgroup_mount;
mod cgroup_mount_flags;
mod console;
mod create;
mod cwd;
mod delete;
mod device_filter;
mod events;
mod exec;
mod executor;
mod hook_state;
mod home_env;
mod in_root;
mod init;
mod kill;
mod list;
mod pause;
mod pid_file;
mod process_io;
mod process_setup;
mod ps;
mod resume;
mod rootfs_hook;
mod run;
mod start;
mod start_barrier;
mod state;
mod stop;
mod tenant;
mod update;
mod wait;
