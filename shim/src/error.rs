//! The task service's errors and the gRPC code each reaches containerd with,
//! as containerd's runc shim (Go) answers: containerd branches on NotFound
//! (e.g. its cleanup deletes what may be gone), AlreadyExists and
//! FailedPrecondition.

use ttrpc::Code;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Go shim: "container not created" (ErrNotFound).
    #[error("container {0} not found in this shim")]
    NoContainer(String),
    /// The Go shim: "process does not exist <id>" (ErrNotFound).
    #[error("container {id}: process {exec_id:?} does not exist")]
    NoProcess { id: String, exec_id: String },
    /// Signalling a process that has exited (the Go shim: ErrNotFound).
    #[error("{0}: process already finished")]
    Finished(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// The process is in the wrong state for the request.
    #[error("{0}")]
    WrongState(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    Unimplemented(String),
    /// What the runtime library refused or failed, with the request it served.
    #[error("{what}: {source}")]
    Runtime { what: String, source: rustpod::Error },
    /// What a create or exec helper answered, with the code it chose for it.
    #[error("{what}: {message}")]
    Helper { what: String, message: String, code: Code },
    /// Stdio for a process could not be set up (a log URI we do not take:
    /// InvalidArgument; a failed call: Unknown).
    #[error("{what}: {source}")]
    Stdio { what: String, source: crate::io::StdioError },
    /// The rootfs containerd gave could not be unmounted.
    #[error("delete {id}: unmount its rootfs: {source}")]
    Unmount { id: String, source: crate::mount::MountError },
    /// Boxed: the largest cause, and rare; it kept every `Result` of the
    /// service 128 bytes wide.
    #[error(transparent)]
    Stats(Box<crate::metrics::StatsError>),
    /// A Start that restores a checkpoint failed: Unknown whatever the
    /// cause, as containerd's runc shim answers ("OCI runtime restore failed").
    #[error("OCI runtime restore failed: {0}")]
    Restore(Box<Error>),
    /// kill(2) of an exec's pid failed other than with ESRCH.
    #[error("{what}: kill: {errno}")]
    Signal { what: String, errno: nix::errno::Errno },
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<crate::metrics::StatsError> for Error {
    fn from(e: crate::metrics::StatsError) -> Self {
        Error::Stats(Box::new(e))
    }
}

impl Error {
    pub fn runtime(what: impl Into<String>) -> impl FnOnce(rustpod::Error) -> Error {
        let what = what.into();
        move |source| Error::Runtime { what, source }
    }

    pub fn code(&self) -> Code {
        match self {
            Error::NoContainer(_) | Error::NoProcess { .. } | Error::Finished(_) => Code::NOT_FOUND,
            Error::AlreadyExists(_) => Code::ALREADY_EXISTS,
            Error::WrongState(_) => Code::FAILED_PRECONDITION,
            Error::InvalidArgument(_) => Code::INVALID_ARGUMENT,
            Error::Unimplemented(_) => Code::UNIMPLEMENTED,
            Error::Runtime { source, .. } => runtime_code(source),
            Error::Helper { code, .. } => *code,
            Error::Stdio { source: crate::io::StdioError::Unsupported(_), .. } => Code::INVALID_ARGUMENT,
            Error::Stdio { .. } => Code::UNKNOWN,
            Error::Stats(stats) => match stats.as_ref() {
                crate::metrics::StatsError::Runtime { source, .. } => runtime_code(source),
                _ => Code::UNKNOWN,
            },
            Error::Signal { .. } | Error::Unmount { .. } | Error::Restore(_) => Code::UNKNOWN,
        }
    }
}

/// The code of a runtime library error.
pub fn runtime_code(e: &rustpod::Error) -> Code {
    use rustpod::Error as E;
    match e {
        E::NotFound(_) => Code::NOT_FOUND,
        E::AlreadyExists(_) => Code::ALREADY_EXISTS,
        E::Bundle { .. } | E::Config { .. } | E::InvalidId { .. } | E::InvalidSignal(_) => Code::INVALID_ARGUMENT,
        E::WrongStatus { .. } => Code::FAILED_PRECONDITION,
        _ => Code::UNKNOWN,
    }
}

impl Error {
    /// A stdio failure at `what`.
    pub fn stdio(what: impl Into<String>) -> impl FnOnce(crate::io::StdioError) -> Error {
        let what = what.into();
        move |source| Error::Stdio { what, source }
    }

    /// A helper's failure at `what`.
    pub fn helper(what: impl Into<String>) -> impl FnOnce(crate::helper::Failure) -> Error {
        let what = what.into();
        move |f| Error::Helper { what, message: f.message, code: f.code }
    }
}

impl From<Error> for ttrpc::Error {
    fn from(e: Error) -> ttrpc::Error {
        let code = e.code();
        ttrpc::Error::RpcStatus(ttrpc::get_status(code, with_class(code, e.to_string())))
    }
}

/// `message` ending in its code's errdefs class (": not found"), as the Go shim's messages end
/// (errdefs wraps the class into the text). containerd 1.6 appended the class to a message
/// without it; 2.x shows the message as it came, so without the class ctr said "process
/// already finished" where the runc shim says "process already finished: not found".
fn with_class(code: Code, message: String) -> String {
    let class = match code {
        Code::NOT_FOUND => "not found",
        Code::ALREADY_EXISTS => "already exists",
        Code::INVALID_ARGUMENT => "invalid argument",
        Code::FAILED_PRECONDITION => "failed precondition",
        Code::UNIMPLEMENTED => "not implemented",
        _ => return message,
    };
    if message.ends_with(class) {
        message
    } else {
        format!("{message}: {class}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(e: Error) -> Code {
        match ttrpc::Error::from(e) {
            ttrpc::Error::RpcStatus(status) => status.code(),
            other => panic!("not a status: {other:?}"),
        }
    }

    #[test]
    fn codes_are_the_go_shims() {
        assert_eq!(code_of(Error::NoContainer("c".into())), Code::NOT_FOUND);
        assert_eq!(code_of(Error::NoProcess { id: "c".into(), exec_id: "e".into() }), Code::NOT_FOUND);
        assert_eq!(code_of(Error::Finished("c".into())), Code::NOT_FOUND);
        assert_eq!(code_of(Error::AlreadyExists("c".into())), Code::ALREADY_EXISTS);
        assert_eq!(code_of(Error::WrongState("running".into())), Code::FAILED_PRECONDITION);
        assert_eq!(code_of(Error::InvalidArgument("signal".into())), Code::INVALID_ARGUMENT);
        assert_eq!(code_of(Error::Unimplemented("checkpoint".into())), Code::UNIMPLEMENTED);
        let signal = Error::Signal { what: "signal exec e of c (pid 9)".into(), errno: nix::errno::Errno::EPERM };
        assert_eq!(signal.to_string(), "signal exec e of c (pid 9): kill: EPERM: Operation not permitted");
        assert_eq!(code_of(signal), Code::UNKNOWN);
    }

    fn message_of(e: Error) -> String {
        match ttrpc::Error::from(e) {
            ttrpc::Error::RpcStatus(status) => status.message,
            other => panic!("not a status: {other:?}"),
        }
    }

    #[test]
    fn messages_end_in_their_class_as_the_go_shims() {
        assert_eq!(message_of(Error::Finished("container c".into())), "container c: process already finished: not found");
        assert_eq!(message_of(Error::AlreadyExists("exec e".into())), "exec e already exists");
        assert_eq!(message_of(Error::WrongState("c is running".into())), "c is running: failed precondition");
        let signal = Error::Signal { what: "signal e".into(), errno: nix::errno::Errno::EPERM };
        assert_eq!(message_of(signal), "signal e: kill: EPERM: Operation not permitted");
    }

    #[test]
    fn stdio_we_do_not_take_is_the_requests_fault() {
        use crate::io::StdioError;
        let unsupported = Error::stdio("create c")(StdioError::Unsupported("stdio syslog://x".into()));
        assert_eq!(code_of(unsupported), Code::INVALID_ARGUMENT);
        let failed = Error::stdio("create c")(StdioError::os("open stdin /f (O_RDWR)")(std::io::Error::from_raw_os_error(libc::EMFILE)));
        assert_eq!(failed.to_string(), "create c: open stdin /f (O_RDWR): Too many open files (os error 24)");
        assert_eq!(code_of(failed), Code::UNKNOWN);
    }

    #[test]
    fn runtime_errors_keep_their_meaning() {
        let runtime = |e| code_of(Error::runtime("kill c")(e));
        assert_eq!(runtime(rustpod::Error::NotFound("c".into())), Code::NOT_FOUND);
        assert_eq!(runtime(rustpod::Error::AlreadyExists("c".into())), Code::ALREADY_EXISTS);
        assert_eq!(runtime(rustpod::Error::InvalidSignal("SIGFOO".into())), Code::INVALID_ARGUMENT);
        let wrong = rustpod::Error::WrongStatus { id: "c".into(), op: "pause", status: "stopped".into(), wanted: "running" };
        assert_eq!(runtime(wrong), Code::FAILED_PRECONDITION);
        assert_eq!(runtime(rustpod::Error::Invalid("x".into())), Code::UNKNOWN);
    }

    #[test]
    fn the_message_names_the_request() {
        let e = Error::runtime("pause c1")(rustpod::Error::NotFound("c1".into()));
        assert_eq!(e.to_string(), "pause c1: container c1 does not exist");
    }
}
