//! The single-threaded helper that forks containers: the engine forks and
//! runs Rust code in the child, which is unsafe from the multi-threaded
//! shim. The shim re-executes itself under another argv[0]; the helper
//! creates the container (or starts an exec), answers with the pid and exits.
//! Its grandchild, the container process, is reparented to the shim, which
//! is a child subreaper.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::io::ChildStdio;
use crate::mount::MountSpec;

const CREATE_ARGV0: &str = "containerd-shim-rustpod-v1-create";
const EXEC_ARGV0: &str = "containerd-shim-rustpod-v1-exec";
/// Descriptors in the helper: the answer pipe, then the container's stdio.
const ANSWER_FD: RawFd = 3;
const STDIO_FDS: [RawFd; 3] = [4, 5, 6];
/// A create that takes longer than this is given up (and the helper killed).
const HELPER_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub root: PathBuf,
    pub id: String,
    /// Create: the bundle and containerd's rootfs mounts for `<bundle>/rootfs`.
    pub bundle: PathBuf,
    pub rootfs_mounts: Vec<MountSpec>,
    pub systemd_cgroup: bool,
    /// Exec: the OCI process (JSON).
    pub process: Option<String>,
    pub console_socket: Option<PathBuf>,
    /// Which of stdin, stdout, stderr were passed (as fds 4, 5, 6).
    pub stdio: [bool; 3],
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Answer {
    pid: Option<i32>,
    error: Option<String>,
}

#[derive(Clone, Copy)]
pub enum Kind {
    Create,
    Exec,
}

/// Runs a helper for `req` and returns the container process's pid. The
/// helper's own exit is reaped (and ignored) by the shim's reaper.
pub fn run(kind: Kind, req: &Request, stdio: ChildStdio) -> Result<i32, String> {
    let (answer_read, answer_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("create answer pipe: {e}"))?;
    let sources: Vec<Option<RawFd>> = vec![
        Some(answer_write.as_raw_fd()),
        stdio.stdin.as_ref().map(AsRawFd::as_raw_fd),
        stdio.stdout.as_ref().map(AsRawFd::as_raw_fd),
        stdio.stderr.as_ref().map(AsRawFd::as_raw_fd),
    ];
    let argv0 = match kind {
        Kind::Create => CREATE_ARGV0,
        Kind::Exec => EXEC_ARGV0,
    };
    let mut cmd = Command::new(helper_binary());
    cmd.arg0(argv0).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: the closure only calls fcntl and dup2, which are
    // async-signal-safe, on descriptors that stay open until spawn returns.
    unsafe {
        cmd.pre_exec(move || place_fds(&sources));
    }
    let mut child = cmd.spawn().map_err(|e| format!("start helper: {e}"))?;
    drop(answer_write);
    drop(stdio);
    let data = serde_json::to_vec(req).map_err(|e| format!("encode helper request: {e}"))?;
    let mut stdin = child.stdin.take().expect("helper stdin is piped");
    let sent = stdin.write_all(&data);
    drop(stdin);
    let answer = read_answer(answer_read);
    if answer.is_err() || sent.is_err() {
        let _ = child.kill();
    }
    // The reaper thread reaps the helper; `child` is not waited for.
    let answer = answer?;
    match (answer.pid, answer.error) {
        (_, Some(error)) => Err(error),
        (Some(pid), None) => Ok(pid),
        (None, None) => Err("helper answered without a pid".into()),
    }
}

/// The binary a helper starts from: the read-only view of ours (so it need
/// not re-execute itself to be safe from CVE-2019-5736), else our own binary,
/// which then re-executes from a sealed copy.
fn helper_binary() -> PathBuf {
    rustpod::sealed_exe::read_only_view().unwrap_or_else(|e| {
        log::warn!("read-only view of the shim binary: {e}; helpers start from a sealed copy");
        PathBuf::from("/proc/self/exe")
    })
}

