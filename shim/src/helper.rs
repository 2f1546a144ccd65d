//! The single-threaded helper that forks containers: the engine forks and
//! runs Rust code in the child, which is unsafe from the multi-threaded
//! shim. The shim starts its own binary under another argv[0] (posix_spawn:
//! nothing of the shim's memory is copied) and hands it the request and the
//! container's stdio over a socket; the helper creates the container (or
//! starts an exec, restores a checkpoint, or mounts a restore's rootfs),
//! answers with the pid on that
//! socket and exits. Its
//! grandchild, the container process, is reparented to the shim, which is a
//! child subreaper.

use std::io::{BufRead, BufReader, IoSlice, IoSliceMut, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use protobuf::Enum;
use serde::{Deserialize, Serialize};
use ttrpc::Code;

use crate::mount::MountSpec;

const CREATE_ARGV0: &str = "containerd-shim-rustpod-v1-create";
const EXEC_ARGV0: &str = "containerd-shim-rustpod-v1-exec";
const RESTORE_ARGV0: &str = "containerd-shim-rustpod-v1-restore";
const MOUNT_ARGV0: &str = "containerd-shim-rustpod-v1-mount";
/// A create that takes longer than this is given up (and the helper killed).
const HELPER_TIMEOUT: Duration = Duration::from_secs(120);

/// What the helper is asked to do, for container `id` under state root `root`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub root: PathBuf,
    pub id: String,
    pub job: Job,
    pub console_socket: Option<PathBuf>,
    /// Which of stdin, stdout, stderr were passed (in that order, with the request).
    pub stdio: [bool; 3],
    /// Who the stdio pipes are chowned to (runc's IoUid/IoGid), if not root.
    pub io_owner: Option<(u32, u32)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Job {
    /// Mount containerd's rootfs at `<bundle>/rootfs`, then create the container.
    Create { bundle: PathBuf, rootfs_mounts: Vec<MountSpec>, systemd_cgroup: bool, no_pivot: bool },
    /// Restore the container from `from` with criu on the rootfs a `Mount`
    /// job mounted, the stdio passed being the restored init's.
    Restore { bundle: PathBuf, systemd_cgroup: bool, from: crate::checkpoint::Restore },
    /// Mount containerd's rootfs at `<bundle>/rootfs` and nothing else (the
    /// answer's pid is 0): a Create with a checkpoint, as containerd's runc
    /// shim mounts it then, before containerd applies the checkpoint's
    /// rootfs diff there and Start restores.
    Mount { bundle: PathBuf, rootfs_mounts: Vec<MountSpec> },
    /// Start this process (parsed by the shim when Exec arrived) in the container.
    Exec { process: Box<oci_spec::runtime::Process> },
}

/// The helper's one-line answer: the container process's pid, or why not,
/// with the gRPC code the failure reaches containerd with.
#[derive(Debug, Serialize, Deserialize)]
enum Answer {
    Pid(i32),
    Failed { message: String, code: i32 },
}

/// What went wrong in the exchange between the shim and its helper, on
/// either side of the socket (containerd gets Unknown for each).
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error("create helper socket: socketpair: {0}")]
    Socketpair(#[source] std::io::Error),
    #[error("start helper: posix_spawn: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("encode helper request: {0}")]
    EncodeRequest(#[source] serde_json::Error),
    /// sendmsg(2), write(2) or shutdown(2) on the helper's socket.
    #[error("send request to helper: {0}")]
    Send(#[source] std::io::Error),
    #[error("helper did not answer within {0:?}")]
    Timeout(Duration),
    /// poll(2) on the helper's socket.
    #[error("wait for helper: {0}")]
    Wait(#[source] nix::errno::Errno),
    #[error("read helper answer: {0}")]
    ReadAnswer(#[source] std::io::Error),
    #[error("helper exited without an answer")]
    NoAnswer,
    #[error("bad helper answer {line:?}: {source}")]
    BadAnswer { line: String, source: serde_json::Error },
    /// fcntl(F_DUPFD_CLOEXEC) of the helper's stdin.
    #[error("take the request socket: {0}")]
    TakeSocket(#[source] std::io::Error),
    /// recvmsg(2) or read(2) of the request.
    #[error("read request: {0}")]
    ReadRequest(#[source] std::io::Error),
    #[error("bad request: {0}")]
    BadRequest(#[source] serde_json::Error),
    #[error("request names {expected} stdio descriptors but {came} came")]
    StdioCount { expected: usize, came: usize },
    #[error("open /dev/null: {0}")]
    OpenNull(#[source] std::io::Error),
    #[error(transparent)]
    Mount(#[from] crate::mount::MountError),
}

/// A helper's failure, as the shim reports it.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub code: Code,
}

impl Failure {
    /// A failure of the shim's side of the exchange (containerd gets Unknown).
    fn local(message: String) -> Failure {
        Failure { message, code: Code::UNKNOWN }
    }
}

impl From<HelperError> for Failure {
    fn from(e: HelperError) -> Failure {
        Failure::local(e.to_string())
    }
}

impl From<rustpod::Error> for Failure {
    fn from(e: rustpod::Error) -> Failure {
        Failure { code: crate::error::runtime_code(&e), message: e.to_string() }
    }
}

/// Runs a helper for `req` and returns the container process's pid. The
/// helper's own exit is reaped (and ignored) by the shim's reaper.
pub fn run(req: &Request, stdio: rustpod::Stdio) -> Result<i32, Failure> {
    let (ours, theirs) = UnixStream::pair().map_err(HelperError::Socketpair)?;
    // One name per job, so that `ps` tells them apart.
    let argv0 = match req.job {
        Job::Create { .. } => CREATE_ARGV0,
        Job::Exec { .. } => EXEC_ARGV0,
        Job::Restore { .. } => RESTORE_ARGV0,
        Job::Mount { .. } => MOUNT_ARGV0,
    };
    // No pre_exec closure, so the standard library uses posix_spawn.
    let mut cmd = Command::new(helper_binary());
    cmd.arg0(argv0).stdin(Stdio::from(OwnedFd::from(theirs))).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(HelperError::Spawn)?;
    let answer = send_request(&ours, req, stdio).and_then(|()| read_answer(&ours));
    if answer.is_err() {
        let _ = child.kill();
    }
    // The reaper thread reaps the helper; `child` is not waited for.
    match answer? {
        Answer::Pid(pid) => Ok(pid),
        Answer::Failed { message, code } => Err(Failure { message, code: Code::from_i32(code).unwrap_or(Code::UNKNOWN) }),
    }
}

/// Sends the request, with the container's stdio descriptors attached to its
/// first bytes, then ends our side of the stream.
fn send_request(sock: &UnixStream, req: &Request, stdio: rustpod::Stdio) -> Result<(), HelperError> {
    let data = serde_json::to_vec(req).map_err(HelperError::EncodeRequest)?;
    let fds: Vec<RawFd> = [&stdio.stdin, &stdio.stdout, &stdio.stderr].into_iter().flatten().map(AsRawFd::as_raw_fd).collect();
    let rights = [ControlMessage::ScmRights(&fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    let sent = sendmsg::<()>(sock.as_raw_fd(), &[IoSlice::new(&data)], cmsgs, MsgFlags::MSG_NOSIGNAL, None)
        .map_err(|errno| HelperError::Send(errno.into()))?;
    (&*sock).write_all(&data[sent..]).map_err(HelperError::Send)?;
    sock.shutdown(Shutdown::Write).map_err(HelperError::Send)
}

/// The binary a helper starts from: ours, sealed once (a detached read-only
/// overlay, else a memfd copy), so the helper need not re-execute itself to
/// be safe from CVE-2019-5736; else our own binary, which then re-executes
/// from a sealed one. The kernel resolves `/proc/self/fd/N` before it closes
/// the close-on-exec descriptor.
fn helper_binary() -> PathBuf {
    static SEALED_EXE: OnceLock<Option<OwnedFd>> = OnceLock::new();
    let fd = SEALED_EXE
        .get_or_init(|| rustpod::sealed_exe::open().map_err(|e| log::warn!("seal the shim binary: {e}; each helper seals its own")).ok());
    match fd {
        Some(fd) => PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
        None => PathBuf::from("/proc/self/exe"),
    }
}

fn read_answer(sock: &UnixStream) -> Result<Answer, HelperError> {
    if !rustpod::wait_readable(sock.as_fd(), HELPER_TIMEOUT).map_err(HelperError::Wait)? {
        return Err(HelperError::Timeout(HELPER_TIMEOUT));
    }
    let mut line = String::new();
    BufReader::new(sock).read_line(&mut line).map_err(HelperError::ReadAnswer)?;
    if line.trim().is_empty() {
        return Err(HelperError::NoAnswer);
    }
    serde_json::from_str(&line).map_err(|source| HelperError::BadAnswer { line, source })
}

/// At the top of main: if we were started as a helper, do its job and exit.
pub fn run_if_invoked() {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if !matches!(Path::new(&argv0).file_name().and_then(|n| n.to_str()), Some(CREATE_ARGV0 | EXEC_ARGV0 | RESTORE_ARGV0 | MOUNT_ARGV0)) {
        return;
    }
    // The helper enters containers: run it from a sealed copy of the binary
    // (CVE-2019-5736). The request socket (stdin) survives the re-exec.
    if !rustpod::sealed_exe::is_sealed() {
        let err = rustpod::sealed_exe::reexec();
        eprintln!("containerd-shim-rustpod-v1: helper: {err}");
        std::process::exit(1);
    }
    // Our stdin is the shim's socket: keep it for the answer, out of reach of
    // the container (close-on-exec), and give stdin /dev/null.
    let sock = match take_stdin_socket() {
        Ok(sock) => sock,
        Err(e) => {
            eprintln!("containerd-shim-rustpod-v1: helper: {e}");
            std::process::exit(1);
        }
    };
    let answer = match helper_main(&sock) {
        Ok(pid) => Answer::Pid(pid),
        Err(Failure { message, code }) => Answer::Failed { message, code: code.value() },
    };
    let mut line = serde_json::to_vec(&answer).unwrap_or_default();
    line.push(b'\n');
    let _ = (&sock).write_all(&line);
    std::process::exit(if matches!(answer, Answer::Pid(_)) { 0 } else { 1 });
}

fn helper_main(sock: &UnixStream) -> Result<i32, Failure> {
    let (data, fds) = receive_request(sock)?;
    let req: Request = serde_json::from_slice(&data).map_err(HelperError::BadRequest)?;
    // The container must start with SIGPIPE at its default, but a SIGPIPE
    // before its program runs must not kill the init (see rustpod::sigpipe).
    rustpod::sigpipe::handle_for_children();
    rustpod::spawn_signals::reset_inherited_ignores();
    rustpod::spawn_signals::restore_caller_sigcancel();
    let stdio = stdio_for(&req, fds)?;
    match &req.job {
        Job::Create { bundle, rootfs_mounts, systemd_cgroup, no_pivot } => {
            create(&req, stdio, bundle, rootfs_mounts, *systemd_cgroup, *no_pivot)
        }
        Job::Exec { process } => exec(&req, stdio, process),
        Job::Restore { bundle, systemd_cgroup, from } => restore(&req, stdio, bundle, *systemd_cgroup, from),
        Job::Mount { bundle, rootfs_mounts } => on_rootfs(bundle, rootfs_mounts, || Ok(0)),
    }
}

/// Moves our stdin (the shim's socket) to a close-on-exec descriptor and
/// points stdin at /dev/null.
fn take_stdin_socket() -> Result<UnixStream, HelperError> {
    // SAFETY: fcntl on our own stdin; the result is checked.
    let fd = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(HelperError::TakeSocket(std::io::Error::last_os_error()));
    }
    redirect_stdin_to_null();
    // SAFETY: the kernel just gave us this descriptor.
    Ok(UnixStream::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// The request and the descriptors sent with it (close-on-exec).
fn receive_request(sock: &UnixStream) -> Result<(Vec<u8>, Vec<OwnedFd>), HelperError> {
    let what = |errno: nix::errno::Errno| HelperError::ReadRequest(errno.into());
    let mut first = vec![0u8; 64 * 1024];
    let mut space = nix::cmsg_space!([RawFd; 3]);
    let (n, fds) = {
        let mut iov = [IoSliceMut::new(&mut first)];
        let msg = recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC).map_err(what)?;
        let mut fds = Vec::new();
        for cmsg in msg.cmsgs().map_err(what)? {
            if let ControlMessageOwned::ScmRights(received) = cmsg {
                // SAFETY: the kernel just gave us these descriptors.
                fds.extend(received.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        (msg.bytes, fds)
    };
    first.truncate(n);
    (&*sock).read_to_end(&mut first).map_err(HelperError::ReadRequest)?;
    Ok((first, fds))
}

fn create(
    req: &Request,
    stdio: rustpod::Stdio,
    bundle: &Path,
    mounts: &[MountSpec],
    systemd_cgroup: bool,
    no_pivot: bool,
) -> Result<i32, Failure> {
    on_rootfs(bundle, mounts, || {
        let opts = rustpod::CreateOptions {
            bundle: bundle.to_path_buf(),
            console_socket: req.console_socket.clone(),
            systemd_cgroup,
            no_pivot,
            stdio,
            ..Default::default()
        };
        let container = rustpod::Runtime::new(&req.root).create(&req.id, opts)?;
        container.pid().ok_or_else(|| Failure::local(format!("container {}: no init pid", req.id)))
    })
}

/// criu restores the container from `from`, detached (the shim reaps the
/// init), its pipes the stdio passed, as containerd's runc shim runs
/// `runc restore --detach` with its pipes as runc's stdio. Its rootfs is
/// already mounted (the Create's `Mount` job) and stays so on failure: the
/// Delete unmounts it.
fn restore(
    req: &Request,
    stdio: rustpod::Stdio,
    bundle: &Path,
    systemd_cgroup: bool,
    from: &crate::checkpoint::Restore,
) -> Result<i32, Failure> {
    on_rootfs(bundle, &[], || {
        let criu = rustpod::criu::CriuOptions {
            criu_path: "criu".into(),
            image_path: from.image_path.clone(),
            work_path: Some(from.work_path.clone()),
            ..Default::default()
        };
        let opts = rustpod::RestoreOptions {
            criu,
            bundle: bundle.to_path_buf(),
            detach: true,
            console_socket: req.console_socket.clone(),
            systemd_cgroup,
            stdio,
            ..Default::default()
        };
        Ok(rustpod::Runtime::new(&req.root).restore_detached(&req.id, opts)?)
    })
}

/// Runs `job` with containerd's rootfs mounts on `<bundle>/rootfs`, which
/// are unmounted again if it fails. The engine's errors in the container's
/// init (which mount failed, and why) go to the bundle's log FIFO, which
/// containerd copies to its own log; a failure also says how our children
/// that already ended ended.
fn on_rootfs(bundle: &Path, mounts: &[MountSpec], job: impl FnOnce() -> Result<i32, Failure>) -> Result<i32, Failure> {
    crate::logger::init_in(bundle, false);
    let rootfs = bundle.join("rootfs");
    if !mounts.is_empty() {
        crate::mount::mount_all(mounts, &rootfs).map_err(HelperError::Mount)?;
    }
    let result = job();
    if result.is_err() && !mounts.is_empty() {
        let _ = crate::mount::unmount_all(&rootfs);
    }
    result.map_err(|mut f| {
        f.message += &dead_children();
        f
    })
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

fn exec(req: &Request, stdio: rustpod::Stdio, process: &oci_spec::runtime::Process) -> Result<i32, Failure> {
    let opts = rustpod::ExecOptions {
        process: rustpod::ProcessArgs { process: Some(process.clone()), ..Default::default() },
        detach: true,
        console_socket: req.console_socket.clone(),
        stdio,
        ..Default::default()
    };
    let result = rustpod::Runtime::new(&req.root).load(&req.id).and_then(|c| c.exec(opts));
    Ok(result?.as_raw())
}

/// The container's stdio: what the shim passed (`fds`, in order), /dev/null
/// for the rest; nothing with a terminal (the pty replaces all three).
fn stdio_for(req: &Request, fds: Vec<OwnedFd>) -> Result<rustpod::Stdio, HelperError> {
    if req.console_socket.is_some() {
        return Ok(rustpod::Stdio::default());
    }
    let expected = req.stdio.iter().filter(|passed| **passed).count();
    if fds.len() != expected {
        return Err(HelperError::StdioCount { expected, came: fds.len() });
    }
    let mut passed = fds.into_iter();
    let mut streams = Vec::new();
    for (i, was_passed) in req.stdio.iter().enumerate() {
        let fd = match was_passed {
            true => passed.next().expect("counted above"),
            false => {
                OwnedFd::from(std::fs::OpenOptions::new().read(i == 0).write(i != 0).open("/dev/null").map_err(HelperError::OpenNull)?)
            }
        };
        streams.push(Some(fd));
    }
    Ok(rustpod::Stdio { stdin: streams[0].take(), stdout: streams[1].take(), stderr: streams[2].take() })
}

fn redirect_stdin_to_null() {
    if let Ok(null) = std::fs::File::open("/dev/null") {
        // SAFETY: dup2 onto fd 0, which we own.
        unsafe { libc::dup2(null.as_raw_fd(), 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exec's process travels as part of the request, not as a string
    /// of JSON inside it, and comes back whole.
    #[test]
    fn an_exec_request_carries_its_process_typed() {
        let mut process = oci_spec::runtime::Process::default();
        process.set_args(Some(vec!["sh".into(), "-c".into(), "echo hi".into()]));
        let req = Request {
            root: "/run/r".into(),
            id: "c".into(),
            job: Job::Exec { process: Box::new(process.clone()) },
            console_socket: None,
            stdio: [false, true, true],
            io_owner: None,
        };
        let wire: serde_json::Value = serde_json::to_value(&req).expect("encode");
        assert!(wire["job"]["Exec"]["process"]["args"].is_array(), "{wire}");
        let back: Request = serde_json::from_value(wire).expect("decode");
        match back.job {
            Job::Exec { process: got } => assert_eq!(*got, process),
            other => panic!("not an exec: {other:?}"),
        }
    }

    #[test]
    fn a_failure_keeps_its_code_across_the_socket() {
        let failure = Failure::from(rustpod::Error::NotFound("c".into()));
        let answer = Answer::Failed { message: failure.message, code: failure.code.value() };
        let line = serde_json::to_string(&answer).expect("encode");
        match serde_json::from_str::<Answer>(&line).expect("decode") {
            Answer::Failed { code, .. } => assert_eq!(Code::from_i32(code), Some(Code::NOT_FOUND)),
            other => panic!("not a failure: {other:?}"),
        }
    }
}
