// One shim per pod: containers with the same sandbox-id annotation share a shim process, and each
// keeps its own exit status and its own output, even when many start and exit at once.

use rustpod_tests::shim::{blocker, ShimContainerd, IMAGE, RUNTIME};
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

#[test]
fn shim_grouped_short_lived_containers_keep_their_output() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let group = ["--annotation", "io.containerd.runc.v2.group=burst"];
    ctd.run_detached("anchor", &group, &["sleep", "1000"]);
    ctd.wait_task("anchor", "RUNNING");
    // Many exits at once keep the shim's reaper busy while output is still being copied: each
    // exit must still be reported only after its container's output reached ctr.
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let id = format!("burst{i}");
            let line = format!("output of {id}");
            let mut args = vec!["run", "--rm", "--runtime", RUNTIME];
            args.extend_from_slice(&group);
            args.extend_from_slice(&[IMAGE, id.as_str(), "echo", line.as_str()]);
            let client = ctd.spawn_ctr(&args);
            (line, client)
        })
        .collect();
    for (line, client) in clients {
        let out = client.wait().ok();
        assert_eq!(out.stdout, format!("{line}\n"), "{}", out.describe());
    }
    assert_eq!(ctd.shim_pids().len(), 1, "the group was served by more than one shim");
}

#[test]
fn a_group_shim_outlives_the_bundle_it_started_in() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let group = ["--annotation", "io.containerd.runc.v2.group=outlive"];
    // The shim starts in `first`'s bundle, which containerd removes with `first`.
    ctd.run_detached("first", &group, &["sleep", "1000"]);
    ctd.run_detached("second", &group, &["sleep", "1000"]);
    ctd.wait_task("second", "RUNNING");
    ctd.ctr(&["task", "kill", "-s", "SIGKILL", "first"]).ok();
    ctd.wait_task("first", "STOPPED");
    assert_eq!(ctd.delete_task("first"), 137);
    ctd.ctr(&["container", "rm", "first"]).ok();
    // Starting a container must not depend on the shim's working directory.
    let mut args = vec!["run", "--rm", "--runtime", RUNTIME];
    args.extend_from_slice(&group);
    args.extend_from_slice(&[IMAGE, "third", "echo", "third runs"]);
    let out = ctd.ctr(&args).ok();
    assert_eq!(out.stdout, "third runs\n", "{}", out.describe());
    assert_eq!(ctd.shim_pids().len(), 1, "the group was served by more than one shim");
}
