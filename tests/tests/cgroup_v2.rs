// Resources on a pure cgroup v2 host, where this host (v1 hybrid) cannot run them and
// hack/guest-v2.sh does: linux.resources as the v2 files show them, `update` flags and JSON
// changing them live, hugetlb, and pause/resume through cgroup.freeze. Each scenario runs on
// runc too, and rustpod must write the same values.

use rustpod_tests::cgroup::v2_file;
use rustpod_tests::{env, json, needs, skip_if, Bundle, Runtime, Value, SLEEP};

const MIB: i64 = 1024 * 1024;

fn blocker(controllers: &[&str]) -> Option<String> {
    needs::cgroup_v2(controllers).or_else(|| needs::program(&env::runc_bin()))
}

/// `files` of a container started by `rt` with `resources`, after `then` ran on it.
fn files_after(rt: &Runtime, resources: &Value, files: &[&str], then: impl Fn(&Runtime, &str)) -> Vec<String> {
    let mut bundle = Bundle::new(SLEEP);
    bundle.set("/linux/resources", resources.clone());
    let id = rt.new_id("v2");
    rt.start_container(&id, &bundle);
    then(rt, &id);
    let values = files.iter().map(|f| format!("{f}={}", v2_file(&id, f))).collect();
    rt.cmd(&["delete", "--force", &id]).ok();
    rt.assert_nothing_left(&id, bundle.path());
    values
}

/// The same scenario on runc and on rustpod: rustpod must write `expected`, and runc the same
/// but for `runc_differs`, which runc before 1.3.2 writes instead (see tests/RUNC_DIFFERENCES.md;
/// runc 1.3.6 in the sid guest and crun 1.28 write `expected`).
#[track_caller]
fn assert_files(resources: Value, expected: &[(&str, &str)], runc_differs: &[(&str, &str)], then: impl Fn(&Runtime, &str)) {
    let files: Vec<&str> = expected.iter().map(|(f, _)| *f).collect();
    let runc_differs = if env::runc_before(&env::runc_bin(), (1, 3, 2)) { runc_differs } else { &[] };
    let line = |(f, v): &(&str, &str)| {
        let v = runc_differs.iter().find(|(d, _)| d == f).map_or(*v, |(_, runc)| *runc);
        format!("{f}={v}")
    };
    let runc_expected: Vec<String> = expected.iter().map(line).collect();
    let runc = files_after(&Runtime::runc(), &resources, &files, &then);
    assert_eq!(runc, runc_expected, "runc's cgroup v2 files");
    let ours = files_after(&Runtime::under_test(), &resources, &files, &then);
    let expected: Vec<String> = expected.iter().map(|(f, v)| format!("{f}={v}")).collect();
    assert_eq!(ours, expected, "rustpod's cgroup v2 files");
}

/// runc before 1.3.2 (1.1.5 here) maps cpu shares to cpu.weight linearly (1024 shares, the
/// default, becomes 39); runc 1.3.2+, crun and libcgroups map 1024 to 100, the default weight.
const RUNC_1_1_WEIGHT_OF_512: (&str, &str) = ("cpu.weight", "20");
const RUNC_1_1_WEIGHT_OF_1024: (&str, &str) = ("cpu.weight", "39");

#[test]
fn v2_limits_from_the_config() {
    skip_if!(blocker(&["memory", "cpu", "cpuset", "pids"]));
    let resources = json!({
        "memory": {"limit": 64 * MIB, "reservation": 32 * MIB},
        "cpu": {"shares": 512, "quota": 20000, "period": 100000, "cpus": "0", "mems": "0"},
        "pids": {"limit": 64}
    });
    let expected = [
        ("memory.max", "67108864"),
        ("memory.low", "33554432"),
        ("cpu.weight", "59"),
        ("cpu.max", "20000 100000"),
        ("cpuset.cpus", "0"),
        ("cpuset.mems", "0"),
        ("pids.max", "64"),
    ];
    assert_files(resources, &expected, &[RUNC_1_1_WEIGHT_OF_512], |_, _| {});
}

