// A containerd restart is expected, not an error (issue 15 item 3): the shims that outlive it
// lose the replies and events in flight (EPIPE), wait, and deliver them once containerd is back.
// Their log must say so at info, with no error line, and events must still arrive.

use rustpod_tests::shim::{blocker, ShimContainerd, RUNTIME};
use rustpod_tests::{skip_if, wait};

/// The lines our shims wrote to containerd's log.
fn shim_log(ctd: &ShimContainerd) -> Vec<String> {
    let log = std::fs::read_to_string(std::path::Path::new(ctd.dir()).join("containerd.log")).unwrap_or_default();
    log.lines().filter(|l| l.contains(RUNTIME)).map(str::to_string).collect()
}

#[test]
fn a_containerd_restart_logs_no_error_and_events_still_arrive() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    for id in ["a", "b"] {
        ctd.run_detached(id, &[], &["sleep", "1000"]);
        ctd.wait_task(id, "RUNNING");
    }
    let (a, _) = ctd.task("a").expect("a listed");

    // containerd's Wait for `a` is in flight: its reply, and the exit event, find no one.
    ctd.kill_containerd();
    rustpod_tests::leftovers::kill_pids([a]);
    ctd.restart_containerd();
    ctd.wait_task("a", "STOPPED");
    assert_eq!(ctd.delete_task("a"), 137, "the exit during the outage");

    // Events flow after the restart: execs in b are seen by a subscriber (retried until it is
    // subscribed).
    let events = ctd.spawn_ctr(&["events"]);
    let events_pid = events.pid();
    let mut n = 0;
    let seen = wait::eventually(|| {
        n += 1;
        let _ = ctd.ctr(&["task", "exec", "--exec-id", &format!("e{n}"), "b", "true"]);
        std::fs::read_to_string(format!("/proc/{events_pid}/fd/1")).is_ok_and(|out| out.contains("/tasks/exec-started"))
    });
    rustpod_tests::leftovers::kill_pids([events_pid]);
    let out = events.try_wait().expect("ctr events ended");
    assert!(seen, "no exec event after the restart: {}", out.describe());
    ctd.ctr(&["task", "kill", "-s", "SIGKILL", "b"]).ok();
    ctd.wait_task("b", "STOPPED");
    assert_eq!(ctd.delete_task("b"), 137, "b's exit status");

    let lines = shim_log(&ctd);
    let errors: Vec<&String> = lines.iter().filter(|l| l.contains("level=error")).collect();
    assert!(errors.is_empty(), "the shim logged errors for an expected restart: {errors:?}");
    assert!(
        lines.iter().any(|l| l.contains("level=info") && l.contains("containerd closed its connection")),
        "the outage is not logged at info: {lines:?}"
    );
}
