//! The `rustpod` CLI: parses runc's command line and calls the library,
//! one function per command. Errors print as one line on stderr in runc's
//! shape and, with `--log`, as an error entry in the log.

mod args;
mod logging;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

use args::{CheckpointArgs, Cli, Command, CreateArgs, CriuArgs, ExecArgs, Format, RestoreArgs, UpdateArgs};
use rustpod::CreateOptions;
use rustpod::Runtime;
use rustpod::{ExecOptions, ProcessArgs};

fn main() {
    // Before anything opens: what our caller left open reaches no hook.
    if let Err(err) = rustpod::inherited_fds::close_on_exec_all() {
        eprintln!("rustpod: {err}");
        std::process::exit(1);
    }
    rustpod::sigpipe::handle_for_children();
    rustpod::spawn_signals::reset_inherited_ignores();
    rustpod::self_exec::run_if_invoked();
    let cli = Cli::parse_from(args::with_go_runc_spellings(std::env::args_os()));
    if let Err(err) = pass_on_fds(&cli.command) {
        eprintln!("rustpod: {err}");
        std::process::exit(1);
    }
    if enters_container(&cli.command) && !rustpod::sealed_exe::is_sealed() {
        let err = rustpod::sealed_exe::reexec();
        eprintln!("rustpod: run from a sealed copy of the binary: {err}");
        std::process::exit(1);
    }
    if let Err(err) = logging::init(cli.global.log.as_deref(), cli.global.log_format, cli.global.debug) {
        eprintln!("rustpod: {err:#}");
        std::process::exit(1);
    }
    let (logs_to_file, log_format) = (cli.global.log.is_some(), cli.global.log_format);
    match dispatch(cli) {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            report_error(&format!("{err:#}").replace('\n', " "), logs_to_file, log_format);
            std::process::exit(1);
        }
    }
}

/// As runc: with `--log`, the error is an entry there (where containerd's
/// runc shim reads it) and a plain line on stderr; without, stderr gets the
/// entry itself, which harnesses search for "error".
fn report_error(line: &str, logs_to_file: bool, format: logging::LogFormat) {
    if logs_to_file {
        tracing::error!("{line}");
        eprintln!("{line}");
    } else {
        eprintln!("{}", logging::entry(format, "error", line.to_string(), Vec::new()));
    }
}

/// Commands that fork into a container's namespaces; they run from a
/// sealed copy of the binary (CVE-2019-5736, see `sealed_exe`).
fn enters_container(command: &Command) -> bool {
    matches!(command, Command::Create(_) | Command::Run(_) | Command::Exec(_))
}

/// The descriptors a create, run or exec hands to the container: its
/// `--preserve-fds` and systemd's `LISTEN_FDS`, as runc passes them.
fn pass_on_fds(command: &Command) -> rustpod::Result<()> {
    let preserved = match command {
        Command::Create(args) => args.preserve_fds,
        Command::Run(args) => args.create.preserve_fds,
        Command::Exec(args) => args.preserve_fds,
        _ => return Ok(()),
    };
    rustpod::inherited_fds::pass_on(preserved.saturating_add(rustpod::inherited_fds::listen_fds()))
}

fn dispatch(cli: Cli) -> Result<i32> {
    let runtime = Runtime::new(&cli.global.root).with_systemd_cgroup(cli.global.systemd_cgroup);
    match cli.command {
        Command::Create(args) => {
            let id = args.id.clone();
            runtime.create(&id, create_options(args))?;
            Ok(0)
        }
        Command::Start { id } => done(runtime.load(&id)?.start()),
        Command::Run(args) => {
            let id = args.create.id.clone();
            let mode = rustpod::RunMode { detach: args.detach, keep: args.keep };
            Ok(runtime.run(&id, create_options(args.create), mode)?)
        }
        Command::State { id } => print_json_pretty(&runtime.load(&id)?.state()),
        Command::Kill { all, id, signal } => {
            let signal = rustpod::signal::parse(&signal)?;
            done(runtime.load(&id)?.kill(signal, all))
        }
        Command::Delete { force, ids } => {
            for id in ids {
                runtime.delete(&id, force)?;
            }
            Ok(0)
        }
        Command::Exec(args) => exec(&runtime, args),
        Command::Ps { format, id, ps_args } => ps(&runtime, &id, format, &ps_args),
        Command::List { format, quiet } => list(&runtime, format, quiet),
        Command::Pause { id } => done(runtime.load(&id)?.pause()),
        Command::Resume { id } => done(runtime.load(&id)?.resume()),
        Command::Update(args) => update(&runtime, args),
        Command::Events { stats, interval, id } => {
            let interval = parse_interval(&interval)?;
            done(runtime.load(&id)?.events(interval, stats, &mut std::io::stdout()))
        }
        Command::Features => print_json_pretty(&rustpod::features::features()),
        Command::Spec { bundle, rootless } => {
            rustpod::spec::write(&bundle, rootless)?;
            Ok(0)
        }
        Command::Checkpoint(args) => {
            let opts = checkpoint_options(&cli.global.criu, &args)?;
            done(runtime.load(&args.id)?.checkpoint(&opts))
        }
        Command::Restore(args) => {
            let opts = restore_options(&cli.global.criu, &args)?;
            Ok(runtime.restore(&args.id, opts)?)
        }
    }
}

