//! The container's rootfs made by our own steps rather than the engine's
//! (issue 22 item 2, `docs/rootfs-plan.md`): the plan of the spec's mounts,
//! read without a syscall, with a cgroup mount expanded from the host's
//! hierarchies; each mount made from it, /dev's nodes and links,
//! pivot_root (or `--no-pivot`'s move and chroot), the read-only and masked paths through the `Syscall` seam;
//! sysctls through one checked procfs; runc's error words; `prepare`, which
//! runs them in runc's order; and `own`, which decides when a new
//! container's init takes them (the direct route, no terminal, a spec they
//! cover).
pub mod cgroup;
pub mod dev;
pub mod error;
pub mod finish;
pub mod mounts;
pub mod move_root;
pub mod own;
pub mod pivot;
pub mod plan;
pub mod prepare;
pub mod sysctl;

/// For tests that mount: runs the test `name` of this binary again, alone,
/// as a child with `var` set to a new scratch directory, and returns
/// whether it passed and what it printed. The child test is expected to
/// return at once when `var` is unset, and to unshare its mount namespace
/// first; the scratch directory is removed afterwards.
#[cfg(test)]
pub(crate) fn in_child(name: &str, var: &str) -> (bool, String) {
    let scratch = std::env::temp_dir().join(format!("rustpod-{}-{}", var.to_lowercase(), std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--test-threads=1", "--nocapture"])
        .env(var, &scratch)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&scratch);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success() && text.contains("1 passed"), text)
}
