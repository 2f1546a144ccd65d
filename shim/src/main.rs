//! `containerd-shim-rustpod-v1`: containerd's shim v2 for rustpod. The same
//! binary is also the single-threaded create/exec helper and the runtime's
//! hooks, told apart by argv[0].

mod binary_logger;
mod bootstrap;
mod cgroup_warmup;
mod checkpoint;
mod container;
mod containers;
mod error;
mod events;
mod helper;
mod io;
mod logger;
mod metrics;
mod mount;
mod mount_idmap;
mod oom;
mod process;
mod reaper;
mod runtime_options;
mod server;
mod service;
mod shim_cgroup;
mod task;

/// containerd's name for this runtime.
pub const RUNTIME_ID: &str = "io.containerd.rustpod.v1";

fn main() {
    // Before anything opens: what containerd (or whoever started us) left
    // open reaches no helper, hook or container; we pass nothing on by
    // inheritance (a helper gets its socket as stdin, the rest by SCM_RIGHTS).
    if let Err(err) = rustpod::inherited_fds::close_on_exec_all() {
        eprintln!("containerd-shim-rustpod-v1: {err}");
        std::process::exit(1);
    }
    rustpod::self_exec::run_if_invoked();
    helper::run_if_invoked();
    std::process::exit(service::main());
}
