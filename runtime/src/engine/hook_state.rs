//! OCI hooks get the state the spec describes: each runs through a small
//! wrapper that completes what the engine leaves out (the user's bundle,
//! the init's pid, `created` for startContainer) before it execs the hook.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use oci_spec::runtime::Hook;

/// Why the wrapper could not hand the state to the hook: the step, and the
/// syscall's errno or the JSON error.
#[derive(Debug, thiserror::Error)]
pub enum HookStateError {
    #[error("usage: rustpod-hook BUNDLE PATH ARGV0 [ARGS...]")]
    Usage,
    #[error("{call}: {errno}")]
    Sys { call: &'static str, errno: Errno },
    #[error("parse state: {0}")]
    Parse(serde_json::Error),
    #[error("state is not a JSON object")]
    NotAnObject,
    #[error("encode state: {0}")]
    Encode(serde_json::Error),
    #[error("execve {}: {errno}", path.display())]
    Exec { path: PathBuf, errno: Errno },
}

fn sys(call: &'static str) -> impl Fn(std::io::Error) -> HookStateError {
    move |e| HookStateError::Sys { call, errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)) }
}

/// argv[0] by which our binaries recognise the wrapper invocation.
pub const WRAPPER_ARG0: &str = "rustpod-hook";
/// The same for a startContainer hook, run by the init inside the
/// container: the state also gets status `created` and the init's pid.
pub const START_WRAPPER_ARG0: &str = "rustpod-start-hook";

/// Wraps `hook` so it receives a state whose bundle is `bundle`. The
/// wrapper re-executes our binary through /proc/self/exe.
pub fn wrap(hook: &Hook, bundle: &Path) -> Hook {
    wrap_as(WRAPPER_ARG0, hook, bundle)
}

/// Wraps a startContainer hook (see [`START_WRAPPER_ARG0`]).
pub fn wrap_start_container(hook: &Hook, bundle: &Path) -> Hook {
    wrap_as(START_WRAPPER_ARG0, hook, bundle)
}

fn wrap_as(arg0: &str, hook: &Hook, bundle: &Path) -> Hook {
    let original_args = hook.args().clone().unwrap_or_else(|| vec![hook.path().display().to_string()]);
    let mut args = vec![arg0.to_string(), bundle.display().to_string(), hook.path().display().to_string()];
    args.extend(original_args);
    let mut wrapped = hook.clone();
    wrapped.set_path(PathBuf::from("/proc/self/exe"));
    wrapped.set_args(Some(args));
    wrapped
}

/// The wrapper's body: `<bundle> <path> <argv0> [args…]`. Reads the state,
/// sets its bundle (and the pid, if the engine left it out), and execs
/// the real hook with that state on stdin. Returns only on error.
pub fn main(args: Vec<OsString>, start_container: bool) -> i32 {
    match exec_hook(args, start_container) {
        Ok(never) => match never {},
        Err(err) => {
            eprintln!("rustpod: hook: {err}");
            1
        }
    }
}

fn exec_hook(args: Vec<OsString>, start_container: bool) -> Result<std::convert::Infallible, HookStateError> {
    let [bundle, path, argv0, rest @ ..] = args.as_slice() else {
        return Err(HookStateError::Usage);
    };
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).map_err(sys("read(2) of the state on stdin"))?;
    let mut state = fix_state(&input, Path::new(bundle))?;
    if start_container {
        // Run by the init itself: our parent is the init, numbered as the
        // container sees it, as runc reports it.
        state = as_created(&state, nix::unistd::getppid().as_raw())?;
    }
    let (reader, mut writer) = std::io::pipe().map_err(sys("pipe2"))?;
    // The state is far smaller than a pipe buffer, so this never blocks.
    writer.write_all(&state).map_err(sys("write(2) of the state to the hook's stdin"))?;
    drop(writer);
    let err = std::process::Command::new(path).arg0(argv0).args(rest).stdin(reader).exec();
    Err(HookStateError::Exec { path: PathBuf::from(path), errno: Errno::from_raw(err.raw_os_error().unwrap_or(0)) })
}

fn fix_state(input: &[u8], bundle: &Path) -> Result<Vec<u8>, HookStateError> {
    let mut state: serde_json::Value = serde_json::from_slice(input).map_err(HookStateError::Parse)?;
    let obj = state.as_object_mut().ok_or(HookStateError::NotAnObject)?;
    obj.insert("bundle".into(), bundle.display().to_string().into());
    if !obj.contains_key("pid") {
        if let Some(pid) = parent_pid_in_host_proc() {
            obj.insert("pid".into(), pid.into());
        }
    }
    serde_json::to_vec(&state).map_err(HookStateError::Encode)
}

/// The state a startContainer hook gets: the container is created and its
/// init is `pid`.
fn as_created(state: &[u8], pid: i32) -> Result<Vec<u8>, HookStateError> {
    let mut state: serde_json::Value = serde_json::from_slice(state).map_err(HookStateError::Parse)?;
    let obj = state.as_object_mut().ok_or(HookStateError::NotAnObject)?;
    obj.insert("status".into(), "created".into());
    obj.insert("pid".into(), pid.into());
    serde_json::to_vec(&state).map_err(HookStateError::Encode)
}

/// Our parent's pid as the mounted /proc sees it. For a createContainer
/// hook that is the container init as the host numbers it, because the
/// host's /proc is still mounted there before pivot_root.
fn parent_pid_in_host_proc() -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    after_comm.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_that_is_not_an_object_or_not_json_is_refused() {
        assert!(matches!(fix_state(b"[1]", Path::new("/b")), Err(HookStateError::NotAnObject)));
        let err = as_created(b"{", 1).unwrap_err();
        assert!(err.to_string().starts_with("parse state: "), "{err}");
        assert!(matches!(exec_hook(Vec::new(), false), Err(HookStateError::Usage)));
    }

    #[test]
    fn state_gets_the_user_bundle() {
        let input = br#"{"ociVersion":"1.1.0","id":"x","status":"creating","pid":7,"bundle":"/run/rustpod/x"}"#;
        let out: serde_json::Value = serde_json::from_slice(&fix_state(input, Path::new("/b")).unwrap()).unwrap();
        assert_eq!(out["bundle"], "/b");
        assert_eq!(out["pid"], 7);
    }

    #[test]
    fn start_container_state_is_created_with_the_inits_pid() {
        let input = br#"{"ociVersion":"1.1.0","id":"x","status":"creating","bundle":"/b"}"#;
        let out: serde_json::Value = serde_json::from_slice(&as_created(input, 1).unwrap()).unwrap();
        assert_eq!((out["status"].as_str(), out["pid"].as_i64()), (Some("created"), Some(1)));
    }

    #[test]
    fn wrapped_hook_keeps_argv_and_timeout() {
        let mut hook = Hook::default();
        hook.set_path(PathBuf::from("/usr/bin/h"));
        hook.set_args(Some(vec!["h".into(), "a".into()]));
        hook.set_timeout(Some(5));
        let w = wrap(&hook, Path::new("/b"));
        assert_eq!(w.path(), Path::new("/proc/self/exe"));
        assert_eq!(w.args().clone().unwrap(), vec![WRAPPER_ARG0, "/b", "/usr/bin/h", "h", "a"]);
        assert_eq!(w.timeout(), Some(5));
    }
}
