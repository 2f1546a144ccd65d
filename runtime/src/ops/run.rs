//! `run`: create and start; in the foreground also wait, delete (unless
//! `--keep`), and return the container's exit code. A foreground `terminal: true`
//! container gets a pty proxied to our stdio, as with runc. The handle
//! (`api::Runtime::run`) composes create, start and delete; this holds what
//! only `run` does: its terminal and its wait in the foreground.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::unistd::Pid;

use crate::engine::engine_bundle::Bundle;
use crate::engine::process::console::{self, ConsoleSocket};
use crate::engine::process::wait;
use crate::error::Result;

/// How `run` ends: `detach` returns once started; `keep` leaves the
/// stopped container for `delete`, as runc's `--keep`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunMode {
    pub detach: bool,
    pub keep: bool,
}

/// The console socket a foreground run of a `terminal: true` process needs
/// (in `root`), its path set in `console_socket` (create's option); none
/// when detached or the caller gave one.
pub(crate) fn console_for(
    root: &Path,
    bundle: &Bundle,
    mode: RunMode,
    console_socket: &mut Option<PathBuf>,
) -> Result<Option<ConsoleSocket>> {
    let wants_tty = bundle.spec.process().as_ref().and_then(|p| p.terminal()).unwrap_or(false);
    if !wants_tty || mode.detach || console_socket.is_some() {
        return Ok(None);
    }
    let socket = ConsoleSocket::bind(root)?;
    *console_socket = Some(socket.path().to_path_buf());
    Ok(Some(socket))
}

/// Waits in the foreground for the init `pid`, proxying its pty when it has
/// one, and returns its exit code.
pub(crate) fn wait_foreground(master: Option<OwnedFd>, pid: Pid) -> Result<i32> {
    match master {
        Some(master) => console::proxy_until_exit(master, pid),
        None => wait::forward_signals_until_exit(pid),
    }
}
