//! `exec`: run another process in a running container. The argv form is
//! turned into a full process spec from the container's own, as runc does;
//! `tenant` starts it as confined as the container's init.

use std::fs;
use std::path::{Path, PathBuf};

use libcontainer::container::{Container, ContainerStatus};
use nix::unistd::Pid;
use oci_spec::runtime::{Capability, Process, Spec};

use crate::engine::container_dir::ContainerDir;
use crate::engine::engine_bundle;
use crate::engine::process::console::ConsoleSocket;
use crate::engine::process::process_io::ProcessIo;
use crate::engine::process::process_io::Stdio;
use crate::engine::process::wait;
use crate::engine::process::{home_env, tenant};
use crate::error::{Error, Result};
use crate::sys::pidfd::PidFd;

/// What runs: a process spec (a value, or a process.json), or argv plus
/// overrides of the container's process.
#[derive(Debug, Default, Clone)]
pub struct ProcessArgs {
    pub process: Option<Process>,
    pub process_file: Option<PathBuf>,
    pub args: Vec<String>,
    pub tty: bool,
    pub cwd: Option<PathBuf>,
    pub env: Vec<String>,
    pub user: Option<(u32, Option<u32>)>,
    pub additional_gids: Vec<u32>,
    pub caps: Vec<String>,
    pub no_new_privs: bool,
    pub process_label: Option<String>,
    pub apparmor: Option<String>,
}

#[derive(Debug, Default)]
pub struct ExecOptions {
    pub process: ProcessArgs,
    pub detach: bool,
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub preserve_fds: i32,
    pub stdio: Stdio,
    pub ignore_paused: bool,
    /// An existing sub-cgroup of the container's to run in (`--cgroup`).
    pub sub_cgroup: Option<String>,
}

/// Starts the process and returns its pid (our child).
pub(crate) fn spawn(dir: &ContainerDir, container: &Container, opts: ExecOptions) -> Result<Pid> {
    let init_pid = runnable_init(container, &dir.id, opts.ignore_paused)?;
    let meta = dir.metadata();
    let init = hold_init(&dir.id, init_pid, meta.as_ref().and_then(|m| m.init_start))?;
    // Fault point: the init is held and checked, no namespace opened yet.
    crate::sys::debug_pause::at("exec-init-held");
    let spec = engine_bundle::parse_config(&dir.config_path())?;
    let added_home = meta.is_some_and(|m| m.added_home);
    let mut process = build_process(&spec, &opts.process, added_home)?;
    let init_root = format!("/proc/{init_pid}/root");
    home_env::set_if_missing(&mut process, Path::new(&init_root));
    // The engine's error would not name the cwd.
    crate::engine::process::cwd::check_in_container(Path::new(&init_root), process.cwd())?;
    crate::engine::process::init::check_terminal(process.terminal().unwrap_or(false), opts.console_socket.is_some())?;
    crate::engine::process::caps_check::check(Some(&process))?;
    crate::engine::process::caps_check::check_rlimits(Some(&process))?;
    let spec = tenant::tenant_spec(&spec, process, init_pid)?;
    let io = ProcessIo { console_socket: opts.console_socket, preserve_fds: opts.preserve_fds, stdio: opts.stdio };
    let pid = tenant::spawn(dir, container, spec, io, opts.sub_cgroup.as_deref(), &init)?;
    if let Some(Err(err)) = opts.pid_file.as_deref().map(|path| crate::sys::pid_file::write(path, pid)) {
        // As runc: no pid file, no process.
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        return Err(err);
    }
    Ok(pid)
}

