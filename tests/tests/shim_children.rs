// The shim's own children and a container's leftovers (issue 15 item 1), through containerd:
// poststart and poststop hooks the shim server forks and waits for (its reaper must not take their
// status), and an init that exits in a PID namespace it shares, whose exec'd processes must die as
// containerd's runc shim kills them. containerd's runc shim with runc is the reference.

use rustpod_tests::process;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd, RUNTIME};
use rustpod_tests::{env, json, needs, skip_if, wait, Bundle, Value, SLEEP};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn blocker() -> Option<String> {
    shim::blocker().or_else(|| needs::program(&env::runc_bin()))
}

/// `(name, ctr flags)`: containerd's runc shim with runc (the reference), and our shim.
fn paths() -> Vec<(&'static str, Vec<String>)> {
    let runc = env::runc_bin().to_string_lossy().into_owned();
    vec![("runc-shim-runc", vec!["--runc-binary".into(), runc]), ("rustpod-shim", vec!["--runtime".into(), RUNTIME.into()])]
}

/// `ctd.oci_spec` with `hooks`, edited by `edit`, written to `dir/<name>.json`.
fn spec_file(ctd: &ShimContainerd, dir: &ScratchDir, name: &str, rootfs: &str, hooks: Value, edit: impl Fn(&mut Value)) -> String {
    let mut spec = ctd.oci_spec(name, rootfs);
    spec["hooks"] = hooks;
    edit(&mut spec);
    let path = dir.join_str(&format!("{name}.json"));
    fs::write(&path, spec.to_string()).expect("write spec");
    path
}

fn run(ctd: &ShimContainerd, config: &str, flags: &[String], id: &str) -> process::Output {
    ctd.run_config(config, flags, id)
}

/// A hook that appends its name to `report/<file>` and exits `code`.
fn hook(report: &ScratchDir, file: &str, code: i32) -> Value {
    let script = format!("cat >/dev/null; echo ran >> {}; exit {code}", report.join_str(file));
    json!({"path": "/bin/sh", "args": ["sh", "-c", script]})
}

/// A hook that appends to `report/<file>` and exits at once (often before its state is written).
fn fast_hook(report: &ScratchDir, file: &str) -> Value {
    json!({"path": "/bin/sh", "args": ["sh", "-c", format!("echo ran >> {}", report.join_str(file))]})
}

/// The lines our shim wrote to containerd's log.
fn shim_log(ctd: &ShimContainerd) -> Vec<String> {
    let log = fs::read_to_string(Path::new(ctd.dir()).join("containerd.log")).unwrap_or_default();
    log.lines().filter(|l| l.contains(RUNTIME)).map(str::to_string).collect()
}

fn report_dir() -> ScratchDir {
    let report = ScratchDir::new("hookreport");
    fs::set_permissions(report.str(), fs::Permissions::from_mode(0o777)).expect("chmod report dir");
    report
}

fn alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.rsplit(") ").next().unwrap_or("").starts_with('Z'))
}

