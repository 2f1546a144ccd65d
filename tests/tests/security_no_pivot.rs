// `--no-pivot` (runc's NoPivotRoot): the rootfs is moved onto `/` and chrooted into, so the
// host's mounts stay in the container's mount namespace, under the rootfs's mount. The kernel
// lets a user namespace mount a procfs only where a full one is already in its mount namespace
// (the container's own is masked; the host's is not), and a process of a --no-pivot container
// counts as not chrooted (its root is the namespace's root, followed down), so it may make one.
// runc therefore detaches every full procfs and sysfs outside the rootfs before the move. The
// engine rustpod ran before detached only /proc and /sys by name: with a host procfs mounted
// anywhere else (here one the test mounts), an unprivileged process in the container made a user
// namespace and mounted a fresh, unmasked procfs (`MOUNTED`). Each test attacks from inside and
// lists the container's mount namespace from the host (tests/src/no_pivot.rs), through the CLI,
// containerd's runc shim driving each, and our shim (which must honour the option, not drop it),
// next to runc; the detaches must not reach the host's own mounts. CRI: tests/cri/tests/no_pivot.rs.

use rustpod_tests::no_pivot::{self, ATTACK};
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd, REPORTS};
use rustpod_tests::{env, json, needs, skip_if, wait, Bundle, Runtime};
use std::os::unix::fs::PermissionsExt;

fn blocker() -> Option<String> {
    needs::containers().or_else(|| needs::program(&env::runc_bin())).or_else(no_pivot::blocker)
}

/// Where the attacker says it is done: the container's /dev/shm (its rootfs is read-only).
const DONE: &str = "dev/shm/attacked";

/// A bundle whose init, as uid 1000, runs ATTACK, says it is done, and then sleeps.
fn attacker() -> Bundle {
    let mut bundle = Bundle::new(&["sh", "-c", &format!("{ATTACK}; touch /{DONE}; exec sleep 1000")]);
    bundle.set("/process/user", json!({"uid": 1000, "gid": 1000}));
    bundle
}

/// Runs `bundle` with --no-pivot on runc, then on the runtime under test: `seen_from_the_host`
/// checks the container's mount namespace, then the attack must have been refused. The kill
/// waits for the attack's end (in CI run 95 it cut runc's short, after `NESTED`).
fn attack(bundle: &Bundle, seen_from_the_host: impl Fn(i32, &str)) {
    for rt in Runtime::runc_and_under_test() {
        let who = rt.bin().display().to_string();
        let id = rt.new_id("nopivot");
        let run = rt.spawn_run(&id, bundle, &["--no-pivot"], b"");
        rt.wait_status(&id, "running");
        let pid = rt.pid(&id);
        seen_from_the_host(pid, &who);
        let done = format!("/proc/{pid}/root/{DONE}");
        wait::wait_for("the attack's end", || std::path::Path::new(&done).exists().then_some(()));
        rt.kill(&id, "KILL");
        let out = run.wait();
        skip_if!(no_pivot::untried(&out.stdout));
        no_pivot::assert_refused(&out.stdout, &who);
    }
}

#[test]
fn from_a_no_pivot_container_a_user_namespace_cannot_mount_a_procfs_past_the_host_one() {
    skip_if!(blocker());
    let (_mounts, proc) = no_pivot::extra_host_procfs();
    attack(&attacker(), |pid, who| no_pivot::assert_hidden(pid, &proc, who));
}

/// The same in a container with a user namespace of its own (`hostUsers: false`): its copies of
/// the host's mounts are locked, so runc and rustpod cover each host procfs and sysfs with a
/// tmpfs, and the nested namespace's copy of that cover is locked too: the attack still fails.
#[test]
fn in_a_user_namespaced_no_pivot_container_the_host_procfs_is_covered_and_the_attack_fails() {
    skip_if!(blocker());
    let (_mounts, proc) = no_pivot::extra_host_procfs();
    let mut bundle = attacker();
    bundle.add_user_namespace();
    attack(&bundle, |pid, who| no_pivot::assert_covered(pid, &proc, who));
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
    skip_if!(shim::blocker_with_runc().or_else(no_pivot::blocker));
    let (_mounts, proc) = no_pivot::extra_host_procfs();
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
        no_pivot::assert_hidden(pid, &proc, path);
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", &id]).ok();
        ctd.wait_task(&id, "STOPPED");
        ctd.delete_task(&id);
        let out = shim::report(&reports, "out");
        std::fs::remove_file(reports.join("out")).expect("remove the report");
        skip_if!(no_pivot::untried(&out));
        no_pivot::assert_refused(&out, path);
    }
}
