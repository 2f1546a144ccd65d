// The shim's events as containerd publishes them (`ctr events`): the task lifecycle in order
// (exit after start), exec events, and /tasks/oom when a container exceeds its memory limit
// (memory.oom_control on cgroup v1, memory.events on v2: run in the sid guest).

use rustpod_tests::events::{assert_task_lifecycle, position};
use rustpod_tests::shim::{blocker, ShimContainerd, IMAGE, RUNTIME};
use rustpod_tests::{needs, skip_if, wait};

/// Runs `body` while `ctr events` records; returns the topics (with their JSON) in order.
fn record_events(ctd: &ShimContainerd, body: impl FnOnce()) -> Vec<String> {
    rustpod_tests::events::record(ctd.spawn_ctr(&["events"]), body)
}

#[test]
fn shim_publishes_lifecycle_and_exec_events_in_order() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let events = record_events(&ctd, || {
        ctd.run_detached("ev", &[], &["sleep", "1000"]);
        ctd.wait_task("ev", "RUNNING");
        ctd.ctr(&["task", "exec", "--exec-id", "x1", "ev", "true"]).ok();
        ctd.ctr(&["task", "pause", "ev"]).ok();
        ctd.ctr(&["task", "resume", "ev"]).ok();
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", "ev"]).ok();
        ctd.wait_task("ev", "STOPPED");
        ctd.delete_task("ev");
    });
    let init_exit = assert_task_lifecycle(&events, "containerd-shim-rustpod-v1");
    assert!(init_exit < position(&events, "/tasks/delete"), "{events:#?}");
}

#[test]
fn shim_reports_oom() {
    skip_if!(blocker());
    skip_if!(needs::cgroup_controller("memory"));
    let ctd = ShimContainerd::start();
    let mut code = 0;
    let events = record_events(&ctd, || {
        let out = ctd.ctr(&[
            "run",
            "--rm",
            "--memory-limit",
            "16777216",
            "--runtime",
            RUNTIME,
            IMAGE,
            "hog",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=64M",
            "count=1",
        ]);
        code = out.code();
    });
    if code == 0 {
        rustpod_tests::skip!("a 64 MiB buffer fit in a 16 MiB memory limit (swap?): no OOM to observe");
    }
    assert_eq!(code, 137, "the OOM-killed container's status");
    let oom = position(&events, "/tasks/oom");
    let exit = position(&events, "/tasks/exit");
    assert!(oom < exit, "{events:#?}");
    assert!(wait::eventually(|| ctd.shim_pids().is_empty()), "the shim outlived its container");
}
