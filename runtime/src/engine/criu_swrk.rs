//! One request to criu's RPC (`criu swrk`) sent by us rather than through
//! rust-criu's client, for what that client cannot ask: a PRE_DUMP, a
//! FEATURE_CHECK, and a DUMP that tracks memory (`track_mem`, which an
//! iterative migration's dump needs). The messages are rust-criu's generated
//! protobuf types: criu gets its end of a SOCK_SEQPACKET socketpair, the
//! request goes out, notifications are acknowledged, and criu's answer of the
//! request's own type comes back.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};

use nix::errno::Errno;
use nix::sys::socket::{recv, send, socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
use protobuf::Message;
use rust_criu::rust_criu_protobuf::rpc::{Criu_features, Criu_req, Criu_req_type, Criu_resp};

/// criu's answers are small (runc reads them into 40 KiB); a longer one is
/// refused, not cut.
const ANSWER_MAX: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SwrkError {
    #[error("socketpair(AF_UNIX, SOCK_SEQPACKET) for criu: {0}")]
    Socketpair(Errno),
    #[error("execve {path} swrk: {err}")]
    Spawn { path: String, err: std::io::Error },
    #[error("encode the criu {kind:?} request: {err}")]
    Encode { kind: Criu_req_type, err: protobuf::Error },
    #[error("send the criu {kind:?} request (sendmsg): {err}")]
    Send { kind: Criu_req_type, err: Errno },
    #[error("read criu's answer to {kind:?} (recvmsg): {err}")]
    Receive { kind: Criu_req_type, err: Errno },
    #[error("criu closed its socket without answering {kind:?}")]
    NoAnswer { kind: Criu_req_type },
    #[error("criu's answer to {kind:?} is over {ANSWER_MAX} bytes")]
    TooLong { kind: Criu_req_type },
    #[error("decode criu's answer to {kind:?}: {err}")]
    Decode { kind: Criu_req_type, err: protobuf::Error },
    // runc's words ("criu failed: type DUMP errno 0"), with criu's own message.
    #[error("criu failed: type {kind:?} errno {errno}{message}")]
    Failed { kind: Criu_req_type, errno: i32, message: String },
    #[error("criu answered {got:?} to a {kind:?} request")]
    Unexpected { kind: Criu_req_type, got: Criu_req_type },
    #[error("wait for criu (waitpid): {0}")]
    Wait(std::io::Error),
    #[error("criu {kind:?} exited {status}")]
    Exited { kind: Criu_req_type, status: ExitStatus },
}

/// Sends `req` to a new `criu swrk` at `criu_path` and returns its answer.
/// criu ends once our end closes; its exit must be clean except after a
/// PRE_DUMP, where criu waits for a next request and leaves on the close
/// however it may (runc ignores that exit too).
pub fn request(criu_path: &str, req: &Criu_req) -> Result<Criu_resp, SwrkError> {
    request_notifying(criu_path, req, &mut |_| {})
}

/// `request`, with `on_notify` told the name of each notification criu
/// sends before its answer (with `notify_scripts` set), before it is
/// acknowledged.
pub fn request_notifying(criu_path: &str, req: &Criu_req, on_notify: &mut dyn FnMut(&str)) -> Result<Criu_resp, SwrkError> {
    let kind = req.type_();
    let bytes = req.write_to_bytes().map_err(|err| SwrkError::Encode { kind, err })?;
    let (ours, theirs) =
        socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC).map_err(SwrkError::Socketpair)?;
    let mut criu = spawn(criu_path, theirs)?;
    let answer = exchange(&ours, kind, &bytes, on_notify);
    drop(ours);
    let status = criu.wait().map_err(SwrkError::Wait)?;
    let answer = answer?;
    if !status.success() && kind != Criu_req_type::PRE_DUMP {
        return Err(SwrkError::Exited { kind, status });
    }
    Ok(answer)
}

