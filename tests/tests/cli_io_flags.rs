// Stdio pass-through without a terminal (stdout, stderr, stdin), and the global flags a
// drop-in must take: --log/--log-format json/--debug, --systemd-cgroup, --criu, --rootless.

use rustpod_tests::assertions::assert_one_line_error;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{json, needs, skip, skip_if, Fixture, Runtime, Value};
use std::path::Path;

#[test]
fn run_passes_stdout_and_stderr_through() {
    skip_if!(needs::containers());
    let fx = Fixture::new(&["sh", "-c", "echo hello; echo err >&2"]);
    let out = fx.rt.run(&fx.id, &fx.bundle, &[], b"").ok();
    assert_eq!(out.stdout, "hello\n");
    assert_eq!(out.stderr, "err\n");
}

#[test]
fn run_passes_stdin_through() {
    skip_if!(needs::containers());
    let fx = Fixture::new(&["cat"]);
    let out = fx.rt.run(&fx.id, &fx.bundle, &[], b"abc").ok();
    assert_eq!(out.stdout, "abc");
}

/// The lines of a `--log-format json` log file, each checked to be an object with level/msg/time.
fn json_log_lines(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line is not JSON ({e}): {l}")))
        .collect();
    for line in &lines {
        for field in ["level", "msg", "time"] {
            assert!(line[field].is_string(), "log line lacks string {field}: {line}");
        }
    }
    lines
}

/// A runtime logging to `<dir>/log.json` in JSON, with `extra` global flags; and the log's path.
fn json_logging(dir: &ScratchDir, extra: &[&str]) -> (Runtime, String) {
    let log = dir.join_str("log.json");
    let rt = Runtime::under_test().with_globals(&["--log", &log, "--log-format", "json"]).with_globals(extra);
    (rt, log)
}

#[test]
fn log_format_json_records_errors() {
    let dir = ScratchDir::new("log");
    let (rt, log) = json_logging(&dir, &[]);
    let out = rt.cmd(&["state", "no-such-container"]);
    assert!(!out.success(), "{}", out.describe());
    let lines = json_log_lines(&log);
    let error = lines.iter().find(|l| l["level"] == "error");
    assert!(error.is_some_and(|e| e["msg"].as_str().unwrap_or("").contains("not exist")), "log: {lines:?}");
}

#[test]
fn debug_run_with_json_log() {
    skip_if!(needs::containers());
    let dir = ScratchDir::new("log");
    let (rt, log) = json_logging(&dir, &["--debug"]);
    let fx = Fixture::on(rt, &["echo", "hi"]);
    assert_eq!(fx.rt.run(&fx.id, &fx.bundle, &[], b"").ok().stdout, "hi\n");
    json_log_lines(&log);
}

#[test]
fn criu_and_rootless_flags_are_accepted() {
    skip_if!(needs::containers());
    let rt = Runtime::under_test().with_globals(&["--criu", "x", "--rootless", "auto"]);
    let fx = Fixture::on(rt, &["echo", "hi"]);
    assert_eq!(fx.rt.run(&fx.id, &fx.bundle, &[], b"").ok().stdout, "hi\n");
}

/// runc 1.1 refuses --systemd-cgroup when systemd is not PID 1: "systemd not running on this host".
#[test]
fn systemd_cgroup_without_systemd_fails_cleanly() {
    skip_if!(needs::containers());
    if Path::new("/run/systemd/system").exists() {
        skip!("systemd is running here; this test is about hosts without it");
    }
    let mut fx = Fixture::on(Runtime::under_test().with_globals(&["--systemd-cgroup"]), &["true"]);
    let slice = format!("system.slice:rustpod:{}", fx.id);
    fx.bundle.clear_cgroups_path().set("/linux/cgroupsPath", json!(slice));
    assert_one_line_error(&fx.rt.run(&fx.id, &fx.bundle, &[], b""), &["systemd"]);
    fx.assert_nothing_left();
}