/// Passing poststart hooks run once each and no failure is logged for them, while the shim's
/// reaper is kept busy by a pod-mate (no PID namespace of its own) whose orphans it reaps; a
/// failing one is a warning and Start succeeds (the spec). Not compared with runc here.
#[test]
fn poststart_hooks_keep_their_status_in_the_shim() {
    skip_if!(shim::blocker());
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("hookspec");
    let rootfs = Bundle::new(SLEEP);
    let report = report_dir();
    let flags = vec!["--runtime".to_string(), RUNTIME.to_string()];
    let group = |spec: &mut Value| spec["annotations"] = json!({"io.containerd.runc.v2.group": "storm"});
    let storm = spec_file(&ctd, &dir, "storm", &rootfs.rootfs(), json!({}), |spec| {
        group(spec);
        spec["process"]["args"] = json!(["sh", "-c", "while true; do (true &) ; done"]);
        spec["linux"]["namespaces"].as_array_mut().expect("namespaces").retain(|ns| ns["type"] != "pid");
    });
    run(&ctd, &storm, &flags, "storm").ok();
    ctd.wait_task("storm", "RUNNING");
    for i in 0..20 {
        let id = format!("ok{i}");
        let hooks = json!({"poststart": [fast_hook(&report, &id), fast_hook(&report, &id)]});
        let config = spec_file(&ctd, &dir, &id, &rootfs.rootfs(), hooks, group);
        run(&ctd, &config, &flags, &id).ok();
        ctd.wait_task(&id, "RUNNING");
        assert_eq!(fs::read_to_string(report.join(&id)).unwrap_or_default(), "ran\nran\n", "{id}: each hook runs once");
    }
    let failed: Vec<String> = shim_log(&ctd).into_iter().filter(|l| l.contains("poststart hook failed")).collect();
    assert!(failed.is_empty(), "passing hooks were reported failed: {failed:?}");
    let hooks = json!({"poststart": [hook(&report, "bad", 5), hook(&report, "bad", 0)]});
    let config = spec_file(&ctd, &dir, "bad", &rootfs.rootfs(), hooks, group);
    let out = run(&ctd, &config, &flags, "bad");
    assert!(out.success(), "a failing poststart hook failed start: {}", out.describe());
    ctd.wait_task("bad", "RUNNING");
    let warnings = wait::wait_for("the shim's warning about the failing hook", || {
        let lines: Vec<String> = shim_log(&ctd).into_iter().filter(|l| l.contains("poststart hook failed")).collect();
        (!lines.is_empty()).then_some(lines)
    });
    assert!(warnings.iter().all(|l| l.contains("level=warn")), "not a warning: {warnings:?}");
    assert_eq!(warnings.len(), 1, "only the failing hook is reported: {warnings:?}");
}

/// Poststop hooks run at Delete; a failing one is logged and Delete still succeeds and removes
/// the task, as with runc 1.1.5 and crun 1.28 (runc 1.2 and later fail the first Delete, see
/// below). Each passing hook runs once.
#[test]
fn poststop_hooks_run_and_a_failing_one_does_not_fail_delete() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("hookspec");
    let rootfs = Bundle::new(SLEEP);
    let report = report_dir();
    for (path, flags) in paths() {
        for (kind, code) in [("good", 0), ("bad", 7)] {
            let id = format!("{path}-{kind}");
            let after = format!("{id}-after");
            let hooks = json!({"poststop": [hook(&report, &id, code), hook(&report, &after, 0)]});
            let config = spec_file(&ctd, &dir, &id, &rootfs.rootfs(), hooks, |_| {});
            run(&ctd, &config, &flags, &id).ok();
            ctd.wait_task(&id, "RUNNING");
            ctd.ctr(&["task", "kill", "-s", "SIGKILL", &id]).ok();
            ctd.wait_task(&id, "STOPPED");
            let out = ctd.ctr(&["task", "delete", &id]);
            if path == "runc-shim-runc" && !out.success() && out.stderr.contains("poststop hook") {
                // runc 1.2 and later remove the container, then fail its delete with the hook's
                // error, and the runc shim fails the Delete; the next Delete finds the container
                // gone and removes the task (tests/RUNC_DIFFERENCES.md). Ours warns and goes on.
                let again = ctd.ctr(&["task", "delete", &id]);
                assert!(again.success(), "{id}: a second delete after the hook's failure: {}", again.describe());
            } else {
                assert!(out.success(), "{id}: delete failed: {}", out.describe());
            }
            assert_eq!(ctd.task(&id), None, "{id}: the task is still listed");
            assert_eq!(fs::read_to_string(report.join(&id)).unwrap_or_default(), "ran\n", "{id}: the hook ran once");
            let after_ran = fs::read_to_string(report.join(&after)).unwrap_or_default();
            if code == 0 {
                assert_eq!(after_ran, "ran\n", "{id}: the second hook ran once");
            }
            ctd.ctr(&["containers", "delete", &id]).ok();
        }
    }
}

