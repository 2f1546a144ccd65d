//! Lets `start` learn whether the startContainer hooks passed where our own
//! init runs them. `create` leaves a listening socket in the state
//! directory, held by the init alone; `start` connects before it releases
//! the init, which answers once its hooks passed, just before its exec. An
//! init that dies first closes the socket unanswered, and the kernel resets
//! the connection. Unlike the engine's route (`start_barrier`), no process
//! of ours runs in the container for it.

use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use nix::sys::socket::{MsgFlags, SockFlag};

use crate::error::{Error, Result};

/// The socket's name in the container's state directory.
pub const SOCKET: &str = "start-hooks.sock";
/// The init's answer once its hooks passed.
const PASSED: &[u8] = b"passed";

/// For `create`: the socket the init inherits (close-on-exec, so neither
/// the hooks nor the user's program get it). Bound through a descriptor of
/// `dir`, which keeps the path within sun_path's 108 bytes.
pub fn listen(dir: &Path) -> Result<OwnedFd> {
    let (_dir, path) = through_fd(dir)?;
    let listener = UnixListener::bind(&path).map_err(|e| Error::io("bind(2) the start-hooks socket", dir.join(SOCKET), e))?;
    // Whoever connects first gets the answer: only root may.
    crate::engine::container_dir::set_mode(Path::new(&path), 0o600)?;
    // The init only looks for a `start` already waiting.
    listener.set_nonblocking(true).map_err(|e| Error::io("fcntl(O_NONBLOCK) of the start-hooks socket", dir.join(SOCKET), e))?;
    Ok(OwnedFd::from(listener))
}

/// For the init, its startContainer hooks passed: answers the `start`
/// waiting on `listener`. None waiting (it timed out or died) is no error:
/// the program runs, as it would have without `start` watching.
pub fn report_passed(listener: BorrowedFd) {
    let Ok(fd) = nix::sys::socket::accept4(listener.as_raw_fd(), SockFlag::SOCK_CLOEXEC) else { return };
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    let stream = unsafe { OwnedFd::from_raw_fd(fd) };
    let _ = nix::sys::socket::send(stream.as_raw_fd(), PASSED, MsgFlags::MSG_NOSIGNAL);
}

/// For `start`, before it releases the init: a connection the init answers.
pub fn connect(dir: &Path) -> Result<UnixStream> {
    let (_dir, path) = through_fd(dir)?;
    UnixStream::connect(&path).map_err(|e| Error::io("connect(2) to the start-hooks socket", dir.join(SOCKET), e))
}

/// The socket's path through a descriptor of `dir`, valid while it is open.
fn through_fd(dir: &Path) -> Result<(std::fs::File, String)> {
    let file = std::fs::File::open(dir).map_err(|e| Error::io("open container state dir", dir, e))?;
    let path = format!("/proc/self/fd/{}/{SOCKET}", file.as_raw_fd());
    Ok((file, path))
}

/// What the init's answer on `stream` says.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    Passed,
    /// The init closed the socket unanswered: it exited first.
    Died,
    /// No answer within the wait: the hooks still run.
    StillRunning,
}

/// For `start`, once the init is released: waits at most `limit` for its
/// answer.
pub fn wait(mut stream: UnixStream, limit: Duration) -> Result<Answer> {
    stream.set_read_timeout(Some(limit)).map_err(|e| Error::io("setsockopt(SO_RCVTIMEO) of the start-hooks socket", SOCKET, e))?;
    let mut got = [0u8; 8];
    match stream.read(&mut got) {
        Ok(n) if &got[..n] == PASSED => Ok(Answer::Passed),
        Ok(_) => Ok(Answer::Died),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(Answer::Died),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Ok(Answer::StillRunning),
        Err(e) => Err(Error::io("read(2) of the start-hooks socket", SOCKET, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// The three answers, from the kernel's own sockets: the init answers,
    /// the init dies with the connection unaccepted (the listener closes),
    /// and the hooks outlast the wait.
    #[test]
    fn start_tells_passed_hooks_from_a_dead_init_and_from_running_hooks() {
        let dir = tempfile_dir();
        let listener = listen(&dir).unwrap();
        let stream = connect(&dir).unwrap();
        report_passed(listener.as_fd());
        assert_eq!(wait(stream, Duration::from_secs(5)).unwrap(), Answer::Passed);

        let stream = connect(&dir).unwrap();
        drop(listener);
        assert_eq!(wait(stream, Duration::from_secs(5)).unwrap(), Answer::Died);

        std::fs::remove_file(dir.join(SOCKET)).unwrap();
        let _listener = listen(&dir).unwrap();
        let stream = connect(&dir).unwrap();
        assert_eq!(wait(stream, Duration::from_millis(10)).unwrap(), Answer::StillRunning);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// With nobody connected, the init's answer is a no-op, never a block.
    #[test]
    fn an_init_with_no_start_waiting_goes_on() {
        let dir = tempfile_dir();
        let listener = listen(&dir).unwrap();
        report_passed(listener.as_fd());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rustpod-start-report-{}-{:?}", std::process::id(), std::thread::current().id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
