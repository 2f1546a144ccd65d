//! A seccomp notify filter's listener fd, handed to the spec's
//! `listenerPath` without an intermediate process: the init (or an exec'd
//! process), once its filter is loaded, sends the fd to `create` (or
//! `exec`) over a socket pair made for it and waits; the runtime sends it
//! on with the container's process state (one SCM_RIGHTS message on a new
//! stream connection, as runc does), then lets the process go on.

use std::collections::HashMap;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use libcontainer::process::args::ContainerArgs;
use nix::errno::Errno;
use nix::sys::socket::{self, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixAddr};
use oci_spec::runtime::{ContainerProcessState, ContainerState, LinuxSeccomp, Spec};

/// Why the listener fd did not reach the listener: the path, the call and
/// the errno, or what was missing.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("linux.seccomp: SCMP_ACT_NOTIFY needs a listenerPath")]
    NoListenerPath,
    #[error("linux.seccomp.listenerPath {}: {call}: {errno}", path.display())]
    Listener { path: PathBuf, call: &'static str, errno: Errno },
    #[error("the seccomp notify fd from the init: {call}: {errno}")]
    FromInit { call: &'static str, errno: Errno },
    #[error("the seccomp listener's state: {0}")]
    State(String),
}

/// The spec's seccomp section when it has a notify action.
pub fn filter(spec: &Spec) -> Option<&LinuxSeccomp> {
    spec.linux().as_ref()?.seccomp().as_ref().filter(|s| libcontainer::seccomp::is_notify(s))
}

/// The socket pair between `create` (first) and the init (second), both
/// close-on-exec.
pub fn pair() -> Result<(OwnedFd, OwnedFd), NotifyError> {
    socket::socketpair(AddressFamily::Unix, SockType::Stream, None, SockFlag::SOCK_CLOEXEC)
        .map_err(|errno| NotifyError::FromInit { call: "socketpair", errno })
}

/// In the init: sends the filter's `fd` to `create` and waits until it has
/// reached the listener (the filter may stop a syscall the runtime still
/// makes; the listener must hold the fd before the init goes on).
pub fn hand_over(socket: BorrowedFd, fd: OwnedFd) -> Result<(), Errno> {
    let fds = [fd.as_raw_fd()];
    socket::sendmsg::<()>(socket.as_raw_fd(), &[IoSlice::new(b"s")], &[ControlMessage::ScmRights(&fds)], MsgFlags::empty(), None)?;
    drop(fd);
    let mut ack = [0u8; 1];
    match nix::unistd::read(socket.as_raw_fd(), &mut ack)? {
        1 => Ok(()),
        _ => Err(Errno::EPIPE),
    }
}

/// In `create`: the fd the init sent, or None when the init closed its end
/// first (it failed; its words come through the engine's channel).
pub fn receive(socket: &OwnedFd) -> Result<Option<OwnedFd>, NotifyError> {
    let fail = |call, errno| NotifyError::FromInit { call, errno };
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = socket::recvmsg::<()>(socket.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(|errno| fail("recvmsg", errno))?;
    let fds: Vec<RawFd> = msg
        .cmsgs()
        .map_err(|errno| fail("recvmsg", errno))?
        .flat_map(|c| match c {
            ControlMessageOwned::ScmRights(fds) => fds,
            _ => Vec::new(),
        })
        .collect();
    // SAFETY: the kernel just installed these descriptors for us.
    let mut fds = fds.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    match (msg.bytes, fds.next()) {
        (0, _) => Ok(None),
        (_, Some(fd)) => Ok(Some(fd)),
        (_, None) => Err(fail("recvmsg (no descriptor)", Errno::EBADMSG)),
    }
}

/// In `create`: lets the init go on.
pub fn ack(socket: &OwnedFd) -> Result<(), NotifyError> {
    nix::unistd::write(socket, b"k").map(drop).map_err(|errno| NotifyError::FromInit { call: "write", errno })
}

/// In `create` (the init, the container `creating`) or `exec` (an exec'd
/// process, the container `running`): the fd the process sends on
/// `socket`, on to the spec's listener with the container's state; then
/// the process goes on. Nothing when the process failed before it sent one
/// (its words come on the engine's channel).
pub fn serve(args: &ContainerArgs, id: &str, status: ContainerState, pid: i32, socket: &OwnedFd) -> Result<(), NotifyError> {
    let Some(fd) = receive(socket)? else { return Ok(()) };
    let seccomp = filter(&args.spec).ok_or(NotifyError::NoListenerPath)?;
    let state = args.container.as_ref().map(|c| &c.state);
    let init_pid = match status {
        ContainerState::Creating => Some(pid),
        _ => state.and_then(|s| s.pid),
    };
    let container = Container {
        id,
        status,
        pid: init_pid.unwrap_or_default(),
        bundle: state.map(|s| s.bundle.clone()).unwrap_or_default(),
        annotations: state.and_then(|s| s.annotations.clone()).unwrap_or_default(),
    };
    send(seccomp, &process_state(seccomp, &container, pid)?, fd.as_fd())?;
    ack(socket)
}

/// What the listener is told of the container.
pub struct Container<'a> {
    pub id: &'a str,
    pub status: ContainerState,
    /// The init's pid.
    pub pid: i32,
    pub bundle: PathBuf,
    pub annotations: HashMap<String, String>,
}

/// The process state the listener gets with the fd: runtime-spec's
/// `containerProcessState` of the process `pid`.
pub fn process_state(seccomp: &LinuxSeccomp, container: &Container, pid: i32) -> Result<ContainerProcessState, NotifyError> {
    let state = oci_spec::runtime::StateBuilder::default()
        .version(oci_spec::runtime::VERSION)
        .id(container.id)
        .status(container.status)
        .pid(container.pid)
        .bundle(container.bundle.clone())
        .annotations(container.annotations.clone())
        .build()
        .map_err(|e| NotifyError::State(e.to_string()))?;
    oci_spec::runtime::ContainerProcessStateBuilder::default()
        .version(oci_spec::runtime::VERSION)
        .fds(vec![oci_spec::runtime::SECCOMP_FD_NAME.to_string()])
        .pid(pid)
        .metadata(seccomp.listener_metadata().clone().unwrap_or_default())
        .state(state)
        .build()
        .map_err(|e| NotifyError::State(e.to_string()))
}

/// Sends `fd` with `state` to the listener at the spec's `listenerPath`:
/// one message on a new connection, closed at once.
pub fn send(seccomp: &LinuxSeccomp, state: &ContainerProcessState, fd: BorrowedFd) -> Result<(), NotifyError> {
    let path = seccomp.listener_path().as_deref().ok_or(NotifyError::NoListenerPath)?;
    let fail = |call, errno| NotifyError::Listener { path: path.to_path_buf(), call, errno };
    let message = serde_json::to_vec(state).map_err(|e| NotifyError::State(e.to_string()))?;
    let conn = socket::socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).map_err(|e| fail("socket", e))?;
    let addr = UnixAddr::new(path).map_err(|e| fail("socket address", e))?;
    socket::connect(conn.as_raw_fd(), &addr).map_err(|e| fail("connect", e))?;
    let fds = [fd.as_raw_fd()];
    socket::sendmsg::<()>(conn.as_raw_fd(), &[IoSlice::new(&message)], &[ControlMessage::ScmRights(&fds)], MsgFlags::empty(), None)
        .map_err(|e| fail("sendmsg", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fd crosses the pair, and the init waits for the ack; an init
    /// that closes its end first is told apart from one that sent.
    #[test]
    fn the_fd_crosses_the_pair_and_an_early_close_is_none() {
        let (runtime, init) = pair().unwrap();
        let file: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let sent = std::thread::spawn(move || hand_over(init.as_fd(), file));
        let got = receive(&runtime).unwrap().expect("the fd");
        assert!(nix::sys::stat::fstat(got.as_raw_fd()).is_ok());
        ack(&runtime).unwrap();
        sent.join().unwrap().unwrap();

        let (runtime, init) = pair().unwrap();
        drop(init);
        assert!(receive(&runtime).unwrap().is_none());
    }

    #[test]
    fn a_listener_that_is_not_there_is_named_with_the_call_and_errno() {
        let seccomp: LinuxSeccomp = serde_json::from_value(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/nonexistent/rustpod.sock", "listenerMetadata": "m"
        }))
        .unwrap();
        let container = Container { id: "c1", status: ContainerState::Running, pid: 7, bundle: "/b".into(), annotations: HashMap::new() };
        let state = process_state(&seccomp, &container, 42).unwrap();
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(
            (&json["fds"], &json["pid"], &json["metadata"]),
            (&serde_json::json!(["seccompFd"]), &serde_json::json!(42), &serde_json::json!("m"))
        );
        let container = &json["state"];
        assert_eq!(
            (&container["id"], &container["status"], &container["bundle"], &container["pid"]),
            (&serde_json::json!("c1"), &serde_json::json!("running"), &serde_json::json!("/b"), &serde_json::json!(7))
        );
        let file: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let err = send(&seccomp, &state, file.as_fd()).unwrap_err();
        assert_eq!(err.to_string(), "linux.seccomp.listenerPath /nonexistent/rustpod.sock: connect: ENOENT: No such file or directory");
    }
}
