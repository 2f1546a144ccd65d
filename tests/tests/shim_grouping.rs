// One shim per pod: containers with the same sandbox-id annotation share a shim process, and each
// keeps its own exit status.

use rustpod_tests::shim::{blocker, ShimContainerd};
use rustpod_tests::skip_if;

#[test]
fn shim_groups_containers_by_sandbox_id() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let pod = ["--annotation", "io.kubernetes.cri.sandbox-id=pod-a"];
    ctd.run_detached("first", &pod, &["sleep", "1000"]);
    ctd.run_detached("second", &pod, &["sh", "-c", "trap 'exit 5' TERM; sleep 1000 & wait"]);
    ctd.run_detached("other", &[], &["sleep", "1000"]);
    for id in ["first", "second", "other"] {
        ctd.wait_task(id, "RUNNING");
    }
    let shims = ctd.shim_pids();
    assert_eq!(shims.len(), 2, "expected one shim for the pod and one for `other`, found {shims:?}");

    ctd.ctr(&["task", "kill", "-s", "SIGKILL", "first"]).ok();
    ctd.ctr(&["task", "kill", "-s", "SIGTERM", "second"]).ok();
    ctd.wait_task("first", "STOPPED");
    ctd.wait_task("second", "STOPPED");
    assert_eq!(ctd.delete_task("first"), 137);
    assert_eq!(ctd.delete_task("second"), 5);
    assert_eq!(ctd.task_status("other").as_deref(), Some("RUNNING"), "the other shim was disturbed");
}
