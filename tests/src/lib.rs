//! Harness for rustpod's integration tests: drives a runtime CLI (rustpod or runc)
//! as a subprocess against real busybox containers.

pub mod assertions;
pub mod bundle;
pub mod cgroup;
pub mod checker;
pub mod clients;
pub mod console;
pub mod containerd;
pub mod containerd2;
pub mod docker;
pub mod env;
pub mod events;
pub mod fixture;
pub mod host_mount;
pub mod leftovers;
pub mod mount_ns;
pub mod needs;
pub mod no_pivot;
pub mod podman;
pub mod process;
pub mod runtime;
pub mod scratch;
pub mod shim;
pub mod shim_task;
pub mod signals;
pub mod skip;
pub mod spec;
pub mod wait;

pub use bundle::Bundle;
pub use fixture::{Fixture, SLEEP, TRAP_TERM};
pub use process::Output;
pub use runtime::Runtime;
pub use serde_json::{json, Value};
