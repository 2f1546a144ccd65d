//! The container's cgroups: libcgroups' manager for it, a new container's
//! v1 cgroups set up from one mountinfo read, its v2 cgroup made before
//! its init is born in it, the host's cgroup mounts,
//! the named v1 hierarchies, device rules (and their v2 program), the pids limit of
//! 0, the memory check before an update, statistics with pressure, and a
//! restored tree gathered into its container's cgroup.

pub mod device_filter;
pub mod device_rules;
pub mod fs;
pub mod manager;
pub mod memory_check;
pub mod named;
pub mod pids_zero;
pub mod pressure;
pub mod restored_tree;
pub mod stats;
pub mod v1_setup;
pub mod v2_setup;