#[test]
fn v2_update_flags_change_limits_live() {
    skip_if!(blocker(&["memory", "cpu", "cpuset", "pids"]));
    let flags = ["--pids-limit", "50", "--cpu-share", "1024", "--cpu-quota", "50000", "--cpu-period", "100000", "--cpuset-cpus", "0"];
    let expected =
        [("memory.max", "100663296"), ("pids.max", "50"), ("cpu.weight", "100"), ("cpu.max", "50000 100000"), ("cpuset.cpus", "0")];
    assert_files(json!({}), &expected, &[RUNC_1_1_WEIGHT_OF_1024], |rt, id| {
        // crun 1.28 takes bytes only: it writes memory.max 0 for "96M".
        let memory = if env::is_crun(rt.bin()) { "100663296" } else { "96M" };
        rt.cmd(&[&["update", "--memory", memory][..], &flags, &[id]].concat()).ok();
    });
}

#[test]
fn v2_update_resources_json_changes_limits_live() {
    skip_if!(blocker(&["memory", "pids"]));
    let update = json!({"memory": {"limit": 128 * MIB}, "pids": {"limit": 32}}).to_string();
    let expected = [("memory.max", "134217728"), ("pids.max", "32")];
    assert_files(json!({"memory": {"limit": 64 * MIB}}), &expected, &[], |rt, id| {
        rt.cmd_stdin(&["update", "--resources", "-", id], update.as_bytes()).ok();
    });
}

#[test]
fn v2_hugetlb_limit() {
    skip_if!(blocker(&["hugetlb"]));
    let resources = json!({"hugepageLimits": [{"pageSize": "2MB", "limit": 4 * 2 * MIB}]});
    assert_files(resources, &[("hugetlb.2MB.max", "8388608")], &[], |_, _| {});
}

#[test]
fn v2_pause_freezes_the_cgroup_and_resume_thaws_it() {
    skip_if!(blocker(&[]));
    let status = |rt: &Runtime, id: &str| rt.status(id);
    for rt in [Runtime::runc(), Runtime::under_test()] {
        let bundle = Bundle::new(SLEEP);
        let id = rt.new_id("frz");
        rt.start_container(&id, &bundle);
        rt.cmd(&["pause", &id]).ok();
        let frozen = (status(&rt, &id), v2_file(&id, "cgroup.freeze"), v2_file(&id, "cgroup.events"));
        rt.cmd(&["resume", &id]).ok();
        let thawed = (status(&rt, &id), v2_file(&id, "cgroup.freeze"), v2_file(&id, "cgroup.events"));
        let bin = rt.bin().display().to_string();
        assert_eq!(frozen.0, "paused", "{bin}");
        assert_eq!(frozen.1, "1", "{bin}");
        assert!(frozen.2.lines().any(|l| l == "frozen 1"), "{bin}: {}", frozen.2);
        assert_eq!(thawed.0, "running", "{bin}");
        assert_eq!(thawed.1, "0", "{bin}");
        assert!(thawed.2.lines().any(|l| l == "frozen 0"), "{bin}: {}", thawed.2);
        rt.cmd(&["delete", "--force", &id]).ok();
        rt.assert_nothing_left(&id, bundle.path());
    }
}

/// A cgroup made for one test under the v2 root, removed on Drop (also when the test fails).
struct CallerCgroup(std::path::PathBuf);

impl CallerCgroup {
    /// With room for one process: pids.max 1.
    fn with_room_for_one() -> Self {
        let root = std::path::Path::new("/sys/fs/cgroup");
        // The caller's cgroup needs the pids controller from its parent, the root.
        std::fs::write(root.join("cgroup.subtree_control"), "+pids").expect("enable pids at the v2 root");
        let dir = root.join(rustpod_tests::scratch::unique_name("rustpod-test-caller"));
        std::fs::create_dir(&dir).expect("mkdir the caller's cgroup");
        let cgroup = CallerCgroup(dir);
        std::fs::write(cgroup.0.join("pids.max"), "1").expect("write pids.max");
        cgroup
    }
}

impl Drop for CallerCgroup {
    fn drop(&mut self) {
        // Its one process (the CLI) has exited by now; retry while the kernel lets go of it.
        rustpod_tests::wait::eventually(|| std::fs::remove_dir(&self.0).is_ok());
    }
}

