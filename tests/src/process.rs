// Runs a program with its stdio in files (a container may inherit them and hold them open,
// which would hang a pipe reader) and with a deadline, so that no command hangs the suite.

use crate::scratch::ScratchDir;
use crate::wait;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};

/// What a finished command did.
#[derive(Debug)]
pub struct Output {
    pub cmdline: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The exit code, or 128+signal like a shell when the command was killed.
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or_else(|| 128 + self.status.signal().unwrap_or(0))
    }

    pub fn success(&self) -> bool {
        self.status.success()
    }

    pub fn describe(&self) -> String {
        format!("`{}` exited {}\n--- stdout:\n{}\n--- stderr:\n{}", self.cmdline, self.code(), self.stdout, self.stderr)
    }

    /// Panics unless the command succeeded.
    #[track_caller]
    pub fn ok(self) -> Self {
        assert!(self.success(), "command failed: {}", self.describe());
        self
    }

    /// Panics unless the command failed.
    #[track_caller]
    pub fn failed(self) -> Self {
        assert!(!self.success(), "command should have failed: {}", self.describe());
        self
    }

    /// Stdout parsed as JSON; panics with the whole output if it is not.
    #[track_caller]
    pub fn stdout_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.describe()))
    }

    /// Non-empty lines of stderr.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| !l.trim().is_empty()).collect()
    }
}

/// A command running in the background.
pub struct Spawned {
    child: Child,
    cmdline: String,
    io: ScratchDir,
}

/// Starts `program args` with `stdin` as its standard input.
pub fn spawn<S: AsRef<OsStr>>(program: &Path, args: &[S], stdin: &[u8]) -> Spawned {
    spawn_with_signals(program, args, stdin, &[])
}

/// `spawn`, the child starting with each of `signals` ignored (`true`) or at its default, as its
/// caller left it; with none the standard library's posix_spawn decides (glibc ignores 32 and 33).
pub fn spawn_with_signals<S: AsRef<OsStr>>(program: &Path, args: &[S], stdin: &[u8], signals: &[(i32, bool)]) -> Spawned {
    try_spawn_with_signals(program, args, stdin, signals).unwrap_or_else(|(cmdline, e)| panic!("cannot run `{cmdline}`: {e}"))
}

/// `spawn`, an execve that fails returned as its error (with the command line) for the caller
/// to judge: an ETXTBSY can be the finding a test looks for.
pub fn try_spawn<S: AsRef<OsStr>>(program: &Path, args: &[S], stdin: &[u8]) -> Result<Spawned, (String, std::io::Error)> {
    try_spawn_with_signals(program, args, stdin, &[])
}

fn try_spawn_with_signals<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    stdin: &[u8],
    signals: &[(i32, bool)],
) -> Result<Spawned, (String, std::io::Error)> {
    try_spawn_with(program, args, stdin, |cmd| {
        if !signals.is_empty() {
            let signals = signals.to_vec();
            // SAFETY: the closure makes only rt_sigaction calls, async-signal-safe.
            unsafe { cmd.pre_exec(move || set_dispositions(&signals)) };
        }
    })
}

/// [`run`], `setup` given the command before it starts (a `pre_exec` step, say).
pub fn run_with<S: AsRef<OsStr>>(program: &Path, args: &[S], stdin: &[u8], setup: impl FnOnce(&mut Command)) -> Output {
    try_spawn_with(program, args, stdin, setup).unwrap_or_else(|(cmdline, e)| panic!("cannot run `{cmdline}`: {e}")).wait()
}

fn try_spawn_with<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    stdin: &[u8],
    setup: impl FnOnce(&mut Command),
) -> Result<Spawned, (String, std::io::Error)> {
    let cmdline = std::iter::once(program.as_os_str())
        .chain(args.iter().map(AsRef::as_ref))
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let io = ScratchDir::new("io");
    fs::write(io.join("stdin"), stdin).expect("write stdin file");
    let open = |name: &str| File::open(io.join(name)).expect("open stdin file");
    let create = |name: &str| File::create(io.join(name)).expect("create output file");
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(open("stdin")).stdout(create("stdout")).stderr(create("stderr"));
    setup(&mut cmd);
    match cmd.spawn() {
        Ok(child) => Ok(Spawned { child, cmdline, io }),
        Err(e) => Err((cmdline, e)),
    }
}

/// Runs `program args` to completion (bounded by `wait::DEADLINE`).
pub fn run<S: AsRef<OsStr>>(program: &Path, args: &[S], stdin: &[u8]) -> Output {
    spawn(program, args, stdin).wait()
}

impl Spawned {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The command has exited (it is not reaped from the caller's view: `wait` still works).
    pub fn is_finished(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Polls (bounded) until `ready` while the command runs; panics with its output if it exits first.
    #[track_caller]
    pub fn running_until(mut self, what: &str, mut ready: impl FnMut() -> bool) -> Self {
        let exited = wait::wait_for(what, || if ready() { Some(false) } else { self.is_finished().then_some(true) });
        if exited {
            panic!("exited before {what}: {}", self.wait().describe());
        }
        self
    }

    /// Waits for the command; panics if it outlives the deadline (it is then killed).
    #[track_caller]
    pub fn wait(self) -> Output {
        self.try_wait().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits for the command; kills it by pid and errs if it outlives the deadline.
    pub fn try_wait(mut self) -> Result<Output, String> {
        let finished = wait::eventually(|| self.is_finished());
        if !finished {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return Err(format!("`{}` did not finish within {:?}", self.cmdline, wait::DEADLINE));
        }
        let status = self.child.wait().map_err(|e| format!("reap `{}`: {e}", self.cmdline))?;
        let read = |name: &str| String::from_utf8_lossy(&fs::read(self.io.join(name)).unwrap_or_default()).into_owned();
        Ok(Output { cmdline: self.cmdline.clone(), status, stdout: read("stdout"), stderr: read("stderr") })
    }
}

/// The kernel's `struct sigaction` (x86-64 and aarch64 layout).
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// Sets each signal ignored or to its default with rt_sigaction(2) itself: glibc's sigaction()
/// refuses its internal signals.
fn set_dispositions(signals: &[(i32, bool)]) -> std::io::Result<()> {
    for &(sig, ignored) in signals {
        let action = KernelSigaction { handler: if ignored { libc::SIG_IGN } else { libc::SIG_DFL }, flags: 0, restorer: 0, mask: 0 };
        let none: *mut KernelSigaction = std::ptr::null_mut();
        // SAFETY: `action` is a live kernel sigaction; no old action is asked for.
        let rc = unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, &action as *const KernelSigaction, none, 8usize) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