/// An init that shares a PID namespace (here the host's) takes its container's other processes
/// with it: an exec'd `sleep` left behind is killed, and its exit comes before the init's.
#[test]
fn init_exit_kills_the_rest_of_a_container_without_its_own_pid_namespace() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("pidspec");
    let rootfs = Bundle::new(SLEEP);
    let no_pid_ns = |spec: &mut Value| {
        let namespaces = spec["linux"]["namespaces"].as_array_mut().expect("spec has namespaces");
        namespaces.retain(|ns| ns["type"] != "pid");
    };
    for (path, flags) in paths() {
        let config = spec_file(&ctd, &dir, path, &rootfs.rootfs(), json!({}), no_pid_ns);
        run(&ctd, &config, &flags, path).ok();
        ctd.wait_task(path, "RUNNING");
        let (init, _) = ctd.task(path).expect("task listed");
        ctd.ctr(&["task", "exec", "-d", "--exec-id", "left", path, "sleep", "1001"]).ok();
        let sleeper = wait::wait_for(&format!("{path}: the exec'd sleep"), || {
            let ps = ctd.ctr(&["task", "ps", path]).stdout;
            ps.lines().filter_map(|l| l.split_whitespace().next()?.parse::<i32>().ok()).find(|&pid| pid != init)
        });
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", path]).ok();
        ctd.wait_task(path, "STOPPED");
        assert!(
            wait::eventually(|| !alive(sleeper)),
            "{path}: the exec'd sleep {sleeper} outlived its init; shim log: {:?}",
            shim_log(&ctd)
        );
        assert_eq!(ctd.delete_task(path), 137, "{path}: the init's exit status");
    }
}

/// The codes containerd acts on, as ctr shows them, match the Go shim's: NotFound for a signal
/// to a process that has exited, AlreadyExists for a second exec with the same id.
#[test]
fn error_codes_reach_containerd_as_the_go_shims() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("codespec");
    let rootfs = Bundle::new(SLEEP);
    for (path, flags) in paths() {
        let config = spec_file(&ctd, &dir, path, &rootfs.rootfs(), json!({}), |_| {});
        run(&ctd, &config, &flags, path).ok();
        ctd.wait_task(path, "RUNNING");
        ctd.ctr(&["task", "exec", "-d", "--exec-id", "twice", path, "sleep", "1002"]).ok();
        let again = ctd.ctr(&["task", "exec", "-d", "--exec-id", "twice", path, "true"]);
        assert!(again.stderr.contains("already exists"), "{path}: a second exec `twice`: {}", again.describe());
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", path]).ok();
        ctd.wait_task(path, "STOPPED");
        let kill = ctd.ctr(&["task", "kill", "-s", "SIGTERM", path]);
        assert!(kill.stderr.contains("not found"), "{path}: kill of a stopped task: {}", kill.describe());
        ctd.delete_task(path);
        let gone = ctd.ctr(&["task", "delete", path]);
        assert!(gone.stderr.contains("not found"), "{path}: delete of a deleted task: {}", gone.describe());
    }
}

/// A signal the init ignores leaves it running, so the next one must still reach it: kubelet's
/// StopContainer sends TERM, then KILL after the grace period. The shim keeps one handle per
/// container, and the engine marks a handle stopped after any kill; a stale "stopped" made the
/// KILL answer NotFound and containerd waited for an exit forever.
#[test]
fn a_signal_after_an_ignored_one_still_reaches_the_init() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("termspec");
    let rootfs = Bundle::new(SLEEP);
    for (path, flags) in paths() {
        // The marker says the trap is set, so the TERM below cannot come before it.
        let marker = format!("/trapped-{path}");
        let script = format!("trap '' TERM; touch {marker}; while :; do sleep 1; done");
        let stubborn = |spec: &mut Value| spec["process"]["args"] = json!(["sh", "-c", script]);
        let config = spec_file(&ctd, &dir, path, &rootfs.rootfs(), json!({}), stubborn);
        run(&ctd, &config, &flags, path).ok();
        let on_host = Path::new(&rootfs.rootfs()).join(marker.trim_start_matches('/'));
        wait::wait_for(&format!("{path}: the init to set its trap"), || on_host.exists().then_some(()));
        let (init, _) = ctd.task(path).expect("task listed");
        ctd.ctr(&["task", "kill", "-s", "SIGTERM", path]).ok();
        assert_eq!(ctd.task_status(path).as_deref(), Some("RUNNING"), "{path}: the init ignores TERM");
        let kill = ctd.ctr(&["task", "kill", "-s", "SIGKILL", path]);
        assert!(kill.success(), "{path}: KILL after an ignored TERM: {}", kill.describe());
        ctd.wait_task(path, "STOPPED");
        assert!(!alive(init), "{path}: the init {init} survived KILL");
        assert_eq!(ctd.delete_task(path), 137, "{path}: the init's exit status");
    }
}
