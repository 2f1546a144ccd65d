//! A process's stdio: the shim holds both ends of containerd's FIFOs and
//! copies through pipes (or a pty) it owns, so a container never sees
//! SIGPIPE or EOF because containerd went away; it only blocks once the
//! FIFO's buffer is full.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// The stdio containerd asked for: FIFO (or log URI) paths, and whether the
/// process gets a terminal.
#[derive(Debug, Clone, Default)]
pub struct Stdio {
    pub stdin: String,
    pub stdout: String,
    pub stderr: String,
    pub terminal: bool,
}

/// Why a process's stdio could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// A call on a path or descriptor failed: `what` names both.
    #[error("{what}: {source}")]
    Os { what: String, source: std::io::Error },
    /// containerd asked for stdio the shim does not provide.
    #[error("{0}")]
    Unsupported(String),
}

impl StdioError {
    pub fn os(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StdioError {
        let what = what.into();
        move |source| StdioError::Os { what, source }
    }

    /// The same, for a nix call.
    pub fn errno(what: impl Into<String>) -> impl FnOnce(nix::errno::Errno) -> StdioError {
        let what = what.into();
        move |errno| StdioError::Os { what, source: errno.into() }
    }
}

pub type Result<T> = std::result::Result<T, StdioError>;

const BUF_SIZE: usize = 32 * 1024;
const COPY_STACK: usize = 64 * 1024;
/// ^D: what closing stdin means on a terminal.
const EOT: u8 = 4;

/// The shim's handles on a running process's stdio.
pub struct ProcessIo {
    /// Dropping it tells the stdin copier to drain the FIFO and close.
    stdin_close: Mutex<Option<OwnedFd>>,
    console: Option<File>,
    output: Arc<OutputCopiers>,
}

/// The output copiers of one process still running: they end once every
/// writer of the process's pipes (or pty) is gone and all it wrote is passed
/// on, or when told to stop (a child the process left holds its stdout).
pub struct OutputCopiers {
    running: Mutex<usize>,
    ended: Condvar,
    /// Readable (hung up) once `stop_write` is dropped.
    stop_read: OwnedFd,
    stop_write: Mutex<Option<OwnedFd>>,
}

impl OutputCopiers {
    fn new() -> Result<Arc<OutputCopiers>> {
        let (stop_read, stop_write) = pipe()?;
        Ok(Arc::new(OutputCopiers { running: Mutex::new(0), ended: Condvar::new(), stop_read, stop_write: Mutex::new(Some(stop_write)) }))
    }

    pub fn all_ended(&self) -> bool {
        *self.running.lock().unwrap() == 0
    }

    /// Waits up to `timeout` for every copier to end; false if some still run.
    pub fn wait_ended(&self, timeout: Duration) -> bool {
        let running = self.running.lock().unwrap();
        let (running, _) = self.ended.wait_timeout_while(running, timeout, |n| *n > 0).unwrap();
        *running == 0
    }

    /// Tells the copiers to pass on what is already written and end.
    pub fn stop(&self) {
        self.stop_write.lock().unwrap().take();
    }

    /// Counts one copier until the returned guard drops.
    fn begin(self: &Arc<Self>) -> CopierRunning {
        *self.running.lock().unwrap() += 1;
        CopierRunning(Arc::clone(self))
    }
}

/// Held by a running output copier (or by its closure, if the thread never started).
struct CopierRunning(Arc<OutputCopiers>);

impl Drop for CopierRunning {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap() -= 1;
        self.0.ended.notify_all();
    }
}

impl ProcessIo {
    /// CloseIO: the process sees EOF on stdin (^D on a terminal) once what
    /// is already in the FIFO has been passed on.
    pub fn close_stdin(&self) {
        self.stdin_close.lock().unwrap().take();
    }

    /// The process is gone: stop copying its stdin.
    pub fn on_exit(&self) {
        self.close_stdin();
    }

