//! The `engine` layer: the steps a container is made of — reading and
//! checking the bundle, the spec handed to libcontainer (`engine_bundle`),
//! starting the init and exec'd processes, the rootfs and mount steps, idmaps,
//! cgroups, hooks and the container's state on disk. Operations (`ops`)
//! compose these steps. A step may use other steps and `sys`, never `ops` or
//! `api` (but the crate's error type).

pub mod cgroup;
pub mod container_dir;
pub mod criu;
pub mod criu_swrk;
pub mod engine_bundle;
pub mod hook_state;
pub mod idmap;
pub mod mount;
pub mod process;
pub mod rootfs;
pub mod seccomp;
pub mod self_exec;
pub mod signal;
pub mod spec_support;
pub mod start_barrier;
pub mod start_report;
pub mod state;
pub mod stop;
pub mod teardown;
pub mod validate;
