//! A terminal for a `terminal: true` process: the console socket the engine
//! sends the pty master over (for the CLI's foreground `run`/`exec`, as runc
//! gives one, and for the shim), and the CLI's copying between that master
//! and our stdio until the process exits.

use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::cmsg_space;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::SignalFd;
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg, Termios};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::engine::process::wait;
use crate::error::{Error, Result};

/// How long the engine has to send a new process's pty master once the
/// process exists.
const MASTER_WAIT: Duration = Duration::from_secs(10);

/// A unix socket the engine connects to and sends the pty master over.
pub struct ConsoleSocket {
    path: PathBuf,
    listener: UnixListener,
}

impl ConsoleSocket {
    /// Listens on a fresh socket in `dir` (one of several a process, such
    /// as the shim, may have at once).
    pub fn bind(dir: &Path) -> Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("console-{}-{n}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|e| Error::io("listen on", &path, e))?;
        Ok(ConsoleSocket { path, listener })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts the engine's connection and takes the pty master from it;
    /// called once the process exists, so the engine has connected by then
    /// or soon (bounded: a process that never sends one fails here).
    pub fn receive_master(&self) -> Result<OwnedFd> {
        let waited = wait::wait_readable(self.listener.as_fd(), MASTER_WAIT).map_err(|e| Error::sys("poll console socket", e))?;
        if !waited {
            let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "no pty master was sent");
            return Err(Error::io("wait on console socket", &self.path, timed_out));
        }
        let (stream, _) = self.listener.accept().map_err(|e| Error::io("accept on", &self.path, e))?;
        receive_fd(stream.as_raw_fd()).map_err(|e| Error::sys("receive pty master", e))
    }
}

impl Drop for ConsoleSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Receives one file descriptor sent with SCM_RIGHTS on `sock`.
pub fn receive_fd(sock: RawFd) -> nix::Result<OwnedFd> {
    let mut buf = [0u8; 4096];
    let mut iov = [IoSliceMut::new(&mut buf)];
    let mut cmsg = cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(sock, &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)?;
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just installed this descriptor for us.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    Err(nix::errno::Errno::EBADMSG)
}

/// Puts our stdin terminal (if it is one) in raw mode until dropped.
struct RawMode {
    saved: Option<Termios>,
}

impl RawMode {
    fn enter() -> Self {
        let stdin = std::io::stdin();
        let saved = tcgetattr(stdin.as_fd()).ok();
        if let Some(orig) = &saved {
            let mut raw = orig.clone();
            cfmakeraw(&mut raw);
            let _ = tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
        }
        RawMode { saved }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(orig) = &self.saved {
            let _ = tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, orig);
        }
    }
}

/// Copies between our stdio and `master` until our child `pid` exits,
/// forwarding signals and window size changes; returns its exit code.
pub fn proxy_until_exit(master: OwnedFd, pid: Pid) -> Result<i32> {
    let mut signals = SigSet::all();
    for sig in [Signal::SIGKILL, Signal::SIGSTOP, Signal::SIGSEGV, Signal::SIGBUS, Signal::SIGILL, Signal::SIGFPE] {
        signals.remove(sig);
    }
    signals.thread_block().map_err(|e| Error::sys("block signals", e))?;
    let result = proxy_loop(&master, pid, &signals);
    let _ = signals.thread_unblock();
    result
}

fn proxy_loop(master: &OwnedFd, pid: Pid, signals: &SigSet) -> Result<i32> {
    let sigfd = SignalFd::new(signals).map_err(|e| Error::sys("signalfd", e))?;
    let _raw = RawMode::enter();
    copy_window_size(master.as_fd());
    let stdin = std::io::stdin();
    let mut stdin_open = true;
    loop {
        let mut fds = vec![PollFd::new(master.as_fd(), PollFlags::POLLIN), PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        if stdin_open {
            fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(Error::sys("poll terminal", e)),
        }
        let ready = |i: usize| fds.get(i).and_then(|f| f.revents()).is_some_and(|r| !r.is_empty());
        let (master_ready, sig_ready, stdin_ready) = (ready(0), ready(1), ready(2));
        drop(fds);
        if master_ready && copy_once(master.as_fd(), std::io::stdout().as_fd()).is_err() {
            // The pty hung up: the process closed its terminal.
        }
        if stdin_ready && copy_once(stdin.as_fd(), master.as_fd()).is_err() {
            stdin_open = false;
        }
        if sig_ready {
            if let Ok(Some(info)) = sigfd.read_signal() {
                let sig = Signal::try_from(info.ssi_signo as i32).ok();
                match sig {
                    Some(Signal::SIGCHLD) => {}
                    Some(Signal::SIGWINCH) => copy_window_size(master.as_fd()),
                    Some(sig) => {
                        let _ = kill(pid, sig);
                    }
                    None => {}
                }
            }
        }
        if let Some(code) = reap(pid)? {
            drain(master.as_fd());
            return Ok(code);
        }
    }
}

fn reap(pid: Pid) -> Result<Option<i32>> {
    match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => Ok(None),
        Ok(status) => Ok(wait::exit_code(status)),
        Err(e) => Err(Error::sys("wait for container process", e)),
    }
}

/// One read and a full write; Err at end of input or on a dead peer.
fn copy_once(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> std::result::Result<(), ()> {
    let mut buf = [0u8; 8192];
    let n = nix::unistd::read(from.as_raw_fd(), &mut buf).map_err(|_| ())?;
    if n == 0 {
        return Err(());
    }
    let mut off = 0;
    while off < n {
        off += nix::unistd::write(to, &buf[off..n]).map_err(|_| ())?;
    }
    Ok(())
}

/// Copies what the process wrote before it exited.
fn drain(master: BorrowedFd<'_>) {
    let _ = nix::fcntl::fcntl(master.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK));
    while copy_once(master, std::io::stdout().as_fd()).is_ok() {}
}

fn copy_window_size(master: BorrowedFd<'_>) {
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ/TIOCSWINSZ read and write a winsize we own.
    unsafe {
        if libc::ioctl(libc::STDIN_FILENO, libc::TIOCGWINSZ, &mut size) == 0 {
            libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size);
        }
    }
}
