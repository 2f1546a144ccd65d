// The --no-pivot checks the CLI, containerd and CRI tests share. The rootfs is moved onto `/`, so
// the host's mounts stay in the container's mount namespace under it; the kernel lets a user
// namespace mount a procfs only where a full one is already there. So: a procfs of the test's own
// on the host, an unprivileged process's attempt to mount a procfs from a user namespace of its
// own (`ATTACK`), and the container's namespace listed from the host (`mount_ns`).

use crate::host_mount::{self, HostMounts};
use crate::mount_ns;
use std::path::{Path, PathBuf};

/// A user, mount and pid namespace alone (the control: without it the attack would fail for
/// another reason), then the same with a procfs mounted: the attack. Run it as an unprivileged
/// user (uid 1000), as any process in a container may be.
pub const ATTACK: &str = "busybox unshare -U -r -m -p -f busybox true && echo NESTED; \
    busybox unshare -U -r -m -p -f --mount-proc busybox echo MOUNTED 2>&1; true";

/// Why another mount namespace cannot be listed here (listmount with a namespace id: Linux 6.11).
pub fn blocker() -> Option<String> {
    mount_ns::mounts_of(std::process::id() as i32).err().map(|e| format!("listmount/statmount of a mount namespace by its id: {e}"))
}

/// Why the attack could not be tried: a process in the container cannot make a user namespace.
pub fn untried(output: &str) -> Option<String> {
    (!output.contains("NESTED")).then(|| format!("a process in the container cannot make a user namespace here: {output:?}"))
}

/// The attack's output says the nested namespaces were made but no procfs could be mounted.
#[track_caller]
pub fn assert_refused(output: &str, who: &str) {
    assert!(!output.contains("MOUNTED"), "{who}: a process in a --no-pivot container mounted a fresh procfs: {output:?}");
    assert!(output.contains("can't mount proc"), "{who}: the procfs mount should fail (EPERM): {output:?}");
}

/// Seen from the host, the mount namespace of the init `pid` had its root moved, not pivoted
/// into (else the option was dropped), and holds no full procfs or sysfs outside the rootfs; the
/// host kept its own (`proc`).
#[track_caller]
pub fn assert_hidden(pid: i32, proc: &Path, who: &str) {
    let ns = moved_root(pid, proc, who);
    assert!(ns.outside_pseudo_fs.is_empty(), "{who}: a --no-pivot container's mount namespace holds the host's {:?}", ns.outside_pseudo_fs);
}

/// [`assert_hidden`] for a container in a user namespace of its own: there the host's mounts are
/// locked, so each full procfs and sysfs outside the rootfs must be covered by a tmpfs instead.
#[track_caller]
pub fn assert_covered(pid: i32, proc: &Path, who: &str) {
    let ns = moved_root(pid, proc, who);
    assert!(
        ns.uncovered_pseudo_fs.is_empty(),
        "{who}: a --no-pivot container's mount namespace shows the host's {:?}",
        ns.uncovered_pseudo_fs
    );
}

/// The moved root of `pid`'s namespace, checked to be moved, while the host keeps `proc`.
#[track_caller]
fn moved_root(pid: i32, proc: &Path, who: &str) -> mount_ns::MovedRoot {
    let ns = mount_ns::moved_root(pid).unwrap_or_else(|e| panic!("{who}: list the mount namespace of {pid}: {e}"));
    assert!(ns.moved, "{who}: the container pivoted: --no-pivot did not reach the runtime: {:?}", ns.table);
    assert!(host_mount::is_mount_point(proc), "{who}: the detach in the container reached the host: {} is gone", proc.display());
    ns
}

/// A host procfs at a path no runtime names, mounted for the test's length.
pub fn extra_host_procfs() -> (HostMounts, PathBuf) {
    let mounts = HostMounts::new("nopivot");
    let proc = mounts.mkdir("proc");
    mounts.procfs(&proc);
    (mounts, proc)
}
