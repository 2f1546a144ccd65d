// containerd-shim-rustpod-v1 under containerd 2.x, through 2.x's own ctr: run, exec, metrics,
// pause/resume, kill, delete, and the start handshake containerd recorded (bootstrap.json:
// task API v3 over ttrpc from 2.3 on, the plain address, read as v2, before). containerd 2.x is
// not in Debian 12: set RUSTPOD_CONTAINERD=/path/to/containerd (2.x, ctr beside it or in
// RUSTPOD_CTR); without it these tests skip loudly.

use rustpod_tests::containerd2::{blocker, Containerd2};
use rustpod_tests::{skip_if, wait};

#[test]
fn containerd2_runs_execs_measures_pauses_and_deletes() {
    skip_if!(blocker());
    let ctd = Containerd2::start();
    let id = "c2-life";
    ctd.run_sleeping(id);

    let out = ctd.ctr(&["task", "exec", "--exec-id", "e1", id, "sh", "-c", "echo exec-ok; exit 3"]);
    assert_eq!(out.stdout, "exec-ok\n", "{}", out.describe());
    assert_eq!(out.code(), 3, "the exec's exit code: {}", out.describe());

    let metrics = ctd.ctr(&["task", "metrics", id]).ok();
    assert!(metrics.stdout.contains("pids") || metrics.stdout.contains("memory"), "{}", metrics.describe());

    ctd.ctr(&["task", "pause", id]).ok();
    ctd.wait_task(id, "PAUSED");
    ctd.ctr(&["task", "resume", id]).ok();
    ctd.wait_task(id, "RUNNING");

    ctd.ctr(&["task", "kill", "-s", "SIGKILL", id]).ok();
    ctd.wait_task(id, "STOPPED");
    ctd.ctr(&["task", "delete", id]).ok();
    ctd.ctr(&["containers", "delete", id]).ok();
    assert!(wait::eventually(|| ctd.shim_pids().is_empty()), "the shim outlived its last container");
    assert!(!ctd.state_root().join(id).exists(), "state left in {}", ctd.state_root().display());
}

/// What containerd recorded of `start`'s answer: 2.3 sends BootstrapParams and must get a
/// BootstrapResult for task API v3 over ttrpc; 2.0-2.2 get the plain address (task API v2).
#[test]
fn containerd2_records_the_task_api_the_shim_answered() {
    skip_if!(blocker());
    let ctd = Containerd2::start();
    let id = "c2-boot";
    ctd.run_sleeping(id);
    let path = ctd.bundle(id).join("bootstrap.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let recorded: serde_json::Value = serde_json::from_str(&text).expect("bootstrap.json is JSON");
    let expected = if ctd.version() >= (2, 3) { 3 } else { 2 };
    assert_eq!(recorded["version"], expected, "{text}");
    assert_eq!(recorded["protocol"], "ttrpc", "{text}");
    let out = ctd.ctr(&["task", "exec", "--exec-id", "e1", id, "echo", "v-ok"]);
    assert_eq!(out.stdout, "v-ok\n", "{}", out.describe());
}