/// `exec` as the CLI runs it: in the foreground, the exit code of the
/// process (with a pty proxied to our stdio for `--tty`); detached, 0.
pub(crate) fn exec(dir: &ContainerDir, container: &Container, mut opts: ExecOptions) -> Result<i32> {
    let detach = opts.detach;
    let console = if opts.process.tty && !detach && opts.console_socket.is_none() {
        let socket = ConsoleSocket::bind(&dir.path())?;
        opts.console_socket = Some(socket.path().to_path_buf());
        Some(socket)
    } else {
        None
    };
    let pid = spawn(dir, container, opts)?;
    if detach {
        return Ok(0);
    }
    match console {
        Some(console) => crate::engine::process::console::proxy_until_exit(console.receive_master()?, pid),
        None => wait::forward_signals_until_exit(pid),
    }
}

/// The init's pid, if the container can take a new process: runc execs
/// into created and running containers, and into paused ones only when
/// told to.
fn runnable_init(container: &Container, id: &str, ignore_paused: bool) -> Result<i32> {
    let refuse = |reason: &str| Err(Error::Invalid(format!("exec in {id}: {reason}")));
    match container.status() {
        ContainerStatus::Created | ContainerStatus::Running => {}
        ContainerStatus::Paused if ignore_paused => {}
        ContainerStatus::Paused => return refuse("cannot exec in a paused container (use --ignore-paused to override)"),
        _ => return refuse("cannot exec in a stopped container"),
    }
    // Loading the state marked a gone init stopped.
    match container.pid() {
        Some(pid) => Ok(pid.as_raw()),
        None => refuse("cannot exec in a stopped container"),
    }
}

/// The init, by a pidfd opened before its start time is checked once more:
/// the state was loaded a moment ago, and since then the init may have
/// been reaped and its pid given to another process. From here on the
/// pidfd tells (`exec_launch::init_still_holds_its_pid`).
/// `started` is the start time create recorded (None in older states).
fn hold_init(id: &str, pid: i32, started: Option<u64>) -> Result<PidFd> {
    let stopped = || Error::Invalid(format!("exec in {id}: cannot exec in a stopped container"));
    // ESRCH: it is gone; anything else (ENOSYS before Linux 5.3) is said as it is.
    let init = PidFd::open(pid).map_err(|errno| match errno {
        nix::errno::Errno::ESRCH => stopped(),
        errno => Error::sys("pidfd_open of the container's init", errno),
    })?;
    if started.is_some() && crate::sys::proc_stat::read(pid).map(|s| s.start_time) != started {
        return Err(stopped());
    }
    Ok(init)
}

/// The process spec for an exec: the given one, or the container's own
/// process (from the `spec` it runs) with argv and the flags applied.
/// `added_home`: that spec's HOME was ours, not the user's, so the exec
/// looks up its own user's.
pub fn build_process(spec: &Spec, args: &ProcessArgs, added_home: bool) -> Result<Process> {
    if let Some(process) = &args.process {
        crate::engine::validate::exec_process(process)?;
        return Ok(process.clone());
    }
    if let Some(file) = &args.process_file {
        return load_process_file(file);
    }
    if args.args.is_empty() {
        return Err(Error::Invalid("exec needs a command to run".into()));
    }
    let mut process = spec.process().clone().unwrap_or_default();
    process.set_args(Some(args.args.clone()));
    process.set_terminal(Some(args.tty));
    let mut base_env = process.env().clone().unwrap_or_default();
    if added_home {
        base_env = home_env::without_home(base_env);
    }
    process.set_env(Some(merge_env(base_env, &args.env)));
    if let Some(cwd) = &args.cwd {
        if !cwd.is_absolute() {
            return Err(Error::Invalid(format!("--cwd {}: must be absolute", cwd.display())));
        }
        process.set_cwd(cwd.clone());
    }
    apply_user(&mut process, args);
    add_capabilities(&mut process, &args.caps)?;
    if args.no_new_privs {
        process.set_no_new_privileges(Some(true));
    }
    if args.apparmor.is_some() {
        process.set_apparmor_profile(args.apparmor.clone());
    }
    if args.process_label.is_some() {
        process.set_selinux_label(args.process_label.clone());
    }
    crate::engine::validate::exec_process(&process)?;
    Ok(process)
}

