// The shim's events as containerd publishes them (`ctr events`): the task lifecycle in order
// (exit after start), exec events, and /tasks/oom when a container exceeds its memory limit
// (memory.oom_control on cgroup v1, memory.events on v2: run in the sid guest).

use std::time::Duration;

use rustpod_tests::shim::{blocker, ShimContainerd, IMAGE, RUNTIME};
use rustpod_tests::{leftovers, needs, skip_if, wait};

/// Runs `body` while `ctr events` records; returns the topics (with their JSON) in order.
fn record_events(ctd: &ShimContainerd, body: impl FnOnce()) -> Vec<String> {
    let events = ctd.spawn_ctr(&["events"]);
    std::thread::sleep(Duration::from_millis(300));
    body();
    std::thread::sleep(Duration::from_millis(500));
    leftovers::kill_pids([events.pid()]);
    let out = events.try_wait().expect("ctr events ended");
    out.stdout.lines().filter_map(|l| l.split_once(" /").map(|(_, rest)| format!("/{rest}"))).collect()
}

fn position(events: &[String], prefix: &str) -> usize {
    events.iter().position(|e| e.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} event in {events:#?}"))
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
    let create = position(&events, "/tasks/create");
    let start = position(&events, "/tasks/start");
    let added = position(&events, "/tasks/exec-added");
    let started = position(&events, "/tasks/exec-started");
    let paused = position(&events, "/tasks/paused");
    let resumed = position(&events, "/tasks/resumed");
    let delete = position(&events, "/tasks/delete");
    let exits: Vec<usize> = events.iter().enumerate().filter(|(_, e)| e.starts_with("/tasks/exit")).map(|(i, _)| i).collect();
    assert_eq!(exits.len(), 2, "one exit for the exec and one for the init: {events:#?}");
    assert!(create < start && start < added && added < started && started < exits[0], "{events:#?}");
    assert!(paused < resumed && resumed < exits[1] && exits[1] < delete, "{events:#?}");
    assert!(events[exits[1]].contains("\"exit_status\":137"), "{}", events[exits[1]]);
}

#[test]
fn shim_reports_oom() {
    skip_if!(blocker());
    skip_if!(needs::cgroup_controller("memory"));
    let ctd = ShimContainerd::start();
    let mut code = 0;
    let events = record_events(&ctd, || {
        let out = ctd.ctr(&[
            "run", "--rm", "--memory-limit", "16777216", "--runtime", RUNTIME, IMAGE, "hog",
            "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1",
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
