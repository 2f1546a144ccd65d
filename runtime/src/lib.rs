//! rustpod: the container operations behind the `rustpod` CLI and the
//! containerd shim, built on youki's libcontainer with our own fixes for the
//! places where it falls short of the OCI spec or runc's behaviour.

pub mod cgroup;
pub mod cgroup_mount;
pub mod console;
pub mod container_dir;
pub mod device_filter;
pub mod engine_builder;
pub mod engine_bundle;
pub mod error;
pub mod hook_state;
pub mod home_env;
pub mod in_root;
pub mod mount_propagation;
pub mod sealed_exe;
pub mod self_exec;
pub mod signal;
pub mod sigpipe;
pub mod state;
pub mod validate;

pub mod create;
pub mod delete;
pub mod events;
pub mod exec;
pub mod features;
pub mod kill;
pub mod list;
pub mod pause;
pub mod ps;
pub mod resume;
pub mod run;
pub mod spec;
pub mod start;
pub mod start_hooks;
pub mod update;
pub mod wait;

pub use error::{Error, Result};

/// Where container state lives unless `--root` says otherwise.
pub const DEFAULT_ROOT: &str = "/run/rustpod";
