//! The container's rootfs prepared by our own steps rather than the
//! engine's (issue 22 item 2, `docs/rootfs-plan.md`). Not wired yet: the
//! plan of the spec's mounts, read without a syscall, each mount made from
//! it, /dev's nodes and links, pivot_root, the read-only and masked paths
//! through the `Syscall` seam, and sysctls through one checked procfs, with runc's
//! error words.

pub mod dev;
pub mod error;
pub mod finish;
pub mod mounts;
pub mod pivot;
pub mod plan;
pub mod sysctl;
