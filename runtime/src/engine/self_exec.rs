//! Our binaries re-execute themselves (through /proc/self/exe) as OCI hooks;
//! this recognises such a run by argv[0] and does that job instead of main.

use std::os::unix::ffi::OsStrExt;

use crate::engine::idmap::hook as idmap_hook;
use crate::engine::mount::rootfs_hook;
use crate::engine::{hook_state, start_barrier};

/// Call first thing in `main` of every binary that creates containers.
/// Returns only if this process is not one of our hook runs.
pub fn run_if_invoked() {
    let mut args = std::env::args_os();
    let Some(arg0) = args.next() else { return };
    let rest: Vec<_> = args.collect();
    let code = match arg0.as_bytes() {
        a if a == rootfs_hook::HOOK_ARG0.as_bytes() => rootfs_hook::main(rest),
        a if a == idmap_hook::HOOK_ARG0.as_bytes() => idmap_hook::main(rest),
        a if a == hook_state::WRAPPER_ARG0.as_bytes() => hook_state::main(rest, false),
        a if a == hook_state::START_WRAPPER_ARG0.as_bytes() => hook_state::main(rest, true),
        a if a == start_barrier::BARRIER_ARG0.as_bytes() => start_barrier::main(),
        _ => return,
    };
    std::process::exit(code);
}
