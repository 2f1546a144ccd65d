// Console socket (`--console-socket`): listen on a unix socket, receive the pty master a runtime
// sends with SCM_RIGHTS, and read what the container writes to its terminal.

use crate::scratch::ScratchDir;
use crate::wait;
use nix::cmsg_space;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
use std::io::{ErrorKind, IoSliceMut, Read};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Instant;

pub struct ConsoleSocket {
    dir: ScratchDir,
    listener: UnixListener,
}

impl ConsoleSocket {
    pub fn new() -> Self {
        let dir = ScratchDir::new("console");
        let listener = UnixListener::bind(dir.join("console.sock")).expect("bind console socket");
        listener.set_nonblocking(true).expect("console socket non-blocking");
        ConsoleSocket { dir, listener }
    }

    pub fn path(&self) -> String {
        self.dir.join_str("console.sock")
    }

    /// Accepts the runtime's connection (bounded wait) and returns the one fd its message carries.
    pub fn receive_master(&self) -> OwnedFd {
        let stream = wait::wait_for("the runtime to connect to the console socket", || self.accept());
        stream.set_nonblocking(false).expect("blocking console stream");
        receive_one_fd(&stream).1
    }

    /// As `receive_master`, with the bytes the message carried (a seccomp listener gets the
    /// container's process state with the notify fd).
    pub fn receive_message(&self) -> (Vec<u8>, OwnedFd) {
        let stream = wait::wait_for("the runtime to connect to the socket", || self.accept());
        stream.set_nonblocking(false).expect("blocking stream");
        // Bounded: a runtime that connects and never sends fails the test, not hangs it.
        stream.set_read_timeout(Some(wait::DEADLINE)).expect("a read timeout");
        receive_one_fd(&stream)
    }

    fn accept(&self) -> Option<UnixStream> {
        match self.listener.accept() {
            Ok((stream, _)) => Some(stream),
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => panic!("accept on console socket: {e}"),
        }
    }
}

impl Default for ConsoleSocket {
    fn default() -> Self {
        Self::new()
    }
}

fn receive_one_fd(stream: &UnixStream) -> (Vec<u8>, OwnedFd) {
    let mut buf = [0u8; 4096];
    let mut iov = [IoSliceMut::new(&mut buf)];
    let mut cmsg = cmsg_space!([std::os::fd::RawFd; 4]);
    let msg = recvmsg::<()>(stream.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC).expect("recvmsg on console socket");
    let fds: Vec<_> = msg
        .cmsgs()
        .expect("decode control messages")
        .flat_map(|c| match c {
            ControlMessageOwned::ScmRights(fds) => fds,
            other => panic!("unexpected control message {other:?}"),
        })
        .collect();
    assert_eq!(fds.len(), 1, "the console message must carry exactly one fd, got {fds:?}");
    let bytes = msg.bytes;
    // SAFETY: the kernel just installed this fd in our table and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fds[0]) };
    (buf[..bytes].to_vec(), fd)
}

/// Reads the pty master until every `needle` was seen, the terminal closed, or the deadline.
pub fn read_until(master: &OwnedFd, needles: &[&str]) -> String {
    let mut file = std::fs::File::from(master.try_clone().expect("dup pty master"));
    let mut seen = Vec::new();
    let start = Instant::now();
    let done = |seen: &[u8]| needles.iter().all(|n| String::from_utf8_lossy(seen).contains(n));
    while !done(&seen) && start.elapsed() < wait::DEADLINE {
        let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(100u16)).expect("poll pty master") == 0 {
            continue;
        }
        let mut chunk = [0u8; 4096];
        match file.read(&mut chunk) {
            Ok(0) | Err(_) => break, // EIO: the last slave fd closed
            Ok(n) => seen.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}
