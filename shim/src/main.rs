//! `containerd-shim-rustpod-v1`: containerd's shim v2 for rustpod. The same
//! binary is also the single-threaded create/exec helper and the runtime's
//! hooks, told apart by argv[0].

mod binary_logger;
mod bootstrap;
mod cgroup_warmup;
mod container;
mod error;
mod events;
mod helper;
mod io;
mod logger;
mod metrics;
mod mount;
mod oom;
mod process;
mod reaper;
mod runtime_options;
mod server;
mod service;
mod task;

/// containerd's name for this runtime.
pub const RUNTIME_ID: &str = "io.containerd.rustpod.v1";

fn main() {
    rustpod::self_exec::run_if_invoked();
    helper::run_if_invoked();
    std::process::exit(service::main());
}
