// The systemd cgroup driver's own behaviour (issue 14): systemd removes a scope's cgroup as soon
// as its last process exits, so `kill --all` of a stopped container (what containerd's
// WithProcessKill sends after every exit) finds no cgroup and must succeed, as runc does.
// Since issue 22 rustpod places such an init without the engine's intermediate process: its scope,
// limits and cgroup namespace are compared with the reference's (runc 1.3.6, and crun 1.28 with
// RUNC_BIN), as is a failed create's cleanup, on the CLI and through containerd (its runc shim
// driving the reference or rustpod, and our shim). Needs systemd as PID 1: hack/guest-sid.sh runs
// it in a guest.

use rustpod_tests::cgroup::systemd_blocker;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{json, needs, skip_if, Bundle, Runtime, Value, SLEEP};
use std::path::Path;

fn kill_all_after_exit(rt: &Runtime) -> (bool, String) {
    let mut bundle = Bundle::new(&["true"]);
    let id = rt.new_id("sdkill");
    bundle.clear_cgroups_path();
    bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
    rt.create(&id, &bundle);
    rt.start(&id);
    rt.wait_status(&id, "stopped");
    let out = rt.cmd(&["kill", "--all", &id, "KILL"]);
    rt.cmd(&["delete", "--force", &id]).ok();
    (out.success(), out.describe())
}

#[test]
fn kill_all_of_a_stopped_container_succeeds_with_systemd() {
    skip_if!(needs::containers().or_else(|| needs::program(&rustpod_tests::env::runc_bin())).or_else(systemd_blocker));
    let runc = kill_all_after_exit(&Runtime::runc().with_globals(&["--systemd-cgroup"]));
    let ours = kill_all_after_exit(&Runtime::under_test().with_globals(&["--systemd-cgroup"]));
    assert!(runc.0, "runc: {}", runc.1);
    assert!(ours.0, "kill --all after the init exited: {} (runc succeeds)", ours.1);
}

/// What `rt` makes of a systemd-placed container with limits, a cgroup namespace and the spec's
/// cgroup mount, ids replaced by `ID`: where its init is and what that cgroup holds before
/// `start` (the user's program must never run unconfined), what the container and an exec'd
/// process see of it from inside, and what `delete` leaves.
fn scope_report(rt: &Runtime) -> String {
    let mut bundle = Bundle::new(SLEEP);
    let id = rt.new_id("sdscope");
    bundle.clear_cgroups_path();
    bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
    bundle.set("/linux/resources/memory", json!({"limit": 64 << 20, "swap": 64 << 20}));
    bundle.set("/linux/resources/pids", json!({"limit": 64}));
    // crun 1.28 puts a v2 container in a `container` cgroup below its scope unless told not to;
    // runc and rustpod have no such cgroup and leave the annotation alone.
    bundle.set_annotations(json!({"run.oci.systemd.subgroup": ""}));
    let namespaces = with_cgroup_namespace(&bundle.config()["linux"]["namespaces"]);
    bundle.set("/linux/namespaces", namespaces);
    rt.create(&id, &bundle);
    let mut report = scope_lines("created", rt.pid(&id), &id);
    rt.start(&id);
    let inside = rt.exec(&id, &["sh", "-c", LOOK_INSIDE]).ok();
    report.push(format!("exec: {}", inside.stdout.trim().replace('\n', " ")));
    rt.cmd(&["delete", "--force", &id]).ok();
    report.push(scope_gone(&id));
    report.join("\n").replace(&id, "ID")
}

/// What an exec'd process sees of its cgroup and its limits.
const LOOK_INSIDE: &str = "cat /proc/self/cgroup /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max";

fn with_cgroup_namespace(namespaces: &Value) -> Value {
    let mut all = namespaces.as_array().cloned().unwrap_or_default();
    if !all.iter().any(|n| n["type"] == "cgroup") {
        all.push(json!({"type": "cgroup"}));
    }
    json!(all)
}

