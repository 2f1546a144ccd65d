//! `--pid-file`, written as runc writes it: the pid, no newline, through a
//! temporary file renamed over the path, so a symlink planted there is
//! replaced rather than followed to a host file.

use std::path::Path;

use nix::unistd::Pid;

use crate::error::Result;
use crate::sys::atomic_file;

/// Writes `pid` to `path` (mode 0644, as runc's 0666 under the usual umask).
pub fn write(path: &Path, pid: Pid) -> Result<()> {
    atomic_file::write(path, pid.as_raw().to_string().as_bytes(), 0o644)
}
