//! The library's error type: each variant names the object and the step
//! that failed, so the CLI can print it as one line.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bundle {path}: {reason}")]
    Bundle { path: PathBuf, reason: String },

    #[error("{path}: {reason}")]
    Config { path: PathBuf, reason: String },

    #[error("container {0} does not exist")]
    NotFound(String),

    #[error("container {0} already exists")]
    AlreadyExists(String),

    #[error("invalid container id {id:?}: {reason}")]
    InvalidId { id: String, reason: String },

    #[error("container {id} is {status}: {op} needs it {wanted}")]
    WrongStatus {
        id: String,
        op: &'static str,
        status: String,
        wanted: &'static str,
    },

    #[error("invalid signal {0:?}")]
    InvalidSignal(String),

    // The cause is part of the message, not a `source`, so that printing
    // the chain does not repeat it.
    #[error("{op} {path}: {err}")]
    Io {
        op: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },

    #[error("{op}: {err}")]
    Sys { op: &'static str, err: nix::Error },

    #[error("{op} {path}: {err}")]
    Bpf {
        op: &'static str,
        path: PathBuf,
        err: nix::Error,
    },

    #[error("cgroup {path}: {reason}")]
    Cgroup { path: PathBuf, reason: String },

    #[error("{op} {id}: {reason}")]
    Engine {
        op: &'static str,
        id: String,
        reason: String,
    },

    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            err: source,
        }
    }

    pub fn sys(op: &'static str, source: nix::Error) -> Self {
        Error::Sys { op, err: source }
    }

    /// Wraps an engine error with the operation and container it was for,
    /// flattening the engine's nested causes into one line.
    pub fn engine(op: &'static str, id: &str, err: &dyn std::error::Error) -> Self {
        Error::Engine {
            op,
            id: id.to_string(),
            reason: plain_init_failure(&one_line_chain(err)),
        }
    }
}

/// The engine reports an init that failed during setup as its channel's
/// `received unexpected message: ExecFailed("…"), expected: …`; say what
/// failed instead.
fn plain_init_failure(reason: &str) -> String {
    const MARK: &str = "received unexpected message: ExecFailed(\"";
    let Some(start) = reason.find(MARK) else {
        return reason.to_string();
    };
    let rest = &reason[start + MARK.len()..];
    let Some(end) = rest.find("\")") else {
        return reason.to_string();
    };
    let detail = rest[..end].replace("\\\"", "\"");
    format!("{}the container's init failed: {detail}", &reason[..start])
}

/// Joins an error and its sources with ": ", skipping causes that repeat the
/// text already printed, and folds newlines so the result is one line.
pub fn one_line_chain(err: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&dyn std::error::Error> = Some(err);
    while let Some(e) = cur {
        let text = e.to_string().replace('\n', " ");
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod init_failure_tests {
    use super::plain_init_failure;

    #[test]
    fn an_init_setup_failure_reads_plainly() {
        let engine = "failed to create container: received unexpected message: \
                      ExecFailed(\"failed to prepare rootfs\"), expected: HookRequest";
        assert_eq!(
            plain_init_failure(engine),
            "failed to create container: the container's init failed: failed to prepare rootfs"
        );
    }

    #[test]
    fn other_errors_are_unchanged() {
        assert_eq!(plain_init_failure("no such file"), "no such file");
    }
}
