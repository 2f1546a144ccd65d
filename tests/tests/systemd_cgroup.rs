// The systemd cgroup driver's own behaviour (issue 14): systemd removes a scope's cgroup as soon
// as its last process exits, so `kill --all` of a stopped container (what containerd's
// WithProcessKill sends after every exit) finds no cgroup and must succeed, as runc does.
// Since issue 22 rustpod places such an init without the engine's intermediate process: its scope,
// limits and cgroup namespace are compared with the reference's (runc 1.3.6, and crun 1.28 with
// RUNC_BIN), as is a failed create's cleanup. Needs systemd as PID 1: hack/guest-sid.sh runs it in
// a guest.

use rustpod_tests::cgroup::systemd_blocker;
use rustpod_tests::{json, needs, skip_if, Bundle, Runtime, SLEEP};
use std::path::Path;

fn kill_all_after_exit(rt: &Runtime) -> (bool, String) {
    let mut bundle = Bundle::new(&["true"]);
    let id = rt.new_id("sdkill");
    bundle.clear_cgroups_path();
    bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
    rt.create(&id, &bundle);
    rt.start(&id);
    rt.wait_status(&id, "stopped");
    let out = rt.cmd(&["kill", "--all", &id, "KILL"]);
    rt.cmd(&["delete", "--force", &id]).ok();
    (out.success(), out.describe())
}

#[test]
fn kill_all_of_a_stopped_container_succeeds_with_systemd() {
    skip_if!(needs::containers()
        .or_else(|| needs::program(&rustpod_tests::env::runc_bin()))
        .or_else(systemd_blocker));
    let runc = kill_all_after_exit(&Runtime::runc().with_globals(&["--systemd-cgroup"]));
    let ours = kill_all_after_exit(&Runtime::under_test().with_globals(&["--systemd-cgroup"]));
    assert!(runc.0, "runc: {}", runc.1);
    assert!(ours.0, "kill --all after the init exited: {} (runc succeeds)", ours.1);
}

/// What `rt` makes of a systemd-placed container with limits, a cgroup namespace and the spec's
/// cgroup mount, ids replaced by `ID`: where its init is and what that cgroup holds before
/// `start` (the user's program must never run unconfined), what the container and an exec'd
/// process see of it from inside, and what `delete` leaves.
fn scope_report(rt: &Runtime) -> String {
    let mut bundle = Bundle::new(SLEEP);
    let id = rt.new_id("sdscope");
    bundle.clear_cgroups_path();
    bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
    bundle.set("/linux/resources/memory", json!({"limit": 64 << 20, "swap": 64 << 20}));
    bundle.set("/linux/resources/pids", json!({"limit": 64}));
    // crun 1.28 puts a v2 container in a `container` cgroup below its scope unless told not to;
    // runc and rustpod have no such cgroup and leave the annotation alone.
    bundle.set_annotations(json!({"run.oci.systemd.subgroup": ""}));
    let mut namespaces = bundle.config()["linux"]["namespaces"].clone();
    namespaces.as_array_mut().expect("namespaces").push(json!({"type": "cgroup"}));
    bundle.set("/linux/namespaces", namespaces);
    rt.create(&id, &bundle);
    let unit = format!("rustpod-test-{id}.scope");
    let init = rt.pid(&id);
    let own = std::fs::read_to_string(format!("/proc/{init}/cgroup")).unwrap_or_default();
    let dir = format!("/sys/fs/cgroup/system.slice/{unit}");
    let file = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).map(|s| s.trim().to_string()).unwrap_or_else(|e| e.to_string());
    let mut report = vec![
        format!("created: init in {}", own.trim()),
        format!("created: memory.max={} pids.max={}", file("memory.max"), file("pids.max")),
        format!("created: {} {}", unit_property(&unit, "Delegate"), unit_property(&unit, "ActiveState")),
    ];
    rt.start(&id);
    let inside = rt.exec(&id, &["sh", "-c", "cat /proc/self/cgroup /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max"]).ok();
    report.push(format!("exec: {}", inside.stdout.trim().replace('\n', " ")));
    rt.cmd(&["delete", "--force", &id]).ok();
    let gone = || unit_property(&unit, "ActiveState") == "ActiveState=inactive" && !Path::new(&dir).exists();
    rustpod_tests::wait::eventually(gone);
    report.push(format!("deleted: {} dir={}", unit_property(&unit, "ActiveState"), Path::new(&dir).exists()));
    report.join("\n").replace(&id, "ID")
}

fn scope_blocker() -> Option<String> {
    needs::containers()
        .or_else(|| needs::program(&rustpod_tests::env::runc_bin()))
        .or_else(|| needs::program(Path::new("/bin/systemctl")))
        .or_else(systemd_blocker)
}

fn unit_property(unit: &str, property: &str) -> String {
    let out = rustpod_tests::process::run(Path::new("/bin/systemctl"), &["show", "-p", property, unit], b"");
    out.stdout.trim().to_string()
}

/// Issue 22: rustpod starts a systemd-placed init without the engine's intermediate process (the
/// init cloned where rustpod is, then its scope started with the init's pid); the scope, its
/// limits, the cgroup namespace and an exec'd process must be where the reference puts them.
#[test]
fn a_systemd_scope_holds_the_init_before_start_as_the_references() {
    skip_if!(scope_blocker());
    let reference = scope_report(&Runtime::runc().with_globals(&["--systemd-cgroup"]));
    let ours = scope_report(&Runtime::under_test().with_globals(&["--systemd-cgroup"]));
    assert!(reference.contains("init in 0::/system.slice/rustpod-test-ID.scope"), "the reference's report:\n{reference}");
    assert_eq!(ours, reference, "rustpod (left) and {} (right)", rustpod_tests::env::runc_bin().display());
}

/// A create that fails after the scope is made (the program does not exist) leaves no scope
/// and no cgroup, as the reference's does, and says why on one line.
#[test]
fn a_failed_create_leaves_no_scope() {
    skip_if!(scope_blocker());
    let attempt = |rt: &Runtime| {
        let mut bundle = Bundle::new(&["/no/such/program"]);
        let id = rt.new_id("sdfail");
        bundle.clear_cgroups_path();
        bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
        let out = rt.try_create(&id, &bundle, &[]);
        let unit = format!("rustpod-test-{id}.scope");
        let dir = Path::new("/sys/fs/cgroup/system.slice").join(&unit);
        let gone = || unit_property(&unit, "ActiveState") == "ActiveState=inactive" && !dir.exists();
        rustpod_tests::wait::eventually(gone);
        let left = (unit_property(&unit, "ActiveState"), dir.exists());
        (out, left)
    };
    let (runc_out, runc_left) = attempt(&Runtime::runc().with_globals(&["--systemd-cgroup"]));
    let (out, left) = attempt(&Runtime::under_test().with_globals(&["--systemd-cgroup"]));
    assert!(!runc_out.success(), "the reference created it: {}", runc_out.describe());
    assert!(!out.success(), "rustpod created a container with no program: {}", out.describe());
    rustpod_tests::assertions::assert_one_line_error(&out, &["/no/such/program"]);
    assert_eq!(left, runc_left, "(unit state, cgroup dir exists) after the failed create: rustpod (left), reference (right)");
    assert_eq!(left, ("ActiveState=inactive".to_string(), false));
}
