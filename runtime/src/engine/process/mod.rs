//! The container's processes: starting the init and exec'd processes with
//! libcontainer's public pieces, what they are given (stdio, a console),
//! the checks before they start (capabilities, rlimits, cwd, HOME, CPU
//! affinity), the sealed runtime binary they fork from, and waiting for them.

pub mod caps_check;
pub mod child_init;
pub mod confine;
pub mod console;
pub mod cpu_affinity;
pub mod cwd;
pub mod environ;
pub mod exec_launch;
pub mod exec_steps;
pub mod executor;
pub mod home_env;
pub mod init;
pub mod init_launch;
pub mod init_steps;
pub mod namespace_fds;
pub mod net_devices;
pub mod notify;
pub mod process_io;
pub mod rootfs_failure;
pub mod sealed_exe;
pub mod seccomp_notify;
pub mod tenant;
pub mod time_ns;
pub mod user_ns;
pub mod wait;
