// The shim's task control under containerd: exec with and without a terminal, pause/resume,
// ps, metrics, kill, and a live resource update.

use rustpod_tests::shim::{blocker, pty_blocker, ShimContainerd};
use rustpod_tests::skip_if;

#[test]
fn shim_exec_without_tty() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("ex", &[], &["sleep", "1000"]);
    ctd.wait_task("ex", "RUNNING");
    let out = ctd.ctr(&["task", "exec", "--exec-id", "e1", "ex", "sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert_eq!(out.code(), 3, "{}", out.describe());
    assert_eq!(out.stdout, "out\n");
    assert!(out.stderr.contains("err"), "{}", out.describe());
}

/// An exec that leaves a child holding its stdout still ends for its client, with its output
/// (as with containerd's runc shim: Delete closes the output after a grace period).
#[test]
fn shim_exec_ends_when_a_child_it_left_holds_stdout() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("bg", &[], &["sleep", "1000"]);
    ctd.wait_task("bg", "RUNNING");
    // Without the close, ctr would wait for the background sleep (far past the deadline).
    let out = ctd.ctr(&["task", "exec", "--exec-id", "e1", "bg", "sh", "-c", "sleep 900 & echo out; echo err >&2"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
    assert_eq!(out.stdout, "out\n", "{}", out.describe());
    assert!(out.stderr.contains("err"), "{}", out.describe());
}

#[test]
fn shim_exec_with_tty() {
    skip_if!(blocker());
    skip_if!(pty_blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("tty", &[], &["sleep", "1000"]);
    ctd.wait_task("tty", "RUNNING");
    let out = ctd.ctr_in_pty(&["task", "exec", "-t", "--exec-id", "t1", "tty", "sh", "-c", "tty; exit 4"]);
    assert_eq!(out.code(), 4, "{}", out.describe());
    assert!(out.stdout.contains("/dev/pts/"), "no terminal in the exec: {}", out.describe());
}

#[test]
fn shim_run_with_tty() {
    skip_if!(blocker());
    skip_if!(pty_blocker());
    let ctd = ShimContainerd::start();
    let out =
        ctd.ctr_in_pty(&["run", "--rm", "-t", "--runtime", rustpod_tests::shim::RUNTIME, rustpod_tests::shim::IMAGE, "ttyrun", "tty"]);
    assert!(out.success(), "{}", out.describe());
    assert!(out.stdout.contains("/dev/pts/"), "no terminal: {}", out.describe());
}

#[test]
fn shim_pause_resume_ps_metrics_kill() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("ctl", &[], &["sleep", "1000"]);
    ctd.wait_task("ctl", "RUNNING");
    let (pid, _) = ctd.task("ctl").expect("task listed");

    ctd.ctr(&["task", "pause", "ctl"]).ok();
    ctd.wait_task("ctl", "PAUSED");
    assert!(rustpod_tests::shim::is_frozen(pid), "the paused task's cgroup is not frozen");
    ctd.ctr(&["task", "resume", "ctl"]).ok();
    ctd.wait_task("ctl", "RUNNING");

    let ps = ctd.ctr(&["task", "ps", "ctl"]).ok();
    assert!(ps.stdout.lines().any(|l| l.split_whitespace().next() == Some(&pid.to_string())), "{}", ps.describe());

    let metrics = ctd.ctr(&["task", "metrics", "ctl"]).ok();
    assert!(metrics.stdout.contains("memory.usage_in_bytes") || metrics.stdout.contains("memory.usage"), "{}", metrics.describe());
    assert!(metrics.stdout.contains("pids.current"), "{}", metrics.describe());
    // Later calls reuse the cgroup manager the first one built; they must see live values.
    ctd.ctr(&["task", "exec", "--exec-id", "more", "ctl", "sh", "-c", "sleep 1000 >/dev/null 2>&1 & sleep 1000 >/dev/null 2>&1 & true"])
        .ok();
    let pids_current =
        |out: &str| out.lines().find(|l| l.contains("pids.current")).and_then(|l| l.split_whitespace().last()?.parse::<u64>().ok());
    let before = pids_current(&metrics.stdout).expect("pids.current has a value");
    let again = ctd.ctr(&["task", "metrics", "ctl"]).ok();
    let after = pids_current(&again.stdout).expect("pids.current has a value");
    assert!(after >= before + 2, "pids.current {before} -> {after}: {}", again.describe());

    ctd.ctr(&["task", "kill", "-s", "SIGKILL", "ctl"]).ok();
    ctd.wait_task("ctl", "STOPPED");
    assert_eq!(ctd.delete_task("ctl"), 137);
}