fn load_process_file(file: &Path) -> Result<Process> {
    let data = fs::read(file).map_err(|e| Error::io("read", file, e))?;
    let de = &mut serde_json::Deserializer::from_slice(&data);
    let process = serde_path_to_error::deserialize(de)
        .map_err(|err| Error::Config { path: file.to_path_buf(), reason: format!("invalid field {}: {}", err.path(), err.inner()) })?;
    crate::engine::validate::check_process(&process).map_err(|reason| Error::Config { path: file.to_path_buf(), reason })?;
    Ok(process)
}

/// The container's env with `KEY=VALUE` overrides replacing same keys.
fn merge_env(base: Vec<String>, overrides: &[String]) -> Vec<String> {
    let key = |entry: &str| entry.split('=').next().unwrap_or("").to_string();
    let mut env: Vec<String> = base.into_iter().filter(|e| !overrides.iter().any(|o| key(o) == key(e))).collect();
    env.extend(overrides.iter().cloned());
    env
}

/// `--user UID` keeps the container's gid, as runc's exec does (not gid 0).
fn apply_user(process: &mut Process, args: &ProcessArgs) {
    let mut user = process.user().clone();
    if let Some((uid, gid)) = args.user {
        user.set_uid(uid);
        user.set_gid(gid.unwrap_or(user.gid()));
    }
    if !args.additional_gids.is_empty() {
        user.set_additional_gids(Some(args.additional_gids.clone()));
    }
    process.set_user(user);
}

/// `--cap` adds to the bounding, effective and permitted sets, as runc does.
fn add_capabilities(process: &mut Process, caps: &[String]) -> Result<()> {
    if caps.is_empty() {
        return Ok(());
    }
    let parsed: Vec<Capability> = caps.iter().map(|c| parse_capability(c)).collect::<Result<_>>()?;
    let mut set = process.capabilities().clone().unwrap_or_default();
    let add = |current: Option<oci_spec::runtime::Capabilities>| {
        let mut current = current.unwrap_or_default();
        current.extend(parsed.iter().cloned());
        Some(current)
    };
    set.set_bounding(add(set.bounding().clone()));
    set.set_effective(add(set.effective().clone()));
    set.set_permitted(add(set.permitted().clone()));
    // Never inheritable (CVE-2022-29162, as runc >= 1.1.2): a cap there would
    // pass to programs the process execs. Ambient needs the cap inheritable,
    // so it only gets those the config already made inheritable.
    let inheritable = set.inheritable().clone().unwrap_or_default();
    if parsed.iter().any(|c| inheritable.contains(c)) {
        let mut ambient = set.ambient().clone().unwrap_or_default();
        ambient.extend(parsed.iter().filter(|c| inheritable.contains(c)).cloned());
        set.set_ambient(Some(ambient));
    }
    process.set_capabilities(Some(set));
    Ok(())
}

