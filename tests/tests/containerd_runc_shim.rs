// containerd's stock runc shim driving RUSTPOD_BIN via `ctr run --runc-binary`: output, exit codes,
// exec and SIGKILL; each test has its own private containerd and namespace, cleaned up even on panic.

use rustpod_tests::containerd::{self, lingering, Containerd, IMAGE};
use rustpod_tests::{env, skip_if};

/// `ctr run --runc-binary BIN [flags] IMAGE id argv…`.
fn ctr_run_args<'a>(bin: &'a str, flags: &[&'a str], id: &'a str, argv: &[&'a str]) -> Vec<&'a str> {
    [&["run", "--runc-binary", bin][..], flags, &[IMAGE, id], argv].concat()
}

fn runtime_bin() -> String {
    env::rustpod_bin().to_string_lossy().into_owned()
}

#[test]
fn ctr_run_prints_output() {
    skip_if!(containerd::blocker());
    let (ctd, bin) = (Containerd::start(), runtime_bin());
    let out = ctd.ctr(&ctr_run_args(&bin, &["--rm"], "hello", &["sh", "-c", &lingering("echo hello")])).ok();
    assert_eq!(out.stdout, "hello\n");
}

#[test]
fn ctr_run_returns_exit_code() {
    skip_if!(containerd::blocker());
    let (ctd, bin) = (Containerd::start(), runtime_bin());
    let out = ctd.ctr(&ctr_run_args(&bin, &["--rm"], "exit7", &["sh", "-c", "exit 7"]));
    assert_eq!(out.code(), 7, "{}", out.describe());
}

#[test]
fn ctr_task_exec_returns_exit_code() {
    skip_if!(containerd::blocker());
    let (ctd, bin) = (Containerd::start(), runtime_bin());
    ctd.ctr(&ctr_run_args(&bin, &["-d"], "execd", &["sleep", "1000"])).ok();
    ctd.wait_task("execd", "RUNNING");
    let out = ctd.ctr(&["task", "exec", "--exec-id", "e1", "execd", "sh", "-c", "exit 3"]);
    assert_eq!(out.code(), 3, "{}", out.describe());
}

#[test]
fn ctr_task_kill_gives_137() {
    skip_if!(containerd::blocker());
    let (ctd, bin) = (Containerd::start(), runtime_bin());
    let is_running = || ctd.task_status("killed").as_deref() == Some("RUNNING");
    let running =
        ctd.spawn_ctr(&ctr_run_args(&bin, &["--rm"], "killed", &["sleep", "1000"])).running_until("task killed to run", is_running);
    ctd.ctr(&["task", "kill", "-s", "SIGKILL", "killed"]).ok();
    let out = running.wait();
    assert_eq!(out.code(), 137, "{}", out.describe());
    assert_eq!(ctd.task_status("killed"), None, "ctr run --rm must remove the task");
}
