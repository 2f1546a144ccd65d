//! Idmapped bind mounts: the plan (which mounts, which mapping), the
//! detached mounts made on the host side of `create`, the createContainer
//! hook that moves them into place, and the user namespaces carrying a
//! mapping.

pub mod detached;
pub mod hook;
pub mod plan;
pub mod userns;
