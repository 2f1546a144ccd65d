// `exec` into a running container: exit codes, stdout, --env/--cwd/--user, --process FILE,
// and detached execs with --pid-file.

use rustpod_tests::assertions::{pid_alive, read_pid_file};
use rustpod_tests::bundle::write_json;
use rustpod_tests::{json, needs, skip_if, Fixture, SLEEP};
use std::path::Path;

#[test]
fn exec_returns_exit_code() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let out = fx.exec(&["sh", "-c", "exit 5"]);
    assert_eq!(out.code(), 5, "{}", out.describe());
}

#[test]
fn exec_output_comes_back_on_stdout() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    assert_eq!(fx.exec(&["echo", "hi"]).ok().stdout, "hi\n");
}

#[test]
fn exec_env_and_cwd() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let flags = ["--env", "FOO=bar", "--cwd", "/tmp"];
    let out = fx.exec_with(&flags, &["sh", "-c", "echo $FOO; pwd"]).ok();
    assert_eq!(out.stdout, "bar\n/tmp\n");
}

#[test]
fn exec_user() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let out = fx.exec_with(&["--user", "65534:65534"], &["sh", "-c", "id -u; id -g"]);
    assert_eq!(out.ok().stdout, "65534\n65534\n");
}

/// As runc: an exec without HOME gets its own user's home from the container's
/// /etc/passwd, not the init's.
#[test]
fn exec_home_follows_the_exec_user() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let out = fx.exec_with(&["--user", "65534:65534"], &["sh", "-c", "echo $HOME"]);
    assert_eq!(out.ok().stdout, "/nonexistent\n");
    let out = fx.exec_with(&["--env", "HOME=/tmp"], &["sh", "-c", "echo $HOME"]);
    assert_eq!(out.ok().stdout, "/tmp\n");
}

#[test]
fn exec_process_file() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let mut process = fx.bundle.config()["process"].clone();
    process["args"] = json!(["sh", "-c", "echo $X; pwd; exit 4"]);
    let env = process["env"].as_array_mut().expect("env array");
    env.push(json!("X=from-process-json"));
    process["cwd"] = json!("/etc");
    let path = format!("{}/process.json", fx.bundle.path());
    write_json(Path::new(&path), &process);
    let out = fx.exec_with(&["--process", &path], &[]);
    assert_eq!(out.code(), 4, "{}", out.describe());
    assert_eq!(out.stdout, "from-process-json\n/etc\n");
}

#[test]
fn exec_detached_writes_pid_file() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let pid_file = format!("{}/exec.pid", fx.bundle.path());
    fx.exec_with(&["-d", "--pid-file", &pid_file], &["sleep", "999"]).ok();
    let pid = read_pid_file(&pid_file);
    assert!(pid_alive(pid), "exec'd pid {pid} is not running");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert_eq!(cmdline, b"sleep\0999\0", "the pid file must name the exec'd process");
}
