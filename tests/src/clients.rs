//! What the docker and podman harnesses share: which runtime a client drives, comparing its
//! exit with runc's, and removing the cgroups and mounts a client left.

use crate::process::Output;
use crate::{env, leftovers};
use std::fs;
use std::path::PathBuf;

const CGROUP_FS: &str = "/sys/fs/cgroup";

/// Which OCI runtime a client drives: runc (the control) or rustpod (under test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OciRuntime {
    Runc,
    Rustpod,
}

impl OciRuntime {
    pub const BOTH: [OciRuntime; 2] = [OciRuntime::Runc, OciRuntime::Rustpod];

    /// The runtime's binary: `$RUNC_BIN` or `$RUSTPOD_BIN`.
    pub fn bin(self) -> PathBuf {
        match self {
            OciRuntime::Runc => env::runc_bin(),
            OciRuntime::Rustpod => env::rustpod_bin(),
        }
    }
}

/// `[runc, rustpod]`, the same command through `client` on each: runc must exit `expected`
/// (the control), rustpod as runc did. Clients pick 126/127 from the words of the runtime's error.
#[track_caller]
pub fn assert_exits_like_runc(client: &str, [runc, rustpod]: [Output; 2], expected: i32) {
    assert_eq!(runc.code(), expected, "runc, the control: {}", runc.describe());
    assert_eq!(rustpod.code(), runc.code(), "{client} with rustpod must exit as with runc: {}", rustpod.describe());
}

/// Detaches every mount in or at `dir`, innermost first.
pub fn unmount_under(dir: &str) {
    for mount_point in leftovers::mount_points_under(dir).iter().rev() {
        let _ = nix::mount::umount2(mount_point.as_str(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// `/sys/fs/cgroup/<parent>` (pure v2) or `/sys/fs/cgroup/<hierarchy>/<parent>` (v1 and
/// hybrid) and its children, children first, where they exist.
pub fn cgroup_tree(parent: &str) -> Vec<PathBuf> {
    let relative = parent.trim_start_matches('/');
    let hierarchies = fs::read_dir(CGROUP_FS).into_iter().flatten().flatten().map(|h| h.path());
    let mut found = vec![];
    for top in std::iter::once(PathBuf::from(CGROUP_FS)).chain(hierarchies).map(|h| h.join(relative)) {
        let children = fs::read_dir(&top).into_iter().flatten().flatten();
        found.extend(children.map(|c| c.path()).filter(|c| c.is_dir()));
        if top.is_dir() {
            found.push(top);
        }
    }
    found
}

/// Removes the cgroups a client made under `parent`, children first. A process killed just
/// before (podman's conmon in its `conmon` cgroup) leaves it a moment later, and rmdir says
/// EBUSY until then: so again until none is left, bounded, saying what stays.
pub fn remove_cgroup_tree(parent: &str) {
    let gone = crate::wait::eventually(|| {
        for dir in cgroup_tree(parent) {
            let _ = fs::remove_dir(dir);
        }
        cgroup_tree(parent).is_empty()
    });
    if !gone {
        eprintln!("cgroups left under {parent}: {:?}", cgroup_tree(parent));
    }
}