/// `criu swrk FD` with `theirs` as FD, stdin /dev/null and our stdout and
/// stderr (as rust-criu starts it); our copy of `theirs` closes on return,
/// so criu's exit shows as the socket's end.
fn spawn(criu_path: &str, theirs: OwnedFd) -> Result<std::process::Child, SwrkError> {
    let fd: RawFd = theirs.as_raw_fd();
    let mut cmd = Command::new(criu_path);
    cmd.arg("swrk").arg(fd.to_string()).stdin(Stdio::null());
    // SAFETY: fcntl(2) is async-signal-safe and touches only the child's own
    // copy of a descriptor that stays open until spawn returns.
    unsafe {
        cmd.pre_exec(move || match libc::fcntl(fd, libc::F_SETFD, 0) {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    cmd.spawn().map_err(|err| SwrkError::Spawn { path: criu_path.to_string(), err })
}

/// Sends the request and reads until the answer of its type, acknowledging
/// the notifications criu sends before it (none unless notify_scripts).
fn exchange(sock: &OwnedFd, kind: Criu_req_type, bytes: &[u8], on_notify: &mut dyn FnMut(&str)) -> Result<Criu_resp, SwrkError> {
    send_all(sock, kind, bytes)?;
    loop {
        let answer = receive(sock, kind)?;
        let got = answer.type_();
        if !answer.success() {
            let message = answer.cr_errmsg.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
            return Err(SwrkError::Failed { kind: got, errno: answer.cr_errno(), message });
        }
        if got == Criu_req_type::NOTIFY {
            on_notify(answer.notify.script());
            let mut ack = Criu_req::new();
            ack.set_type(Criu_req_type::NOTIFY);
            ack.set_notify_success(true);
            let ack = ack.write_to_bytes().map_err(|err| SwrkError::Encode { kind: Criu_req_type::NOTIFY, err })?;
            send_all(sock, Criu_req_type::NOTIFY, &ack)?;
            continue;
        }
        if got != kind {
            return Err(SwrkError::Unexpected { kind, got });
        }
        return Ok(answer);
    }
}

/// One SEQPACKET message: all of it goes, or the send fails.
fn send_all(sock: &OwnedFd, kind: Criu_req_type, bytes: &[u8]) -> Result<(), SwrkError> {
    send(sock.as_raw_fd(), bytes, MsgFlags::MSG_NOSIGNAL).map_err(|err| SwrkError::Send { kind, err })?;
    Ok(())
}

/// One answer; MSG_TRUNC makes recv report a longer message's full length.
fn receive(sock: &OwnedFd, kind: Criu_req_type) -> Result<Criu_resp, SwrkError> {
    let mut buf = vec![0u8; ANSWER_MAX];
    let n = loop {
        match recv(sock.as_raw_fd(), &mut buf, MsgFlags::MSG_TRUNC) {
            Err(Errno::EINTR) => continue,
            Err(err) => return Err(SwrkError::Receive { kind, err }),
            Ok(n) => break n,
        }
    };
    if n == 0 {
        return Err(SwrkError::NoAnswer { kind });
    }
    if n > ANSWER_MAX {
        return Err(SwrkError::TooLong { kind });
    }
    Criu_resp::parse_from_bytes(&buf[..n]).map_err(|err| SwrkError::Decode { kind, err })
}

/// Whether criu and the kernel can do what `features` asks (a
/// FEATURE_CHECK): the names of those missing, in runc's words
/// (`MemTrack`, `LazyPages`).
pub fn missing_features(criu_path: &str, features: Criu_features) -> Result<Vec<&'static str>, SwrkError> {
    let mut req = Criu_req::new();
    req.set_type(Criu_req_type::FEATURE_CHECK);
    let asked = features.clone();
    req.features = protobuf::MessageField::some(features);
    let answer = request(criu_path, &req)?;
    let has = answer.features.as_ref();
    let mut missing = Vec::new();
    if asked.mem_track() && !has.is_some_and(|f| f.mem_track()) {
        missing.push("MemTrack");
    }
    if asked.lazy_pages() && !has.is_some_and(|f| f.lazy_pages()) {
        missing.push("LazyPages");
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A criu that is not there: the spawn error names the path.
    #[test]
    fn a_missing_criu_is_named() {
        let mut req = Criu_req::new();
        req.set_type(Criu_req_type::VERSION);
        let err = request("/nonexistent/criu", &req).unwrap_err();
        assert!(err.to_string().contains("execve /nonexistent/criu swrk"), "{err}");
    }
}
