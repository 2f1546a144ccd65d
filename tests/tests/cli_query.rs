// Read-only commands: `ps`, `list` (table, -q, JSON), `features`, and `spec` (plain, existing
// config.json, --rootless).

use rustpod_tests::assertions::assert_one_line_error;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{needs, skip_if, spec, Fixture, Runtime, Value, SLEEP};

#[test]
fn ps_table_and_json() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let pid = fx.rt.pid(&fx.id);
    let table = fx.rt.cmd(&["ps", &fx.id]).ok();
    let header = table.stdout.lines().next().unwrap_or_default();
    assert!(header.split_whitespace().any(|c| c == "PID"), "ps table header: {}", table.describe());
    assert!(table.stdout.lines().skip(1).any(|l| l.split_whitespace().any(|c| c == pid.to_string())), "{}", table.describe());
    let pids = fx.rt.pids(&fx.id);
    assert!(pids.contains(&pid), "ps --format json {pids:?} lacks init {pid}");
}

#[test]
fn list_table_quiet_and_json() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let table = fx.rt.cmd(&["list"]).ok();
    let mut lines = table.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"], "{}", table.describe());
    let row: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    let pid = fx.rt.pid(&fx.id).to_string();
    assert_eq!(row[..4], [fx.id.as_str(), pid.as_str(), "running", fx.bundle.path()], "{}", table.describe());

    assert_eq!(fx.rt.cmd(&["list", "-q"]).ok().stdout, format!("{}\n", fx.id));

    let json = fx.rt.cmd(&["list", "--format", "json"]).ok().stdout_json();
    let entry = &json.as_array().expect("list json is an array")[0];
    for field in ["id", "pid", "status", "bundle", "created", "owner"] {
        assert!(entry.get(field).is_some(), "list json lacks {field}: {entry}");
    }
    assert_eq!(entry["id"], fx.id.as_str());
    assert_eq!(entry["status"], "running");
}

#[test]
fn list_of_empty_root() {
    skip_if!(needs::containers());
    let rt = Runtime::under_test();
    assert_eq!(rt.cmd(&["list", "-q"]).ok().stdout, "");
    // runc 1.1 prints `null` here; `[]` is as good for every JSON client.
    let json = rt.cmd(&["list", "--format", "json"]).ok().stdout_json();
    assert!(json.is_null() || json == Value::Array(vec![]), "list of no containers: {json}");
}

#[test]
fn features_json() {
    let rt = Runtime::under_test();
    let features = rt.cmd(&["features"]).ok().stdout_json();
    for field in ["ociVersionMin", "ociVersionMax"] {
        assert!(features[field].as_str().is_some_and(|v| v.starts_with("1.")), "{field}: {features}");
    }
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
    };
    assert!(strings(&features["hooks"]).contains(&"prestart".to_string()), "hooks: {features}");
    assert!(strings(&features["mountOptions"]).contains(&"rbind".to_string()), "mountOptions: {features}");
    let namespaces = strings(&features["linux"]["namespaces"]);
    for ns in ["cgroup", "ipc", "mount", "network", "pid", "user", "uts"] {
        assert!(namespaces.contains(&ns.to_string()), "linux.namespaces lacks {ns}: {features}");
    }
}

/// `spec [flags] --bundle DIR`, returning the config it wrote.
fn spec_in(rt: &Runtime, dir: &ScratchDir, flags: &[&str]) -> Value {
    rt.cmd(&[&["spec"][..], flags, &["--bundle", dir.str()]].concat()).ok();
    let text = std::fs::read_to_string(dir.join("config.json")).expect("spec writes config.json into --bundle");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("spec wrote invalid JSON ({e}): {text}"))
}

fn namespace_types(config: &Value) -> Vec<String> {
    let namespaces = config["linux"]["namespaces"].as_array().cloned().unwrap_or_default();
    namespaces.iter().filter_map(|n| n["type"].as_str().map(str::to_string)).collect()
}

fn mount_destinations(config: &Value) -> Vec<Value> {
    config["mounts"].as_array().map(|m| m.iter().map(|m| m["destination"].clone()).collect()).unwrap_or_default()
}

#[test]
fn spec_writes_runc_default_config() {
    let (rt, dir) = (Runtime::under_test(), ScratchDir::new("spec"));
    let config = spec_in(&rt, &dir, &[]);
    let runc = spec::runc_default();
    assert_eq!(config["process"]["args"], runc["process"]["args"]);
    assert_eq!(config["root"], runc["root"]);
    // runc 1.2 adds a cgroup namespace to its default; more namespaces are fine, a user one is not.
    let namespaces = namespace_types(&config);
    let missing: Vec<String> = namespace_types(&runc).into_iter().filter(|ns| !namespaces.contains(ns)).collect();
    assert!(missing.is_empty(), "spec lacks namespaces {missing:?}: {namespaces:?}");
    assert!(!namespaces.contains(&"user".to_string()), "only --rootless adds a user namespace");
    assert_eq!(mount_destinations(&config), mount_destinations(&runc));
}

#[test]
fn spec_refuses_to_overwrite() {
    let (rt, dir) = (Runtime::under_test(), ScratchDir::new("spec"));
    spec_in(&rt, &dir, &[]);
    let again = rt.cmd(&["spec", "--bundle", dir.str()]);
    assert_one_line_error(&again, &["exists"]);
}

#[test]
fn spec_rootless_adds_user_namespace() {
    let (rt, dir) = (Runtime::under_test(), ScratchDir::new("spec"));
    let config = spec_in(&rt, &dir, &["--rootless"]);
    assert!(namespace_types(&config).contains(&"user".to_string()), "{config}");
    assert!(config["linux"]["uidMappings"].as_array().is_some_and(|m| !m.is_empty()), "uidMappings: {config}");
    assert!(config["linux"]["gidMappings"].as_array().is_some_and(|m| !m.is_empty()), "gidMappings: {config}");
}
