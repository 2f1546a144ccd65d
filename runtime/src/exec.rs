//! `exec`: run another process in a running container. The argv form is
//! turned into a full process spec from the container's own, as runc does.

use std::fs;
use std::path::{Path, PathBuf};

use nix::unistd::Pid;
use oci_spec::runtime::{Capability, Process};

use crate::console::ConsoleSocket;
use crate::container_dir::ContainerDir;
use crate::engine_builder::{self, ProcessIo};
use crate::create::Stdio;
use crate::engine_bundle;
use crate::error::{Error, Result};
use crate::home_env;
use crate::wait;

/// What runs: a process.json, or argv plus overrides of the container's process.
#[derive(Debug, Default, Clone)]
pub struct ProcessArgs {
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
    pub as_sibling: bool,
}

/// Starts the process and returns its pid (it is our child unless
/// `as_sibling`).
pub fn spawn(root: &Path, id: &str, opts: ExecOptions) -> Result<Pid> {
    let dir = ContainerDir::new(root, id)?;
    if !dir.path().exists() {
        return Err(Error::NotFound(id.to_string()));
    }
    let mut process = build_process(&dir, &opts.process)?;
    set_home(&dir, &mut process)?;
    let process_file = write_process_file(&dir, &process)?;
    let result = spawn_with(&dir, &process_file, opts);
    let _ = fs::remove_file(&process_file);
    result
}

/// `exec` as the CLI runs it: in the foreground, the exit code of the
/// process (with a pty proxied to our stdio for `--tty`); detached, 0.
pub fn exec(root: &Path, id: &str, mut opts: ExecOptions) -> Result<i32> {
    let detach = opts.detach;
    let console = if opts.process.tty && !detach && opts.console_socket.is_none() {
        let socket = ConsoleSocket::bind(&ContainerDir::new(root, id)?.path())?;
        opts.console_socket = Some(socket.path().to_path_buf());
        Some(socket)
    } else {
        None
    };
    let pid = spawn(root, id, opts)?;
    if detach {
        return Ok(0);
    }
    match console {
        Some(console) => crate::console::proxy_until_exit(console.receive_master()?, pid),
        None => wait::forward_signals_until_exit(pid),
    }
}

fn spawn_with(dir: &ContainerDir, process_file: &Path, opts: ExecOptions) -> Result<Pid> {
    let detach = opts.detach || opts.console_socket.is_some();
    let io = ProcessIo {
        console_socket: opts.console_socket,
        preserve_fds: opts.preserve_fds,
        stdio: opts.stdio,
    };
    let pid = engine_builder::builder(dir, io, "exec in")?
        .as_tenant()
        .with_process(Some(process_file))
        // The engine only uses this to insist on a console socket for a
        // terminal; we wait for foreground processes ourselves.
        .with_detach(detach)
        .as_sibling(opts.as_sibling)
        .with_process_label(opts.process.process_label.clone())
        .build()
        .map_err(|e| Error::engine("exec in", &dir.id, &e))?;
    if let Some(Err(err)) = opts.pid_file.as_deref().map(|path| crate::pid_file::write(path, pid)) {
        // As runc: no pid file, no process.
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        return Err(err);
    }
    Ok(pid)
}

/// The process spec for an exec: the given file, or the container's own
/// process with argv and the flags applied.
pub fn build_process(dir: &ContainerDir, args: &ProcessArgs) -> Result<Process> {
    if let Some(file) = &args.process_file {
        return load_process_file(file);
    }
    if args.args.is_empty() {
        return Err(Error::Invalid("exec needs a command to run".into()));
    }
    let config = dir.engine_bundle().join("config.json");
    let spec = engine_bundle::parse_config(&config)?;
    let mut process = spec.process().clone().unwrap_or_default();
    process.set_args(Some(args.args.clone()));
    process.set_terminal(Some(args.tty));
    let mut base_env = process.env().clone().unwrap_or_default();
    if dir.metadata().is_some_and(|meta| meta.added_home) {
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
    crate::validate::exec_process(&process)?;
    Ok(process)
}

/// HOME from the container's passwd (as the running init's root sees it),
/// when the process does not set one; and the cwd, which the engine's
/// error would not name. Without an init the engine refuses the exec
/// itself, with its own error.
fn set_home(dir: &ContainerDir, process: &mut Process) -> Result<()> {
    if let Some(pid) = dir.load()?.pid() {
        home_env::set_if_missing(process, Path::new(&format!("/proc/{pid}/root")));
        crate::cwd::check_in_container(Path::new(&format!("/proc/{pid}/root")), process.cwd())?;
    }
    Ok(())
}

fn load_process_file(file: &Path) -> Result<Process> {
    let data = fs::read(file).map_err(|e| Error::io("read", file, e))?;
    let de = &mut serde_json::Deserializer::from_slice(&data);
    let process = serde_path_to_error::deserialize(de).map_err(|err| Error::Config {
        path: file.to_path_buf(),
        reason: format!("invalid field {}: {}", err.path(), err.inner()),
    })?;
    crate::validate::check_process(&process).map_err(|reason| Error::Config { path: file.to_path_buf(), reason })?;
    Ok(process)
}

/// The container's env with `KEY=VALUE` overrides replacing same keys.
fn merge_env(base: Vec<String>, overrides: &[String]) -> Vec<String> {
    let key = |entry: &str| entry.split('=').next().unwrap_or("").to_string();
    let mut env: Vec<String> = base
        .into_iter()
        .filter(|e| !overrides.iter().any(|o| key(o) == key(e)))
        .collect();
    env.extend(overrides.iter().cloned());
    env
}

fn apply_user(process: &mut Process, args: &ProcessArgs) {
    let mut user = process.user().clone();
    if let Some((uid, gid)) = args.user {
        user.set_uid(uid);
        user.set_gid(gid.unwrap_or(0));
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
    let parsed: Vec<Capability> = caps
        .iter()
        .map(|c| parse_capability(c))
        .collect::<Result<_>>()?;
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
    serde_json::from_value(serde_json::Value::String(full))
        .map_err(|_| Error::Invalid(format!("unknown capability {name:?}")))
}

fn write_process_file(dir: &ContainerDir, process: &Process) -> Result<PathBuf> {
    let path = dir
        .path()
        .join(format!("exec-{}-{}.json", std::process::id(), nanos()));
    let data = serde_json::to_vec(process).map_err(|e| Error::Invalid(e.to_string()))?;
    crate::atomic_file::write(&path, &data, crate::container_dir::FILE_MODE)?;
    Ok(path)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
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

    #[test]
    fn capability_names_accept_short_form() {
        assert_eq!(parse_capability("net_admin").unwrap(), Capability::NetAdmin);
        assert!(parse_capability("CAP_NOPE").is_err());
    }
}