/// Exit code 0 for a command that only succeeds or fails.
fn done(result: rustpod::Result<()>) -> Result<i32> {
    result.map(|()| 0).map_err(Into::into)
}

fn create_options(args: CreateArgs) -> CreateOptions {
    CreateOptions {
        bundle: args.init.bundle,
        pid_file: args.init.pid_file,
        console_socket: args.init.console_socket,
        no_pivot: args.init.no_pivot,
        preserve_fds: args.preserve_fds,
        ..Default::default()
    }
}

/// runc's checkpoint flags; those we do not carry to criu are refused,
/// naming the flag.
fn checkpoint_options(criu_path: &str, args: &CheckpointArgs) -> Result<rustpod::CheckpointOptions> {
    let status_fd = match (args.status_fd, args.criu.lazy_pages) {
        (Some(fd), true) => Some(status_fd(fd)?),
        (Some(_), false) => bail!("checkpoint --status-fd: it says when --lazy-pages are ready; there is no --lazy-pages"),
        (None, _) => None,
    };
    Ok(rustpod::CheckpointOptions {
        criu: criu_options(criu_path, &args.criu, "checkpoint")?,
        leave_running: args.leave_running,
        pre_dump: args.pre_dump,
        parent_path: args.parent_path.as_ref().map(PathBuf::from),
        page_server: args.page_server.as_deref().map(page_server).transpose()?.flatten(),
        status_fd,
    })
}

