// Live resource changes and statistics: `update` (flags and --resources JSON) as seen in the
// container's cgroup v1 files, and `events --stats`.

use rustpod_tests::cgroup::v1_file;
use rustpod_tests::{needs, skip_if, Fixture, Value, SLEEP};

const MIB: u64 = 1024 * 1024;

fn memory_limit(fx: &Fixture) -> u64 {
    v1_file("memory", &fx.id, "memory.limit_in_bytes").parse().expect("memory.limit_in_bytes is a number")
}

#[test]
fn update_memory_flag() {
    skip_if!(needs::cgroup_v1("memory"));
    let fx = Fixture::running(SLEEP);
    fx.rt.cmd(&["update", "--memory", "64M", &fx.id]).ok();
    assert_eq!(memory_limit(&fx), 64 * MIB);
}

#[test]
fn update_resources_from_stdin() {
    skip_if!(needs::cgroup_v1("memory"));
    let fx = Fixture::running(SLEEP);
    let resources = format!(r#"{{"memory": {{"limit": {}}}}}"#, 128 * MIB);
    fx.rt.cmd_stdin(&["update", "--resources", "-", &fx.id], resources.as_bytes()).ok();
    assert_eq!(memory_limit(&fx), 128 * MIB);
}

#[test]
fn update_cpu_and_pids_flags() {
    for controller in ["cpu", "cpuset", "pids"] {
        skip_if!(needs::cgroup_v1(controller));
    }
    let fx = Fixture::running(SLEEP);
    // runc 1.1 spells the shares flag `--cpu-share` (singular); a drop-in must accept it.
    let flags = ["--pids-limit", "50", "--cpu-share", "512", "--cpu-quota", "50000", "--cpu-period", "100000"];
    fx.rt.cmd(&[&["update"][..], &flags, &["--cpuset-cpus", "0", &fx.id]].concat()).ok();
    assert_eq!(v1_file("pids", &fx.id, "pids.max"), "50");
    assert_eq!(v1_file("cpu", &fx.id, "cpu.shares"), "512");
    assert_eq!(v1_file("cpu", &fx.id, "cpu.cfs_quota_us"), "50000");
    assert_eq!(v1_file("cpu", &fx.id, "cpu.cfs_period_us"), "100000");
    assert_eq!(v1_file("cpuset", &fx.id, "cpuset.cpus"), "0");
}

#[test]
fn events_stats_prints_one_object() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let out = fx.rt.cmd(&["events", "--stats", &fx.id]).ok();
    let lines: Vec<&str> = out.stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "events --stats prints one JSON line: {}", out.describe());
    let event: Value = serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("not JSON ({e}): {}", lines[0]));
    assert_eq!(event["type"], "stats", "{event}");
    assert_eq!(event["id"], fx.id.as_str(), "{event}");
    assert!(event["data"]["memory"].is_object() && event["data"]["pids"].is_object(), "stats data: {event}");
}

/// Every JSON path of a value, without the `raw` memory counters' names and array indexes.
fn json_paths(value: &Value, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let path = format!("{prefix}/{k}");
                if k == "raw" {
                    out.insert(path);
                    continue;
                }
                json_paths(v, &path, out);
            }
        }
        Value::Array(items) => {
            out.insert(format!("{prefix}[]"));
            items.iter().for_each(|v| json_paths(v, &format!("{prefix}[]"), out));
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

/// Tools that read `runc events --stats` get runc's field names and units: the same paths as
/// runc prints for the same bundle (limits set, so they are not left out as zero), and the
/// limits as they were set.
#[test]
fn events_stats_have_runcs_shape() {
    use rustpod_tests::{env, json, Bundle, Runtime};
    skip_if!(needs::containers().or_else(|| needs::program(&env::runc_bin())));
    let mut bundle = Bundle::new(SLEEP);
    bundle.set("/linux/resources/memory", json!({"limit": 104857600}));
    bundle.set("/linux/resources/pids", json!({"limit": 100}));
    let shape = |rt: &Runtime| {
        let id = rt.new_id("stats");
        rt.start_container(&id, &bundle);
        let out = rt.cmd(&["events", "--stats", &id]).ok();
        let event: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON event");
        let mut paths = std::collections::BTreeSet::new();
        json_paths(&event, "", &mut paths);
        // Counters that are zero in one run and not in another are left out by both; on v2 the
        // page cache of busybox is charged to the container that read it first (memory.cache).
        paths.retain(|p| !p.contains("throttling") && !p.contains("blkio") && !p.contains("/max") && p != "/data/memory/cache");
        (paths, event["data"]["memory"]["usage"]["limit"].clone(), event["data"]["pids"]["limit"].clone())
    };
    let runc = shape(&Runtime::runc());
    let mut ours = shape(&Runtime::under_test());
    // runc 1.2+ adds the cgroup's pressure (`psi`) on v2, as we do; 1.1 (Debian 12's) has none.
    if !runc.0.iter().any(|p| p.contains("/psi/")) {
        eprintln!("runc prints no psi (before 1.2, or no PSI here): comparing without it");
        ours.0.retain(|p| !p.contains("/psi/"));
    }
    assert_eq!(ours, runc, "events --stats differs from runc's");
    assert_eq!((ours.1, ours.2), (json!(104857600), json!(100)));
}