/// Where `init` of container `id` (in scope `rustpod-test-<id>.scope`) is, the scope's limits and
/// its unit's state, each line starting with `when`.
fn scope_lines(when: &str, init: i32, id: &str) -> Vec<String> {
    let unit = format!("rustpod-test-{id}.scope");
    let own = std::fs::read_to_string(format!("/proc/{init}/cgroup")).unwrap_or_default();
    let dir = format!("/sys/fs/cgroup/system.slice/{unit}");
    let file =
        |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).map(|s| s.trim().to_string()).unwrap_or_else(|e| e.to_string());
    vec![
        format!("{when}: init in {}", own.trim()),
        format!("{when}: memory.max={} pids.max={}", file("memory.max"), file("pids.max")),
        format!("{when}: {} {}", unit_property(&unit, "Delegate"), unit_property(&unit, "ActiveState")),
    ]
}

/// Waits (bounded) for container `id`'s scope and cgroup to go; what is left of them.
fn scope_gone(id: &str) -> String {
    let unit = format!("rustpod-test-{id}.scope");
    let dir = Path::new("/sys/fs/cgroup/system.slice").join(&unit);
    let gone = || unit_property(&unit, "ActiveState") == "ActiveState=inactive" && !dir.exists();
    rustpod_tests::wait::eventually(gone);
    format!("deleted: {} dir={}", unit_property(&unit, "ActiveState"), dir.exists())
}

fn scope_blocker() -> Option<String> {
    needs::containers()
        .or_else(|| needs::program(&rustpod_tests::env::runc_bin()))
        .or_else(|| needs::program(Path::new("/bin/systemctl")))
        .or_else(systemd_blocker)
}

fn unit_property(unit: &str, property: &str) -> String {
    let out = rustpod_tests::process::run(Path::new("/bin/systemctl"), &["show", "-p", property, unit], b"");
    out.stdout.trim().to_string()
}

/// Issue 22: rustpod starts a systemd-placed init without the engine's intermediate process (the
/// init cloned where rustpod is, then its scope started with the init's pid); the scope, its
/// limits, the cgroup namespace and an exec'd process must be where the reference puts them.
#[test]
fn a_systemd_scope_holds_the_init_before_start_as_the_references() {
    skip_if!(scope_blocker());
    let reference = scope_report(&Runtime::runc().with_globals(&["--systemd-cgroup"]));
    let ours = scope_report(&Runtime::under_test().with_globals(&["--systemd-cgroup"]));
    assert!(reference.contains("init in 0::/system.slice/rustpod-test-ID.scope"), "the reference's report:\n{reference}");
    assert_eq!(ours, reference, "rustpod (left) and {} (right)", rustpod_tests::env::runc_bin().display());
}

/// A create that fails after the scope is made (the program does not exist) leaves no scope
/// and no cgroup, as the reference's does, and says why on one line.
#[test]
fn a_failed_create_leaves_no_scope() {
    skip_if!(scope_blocker());
    let attempt = |rt: &Runtime| {
        let mut bundle = Bundle::new(&["/no/such/program"]);
        let id = rt.new_id("sdfail");
        bundle.clear_cgroups_path();
        bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
        let out = rt.try_create(&id, &bundle, &[]);
        let unit = format!("rustpod-test-{id}.scope");
        let dir = Path::new("/sys/fs/cgroup/system.slice").join(&unit);
        let gone = || unit_property(&unit, "ActiveState") == "ActiveState=inactive" && !dir.exists();
        rustpod_tests::wait::eventually(gone);
        let left = (unit_property(&unit, "ActiveState"), dir.exists());
        (out, left)
    };
    let (runc_out, runc_left) = attempt(&Runtime::runc().with_globals(&["--systemd-cgroup"]));
    let (out, left) = attempt(&Runtime::under_test().with_globals(&["--systemd-cgroup"]));
    assert!(!runc_out.success(), "the reference created it: {}", runc_out.describe());
    assert!(!out.success(), "rustpod created a container with no program: {}", out.describe());
    rustpod_tests::assertions::assert_one_line_error(&out, &["/no/such/program"]);
    assert_eq!(left, runc_left, "(unit state, cgroup dir exists) after the failed create: rustpod (left), reference (right)");
    assert_eq!(left, ("ActiveState=inactive".to_string(), false));
}

