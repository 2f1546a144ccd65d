// Statistics against the cgroup files they come from (issue 14): `events --stats` and the shim's
// metrics (what kubelet's CRI ContainerStats and /stats/summary show) must equal cpu.stat's
// usage_usec and memory.current on cgroup v2 (cpuacct.usage and memory.usage_in_bytes on v1),
// in the units those files use, never 1000x off; with the cgroupfs driver and, where systemd
// runs, with systemd's. Each runtime is checked next to runc (the CLI) or containerd's runc shim.

use rustpod_tests::cgroup::{assert_between, assert_memory, systemd_blocker, Counters};
use rustpod_tests::shim::ShimContainerd;
use rustpod_tests::{json, needs, skip_if, Bundle, Runtime, Value};

/// Burns some CPU (so that usage is well above a microsecond), then idles.
const BURN: &str = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exec sleep 1000";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Driver {
    Cgroupfs,
    Systemd,
}

/// Starts a burner under `rt` with `driver`; returns its id, the cgroup files of its init and
/// its bundle (to be kept until the container is deleted).
fn start_burner(rt: &Runtime, driver: Driver) -> (String, Counters, Bundle) {
    let mut bundle = Bundle::new(&["sh", "-c", BURN]);
    let id = rt.new_id("stats");
    if driver == Driver::Systemd {
        bundle.clear_cgroups_path();
        bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
    }
    rt.start_container(&id, &bundle);
    let files = Counters::of(rt.pid(&id));
    (id, files, bundle)
}

/// `events --stats`: cpu.usage.total (ns) and memory.usage.usage against the files.
fn check_events_stats(rt: &Runtime, driver: Driver) {
    let (id, files, _bundle) = start_burner(rt, driver);
    let (cpu_before, mem_before) = (files.cpu_ns(), files.memory());
    let out = rt.cmd(&["events", "--stats", &id]).ok();
    let (cpu_after, mem_after) = (files.cpu_ns(), files.memory());
    let event: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("events --stats is not one JSON object ({e}): {}", out.describe()));
    let field = |pointer: &str| event.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("no {pointer} in {event}"));
    let who = format!("{} ({driver:?}) events --stats", rt.bin().display());
    assert_between(&format!("{who} /data/cpu/usage/total (ns)"), cpu_before, field("/data/cpu/usage/total"), cpu_after);
    assert_memory(&format!("{who} /data/memory/usage/usage"), mem_before, field("/data/memory/usage/usage"), mem_after);
    rt.cmd(&["delete", "--force", &id]).ok();
}

fn events_stats_on_both(driver: Driver) {
    skip_if!(needs::containers().or_else(|| needs::program(&rustpod_tests::env::runc_bin())));
    let systemd = ["--systemd-cgroup"];
    let globals: &[&str] = if driver == Driver::Systemd { &systemd } else { &[] };
    check_events_stats(&Runtime::runc().with_globals(globals), driver);
    check_events_stats(&Runtime::under_test().with_globals(globals), driver);
}

#[test]
fn events_stats_match_the_cgroup_files() {
    events_stats_on_both(Driver::Cgroupfs);
}

#[test]
fn events_stats_match_the_cgroup_files_with_systemd() {
    skip_if!(systemd_blocker());
    events_stats_on_both(Driver::Systemd);
}

/// `ctr task metrics ID` as METRIC -> VALUE.
fn metrics(ctd: &ShimContainerd, id: &str) -> std::collections::HashMap<String, String> {
    let out = ctd.ctr(&["task", "metrics", id]).ok();
    out.stdout
        .lines()
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            Some((cols.next()?.to_string(), cols.next()?.to_string()))
        })
        .collect()
}

/// The shim's metrics for a burner run through `runtime` (our shim, or containerd's runc shim).
fn check_metrics(ctd: &ShimContainerd, runtime: &str, driver: Driver) {
    let id = rustpod_tests::scratch::unique_name("metrics");
    let cgroup = format!("system.slice:rustpod-test:{id}");
    let mut args = vec!["run", "-d", "--runtime", runtime];
    if driver == Driver::Systemd {
        if runtime.contains("runc") {
            args.push("--runc-systemd-cgroup");
        }
        args.extend(["--cgroup", cgroup.as_str()]);
    }
    args.extend([rustpod_tests::shim::IMAGE, id.as_str(), "sh", "-c", BURN]);
    ctd.ctr(&args).ok();
    ctd.wait_task(&id, "RUNNING");
    let (pid, _) = ctd.task(&id).expect("task listed");
    let files = Counters::of(pid);
    let (cpu_names, mem_name) = if files.v2() { ("cpu.usage_usec", "memory.usage") } else { ("cpuacct.usage", "memory.usage_in_bytes") };
    let (cpu_before, mem_before) = (files.cpu_native(), files.memory());
    let m = metrics(ctd, &id);
    let (cpu_after, mem_after) = (files.cpu_native(), files.memory());
    let value =
        |name: &str| -> u64 { m.get(name).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no {name} in ctr task metrics: {m:?}")) };
    let who = format!("{runtime} ({driver:?}) metrics");
    assert_between(&format!("{who} {cpu_names}"), cpu_before, value(cpu_names), cpu_after);
    assert_memory(&format!("{who} {mem_name}"), mem_before, value(mem_name), mem_after);
    ctd.ctr(&["task", "kill", "-s", "SIGKILL", &id]).ok();
    ctd.wait_task(&id, "STOPPED");
    ctd.delete_task(&id);
    ctd.ctr(&["containers", "delete", &id]).ok();
}

fn metrics_on_both(driver: Driver) {
    skip_if!(rustpod_tests::shim::blocker());
    let ctd = ShimContainerd::start();
    check_metrics(&ctd, "io.containerd.runc.v2", driver);
    check_metrics(&ctd, rustpod_tests::shim::RUNTIME, driver);
}

#[test]
fn shim_metrics_match_the_cgroup_files() {
    metrics_on_both(Driver::Cgroupfs);
}

#[test]
fn shim_metrics_match_the_cgroup_files_with_systemd() {
    skip_if!(systemd_blocker());
    metrics_on_both(Driver::Systemd);
}
