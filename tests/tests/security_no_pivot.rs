// `--no-pivot` (runc's NoPivotRoot): the rootfs is moved onto `/` and chrooted into, so the
// host's mounts stay in the container's mount namespace, under the rootfs's mount. The kernel
// lets a user namespace mount a procfs only where a full one is already in its mount namespace
// (the container's own is masked; the host's is not), and a process of a --no-pivot container
// counts as not chrooted (its root is the namespace's root, followed down), so it may make one.
// runc therefore detaches every full procfs and sysfs outside the rootfs before the move. The
// engine rustpod ran before detached only /proc and /sys by name: with a host procfs mounted
// anywhere else (here one the test mounts), an unprivileged process in the container made a user
// namespace and mounted a fresh, unmasked procfs (`MOUNTED`). Each test attacks from inside and
// lists the container's mount namespace from the host (`mount_ns`), through the CLI,
// containerd's runc shim driving each, and our shim (which must honour the option, not drop it),
// next to runc; the detaches must not reach the host's own mounts.

use rustpod_tests::host_mount::{self, HostMounts};
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd, REPORTS};
use rustpod_tests::{env, json, mount_ns, needs, skip_if, wait, Bundle, Runtime};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A user, mount and pid namespace alone (the control: without it the attack would fail for
/// another reason), then the same with a procfs mounted: the attack. An unprivileged user (uid
/// 1000) makes them, as any process in a container may.
const ATTACK: &str = "busybox unshare -U -r -m -p -f busybox true && echo NESTED; \
    busybox unshare -U -r -m -p -f --mount-proc busybox echo MOUNTED 2>&1; true";

fn blocker() -> Option<String> {
    needs::containers().or_else(|| needs::program(&env::runc_bin())).or_else(mount_ns_blocker)
}

/// Why another mount namespace cannot be listed here (listmount with a namespace id: Linux 6.11).
fn mount_ns_blocker() -> Option<String> {
    mount_ns::mounts_of(std::process::id() as i32).err().map(|e| format!("listmount/statmount of a mount namespace by its id: {e}"))
}

/// Why the attack could not be tried: a process in the container cannot make a user namespace.
fn no_nested_userns(output: &str) -> Option<String> {
    (!output.contains("NESTED")).then(|| format!("a process in the container cannot make a user namespace here: {output:?}"))
}

/// The attack's output says the nested namespaces were made but no procfs could be mounted.
#[track_caller]
fn assert_refused(output: &str, who: &str) {
    assert!(!output.contains("MOUNTED"), "{who}: a process in a --no-pivot container mounted a fresh procfs: {output:?}");
    assert!(output.contains("can't mount proc"), "{who}: the procfs mount should fail (EPERM): {output:?}");
}

/// Seen from the host, the mount namespace of `pid` still holds the host's root under the rootfs
/// (the root was moved, not pivoted into: else the option was dropped), and no full procfs or
/// sysfs outside `rootfs`; the host kept its own (`proc`).
#[track_caller]
fn assert_hidden(pid: i32, rootfs: &str, proc: &Path, who: &str) {
    let mounts = mount_ns::mounts_of(pid).unwrap_or_else(|e| panic!("{who}: list the mount namespace of {pid}: {e}"));
    let table: Vec<String> = mounts.iter().map(|m| format!("{} {} {}", m.point, m.fstype, m.root)).collect();
    assert!(mounts.iter().any(|m| m.point == "/" && m.root == "/"), "{who}: the container pivoted: --no-pivot did not reach the runtime: {table:?}");
    // The container's mounts are the rootfs's and what is mounted below it; a mount point names
    // no side, as the rootfs is stacked on the namespace's `/`.
    let rootfs_mount = mounts.iter().find(|m| m.point == "/" && m.root == rootfs).unwrap_or_else(|| panic!("{who}: no rootfs mount: {table:?}"));
    let mut inside = std::collections::BTreeSet::from([rootfs_mount.id]);
    while let Some(child) = mounts.iter().find(|m| !inside.contains(&m.id) && inside.contains(&m.parent)) {
        inside.insert(child.id);
    }
    let exposed: Vec<&String> = mounts
        .iter()
        .zip(&table)
        .filter(|(m, _)| !inside.contains(&m.id) && (m.fstype == "proc" || m.fstype == "sysfs") && m.root == "/")
        .map(|(_, line)| line)
        .collect();
    assert!(exposed.is_empty(), "{who}: a --no-pivot container's mount namespace holds the host's {exposed:?}");
    assert!(host_mount::is_mount_point(proc), "{who}: the detach in the container reached the host: {} is gone", proc.display());
}

/// A host procfs at a path no runtime names, mounted for the test's length.
fn extra_host_procfs() -> (HostMounts, PathBuf) {
    let mounts = HostMounts::new("nopivot");
    let proc = mounts.mkdir("proc");
    mounts.procfs(&proc);
    (mounts, proc)
}

#[test]
fn from_a_no_pivot_container_a_user_namespace_cannot_mount_a_procfs_past_the_host_one() {
    skip_if!(blocker());
    let (_mounts, proc) = extra_host_procfs();
    let mut bundle = Bundle::new(&["sh", "-c", &format!("{ATTACK}; exec sleep 1000")]);
    bundle.set("/process/user", json!({"uid": 1000, "gid": 1000}));
    for rt in Runtime::runc_and_under_test() {
        let who = rt.bin().display().to_string();
        let id = rt.new_id("nopivot");
        let run = rt.spawn_run(&id, &bundle, &["--no-pivot"], b"");
        rt.wait_status(&id, "running");
        assert_hidden(rt.pid(&id), &bundle.rootfs(), &proc, &who);
        rt.kill(&id, "KILL");
        let out = run.wait();
        skip_if!(no_nested_userns(&out.stdout));
        assert_refused(&out.stdout, &who);
    }
}

#[test]
fn no_pivot_with_a_shared_rootfs_propagation_is_refused_and_leaves_nothing() {
    skip_if!(needs::containers());
    // Not run on runc: on a host whose `/` is shared (systemd makes it so), the rootfs moved onto
    // the container's copy of it would be mounted on the host's `/` too.
    let rt = Runtime::under_test();
    let mut bundle = Bundle::new(&["true"]);
    bundle.set("/linux/rootfsPropagation", json!("rshared"));
    let id = rt.new_id("nopivot-shared");
    let out = rt.try_create(&id, &bundle, &["--no-pivot"]).failed();
    let line = out.stderr.trim();
    let named = ["rootfsPropagation", "rshared", "with --no-pivot", "host's /"].iter().all(|w| line.contains(w));
    assert!(named && line.lines().count() == 1, "want one line naming the field and the flag: {line:?}");
    rt.assert_nothing_left(&id, bundle.path());
}

/// `ctr run --no-pivot`: NoPivotRoot in runc's options for runc's shim, in ctr's CreateOptions
/// for ours.
#[test]
fn through_containerd_no_pivot_is_honoured_and_the_attack_refused_on_every_path() {
    skip_if!(shim::blocker_with_runc().or_else(mount_ns_blocker));
    let (_mounts, proc) = extra_host_procfs();
    let ctd = ShimContainerd::start();
    let reports = ScratchDir::new("nopivot-reports");
    std::fs::set_permissions(reports.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod the reports dir");
    for (path, flags) in shim::paths() {
        let bundle = Bundle::new(&["true"]);
        let id = format!("{path}-nopivot");
        let mut spec = ctd.oci_spec_with_reports(&id, &bundle.rootfs(), &reports);
        let script = format!("({ATTACK}) > {REPORTS}/out.tmp 2>&1; mv {REPORTS}/out.tmp {REPORTS}/out; exec sleep 1000");
        spec["process"]["args"] = json!(["sh", "-c", script]);
        spec["process"]["user"] = json!({"uid": 1000, "gid": 1000});
        let flags: Vec<String> = flags.into_iter().chain(["--no-pivot".to_string()]).collect();
        ctd.run_spec(&reports, &id, &spec, "-d", &flags).ok();
        wait::wait_for("the attack's report", || reports.join("out").exists().then_some(()));
        let (pid, _) = ctd.task(&id).expect("the task is listed");
        assert_hidden(pid, &bundle.rootfs(), &proc, path);
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", &id]).ok();
        ctd.wait_task(&id, "STOPPED");
        ctd.delete_task(&id);
        let out = shim::report(&reports, "out");
        std::fs::remove_file(reports.join("out")).expect("remove the report");
        skip_if!(no_nested_userns(&out));
        assert_refused(&out, path);
    }
}