/// runc's checks of `--status-fd`: open (fcntl F_GETFL) and writable; then
/// ours to write to.
fn status_fd(fd: i32) -> Result<std::fs::File> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = fcntl(fd, FcntlArg::F_GETFL).map_err(|e| anyhow::anyhow!("invalid --status-fd argument {fd}: fcntl(F_GETFL): {e}"))?;
    if OFlag::from_bits_truncate(flags) & OFlag::O_ACCMODE == OFlag::O_RDONLY {
        bail!("invalid --status-fd argument {fd}: not writable");
    }
    // SAFETY: the descriptor is open (F_GETFL said so) and nothing else in this process uses it.
    Ok(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// runc's `--page-server ADDRESS:PORT` (a bracketed IPv6 address too), in
/// its words when malformed; as runc, an empty address or port 0 is no page
/// server.
fn page_server(value: &str) -> Result<Option<rustpod::PageServer>> {
    let split = match value.strip_prefix('[') {
        Some(rest) => rest.split_once("]:"),
        None => value.rsplit_once(':').filter(|(host, _)| !host.contains(':')),
    };
    let Some((address, port)) = split.filter(|(a, p)| !a.is_empty() && !p.is_empty()) else {
        bail!("Use --page-server ADDRESS:PORT to specify page server");
    };
    let port: i32 = port.parse().map_err(|_| anyhow::anyhow!("Invalid port number"))?;
    Ok((port != 0).then(|| rustpod::PageServer { address: address.to_string(), port }))
}

fn restore_options(criu_path: &str, args: &RestoreArgs) -> Result<rustpod::RestoreOptions> {
    Ok(rustpod::RestoreOptions {
        criu: criu_options(criu_path, &args.criu, "restore")?,
        bundle: args.init.bundle.clone(),
        detach: args.detach,
        pid_file: args.init.pid_file.clone(),
        console_socket: args.init.console_socket.clone(),
        systemd_cgroup: false,
        stdio: Default::default(),
    })
}

/// The shared criu flags; the image path defaults to `./checkpoint`, as
/// runc's.
fn criu_options(criu_path: &str, args: &CriuArgs, op: &str) -> Result<rustpod::criu::CriuOptions> {
    let unsupported = [(!args.empty_ns.is_empty(), "--empty-ns"), (args.auto_dedup, "--auto-dedup")];
    if let Some((_, flag)) = unsupported.iter().find(|(set, _)| *set) {
        bail!("{op} {flag}: not supported by rustpod");
    }
    if let Some(mode) = &args.manage_cgroups_mode {
        rustpod::criu::cgroups_mode(mode)?;
    }
    let image_path = match &args.image_path {
        Some(path) => path.clone(),
        None => std::env::current_dir().context("current directory")?.join("checkpoint"),
    };
    Ok(rustpod::criu::CriuOptions {
        criu_path: criu_path.to_string(),
        image_path,
        work_path: args.work_path.clone(),
        tcp_established: args.tcp_established,
        ext_unix_sk: args.ext_unix_sk,
        shell_job: args.shell_job,
        file_locks: args.file_locks,
        manage_cgroups_mode: args.manage_cgroups_mode.clone(),
        lazy_pages: args.lazy_pages,
    })
}

fn exec(runtime: &Runtime, args: ExecArgs) -> Result<i32> {
    if args.process.is_none() && args.command.is_empty() {
        bail!("exec needs a command or --process");
    }
    let user = args.user.as_deref().map(parse_user).transpose()?;
    let opts = ExecOptions {
        process: ProcessArgs {
            process_file: args.process,
            args: args.command,
            tty: args.tty,
            cwd: args.cwd,
            env: args.env,
            user,
            additional_gids: args.additional_gids,
            caps: args.cap,
            no_new_privs: args.no_new_privs,
            process_label: args.process_label,
            apparmor: args.apparmor,
            process: None,
        },
        detach: args.detach,
        pid_file: args.pid_file,
        console_socket: args.console_socket,
        preserve_fds: args.preserve_fds,
        ignore_paused: args.ignore_paused,
        sub_cgroup: sub_cgroup(&args.cgroup)?,
        ..Default::default()
    };
    Ok(runtime.load(&args.id)?.exec_and_wait(opts)?)
}

/// `--cgroup [<controller>:]<path>`, repeatable: the engine joins one
/// cgroup path in every hierarchy, so every entry must name the same path.
fn sub_cgroup(entries: &[String]) -> Result<Option<String>> {
    let mut paths = entries.iter().map(|e| e.split_once(':').map_or(e.as_str(), |(_, path)| path));
    let Some(first) = paths.next() else { return Ok(None) };
    if paths.any(|p| p != first) {
        bail!("--cgroup: different sub-cgroups per controller are not supported");
    }
    Ok(Some(first.to_string()))
}

/// `uid[:gid]`, numeric as runc takes it.
fn parse_user(raw: &str) -> Result<(u32, Option<u32>)> {
    let (uid, gid) = match raw.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (raw, None),
    };
    let uid = uid.parse().with_context(|| format!("--user {raw:?}: uid must be a number"))?;
    let gid = gid.map(|g| g.parse().with_context(|| format!("--user {raw:?}: gid must be a number"))).transpose()?;
    Ok((uid, gid))
}

fn ps(runtime: &Runtime, id: &str, format: Format, ps_args: &[String]) -> Result<i32> {
    let pids = runtime.load(id)?.processes()?;
    if format == Format::Json {
        return print_json_pretty(&pids);
    }
    let ps_args: Vec<String> = if ps_args.is_empty() { vec!["-ef".into()] } else { ps_args.to_vec() };
    let output = std::process::Command::new("ps").args(&ps_args).output().context("run ps")?;
    if !output.status.success() {
        bail!("ps {}: {}", ps_args.join(" "), String::from_utf8_lossy(&output.stderr).trim());
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let pid_col = header.split_whitespace().position(|h| h == "PID").context("ps output has no PID column")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{header}")?;
    for line in lines {
        let pid = line.split_whitespace().nth(pid_col).and_then(|p| p.parse::<i32>().ok());
        if pid.is_some_and(|p| pids.contains(&p)) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(0)
}

fn list(runtime: &Runtime, format: Format, quiet: bool) -> Result<i32> {
    let states = runtime.list()?;
    let mut out = std::io::stdout().lock();
    if quiet {
        for s in &states {
            writeln!(out, "{}", s.id)?;
        }
        return Ok(0);
    }
    if format == Format::Json {
        // runc prints `null` for no containers; keep that for parsers.
        if states.is_empty() {
            writeln!(out, "null")?;
            return Ok(0);
        }
        // runc's list names the owner; its state leaves root's empty.
        let states: Vec<_> = states.into_iter().map(with_owner_name).collect();
        writeln!(out, "{}", serde_json::to_string(&states)?)?;
        return Ok(0);
    }
    let rows: Vec<[String; 6]> = states
        .iter()
        .map(|s| {
            [
                s.id.clone(),
                s.pid.to_string(),
                s.status.clone(),
                s.bundle.display().to_string(),
                s.created.clone(),
                with_owner_name(s.clone()).owner,
            ]
        })
        .collect();
    let header = ["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"].map(String::from);
    write_table(&mut out, &header, &rows)?;
    Ok(0)
}

/// Columns padded like runc's tabwriter: minwidth 12, padding 3.
fn write_table(out: &mut dyn Write, header: &[String; 6], rows: &[[String; 6]]) -> Result<()> {
    let mut widths = [12usize; 6];
    for row in std::iter::once(header).chain(rows.iter()) {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.len() + 3);
        }
    }
    for row in std::iter::once(header).chain(rows.iter()) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}", width = widths[i]));
            }
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn with_owner_name(mut state: rustpod::State) -> rustpod::State {
    if state.owner.is_empty() {
        state.owner = "root".into();
    }
    state
}

