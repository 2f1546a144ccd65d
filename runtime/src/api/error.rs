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
    WrongStatus { id: String, op: &'static str, status: String, wanted: &'static str },

    #[error("invalid signal {0:?}")]
    InvalidSignal(String),

    // The cause is part of the message, not a `source`, so that printing
    // the chain does not repeat it.
    #[error("{op} {path}: {err}")]
    Io { op: &'static str, path: PathBuf, err: std::io::Error },

    #[error("{op}: {err}")]
    Sys { op: &'static str, err: nix::Error },

    #[error("{op} {path}: {err}")]
    Bpf { op: &'static str, path: PathBuf, err: nix::Error },

    #[error("cgroup {path}: {reason}")]
    Cgroup { path: PathBuf, reason: String },

    #[error("{op} {id}: {reason}")]
    Engine { op: &'static str, id: String, reason: String },

    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { op, path: path.into(), err: source }
    }

    pub fn sys(op: &'static str, source: nix::Error) -> Self {
        Error::Sys { op, err: source }
    }

    /// Wraps an engine error with the operation and container it was for,
    /// flattening the engine's nested causes into one line. When the
    /// container's init failed, its own words are the reason, as runc says
    /// it ("unable to start container process: exec: …"): clients look for
    /// them.
    pub fn engine(op: &'static str, id: &str, err: &(dyn std::error::Error + 'static)) -> Self {
        let reason = match init_failure(err) {
            Some(words) => format!("unable to start container process: {words}"),
            None => one_line_chain(err),
        };
        Error::Engine { op, id: id.to_string(), reason }
    }
}

/// What the container's init reported when it failed during setup. The
/// engine carries it as `ChannelError::ExecError` when the init fails once
/// set up, and as an `UnexpectedMessage` holding the init's `ExecFailed`
/// message when it fails while the engine waits for a hook request. Its
/// wrappers are transparent, so they are looked through by type.
fn init_failure(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    use libcontainer::error::LibcontainerError;
    use libcontainer::process::container_main_process::ProcessError;
    let mut cur = Some(err);
    while let Some(e) = cur {
        let channel = e
            .downcast_ref::<ChannelError>()
            .or_else(|| match e.downcast_ref::<ProcessError>() {
                Some(ProcessError::Channel(c)) => Some(c),
                _ => None,
            })
            .or_else(|| match e.downcast_ref::<LibcontainerError>() {
                Some(LibcontainerError::MainProcess(ProcessError::Channel(c))) => Some(c),
                _ => None,
            });
        if let Some(words) = channel.and_then(init_words) {
            return Some(words);
        }
        cur = e.source();
    }
    None
}

use libcontainer::process::channel::ChannelError;

fn init_words(err: &ChannelError) -> Option<String> {
    match err {
        ChannelError::ExecError(words) => {
            // The engine prefixes what the init sent with its own label.
            let words = words.strip_prefix("error in executing process : ").unwrap_or(words);
            Some(words.replace('\n', " "))
        }
        ChannelError::UnexpectedMessage { received, .. } => {
            let received = received.to_string();
            let words = received.strip_prefix("ExecFailed(")?.strip_suffix(')')?;
            Some(words.replace('\n', " "))
        }
        _ => None,
    }
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
