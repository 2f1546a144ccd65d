//! The rootfs and mount steps of our own: per-mount options the engine drops
//! (propagation, `nosymfollow`, superblock flags, `tmpcopyup`, a cgroup
//! mount's flags) applied by our createContainer hook, a tmpfs's mode from
//! the image, the cgroup mount of a
//! container that joins a PID namespace, device nodes, and where a container
//! path lands in the rootfs.

pub mod cgroup_flags;
pub mod cgroup_ns;
pub mod copyup;
pub mod dev_nodes;
pub mod propagation;
pub mod restore_mountpoints;
pub mod rootfs_hook;
pub mod rootfs_path;
pub mod sb_flags;
pub mod step_error;
pub mod symfollow;
pub mod tmpfs_mode;
