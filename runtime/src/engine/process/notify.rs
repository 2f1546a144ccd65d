//! The start signal of a waiting container process: the init (and an exec'd
//! process) waits on a notify socket in the container's state directory
//! until `start` (or exec) writes to it.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use crate::error::{Error, Result};

/// Tells a process waiting on `socket` (in `dir`) to go on and exec.
/// libcontainer's own notifier reaches the socket by changing the process's
/// working directory and back, which races with any other thread of a shim
/// serving several containers (and fails once the directory it returns to is
/// gone). Here the socket is reached through a descriptor of its directory,
/// which also keeps the path within `sun_path`'s 108 bytes however deep the
/// state root is.
pub fn notify_socket(dir: &Path, socket: &Path) -> Result<()> {
    let dir_file = std::fs::File::open(dir).map_err(|e| Error::io("open container state dir", dir, e))?;
    let name = socket.file_name().unwrap_or_default().to_string_lossy();
    let via_fd = format!("/proc/self/fd/{}/{name}", dir_file.as_raw_fd());
    let mut stream = UnixStream::connect(&via_fd).map_err(|e| Error::io("connect to the notify socket", socket, e))?;
    stream.write_all(b"start container").map_err(|e| Error::io("write to the notify socket", socket, e))
}
