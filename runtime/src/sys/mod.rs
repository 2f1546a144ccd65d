//! The `sys` layer: thin wrappers around system calls and process-wide
//! settings (openat2 in a root, atomic files, inherited descriptors, signal
//! dispositions, the runtime's own process setup). It imports nothing of the
//! other layers but the crate's error type.

pub mod atomic_file;
pub mod children_pid_ns;
pub mod clone3;
pub mod copy_tree;
pub mod debug_pause;
pub mod in_root;
pub mod inherited_fds;
pub mod io_errno;
pub mod mount_api;
pub mod mount_target;
pub mod new_mount;
pub mod pid_file;
pub mod pidfd;
pub mod proc_stat;
pub mod process_attrs;
pub mod process_setup;
pub mod procfs;
pub mod read_only_fs;
pub mod sigpipe;
pub mod spawn_signals;
pub mod syscall;
