//! The `api` layer: all that the CLI (`src/bin/rustpod`) and the shim use,
//! and the only part of the library they see (`lib.rs` re-exports this and
//! nothing else). A [`Runtime`] (a state root and its cgroup driver) creates
//! containers and hands out [`Container`] handles, which carry every
//! operation; beside them, the operations' option and result types, the
//! library's error type, and the few entry steps, parsers and readers the
//! binaries call. It may import every layer below (`ops`, `engine`, `sys`).
//! Nothing below imports it but the error type, which every layer returns
//! (as `crate::error`).

mod container;
pub mod error;
mod runtime;

pub use container::Container;
pub use error::{Error, Result};
pub use libcontainer::container::ContainerStatus;
pub use runtime::Runtime;

pub use crate::engine::cgroup::stats::ContainerStats;
pub use crate::engine::process::console::ConsoleSocket;
pub use crate::engine::process::process_io::Stdio;
pub use crate::engine::process::wait::wait_readable;
pub use crate::engine::state::State;
pub use crate::ops::checkpoint::{CheckpointOptions, PageServer};
pub use crate::ops::create::CreateOptions;
pub use crate::ops::exec::{ExecOptions, ProcessArgs};
pub use crate::ops::restore::RestoreOptions;
pub use crate::ops::run::RunMode;
pub use crate::ops::start::Starting;
pub use crate::ops::update::{parse_resources, parse_size, ResourceFlags};

/// Where container state lives unless `--root` says otherwise.
pub const DEFAULT_ROOT: &str = "/run/rustpod";

// What the binaries need beside the handles, under the names they know:
// their entry steps (fds, SIGPIPE, hook runs, the sealed binary), the CLI's
// parsers and documents, the pieces the shim reads cgroups and mounts with,
// and the config checks the fuzz targets drive.

/// Descriptors inherited from our caller (every binary's first step).
pub mod inherited_fds {
    pub use crate::sys::inherited_fds::{close_on_exec_all, listen_fds, pass_on};
}

/// SIGPIPE as containers must start with it.
pub mod sigpipe {
    pub use crate::sys::sigpipe::handle_for_children;
}

/// Signal dispositions a container must not inherit from our caller (all
/// ignores but 32's), and signal 32 as the shim's caller left it.
pub mod spawn_signals {
    pub use crate::sys::spawn_signals::{reset_inherited_ignores, restore_caller_sigcancel, sigcancel_disposition, CALLER_SIGCANCEL_ENV};
}

/// Our binaries' runs as OCI hooks, recognised by argv[0].
pub mod self_exec {
    pub use crate::engine::self_exec::run_if_invoked;
}

/// Re-executing from a sealed copy of our binary (CVE-2019-5736).
pub mod sealed_exe {
    pub use crate::engine::process::sealed_exe::{is_sealed, open, reexec};
}

/// Signal names as runc takes them.
pub mod signal {
    pub use crate::engine::signal::parse;
}

/// Idmapped copies of host mounts, made from a throw-away user namespace
/// (the shim maps containerd's rootfs layers with them).
pub mod idmap {
    pub use crate::engine::idmap::detached::{mount_idmapped, DetachedError};
    pub use crate::engine::idmap::userns::{with_mappings as userns_with_mappings, UsernsError};
}

/// criu's options, as `checkpoint` and `restore` take them.
pub mod criu {
    pub use crate::engine::criu::{cgroups_mode, CriuOptions};
}

/// The OCI features document.
pub mod features {
    pub use crate::ops::features::features;
}

/// `rustpod spec`: a starter config.json.
pub mod spec {
    pub use crate::ops::spec::write;
}

/// The state root and container ids.
pub mod container_dir {
    pub use crate::engine::container_dir::{ensure_root, set_mode, validate_id};
}

/// Where the host's cgroup filesystems are mounted.
pub mod cgroup_fs {
    pub use crate::engine::cgroup::fs::{hierarchies, join, path_in, relative, Hierarchy};
}

/// The mount(2) flags of a propagation option.
pub mod mount_propagation {
    pub use crate::engine::mount::propagation::propagation_flags;
}

/// Statistics of a cgroup v2 directory.
pub mod stats {
    pub use crate::engine::cgroup::stats::{read_v2, v2_dir_of};
}

/// config.json as `create` reads it, and the spec handed to the engine.
pub mod engine_bundle {
    pub use crate::engine::engine_bundle::{engine_spec, parse_spec_bytes, Bundle, EngineOptions, SpecError};
}

/// The checks of config.json (at `create`) and of an exec's process (at Exec)
/// made before the engine runs.
pub mod validate {
    pub use crate::engine::validate::{check, exec_process};
}
