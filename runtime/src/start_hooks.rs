//! startContainer hooks, run by `start` before it lets the init exec the
//! user's program: inside the container's namespaces (its mount namespace,
//! so the hook path resolves in the rootfs), with the OCI state the spec
//! asks for: the user's bundle, status `created`, the init's pid as the
//! container sees it.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use oci_spec::runtime::Hook;

use crate::error::{Error, Result};

/// Namespaces a hook joins, user first (it decides what the others allow);
/// pid and time apply to children, so the hook runs in a second fork.
const NAMESPACES: &[&str] = &["user", "cgroup", "ipc", "uts", "net", "pid", "time", "mnt"];

/// Runs `hooks` in order in the namespaces of `init_pid`, each with `state`
/// on stdin. The first failure is the error.
pub fn run(hooks: &[Hook], state: &serde_json::Value, init_pid: i32) -> Result<()> {
    let namespaces = open_namespaces(init_pid)?;
    let state = serde_json::to_vec(state).map_err(|e| Error::Invalid(e.to_string()))?;
    for hook in hooks {
        run_one(hook, &state, &namespaces)?;
    }
    Ok(())
}

/// The init's pid in its own (innermost) PID namespace, from NSpid.
pub fn pid_in_container(init_pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{init_pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("NSpid:"))?.to_string();
            line.split_whitespace().last()?.parse().ok()
        })
        .unwrap_or(init_pid)
}

/// fds of the init's namespaces that differ from ours.
fn open_namespaces(pid: i32) -> Result<Vec<OwnedFd>> {
    let mut fds = Vec::new();
    for ns in NAMESPACES {
        let theirs = format!("/proc/{pid}/ns/{ns}");
        let ours = format!("/proc/self/ns/{ns}");
        let same = match (std::fs::metadata(&theirs), std::fs::metadata(&ours)) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            (Err(_), _) => continue,
            _ => false,
        };
        if !same {
            let file = std::fs::File::open(&theirs).map_err(|e| Error::io("open", &theirs, e))?;
            fds.push(OwnedFd::from(file));
        }
    }
    Ok(fds)
}

fn run_one(hook: &Hook, state: &[u8], namespaces: &[OwnedFd]) -> Result<()> {
    let path = hook.path();
    let failed = |what: String| Error::Invalid(format!("startContainer hook {}: {what}", path.display()));
    let args = hook.args().clone().unwrap_or_else(|| vec![path.display().to_string()]);
    let env: Vec<String> = hook.env().clone().unwrap_or_default();
    let exec = ExecArgs::new(&path.display().to_string(), &args, &env).map_err(|e| failed(e.to_string()))?;
    let (stdin_read, stdin_write) = nix::unistd::pipe().map_err(|e| failed(format!("pipe: {e}")))?;
    let raw_ns: Vec<i32> = namespaces.iter().map(|fd| fd.as_raw_fd()).collect();
    // SAFETY: between fork and exec/_exit the child only makes
    // async-signal-safe calls on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(failed(format!("fork: {}", std::io::Error::last_os_error())));
    }
    if pid == 0 {
        unsafe { enter_and_exec(&raw_ns, stdin_read.as_raw_fd(), stdin_write.as_raw_fd(), &exec) }
    }
    drop(stdin_read);
    let mut writer = std::fs::File::from(stdin_write);
    // A hook that does not read its state is fine.
    let _ = writer.write_all(state);
    drop(writer);
    let timeout = hook.timeout().map(|t| Duration::from_secs(t.max(0) as u64));
    match wait(nix::unistd::Pid::from_raw(pid), timeout).map_err(failed)? {
        0 => Ok(()),
        code => Err(failed(format!("exited {code}"))),
    }
}

/// argv and envp as C strings, made before forking.
struct ExecArgs {
    path: std::ffi::CString,
    _strings: Vec<std::ffi::CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl ExecArgs {
    fn new(path: &str, args: &[String], env: &[String]) -> std::result::Result<Self, std::ffi::NulError> {
        let path = std::ffi::CString::new(path)?;
        let args: Vec<std::ffi::CString> = args.iter().map(|a| std::ffi::CString::new(a.as_str())).collect::<std::result::Result<_, _>>()?;
        let env: Vec<std::ffi::CString> = env.iter().map(|a| std::ffi::CString::new(a.as_str())).collect::<std::result::Result<_, _>>()?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        let mut strings = args;
        strings.extend(env);
        Ok(ExecArgs { path, _strings: strings, argv, envp })
    }
}

/// In the forked child: join the namespaces, fork once more so the hook is
/// inside the PID namespace too, and exec it; this child reports the
/// hook's exit as its own.
unsafe fn enter_and_exec(namespaces: &[i32], stdin_read: i32, stdin_write: i32, exec: &ExecArgs) -> ! {
    libc::close(stdin_write);
    for &fd in namespaces {
        if libc::setns(fd, 0) != 0 {
            libc::_exit(126);
        }
    }
    let hook = libc::fork();
    if hook < 0 {
        libc::_exit(126);
    }
    if hook == 0 {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::dup2(stdin_read, 0);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null >= 0 {
            libc::dup2(null, 1);
        }
        libc::execve(exec.path.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr());
        libc::_exit(127);
    }
    let mut status = 0;
    while libc::waitpid(hook, &mut status, 0) < 0 {}
    if libc::WIFEXITED(status) {
        libc::_exit(libc::WEXITSTATUS(status));
    }
    libc::_exit(128 + libc::WTERMSIG(status));
}

/// Waits for the forked child (bounded by `timeout`); its exit code.
fn wait(pid: nix::unistd::Pid, timeout: Option<Duration>) -> std::result::Result<i32, String> {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => return Ok(128 + sig as i32),
            Ok(_) => {}
            // A subreaper that reaps every child (the shim) took its status.
            Err(nix::errno::Errno::ECHILD) => return Ok(0),
            Err(e) => return Err(format!("wait: {e}")),
        }
        if deadline.is_some_and(|d| Instant::now() > d) {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = waitpid(pid, None);
            return Err(format!("timed out after {}s", timeout.unwrap_or_default().as_secs()));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