fn parse_capability(name: &str) -> Result<Capability> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") { upper } else { format!("CAP_{upper}") };
    serde_json::from_value(serde_json::Value::String(full)).map_err(|_| Error::Invalid(format!("unknown capability {name:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_replace_same_key() {
        let base = vec!["PATH=/bin".to_string(), "A=1".to_string()];
        let env = merge_env(base, &["A=2".to_string(), "B=3".to_string()]);
        assert_eq!(env, vec!["PATH=/bin", "A=2", "B=3"]);
    }

    fn container_spec() -> Spec {
        let json = serde_json::json!({
            "ociVersion": "1.0.2",
            "root": {"path": "/r"},
            "process": {
                "args": ["init"], "cwd": "/", "env": ["PATH=/bin", "HOME=/root", "A=1"],
                "user": {"uid": 1000, "gid": 1000, "additionalGids": [5]},
                "noNewPrivileges": true,
                "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "permitted": ["CAP_KILL"],
                                 "inheritable": [], "ambient": []},
                "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 10, "soft": 5}]
            }
        });
        serde_json::from_value(json).unwrap()
    }

    fn argv(args: &[&str]) -> ProcessArgs {
        ProcessArgs { args: args.iter().map(|a| a.to_string()).collect(), ..Default::default() }
    }

    #[test]
    fn argv_exec_inherits_the_containers_confinement() {
        let p = build_process(&container_spec(), &argv(&["ps"]), false).unwrap();
        assert_eq!(p.args().as_deref(), Some(&["ps".to_string()][..]));
        assert_eq!((p.user().uid(), p.user().gid()), (1000, 1000));
        assert_eq!(p.no_new_privileges(), Some(true));
        assert_eq!(p.rlimits().as_ref().map(|r| r.len()), Some(1));
        let caps = p.capabilities().clone().unwrap();
        assert!(caps.bounding().as_ref().unwrap().contains(&Capability::Kill));
    }

    #[test]
    fn a_user_flag_without_a_gid_keeps_the_containers_gid() {
        let mut args = argv(&["sh"]);
        args.user = Some((1234, None));
        let p = build_process(&container_spec(), &args, false).unwrap();
        assert_eq!((p.user().uid(), p.user().gid()), (1234, 1000));
    }

    #[test]
    fn flags_override_user_env_cwd_and_add_capabilities_never_inheritable() {
        let mut args = argv(&["sh"]);
        args.user = Some((0, Some(0)));
        args.env = vec!["A=2".into()];
        args.cwd = Some(PathBuf::from("/tmp"));
        args.caps = vec!["net_admin".into()];
        let p = build_process(&container_spec(), &args, false).unwrap();
        assert_eq!((p.user().uid(), p.user().gid()), (0, 0));
        assert!(p.env().as_ref().unwrap().contains(&"A=2".to_string()));
        assert_eq!(p.cwd(), Path::new("/tmp"));
        let caps = p.capabilities().clone().unwrap();
        for set in [caps.bounding(), caps.effective(), caps.permitted()] {
            assert!(set.as_ref().unwrap().contains(&Capability::NetAdmin));
        }
        assert!(caps.inheritable().as_ref().unwrap().is_empty());
    }

    #[test]
    fn a_home_we_added_is_dropped_for_the_exec_users_own() {
        let p = build_process(&container_spec(), &argv(&["sh"]), true).unwrap();
        assert!(!p.env().as_ref().unwrap().iter().any(|e| e.starts_with("HOME=")));
    }

    #[test]
    fn bad_exec_arguments_are_refused() {
        assert!(build_process(&container_spec(), &argv(&[]), false).is_err());
        let mut relative = argv(&["sh"]);
        relative.cwd = Some(PathBuf::from("tmp"));
        assert!(build_process(&container_spec(), &relative, false).is_err());
    }

    #[test]
    fn a_process_value_with_an_id_out_of_range_is_refused() {
        let mut process = container_spec().process().clone().unwrap();
        let mut user = process.user().clone();
        user.set_uid(u32::MAX);
        process.set_user(user);
        let args = ProcessArgs { process: Some(process), ..Default::default() };
        let err = build_process(&container_spec(), &args, false).unwrap_err().to_string();
        assert!(err.contains("cannot setuid to unmapped uid 4294967295"), "{err}");
    }

    #[test]
    fn a_process_value_is_taken_as_given() {
        let given = container_spec().process().clone().unwrap();
        let args = ProcessArgs { process: Some(given.clone()), args: vec!["ignored".into()], ..Default::default() };
        assert_eq!(build_process(&container_spec(), &args, true).unwrap(), given);
    }

    #[test]
    fn capability_names_accept_short_form() {
        assert_eq!(parse_capability("net_admin").unwrap(), Capability::NetAdmin);
        assert!(parse_capability("CAP_NOPE").is_err());
    }
}
