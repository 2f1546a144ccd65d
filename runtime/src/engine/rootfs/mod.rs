//! The container's rootfs prepared by our own steps rather than the
//! engine's (issue 22 item 2, `docs/rootfs-plan.md`): the plan of the
//! spec's mounts, read without a syscall, with a cgroup mount expanded from
//! the host's hierarchies; each mount made from it, /dev's
//! nodes and links, pivot_root, the read-only and masked paths through the
//! `Syscall` seam; sysctls through one checked procfs; runc's error words;
//! and `prepare`, which runs them in runc's order. Not called yet: the init
//! driver of our own will (step 4).

pub mod cgroup;
pub mod dev;
pub mod error;
pub mod finish;
pub mod mounts;
pub mod pivot;
pub mod plan;
pub mod prepare;
pub mod sysctl;
