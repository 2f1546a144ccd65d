// Container lifecycle through the CLI: create/start/state/kill/delete, run, pid files, signals,
// pause/resume, config env and mounts; explicit checks and the guard make sure nothing is left.

use rustpod_tests::assertions::{is_rfc3339, pid_alive, read_pid_file};
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{json, needs, skip_if, wait, Fixture, SLEEP};

#[test]
fn create_start_kill_delete() {
    skip_if!(needs::containers());
    let fx = Fixture::created(SLEEP);
    let state = fx.rt.state(&fx.id);
    assert_eq!(state["status"], "created");
    let pid = state["pid"].as_i64().expect("pid is a number") as i32;
    assert!(pid > 0 && pid_alive(pid), "created container's pid {pid} must be a live process");

    fx.rt.start(&fx.id);
    fx.rt.wait_status(&fx.id, "running");
    assert_eq!(fx.rt.pid(&fx.id), pid, "start keeps the init pid");

    fx.rt.kill(&fx.id, "SIGKILL");
    fx.rt.wait_status(&fx.id, "stopped");
    fx.rt.delete(&fx.id);
    let gone = fx.rt.cmd(&["state", &fx.id]);
    assert!(!gone.success(), "state of a deleted container must fail: {}", gone.describe());
    fx.assert_nothing_left();
}

#[test]
fn state_has_every_runc_field() {
    skip_if!(needs::containers());
    let mut fx = Fixture::new(SLEEP);
    fx.bundle.set_annotations(json!({"org.rustpod.test": "yes", "a.b": "c"}));
    fx.rt.create(&fx.id, &fx.bundle);
    let state = fx.rt.state(&fx.id);
    // The spec version the runtime's state complies with (runc prints its own, 1.0.2-dev).
    let oci_version = state["ociVersion"].as_str();
    assert!(oci_version.is_some_and(|v| v.starts_with("1.")), "ociVersion: {state}");
    assert_eq!(state["id"], fx.id.as_str());
    assert!(state["pid"].as_i64().is_some_and(|p| p > 0), "{state}");
    assert_eq!(state["status"], "created");
    assert_eq!(state["bundle"], fx.bundle.path(), "bundle is the absolute bundle path");
    assert_eq!(state["rootfs"], fx.bundle.rootfs().as_str(), "rootfs is absolute");
    assert!(state["created"].as_str().is_some_and(is_rfc3339), "created must be RFC 3339: {state}");
    assert!(state["owner"].is_string(), "owner must be a string: {state}");
    assert_eq!(state["annotations"], json!({"org.rustpod.test": "yes", "a.b": "c"}));
}

#[test]
fn run_returns_exit_code_and_deletes() {
    skip_if!(needs::containers());
    for code in [0, 7] {
        let script = format!("exit {code}");
        let fx = Fixture::new(&["sh", "-c", &script]);
        let out = fx.rt.run(&fx.id, &fx.bundle, &[], b"");
        assert_eq!(out.code(), code, "{}", out.describe());
        assert!(!fx.rt.cmd(&["state", &fx.id]).success(), "run must delete the container after it exits");
        fx.assert_nothing_left();
    }
}

#[test]
fn run_detached() {
    skip_if!(needs::containers());
    for flag in ["-d", "--detach"] {
        let fx = Fixture::new(SLEEP);
        fx.rt.run(&fx.id, &fx.bundle, &[flag], b"").ok();
        fx.rt.wait_status(&fx.id, "running");
        fx.rt.cmd(&["delete", "--force", &fx.id]).ok();
        fx.assert_nothing_left();
    }
}

#[test]
fn create_writes_pid_file() {
    skip_if!(needs::containers());
    let fx = Fixture::new(SLEEP);
    let pid_file = format!("{}/init.pid", fx.bundle.path());
    let flags = ["--pid-file", pid_file.as_str()];
    fx.rt.try_create(&fx.id, &fx.bundle, &flags).ok();
    assert_eq!(read_pid_file(&pid_file), fx.rt.pid(&fx.id));
}

#[test]
fn kill_accepts_signal_spellings() {
    skip_if!(needs::containers());
    for signal in ["KILL", "SIGKILL", "9"] {
        let fx = Fixture::running(SLEEP);
        fx.rt.kill(&fx.id, signal);
        fx.rt.wait_status(&fx.id, "stopped");
    }
    for signal in ["TERM", "15", "SIGTERM"] {
        let fx = Fixture::running_with_term_trap();
        fx.rt.kill(&fx.id, signal);
        fx.rt.wait_status(&fx.id, "stopped");
    }
}

#[test]
fn kill_defaults_to_sigterm() {
    skip_if!(needs::containers());
    let fx = Fixture::running_with_term_trap();
    fx.rt.cmd(&["kill", &fx.id]).ok();
    fx.rt.wait_status(&fx.id, "stopped");
}

#[test]
fn kill_all_reaches_every_process() {
    skip_if!(needs::containers());
    let fx = Fixture::running(&["sh", "-c", "sleep 1000 & sleep 1000 & wait"]);
    fx.exec_with(&["-d"], &["sleep", "1000"]).ok();
    let pids = fx.rt.pids(&fx.id);
    assert!(pids.len() >= 3, "expected the shell and two sleeps: {pids:?}");
    fx.rt.cmd(&["kill", "--all", &fx.id, "KILL"]).ok();
    fx.rt.wait_status(&fx.id, "stopped");
    assert!(wait::eventually(|| !pids.iter().any(|p| pid_alive(*p))), "kill --all left some of {pids:?} alive");
}

#[test]
fn delete_force_removes_running_container() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let pid = fx.rt.pid(&fx.id);
    fx.rt.cmd(&["delete", "--force", &fx.id]).ok();
    assert!(!fx.rt.cmd(&["state", &fx.id]).success(), "state after delete --force must fail");
    assert!(wait::eventually(|| !pid_alive(pid)), "init {pid} survived delete --force");
    fx.assert_nothing_left();
}

#[test]
fn pause_and_resume() {
    skip_if!(needs::cgroup_v1("freezer"));
    let fx = Fixture::running(SLEEP);
    fx.rt.cmd(&["pause", &fx.id]).ok();
    assert_eq!(fx.status(), "paused");
    fx.rt.cmd(&["resume", &fx.id]).ok();
    assert_eq!(fx.status(), "running");
}

#[test]
fn run_applies_config_env_and_bind_mount() {
    skip_if!(needs::containers());
    let host = ScratchDir::new("host");
    std::fs::write(host.join("file"), "from-host\n").expect("write host file");
    let mut fx = Fixture::new(&["true"]);
    fx.bundle
        .set_args(&["sh", "-c", "echo $GREETING; cat /data/file"])
        .add_env(&["GREETING=hello"])
        .add_mount(json!({"destination": "/data", "type": "bind", "source": host.str(), "options": ["rbind", "ro"]}));
    let out = fx.rt.run(&fx.id, &fx.bundle, &[], b"").ok();
    assert_eq!(out.stdout, "hello\nfrom-host\n");
    fx.assert_nothing_left();
}
