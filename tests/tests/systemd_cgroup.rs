// The systemd cgroup driver's own behaviour (issue 14): systemd removes a scope's cgroup as soon
// as its last process exits, so `kill --all` of a stopped container (what containerd's
// WithProcessKill sends after every exit) finds no cgroup and must succeed, as runc does.
// Needs systemd as PID 1: hack/guest-sid.sh runs it in a guest.

use rustpod_tests::cgroup::systemd_blocker;
use rustpod_tests::{json, needs, skip_if, Bundle, Runtime};

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
