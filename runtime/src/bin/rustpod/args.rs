//! The command line, spelled as runc spells it, so that containerd's runc
//! shim, conmon and test harnesses can drive rustpod unchanged.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::logging::LogFormat;

#[derive(Debug, Parser)]
#[command(name = "rustpod", version, about = "An OCI container runtime, a drop-in for runc")]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOpts,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalOpts {
    /// Directory for container state
    #[arg(long, global = true, default_value = rustpod::DEFAULT_ROOT)]
    pub root: PathBuf,
    /// Write logs to this file instead of stderr
    #[arg(long, global = true)]
    pub log: Option<PathBuf>,
    /// Log format
    #[arg(long = "log-format", global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log at debug level
    #[arg(long, global = true)]
    pub debug: bool,
    /// Manage cgroups through systemd (cgroupsPath is slice:prefix:name)
    #[arg(long = "systemd-cgroup", global = true)]
    pub systemd_cgroup: bool,
    /// The criu binary checkpoint and restore run
    #[arg(long, default_value = "criu")]
    pub criu: String,
    /// Accepted for runc compatibility (true|false|auto)
    #[arg(long = "rootless", id = "global_rootless", hide = true)]
    pub rootless: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a container from a bundle
    Create(CreateArgs),
    /// Start a created container
    Start { id: String },
    /// Create and start a container
    Run(RunArgs),
    /// Print a container's state as JSON
    State { id: String },
    /// Send a signal to a container's init (or all processes)
    Kill {
        #[arg(short, long)]
        all: bool,
        id: String,
        #[arg(default_value = "SIGTERM")]
        signal: String,
    },
    /// Delete containers and everything they own
    Delete {
        #[arg(short, long)]
        force: bool,
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Run a process in a running container
    Exec(ExecArgs),
    /// List the processes of a container
    Ps {
        #[arg(short, long, value_enum, default_value = "table")]
        format: Format,
        id: String,
        /// Options passed to ps(1)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        ps_args: Vec<String>,
    },
    /// List containers
    List {
        #[arg(short, long, value_enum, default_value = "table")]
        format: Format,
        #[arg(short, long)]
        quiet: bool,
    },
    /// Freeze all processes of a container
    Pause { id: String },
    /// Thaw a paused container
    Resume { id: String },
    /// Change a container's resource limits
    Update(UpdateArgs),
    /// Print container statistics
    Events {
        /// Print stats once and exit
        #[arg(long)]
        stats: bool,
        /// Seconds between stats
        #[arg(long, default_value = "5s")]
        interval: String,
        id: String,
    },
    /// Print the OCI features this runtime supports
    Features,
    /// Write a starter config.json
    Spec {
        #[arg(short, long, default_value = ".")]
        bundle: PathBuf,
        #[arg(long)]
        rootless: bool,
    },
    /// Checkpoint a running container with criu
    Checkpoint(CheckpointArgs),
    /// Restore a container from a criu checkpoint
    Restore(RestoreArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub init: InitArgs,
    /// Accepted for runc compatibility: no session keyring is ever made
    #[arg(long = "no-new-keyring")]
    pub no_new_keyring: bool,
    /// Pass this many extra fds (from 3) to the container
    #[arg(long = "preserve-fds", default_value_t = 0)]
    pub preserve_fds: i32,
    pub id: String,
}

/// What `create` and `restore` take about the container's init.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Path to the bundle
    #[arg(short, long, default_value = ".")]
    pub bundle: PathBuf,
    /// File to write the init's pid to
    #[arg(long = "pid-file")]
    pub pid_file: Option<PathBuf>,
    /// Unix socket to send the pty master to
    #[arg(long = "console-socket")]
    pub console_socket: Option<PathBuf>,
    /// Use chroot instead of pivot_root
    #[arg(long = "no-pivot")]
    pub no_pivot: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub create: CreateArgs,
    /// Do not wait for the container
    #[arg(short, long)]
    pub detach: bool,
    /// Do not delete the container after it exits
    #[arg(long = "keep")]
    pub keep: bool,
    /// Accepted for runc compatibility: rustpod never makes itself a
    /// subreaper (the init is its child; orphans go to the init)
    #[arg(long = "no-subreaper")]
    pub no_subreaper: bool,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// process.json to run instead of a command
    #[arg(short, long)]
    pub process: Option<PathBuf>,
    #[arg(short, long)]
    pub tty: bool,
    #[arg(short, long)]
    pub detach: bool,
    #[arg(long = "pid-file")]
    pub pid_file: Option<PathBuf>,
    #[arg(long = "console-socket")]
    pub console_socket: Option<PathBuf>,
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// KEY=VALUE, repeatable
    #[arg(short, long)]
    pub env: Vec<String>,
    /// uid[:gid]
    #[arg(short, long)]
    pub user: Option<String>,
    /// Repeatable
    #[arg(short = 'g', long = "additional-gids")]
    pub additional_gids: Vec<u32>,
    /// Capability to add, repeatable
    #[arg(short, long)]
    pub cap: Vec<String>,
    #[arg(long = "no-new-privs")]
    pub no_new_privs: bool,
    #[arg(long = "preserve-fds", default_value_t = 0)]
    pub preserve_fds: i32,
    #[arg(long = "process-label")]
    pub process_label: Option<String>,
    #[arg(long)]
    pub apparmor: Option<String>,
    /// Exec in a paused container too
    #[arg(long = "ignore-paused")]
    pub ignore_paused: bool,
    /// Run in an existing sub-cgroup: [<controller>:]<cgroup>, repeatable
    #[arg(long)]
    pub cgroup: Vec<String>,
    pub id: String,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// JSON resources file, or - for stdin
    #[arg(short, long)]
    pub resources: Option<PathBuf>,
    #[arg(long)]
    pub memory: Option<String>,
    #[arg(long = "memory-reservation")]
    pub memory_reservation: Option<String>,
    #[arg(long = "memory-swap")]
    pub memory_swap: Option<String>,
    #[arg(long = "cpu-shares", alias = "cpu-share")]
    pub cpu_shares: Option<u64>,
    #[arg(long = "cpu-quota")]
    pub cpu_quota: Option<i64>,
    #[arg(long = "cpu-period")]
    pub cpu_period: Option<u64>,
    #[arg(long = "cpuset-cpus")]
    pub cpuset_cpus: Option<String>,
    #[arg(long = "cpuset-mems")]
    pub cpuset_mems: Option<String>,
    #[arg(long = "pids-limit")]
    pub pids_limit: Option<i64>,
    /// CPU burst (µs) over the quota
    #[arg(long = "cpu-burst")]
    pub cpu_burst: Option<u64>,
    /// 1: the cgroup gets SCHED_IDLE-like treatment
    #[arg(long = "cpu-idle")]
    pub cpu_idle: Option<i64>,
    #[arg(long = "cpu-rt-period")]
    pub cpu_rt_period: Option<u64>,
    #[arg(long = "cpu-rt-runtime")]
    pub cpu_rt_runtime: Option<i64>,
    #[arg(long = "blkio-weight")]
    pub blkio_weight: Option<u16>,
    /// Refused: rustpod makes no resctrl group
    #[arg(long = "l3-cache-schema")]
    pub l3_cache_schema: Option<String>,
    /// Refused: rustpod makes no resctrl group
    #[arg(long = "mem-bw-schema")]
    pub mem_bw_schema: Option<String>,
    pub id: String,
}