/// The container's init is born in the container's cgroup (`clone3` with `CLONE_INTO_CGROUP`),
/// never a moment in its caller's: `create` works from a caller whose own cgroup has room for no
/// other process (pids.max 1, the caller alone), as it does under crun, which clones the same
/// way. runc forks `runc init` (and, being Go, its threads) in the caller's cgroup and cannot
/// (tests/RUNC_DIFFERENCES.md); it is not compared here.
#[test]
fn v2_init_is_born_in_its_cgroup() {
    skip_if!(needs::cgroup_v2(&["pids"]));
    let rt = Runtime::under_test();
    let bundle = Bundle::new(SLEEP);
    let id = rt.new_id("v2born");
    bundle.prepare(&id);
    let caller = CallerCgroup::with_room_for_one();
    let bin = rt.bin().display().to_string();
    // Files, not pipes: the container's init keeps the stdio `create` hands it.
    let scratch = rustpod_tests::scratch::ScratchDir::new("v2born");
    let stderr = scratch.join("stderr");
    let status = std::process::Command::new("sh")
        .args(["-c", r#"echo 0 > "$0/cgroup.procs" && exec "$@""#])
        .arg(&caller.0)
        .args([bin.as_str(), "--root", rt.root(), "create", "--bundle", bundle.path(), &id])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("create the stderr file"))
        .status()
        .expect("run create from the caller's cgroup");
    assert!(
        status.success(),
        "create from a caller at its pids limit: {}",
        std::fs::read_to_string(&stderr).unwrap_or_default().trim_end()
    );
    let init = rt.state(&id)["pid"].as_i64().expect("the init's pid");
    let cgroup = std::fs::read_to_string(format!("/proc/{init}/cgroup")).expect("read the init's cgroup");
    assert!(cgroup.trim_end().ends_with(&rustpod_tests::cgroup::cgroups_path(&id)), "init in {cgroup:?}");
    rt.cmd(&["delete", "--force", &id]).ok();
    rt.assert_nothing_left(&id, bundle.path());
}

/// A cgroup of this test's own under the v2 root, with an empty `rustpod` child, standing
/// for another owner's `system.slice/rustpod`; both removed on Drop (also when the test fails).
struct OthersCgroup(std::path::PathBuf);

impl OthersCgroup {
    fn with_a_rustpod_child() -> Self {
        let dir = std::path::Path::new("/sys/fs/cgroup").join(rustpod_tests::scratch::unique_name("rustpod-test-others"));
        std::fs::create_dir(&dir).expect("mkdir the other owner's cgroup");
        let cgroup = OthersCgroup(dir);
        std::fs::create_dir(cgroup.0.join("rustpod")).expect("mkdir its rustpod child");
        cgroup
    }
}

impl Drop for OthersCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(self.0.join("rustpod"));
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A container without `cgroupsPath` gets `/rustpod/<id>`, and its delete removes the empty
/// `/rustpod` parent it made, and nothing else. On v2 the entries of /sys/fs/cgroup are other
/// owners' cgroups: an empty `rustpod` below one of them (here the test's own, standing for
/// `system.slice/rustpod`) is not ours to remove. rustpod once tried `<entry>/rustpod` for
/// every entry there, as if each were a v1 hierarchy.
#[test]
fn v2_delete_removes_no_other_owners_rustpod_cgroup() {
    skip_if!(needs::cgroup_v2(&[]));
    let rt = Runtime::under_test();
    let mut bundle = Bundle::new(SLEEP);
    bundle.clear_cgroups_path();
    let id = rt.new_id("v2parent");
    let others = OthersCgroup::with_a_rustpod_child();
    rt.create(&id, &bundle);
    let init = rt.state(&id)["pid"].as_i64().expect("the init's pid");
    let cgroup = std::fs::read_to_string(format!("/proc/{init}/cgroup")).expect("read the init's cgroup");
    assert_eq!(cgroup.trim_end(), format!("0::/rustpod/{id}"), "the default cgroup");
    rt.cmd(&["delete", "--force", &id]).ok();
    assert!(others.0.join("rustpod").is_dir(), "delete removed {}/rustpod, a cgroup it did not make", others.0.display());
    rt.assert_nothing_left(&id, bundle.path());
}