/// Moves `sources` to fds 3, 4, 5, 6 in the child (via fds above them so
/// that no source is overwritten before it is moved).
fn place_fds(sources: &[Option<RawFd>]) -> std::io::Result<()> {
    let mut high = [-1; 4];
    for (i, src) in sources.iter().enumerate() {
        if let Some(fd) = src {
            // SAFETY: fcntl on a descriptor that is open in this process.
            let dup = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 10) };
            if dup < 0 {
                return Err(std::io::Error::last_os_error());
            }
            high[i] = dup;
        }
    }
    for (i, fd) in high.iter().enumerate() {
        if *fd >= 0 && unsafe { libc::dup2(*fd, ANSWER_FD + i as RawFd) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn read_answer(fd: OwnedFd) -> Result<Answer, String> {
    match crate::io::wait_readable(std::os::fd::AsFd::as_fd(&fd), HELPER_TIMEOUT) {
        Ok(true) => {}
        Ok(false) => return Err(format!("helper did not answer within {HELPER_TIMEOUT:?}")),
        Err(e) => return Err(format!("wait for helper: {e}")),
    }
    let mut line = String::new();
    BufReader::new(std::fs::File::from(fd))
        .read_line(&mut line)
        .map_err(|e| format!("read helper answer: {e}"))?;
    if line.trim().is_empty() {
        return Err("helper exited without an answer".into());
    }
    serde_json::from_str(&line).map_err(|e| format!("bad helper answer {line:?}: {e}"))
}

/// At the top of main: if we were started as a helper, do its job and exit.
pub fn run_if_invoked() {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let kind = match Path::new(&argv0).file_name().and_then(|n| n.to_str()) {
        Some(CREATE_ARGV0) => Kind::Create,
        Some(EXEC_ARGV0) => Kind::Exec,
        _ => return,
    };
    // The helper enters containers: run it from a sealed copy of the binary
    // (CVE-2019-5736). The request pipe and fd 3 survive the re-exec.
    if !rustpod::sealed_exe::is_sealed() {
        let err = rustpod::sealed_exe::reexec();
        eprintln!("containerd-shim-rustpod-v1: helper: {err}");
        std::process::exit(1);
    }
    // SAFETY: fd 3 was placed by our parent; we own it from here on.
    let mut answer_pipe = unsafe { std::fs::File::from_raw_fd(ANSWER_FD) };
    set_cloexec(ANSWER_FD);
    let answer = match helper_main(kind) {
        Ok(pid) => Answer { pid: Some(pid), error: None },
        Err(e) => Answer { pid: None, error: Some(e) },
    };
    let mut line = serde_json::to_vec(&answer).unwrap_or_default();
    line.push(b'\n');
    let _ = answer_pipe.write_all(&line);
    std::process::exit(if answer.error.is_some() { 1 } else { 0 });
}

fn helper_main(kind: Kind) -> Result<i32, String> {
    let mut data = Vec::new();
    std::io::stdin().read_to_end(&mut data).map_err(|e| format!("read request: {e}"))?;
    let req: Request = serde_json::from_slice(&data).map_err(|e| format!("bad request: {e}"))?;
    // Our stdin was the request pipe: nothing of it may reach the container.
    redirect_stdin_to_null();
    // The container must start with SIGPIPE at its default, but a SIGPIPE
    // before its program runs must not kill the init (see rustpod::sigpipe).
    rustpod::sigpipe::handle_for_children();
    match kind {
        Kind::Create => create(&req),
        Kind::Exec => exec(&req),
    }
}

fn create(req: &Request) -> Result<i32, String> {
    let rootfs = req.bundle.join("rootfs");
    if !req.rootfs_mounts.is_empty() {
        crate::mount::mount_all(&req.rootfs_mounts, &rootfs)?;
    }
    let opts = rustpod::create::CreateOptions {
        bundle: req.bundle.clone(),
        console_socket: req.console_socket.clone(),
        systemd_cgroup: req.systemd_cgroup,
        stdio: stdio_for(req)?,
        as_sibling: false,
        ..Default::default()
    };
    let result = rustpod::create::create(&req.root, &req.id, opts)
        .map_err(|e| e.to_string())
        .and_then(|c| c.pid().map(|p| p.as_raw()).ok_or_else(|| format!("container {}: no init pid", req.id)));
    if result.is_err() && !req.rootfs_mounts.is_empty() {
        let _ = crate::mount::unmount_all(&rootfs);
    }
    result.map_err(|e| e + &dead_children())
}

/// How our children that already ended ended, e.g. a container init that
/// died before it could report an error: " (pid 12 killed by SIGKILL)".
fn dead_children() -> String {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let mut notes = Vec::new();
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
        match status {
            WaitStatus::Signaled(pid, sig, _) => notes.push(format!("pid {pid} killed by {sig}")),
            WaitStatus::Exited(pid, code) if code != 0 => notes.push(format!("pid {pid} exited {code}")),
            WaitStatus::Exited(..) => {}
            _ => break,
        }
    }
    if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join(", "))
    }
}

fn exec(req: &Request) -> Result<i32, String> {
    let process = req.process.as_deref().ok_or("exec request without a process")?;
    let file = req.root.join(format!(".exec-{}.json", std::process::id()));
    std::fs::write(&file, process).map_err(|e| format!("write {}: {e}", file.display()))?;
    let opts = rustpod::exec::ExecOptions {
        process: rustpod::exec::ProcessArgs { process_file: Some(file.clone()), ..Default::default() },
        detach: true,
        console_socket: req.console_socket.clone(),
        stdio: stdio_for(req)?,
        as_sibling: false,
        ..Default::default()
    };
    let result = rustpod::exec::spawn(&req.root, &req.id, opts);
    let _ = std::fs::remove_file(&file);
    result.map(|pid| pid.as_raw()).map_err(|e| e.to_string())
}

/// The container's stdio: what the shim passed, /dev/null for the rest;
/// nothing with a terminal (the pty replaces all three).
fn stdio_for(req: &Request) -> Result<rustpod::create::Stdio, String> {
    if req.console_socket.is_some() {
        return Ok(rustpod::create::Stdio::default());
    }
    let mut fds = Vec::new();
    for (i, passed) in req.stdio.iter().enumerate() {
        let fd = if *passed {
            // SAFETY: the shim placed this descriptor for us.
            unsafe { OwnedFd::from_raw_fd(STDIO_FDS[i]) }
        } else {
            let null = std::fs::OpenOptions::new()
                .read(i == 0)
                .write(i != 0)
                .open("/dev/null")
                .map_err(|e| format!("open /dev/null: {e}"))?;
            OwnedFd::from(null)
        };
        set_cloexec(fd.as_raw_fd());
        fds.push(Some(fd));
    }
    Ok(rustpod::create::Stdio { stdin: fds[0].take(), stdout: fds[1].take(), stderr: fds[2].take() })
}

fn set_cloexec(fd: RawFd) {
    // SAFETY: fcntl on a descriptor of ours.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
}

fn redirect_stdin_to_null() {
    if let Ok(null) = std::fs::File::open("/dev/null") {
        // SAFETY: dup2 onto fd 0, which we own.
        unsafe { libc::dup2(null.as_raw_fd(), 0) };
    }
}