/// The criu options `checkpoint` and `restore` share, as runc names them.
#[derive(Debug, Args)]
pub struct CriuArgs {
    /// Where criu writes (checkpoint) or reads (restore) the images
    #[arg(long = "image-path")]
    pub image_path: Option<PathBuf>,
    /// Where criu writes its log and work files (default: the image path)
    #[arg(long = "work-path")]
    pub work_path: Option<PathBuf>,
    /// Allow open TCP connections
    #[arg(long = "tcp-established")]
    pub tcp_established: bool,
    /// Allow external unix sockets
    #[arg(long = "ext-unix-sk")]
    pub ext_unix_sk: bool,
    /// Allow shell jobs
    #[arg(long = "shell-job")]
    pub shell_job: bool,
    /// Handle file locks
    #[arg(long = "file-locks")]
    pub file_locks: bool,
    /// cgroups mode: soft, full, strict, ignore (default: criu's soft)
    #[arg(long = "manage-cgroups-mode")]
    pub manage_cgroups_mode: Option<String>,
    /// Not supported (runc's empty namespaces)
    #[arg(long = "empty-ns", hide = true)]
    pub empty_ns: Vec<String>,
    /// Not supported (criu's auto-dedup)
    #[arg(long = "auto-dedup", hide = true)]
    pub auto_dedup: bool,
    /// Serve (checkpoint) or fetch on demand (restore) the memory pages
    /// through criu's userfaultfd lazy migration
    #[arg(long = "lazy-pages")]
    pub lazy_pages: bool,
}

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    #[command(flatten)]
    pub criu: CriuArgs,
    /// Leave the container running after the checkpoint
    #[arg(long = "leave-running")]
    pub leave_running: bool,
    /// Dump memory only and leave the container running (an iterative
    /// migration's first step)
    #[arg(long = "pre-dump")]
    pub pre_dump: bool,
    /// The pre-dump images this dump builds on, relative to --image-path
    #[arg(long = "parent-path")]
    pub parent_path: Option<String>,
    /// ADDRESS:PORT of a criu page server the memory pages go to
    #[arg(long = "page-server")]
    pub page_server: Option<String>,
    /// With --lazy-pages: a byte 0 is written to this fd once the pages are ready
    #[arg(long = "status-fd")]
    pub status_fd: Option<i32>,
    pub id: String,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub criu: CriuArgs,
    /// The bundle and the init's pid file and console socket (criu sets
    /// up the restored root, so `--no-pivot` changes nothing)
    #[command(flatten)]
    pub init: InitArgs,
    /// Return once restored instead of waiting for the container to exit
    #[arg(short, long)]
    pub detach: bool,
    /// Accepted for runc compatibility: no subreaper is set
    #[arg(long = "no-subreaper", hide = true)]
    pub no_subreaper: bool,
    pub id: String,
}

/// go-runc (containerd's runc shim) passes restore's `-no-subreaper` with
/// one dash, which runc's flag parser takes as `--no-subreaper`; clap does
/// not, so it is spelled out here.
pub fn with_go_runc_spellings(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    args.map(|a| if a == "-no-subreaper" { "--no-subreaper".into() } else { a }).collect()
}
