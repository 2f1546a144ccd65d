//! What every container process we start is given: its stdio (or a console
//! socket for its pty) and extra fds. The pid file is ours to write, not the
//! engine's: it would follow a symlink there (see `pid_file`).

use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// Standard streams to give the container instead of inheriting ours.
#[derive(Debug, Default)]
pub struct Stdio {
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

#[derive(Debug, Default)]
pub struct ProcessIo {
    pub console_socket: Option<PathBuf>,
    pub preserve_fds: i32,
    pub stdio: Stdio,
}