/// The same systemd-placed container made by containerd through `flags` (its runc shim driving the
/// reference or rustpod, or our shim): its scope and limits once running, an exec'd process's view,
/// and what deleting the task leaves. Named `name`, replaced by `ID`.
fn scope_report_through(ctd: &ShimContainerd, dir: &ScratchDir, name: &str, flags: &[String]) -> String {
    let bundle = Bundle::new(&["true"]);
    let mut spec = ctd.oci_spec_with_reports(name, &bundle.rootfs(), dir);
    let cgroup = format!("system.slice:rustpod-test:{name}");
    spec["linux"]["cgroupsPath"] = json!(cgroup);
    spec["linux"]["resources"]["memory"] = json!({"limit": 64 << 20, "swap": 64 << 20});
    spec["linux"]["resources"]["pids"] = json!({"limit": 64});
    spec["linux"]["namespaces"] = with_cgroup_namespace(&spec["linux"]["namespaces"]);
    spec["annotations"]["run.oci.systemd.subgroup"] = json!("");
    let mounts = spec["mounts"].as_array_mut().expect("ctr's spec has mounts");
    if !mounts.iter().any(|m| m["destination"] == "/sys/fs/cgroup") {
        // ctr's spec has none; the containers CRI makes have this one.
        mounts.push(json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                           "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}));
    }
    // ctr wants the path again with --runc-systemd-cgroup.
    let flags = [flags, &["--cgroup".to_string(), cgroup]].concat();
    ctd.run_spec(dir, name, &spec, "-d", &flags).ok();
    ctd.wait_task(name, "RUNNING");
    let (init, _) = ctd.task(name).expect("the task is listed");
    let mut report = scope_lines("running", init, name);
    // Into a file: ctr loses a short-lived process's output now and then (shim::REPORTS).
    let look = format!("exec >{}/{name}.look 2>&1; {LOOK_INSIDE}", shim::REPORTS);
    ctd.ctr(&["task", "exec", "--exec-id", "look", name, "sh", "-c", &look]).ok();
    let inside = shim::report(dir, &format!("{name}.look"));
    report.push(format!("exec: {}", inside.trim().replace('\n', " ")));
    ctd.ctr(&["task", "kill", "-s", "SIGKILL", name]).ok();
    ctd.wait_task(name, "STOPPED");
    ctd.ctr(&["task", "delete", name]).ok();
    ctd.ctr(&["container", "rm", name]).ok();
    report.push(scope_gone(name));
    report.join("\n").replace(name, "ID")
}

/// The scope through containerd's three paths: its runc shim with `--runc-binary` (the reference,
/// then rustpod) and `--runc-systemd-cgroup`, and our shim with `SystemdCgroup = true` from a
/// runtime config file, as a CRI handler's options reach it. Each must match the reference's.
#[test]
fn a_systemd_scope_through_containerd_matches_the_reference() {
    skip_if!(scope_blocker().or_else(shim::blocker));
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("sdshim");
    let options = dir.join_str("systemd.toml");
    std::fs::write(&options, "SystemdCgroup = true\n").expect("write the runtime options");
    let reports: Vec<(&str, String)> = shim::paths()
        .into_iter()
        .enumerate()
        .map(|(i, (who, mut flags))| {
            if who.starts_with("runc-shim") {
                flags.push("--runc-systemd-cgroup".into());
            } else {
                flags.extend(["--runtime-config-path".into(), options.clone()]);
            }
            (who, scope_report_through(&ctd, &dir, &rustpod_tests::scratch::unique_name(&format!("sdshim{i}")), &flags))
        })
        .collect();
    let (reference_who, reference) = &reports[0];
    eprintln!("{reference_who}'s report:\n{reference}");
    assert!(reference.contains("init in 0::/system.slice/rustpod-test-ID.scope"), "{reference_who}'s report:\n{reference}");
    for (who, report) in &reports[1..] {
        assert_eq!(report, reference, "{who} (left) and {reference_who} with {} (right)", rustpod_tests::env::runc_bin().display());
    }
}