    /// The process's output copiers, to wait for its output before reporting its exit.
    pub fn output(&self) -> Arc<OutputCopiers> {
        Arc::clone(&self.output)
    }

    /// The process is being deleted: give its output copiers until `deadline`
    /// to end on their own, then stop them, so that containerd's readers see
    /// EOF even when a child the process left still holds its stdout.
    pub fn finish_output(&self, deadline: Instant) {
        if !self.output.wait_ended(deadline.saturating_duration_since(Instant::now())) {
            self.output.stop();
        }
    }

    /// Resizes the terminal; without one there is nothing to do (containerd's
    /// runc shim answers OK too).
    pub fn resize(&self, width: u32, height: u32) -> Result<()> {
        let Some(console) = self.console.as_ref() else { return Ok(()) };
        let size = libc::winsize { ws_row: height as u16, ws_col: width as u16, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCSWINSZ reads a winsize from a valid pointer.
        let rc = unsafe { libc::ioctl(console.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        if rc < 0 {
            return Err(StdioError::os("resize terminal: ioctl(TIOCSWINSZ)")(std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

/// Opens containerd's stdio and makes pipes for the container; starts the
/// copiers, or for a `binary://` URI the logging program (which then reads
/// the output pipes itself). `owner` is the container's id and namespace.
/// Returns the shim's handles and the container's pipe ends (for the helper).
pub fn open_pipes(stdio: &Stdio, owner: (&str, &str)) -> Result<(ProcessIo, rustpod::Stdio)> {
    let logger = crate::binary_logger::for_output(&stdio.stdout, &stdio.stderr)?;
    let mut child = rustpod::Stdio::default();
    let mut stdin_close = None;
    let output = OutputCopiers::new()?;
    if !stdio.stdin.is_empty() {
        let fifo = open_input(&stdio.stdin)?;
        let (read, write) = pipe()?;
        let (cancel_read, cancel_write) = pipe()?;
        spawn_copier("stdin", move || copy_input(fifo, File::from(write), cancel_read, false))?;
        child.stdin = Some(read);
        stdin_close = Some(cancel_write);
    }
    if let Some(logger) = logger {
        let (out_read, out_write) = pipe()?;
        let (err_read, err_write) = pipe()?;
        crate::binary_logger::start(&logger, owner.0, owner.1, out_read, err_read)?;
        child.stdout = Some(out_write);
        child.stderr = Some(err_write);
        return Ok((ProcessIo { stdin_close: Mutex::new(stdin_close), console: None, output }, child));
    }
    if let Some(out) = open_output(&stdio.stdout)? {
        let (read, write) = pipe()?;
        let running = output.begin();
        spawn_copier("stdout", move || copy_output(File::from(read), out, running))?;
        child.stdout = Some(write);
    }
    if let Some(out) = open_output(&stdio.stderr)? {
        let (read, write) = pipe()?;
        let running = output.begin();
        spawn_copier("stderr", move || copy_output(File::from(read), out, running))?;
        child.stderr = Some(write);
    }
    Ok((ProcessIo { stdin_close: Mutex::new(stdin_close), console: None, output }, child))
}

/// Chowns the container's ends of its stdio pipes to `owner` (runc's IoUid/IoGid), so that a
/// user-namespaced root can reopen them through /proc/self/fd.
pub fn chown_pipes(child: &rustpod::Stdio, owner: (u32, u32)) -> Result<()> {
    let (uid, gid) = (nix::unistd::Uid::from_raw(owner.0), nix::unistd::Gid::from_raw(owner.1));
    for (name, fd) in [("stdin", &child.stdin), ("stdout", &child.stdout), ("stderr", &child.stderr)] {
        if let Some(fd) = fd {
            nix::unistd::fchown(fd.as_raw_fd(), Some(uid), Some(gid))
                .map_err(StdioError::errno(format!("fchown({name} pipe, {}:{})", owner.0, owner.1)))?;
        }
    }
    Ok(())
}

/// Wires a received pty master to containerd's stdin and stdout.
pub fn attach_console(stdio: &Stdio, master: OwnedFd) -> Result<ProcessIo> {
    let master = File::from(master);
    let dup = |f: &File| f.try_clone().map_err(StdioError::os("dup pty master: fcntl(F_DUPFD_CLOEXEC)"));
    let mut stdin_close = None;
    let output = OutputCopiers::new()?;
    if !stdio.stdin.is_empty() {
        let fifo = open_input(&stdio.stdin)?;
        let (cancel_read, cancel_write) = pipe()?;
        let to_master = dup(&master)?;
        spawn_copier("pty-in", move || copy_input(fifo, to_master, cancel_read, true))?;
        stdin_close = Some(cancel_write);
    }
    if let Some(out) = open_output(&stdio.stdout)? {
        let from_master = dup(&master)?;
        let running = output.begin();
        spawn_copier("pty-out", move || copy_output(from_master, out, running))?;
    }
    Ok(ProcessIo { stdin_close: Mutex::new(stdin_close), console: Some(master), output })
}

/// A FIFO we read from, opened read-write so that its writer (containerd)
/// going away is not EOF and the open never blocks.
fn open_input(path: &str) -> Result<File> {
    OpenOptions::new().read(true).write(true).open(path).map_err(StdioError::os(format!("open stdin {path} (O_RDWR)")))
}

/// Where output goes: a FIFO held read-write (no EPIPE, no blocking open),
/// or with `file://` a file appended to. None when there is no such stream.
fn open_output(uri: &str) -> Result<Option<File>> {
    if uri.is_empty() {
        return Ok(None);
    }
    if let Some(path) = uri.strip_prefix("file://") {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(StdioError::os(format!("open log file {path} (O_APPEND|O_CREAT)")))?;
        return Ok(Some(file));
    }
    if uri.contains("://") && !uri.starts_with("fifo://") {
        return Err(StdioError::Unsupported(format!(
            "stdio {uri}: unsupported log URI (FIFOs, file:// and, without a terminal, binary:// are)"
        )));
    }
    let path = uri.strip_prefix("fifo://").unwrap_or(uri);
    // Held until the read-write handle is open, so the reader never sees EOF in between.
    let _reader_seen = wait_for_reader(path)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map(Some)
        .map_err(StdioError::os(format!("open output {path} (O_RDWR)")))
}

/// How long an output FIFO may wait for its reader before we hold it
/// without one (as before: the output then waits in the FIFO).
const READER_WAIT: Duration = Duration::from_secs(10);

/// Waits until containerd has opened `path` for reading, as the Go shim's
/// blocking open-for-write does. Our own handle is read-write (it outlives
/// containerd), so the FIFO always has a reader once it is open: had we
/// opened it before containerd's reader, a process that ends at once would
/// have its output written and dropped before containerd opened the FIFO,
/// whose open then waits for a writer that never comes (seen as a CRI
/// ExecSync that never returns). Returns the write-only handle that proved
/// it, or None once `READER_WAIT` has passed.
fn wait_for_reader(path: &str) -> Result<Option<File>> {
    let deadline = Instant::now() + READER_WAIT;
    loop {
        let opened = OpenOptions::new().write(true).custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK).open(path);
        match opened {
            Ok(file) => return Ok(Some(file)),
            // ENXIO: no reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                log::warn!("output {path}: no reader after {READER_WAIT:?}; holding it without one");
                return Ok(None);
            }
            Err(e) => return Err(StdioError::os(format!("open output {path} (O_WRONLY|O_NONBLOCK)"))(e)),
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(StdioError::errno("create pipe: pipe2"))
}

fn spawn_copier(name: &str, body: impl FnOnce() + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(COPY_STACK)
        .spawn(body)
        .map(|_| ())
        .map_err(StdioError::os(format!("start {name} copier: clone")))
}

/// Container output to containerd until the container side closes (or we
/// are told to stop: then what is already written is passed on). A write
/// blocks while the FIFO is full (nobody reading): so does the container,
/// which is what keeps it alive and its output intact.
fn copy_output(mut from: File, mut to: File, running: CopierRunning) {
    let mut buf = vec![0u8; BUF_SIZE];
    loop {
        let mut fds = [PollFd::new(from.as_fd(), PollFlags::POLLIN), PollFd::new(running.0.stop_read.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
        let ready = fds[0].revents().is_some_and(|r| !r.is_empty());
        let stopped = fds[1].revents().is_some_and(|r| !r.is_empty());
        if !ready && stopped {
            drain(&mut from, &mut to, &mut buf);
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // EIO: the pty's other side is gone.
            Err(_) => break,
        };
        if let Err(e) = to.write_all(&buf[..n]) {
            log::warn!("copy output: {e}");
            break;
        }
    }
    // Close our end of the FIFO first: the reader sees EOF by the time the exit is reported.
    drop(to);
    drop(running);
}

/// containerd's stdin to the container until CloseIO (or exit): then what
/// is already in the FIFO is passed on, and the container sees EOF.
fn copy_input(fifo: File, mut to: File, cancel: OwnedFd, terminal: bool) {
    let mut buf = vec![0u8; BUF_SIZE];
    let mut fifo = fifo;
    loop {
        let mut fds = [PollFd::new(fifo.as_fd(), PollFlags::POLLIN), PollFd::new(cancel.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        let cancelled = fds[1].revents().is_some_and(|r| !r.is_empty());
        let readable = fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN));
        if cancelled {
            drain(&mut fifo, &mut to, &mut buf);
            if terminal {
                let _ = to.write_all(&[EOT]);
            }
            return;
        }
        if readable {
            match fifo.read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

/// Passes on what `from` holds now, without waiting for more.
fn drain(from: &mut File, to: &mut File, buf: &mut [u8]) {
    if set_nonblocking(from.as_raw_fd()).is_err() {
        return;
    }
    while let Ok(n) = from.read(buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: plain fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::stat::Mode;

    /// A FIFO of its own under the temp dir, removed on drop.
    struct Fifo(std::path::PathBuf);

    impl Fifo {
        fn new(name: &str) -> Fifo {
            let path = std::env::temp_dir().join(format!("rustpod-shim-io-{}-{name}", std::process::id()));
            let _ = std::fs::remove_file(&path);
            nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o600)).expect("mkfifo");
            Fifo(path)
        }
    }

    impl Drop for Fifo {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Everything a reader opened now gets from the FIFO until its writers are gone, waiting
    /// at most 5 s for each piece.
    fn read_all(path: &std::path::Path) -> Vec<u8> {
        let mut reader = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).expect("open reader");
        let mut got = Vec::new();
        loop {
            let mut fds = [PollFd::new(reader.as_fd(), PollFlags::POLLIN)];
            if poll(&mut fds, PollTimeout::from(5000u16)).expect("poll") == 0 {
                return got; // no writer ever came (Linux reports no hang-up then)
            }
            let mut buf = [0u8; 256];
            match reader.read(&mut buf) {
                Ok(0) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// containerd's reader of an exec's stdout can open the FIFO after the exec has ended
    /// (its opener is a goroutine; seen under load as a CRI ExecSync that never returned). The
    /// output must still reach it: the shim waits for the reader before it holds the FIFO.
    #[test]
    fn output_of_a_process_that_ends_before_its_reader_opens_reaches_the_reader() {
        let fifo = Fifo::new("late-reader");
        let path = fifo.0.to_string_lossy().into_owned();
        let writer = std::thread::spawn(move || {
            let mut out = open_output(&path).expect("open output").expect("a FIFO");
            out.write_all(b"output of a short process\n").expect("write");
            // Dropped: the process ended and its copier closes the FIFO.
        });
        std::thread::sleep(Duration::from_millis(300));
        let got = read_all(&fifo.0);
        writer.join().expect("writer thread");
        assert_eq!(String::from_utf8_lossy(&got), "output of a short process\n");
    }
}
