//! `binary://` stdio URIs: containerd's logging-binary protocol. The program
//! the URI names reads the container's stdout and stderr itself, from fds 3
//! and 4, and says it is ready by closing (or writing to) fd 5; its
//! environment names the container in CONTAINER_ID and CONTAINER_NAMESPACE.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::io::{Result, StdioError};

/// How long a logger has to say it is ready (containerd's runc shim gives it as long).
const READY_WAIT: Duration = Duration::from_secs(10);
/// The descriptor numbers the protocol gives the logger: stdout, stderr, ready.
const LOGGER_FDS: [i32; 3] = [3, 4, 5];

/// The program and arguments of a `binary://` URI.
#[derive(Debug, PartialEq, Eq)]
pub struct Logger {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// The logger a process's stdout and stderr URIs name, if they name one.
/// Both streams go to the same program, so the URIs must agree (or one be empty).
pub fn for_output(stdout: &str, stderr: &str) -> Result<Option<Logger>> {
    let (out, err) = (parse(stdout), parse(stderr));
    match (out, err) {
        (None, None) => Ok(None),
        (Some(logger), None) if stderr.is_empty() => Ok(Some(logger?)),
        (None, Some(logger)) if stdout.is_empty() => Ok(Some(logger?)),
        (Some(logger), Some(_)) if stdout == stderr => Ok(Some(logger?)),
        _ => Err(StdioError::Unsupported(format!("stdout {stdout:?} and stderr {stderr:?}: a binary:// logger must take both streams"))),
    }
}

/// `binary:///path?key=value&flag`: the path, then each key and its value (if
/// any) as arguments, in order, %-decoded.
fn parse(uri: &str) -> Option<Result<Logger>> {
    let rest = uri.strip_prefix("binary://")?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let path = decode(path);
    if !path.starts_with('/') {
        return Some(Err(StdioError::Unsupported(format!("log URI {uri}: the logger must be an absolute path"))));
    }
    let mut args = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        args.push(decode(key));
        if !value.is_empty() {
            args.push(decode(value));
        }
    }
    Some(Ok(Logger { program: PathBuf::from(path), args }))
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Starts the logger on the read ends of the process's output pipes and waits
/// until it says it is ready.
pub fn start(logger: &Logger, id: &str, namespace: &str, stdout: OwnedFd, stderr: OwnedFd) -> Result<()> {
    // Before forking the multi-threaded server: a program that is not there
    // (or not executable) fails the create at once, naming it.
    nix::unistd::access(&logger.program, nix::unistd::AccessFlags::X_OK)
        .map_err(StdioError::errno(format!("start logger {}: access(X_OK)", logger.program.display())))?;
    let (ready_read, ready_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(StdioError::errno("create logger ready pipe: pipe2"))?;
    // Above the target numbers, so that no dup2 in the child overwrites a source.
    let sources = [above_targets(&stdout)?, above_targets(&stderr)?, above_targets(&ready_write)?];
    let raw = sources.each_ref().map(|fd| fd.as_raw_fd());
    let mut command = Command::new(&logger.program);
    command
        .args(&logger.args)
        .env("CONTAINER_ID", id)
        .env("CONTAINER_NAMESPACE", namespace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only dup2, which is async-signal-safe, between fork and exec.
    unsafe {
        command.pre_exec(move || {
            for (source, target) in raw.iter().zip(LOGGER_FDS) {
                if libc::dup2(*source, target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let program = logger.program.display();
    command.spawn().map_err(StdioError::os(format!("start logger {program}: fork/exec")))?;
    // Only the logger holds the pipes and the ready pipe's write end now.
    drop((sources, ready_write, stdout, stderr));
    wait_ready(&ready_read, &program.to_string())
}

fn above_targets(fd: &OwnedFd) -> Result<OwnedFd> {
    let dup = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10))
        .map_err(StdioError::errno("duplicate a logger descriptor: fcntl(F_DUPFD_CLOEXEC)"))?;
    // SAFETY: fcntl just returned this new descriptor, which we own.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(dup) })
}

fn wait_ready(ready: &OwnedFd, program: &str) -> Result<()> {
    match rustpod::wait_readable(ready.as_fd(), READY_WAIT) {
        Ok(true) => Ok(()),
        Ok(false) => Err(StdioError::os(format!("logger {program}: not ready within {READY_WAIT:?} (it must close or write to fd 5)"))(
            std::io::ErrorKind::TimedOut.into(),
        )),
        Err(e) => Err(StdioError::errno(format!("logger {program}: wait until ready: poll"))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_gives_program_and_arguments_in_order() {
        let logger = parse("binary:///usr/bin/log%20tool?--dir=/var/log/a%2Fb&-v").unwrap().unwrap();
        assert_eq!(logger, Logger { program: "/usr/bin/log tool".into(), args: vec!["--dir".into(), "/var/log/a/b".into(), "-v".into()] });
        assert!(parse("/run/fifo").is_none());
        assert!(parse("binary://relative/tool").unwrap().is_err());
    }

    #[test]
    fn both_streams_must_name_the_same_logger() {
        let uri = "binary:///bin/logger";
        assert!(for_output(uri, uri).unwrap().is_some());
        assert!(for_output(uri, "").unwrap().is_some());
        assert!(for_output("", "").unwrap().is_none());
        assert!(for_output("/run/out", "/run/err").unwrap().is_none());
        assert!(for_output(uri, "/run/err").is_err());
    }
}
