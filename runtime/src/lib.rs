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
pub use run::RunMode;
pub use runtime::Runtime;
pub use start::Starting;
pub use state::State;
pub use stats::ContainerStats;
pub use update::{parse_resources, parse_size, ResourceFlags};
pub use wait::wait_readable;
/// Idmapped copies of host mounts, made from a throw-away user namespace (the shim maps
/// containerd's rootfs layers with them).
pub use idmap_detached::mount_idmapped;
pub use idmap_userns::with_mappings as userns_with_mappings;

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
pub mod inherited_fds;
pub mod mount_propagation;
pub mod pressure;
pub mod sealed_exe;
pub mod self_exec;
pub mod signal;
pub mod sigpipe;
pub mod spawn_signals;
pub mod spec;
pub mod stats;
pub mod validate;

mod atomic_file;
mod caps_check;
mod cgroup;
mod cgroup_mount;
mod cgroup_mount_flags;
mod console;
mod cpu_affinity;
mod create;
mod cwd;
mod delete;
mod dev_nodes;
mod device_filter;
mod events;
mod exec;
mod executor;
mod hook_state;
mod home_env;
mod idmap_detached;
mod idmap_hook;
mod idmap_mount;
mod idmap_userns;
mod in_root;
mod mount_copyup;
mod mount_sb_flags;
mod mount_symfollow;
mod init;
mod kill;
mod named_cgroup;
mod list;
mod memory_check;
mod pause;
mod pid_file;
mod pids_zero;
mod process_io;
mod process_setup;
mod ps;
mod resume;
mod rootfs_hook;
mod rootfs_path;
mod run;
mod spec_support;
mod start;
mod start_barrier;
mod state;
mod stop;
mod tenant;
mod update;
mod wait;