fn update(runtime: &Runtime, args: UpdateArgs) -> Result<i32> {
    let base = match &args.resources {
        None => None,
        Some(path) => {
            let data = read_file_or_stdin(path)?;
            Some(rustpod::parse_resources(&data)?)
        }
    };
    let size = |v: &Option<String>| v.as_deref().map(rustpod::parse_size).transpose();
    let flags = rustpod::ResourceFlags {
        memory: size(&args.memory)?,
        memory_reservation: size(&args.memory_reservation)?,
        memory_swap: size(&args.memory_swap)?,
        cpu_shares: args.cpu_shares,
        cpu_quota: args.cpu_quota,
        cpu_period: args.cpu_period,
        cpuset_cpus: args.cpuset_cpus,
        cpuset_mems: args.cpuset_mems,
        pids_limit: args.pids_limit,
        cpu_burst: args.cpu_burst,
        cpu_idle: args.cpu_idle,
        cpu_rt_period: args.cpu_rt_period,
        cpu_rt_runtime: args.cpu_rt_runtime,
        blkio_weight: args.blkio_weight,
        intel_rdt: match (&args.l3_cache_schema, &args.mem_bw_schema) {
            (Some(_), _) => Some("--l3-cache-schema"),
            (_, Some(_)) => Some("--mem-bw-schema"),
            _ => None,
        },
    };
    runtime.load(&args.id)?.update(base, &flags)?;
    Ok(0)
}

fn read_file_or_stdin(path: &Path) -> Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut data = Vec::new();
        std::io::stdin().read_to_end(&mut data).context("read resources from stdin")?;
        return Ok(data);
    }
    std::fs::read(path).with_context(|| format!("read {}", path.display()))
}

/// Go-style durations as runc takes them (`5s`, `500ms`, `1m`), or seconds.
fn parse_interval(raw: &str) -> Result<Duration> {
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (num, unit) = raw.split_at(split);
    let n: u64 = num.parse().with_context(|| format!("invalid interval {raw:?}"))?;
    let d = match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n * 60),
        _ => bail!("invalid interval {raw:?}"),
    };
    if d.is_zero() {
        bail!("interval must be greater than 0");
    }
    Ok(d)
}

fn print_json_pretty<T: serde::Serialize>(value: &T) -> Result<i32> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::page_server;

    /// runc's net.SplitHostPort: HOST:PORT, [IPV6]:PORT; port 0 is no page server.
    #[test]
    fn page_server_takes_runcs_address_forms() {
        let v4 = page_server("10.0.0.1:27").unwrap().unwrap();
        assert_eq!((v4.address.as_str(), v4.port), ("10.0.0.1", 27));
        let v6 = page_server("[::1]:27").unwrap().unwrap();
        assert_eq!((v6.address.as_str(), v6.port), ("::1", 27));
        assert!(page_server("10.0.0.1:0").unwrap().is_none());
        for bad in ["::1:27", "host", "host:", ":27"] {
            let err = page_server(bad).unwrap_err().to_string();
            assert_eq!(err, "Use --page-server ADDRESS:PORT to specify page server", "{bad}");
        }
        assert_eq!(page_server("host:x").unwrap_err().to_string(), "Invalid port number");
    }
}
