// linux.cgroupsPath and linux.resources (issue 3): the cgroupfs path form, memory, cpu, cpuset,
// pids, blkio and devices limits as the host's cgroup v1 files and the checker inside see them,
// `update` changing them live; hugetlb, cgroup v2 and the systemd form skip loudly here when the
// machine cannot do them.

use rustpod_tests::cgroup::{cgroups_path, default_parents, v1_file};
use rustpod_tests::checker::{self, Report};
use rustpod_tests::scratch::{unique_name, ScratchDir};
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{json, needs, skip, skip_if, wait, Bundle, Fixture, Runtime, Value, SLEEP};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const MIB: i64 = 1024 * 1024;

/// The block device of the host's root filesystem, for blkio throttling.
fn root_device() -> (u32, u32) {
    let dev = std::fs::metadata("/").expect("stat /").dev();
    (libc::major(dev), libc::minor(dev))
}

fn resources() -> Value {
    let (major, minor) = root_device();
    json!({
        "memory": {"limit": 64 * MIB, "reservation": 32 * MIB},
        "cpu": {"shares": 512, "quota": 20000, "period": 100000, "cpus": "0", "mems": "0"},
        "pids": {"limit": 64},
        "blockIO": {"throttleReadBpsDevice": [{"major": major, "minor": minor, "rate": MIB}]},
        "devices": [
            {"allow": false, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwm"}
        ]
    })
}

/// (controller, file, value) the `resources()` above must produce.
fn expected_files() -> Vec<(&'static str, &'static str, String)> {
    let (major, minor) = root_device();
    vec![
        ("memory", "memory.limit_in_bytes", (64 * MIB).to_string()),
        ("memory", "memory.soft_limit_in_bytes", (32 * MIB).to_string()),
        ("cpu", "cpu.shares", "512".into()),
        ("cpu", "cpu.cfs_quota_us", "20000".into()),
        ("cpu", "cpu.cfs_period_us", "100000".into()),
        ("cpuset", "cpuset.cpus", "0".into()),
        ("cpuset", "cpuset.mems", "0".into()),
        ("pids", "pids.max", "64".into()),
        ("blkio", "blkio.throttle.read_bps_device", format!("{major}:{minor} {MIB}")),
        ("devices", "devices.list", "c 1:3 rwm".into()),
    ]
}

fn v1_blocker() -> Option<String> {
    ["memory", "cpu", "cpuset", "pids", "blkio", "devices"].iter().find_map(|c| needs::cgroup_v1(c))
}

/// Whether a cgroup file's content matches: devices.list must hold the line (runtimes add the
/// default devices to it), every other file must equal it.
fn matches(file: &str, content: &str, value: &str) -> bool {
    if file == "devices.list" {
        content.lines().any(|l| l == value) && !content.lines().any(|l| l == "a *:* rwm")
    } else {
        content == value
    }
}

/// Asserts every (controller, file, value) on the host and, through `report`, inside.
fn assert_limits(id: &str, report: &Report, expected: &[(&str, &str, String)]) {
    for (controller, file, value) in expected {
        let host = v1_file(controller, id, file);
        assert!(matches(file, &host, value), "host {controller}/{file}: {host:?}, want {value:?}");
        let inside = report.cgroup_file(file).unwrap_or_default();
        assert!(matches(file, inside, value), "{file} inside: {inside:?}, want {value:?} (cgroup {})", report.at("/cgroup"));
    }
}

/// A running container (init `SLEEP`, the checker installed) with `linux.resources`.
fn running_with(resources: Value) -> Fixture {
    let mut bundle = checker::bundle_running(SLEEP);
    bundle.set("/linux/resources", resources);
    let rt = Runtime::under_test();
    let id = rt.new_id("cg");
    rt.start_container(&id, &bundle);
    Fixture { rt, bundle, id }
}

#[test]
fn cgroupfs_path_and_v1_limits() {
    skip_if!(v1_blocker());
    let Fixture { rt, id, .. } = &running_with(resources());
    let report = Report::exec(rt, id, &[]);
    let memberships = report.at("/cgroup/membership").as_array().cloned().unwrap_or_default();
    let memory = memberships.iter().find(|m| m["controllers"] == "memory").expect("a memory cgroup");
    assert_eq!(memory["path"], cgroups_path(id).as_str(), "cgroupsPath");
    assert_limits(id, &report, &expected_files());
}

#[test]
fn update_changes_limits_live() {
    skip_if!(v1_blocker());
    let Fixture { rt, id, .. } = &running_with(resources());
    let update = json!({"memory": {"limit": 128 * MIB}, "cpu": {"shares": 256, "quota": 30000},
                        "pids": {"limit": 32}});
    rt.cmd_stdin(&["update", "--resources", "-", id], update.to_string().as_bytes()).ok();
    let report = Report::exec(rt, id, &[]);
    let expected = [
        ("memory", "memory.limit_in_bytes", (128 * MIB).to_string()),
        ("cpu", "cpu.shares", "256".to_string()),
        ("cpu", "cpu.cfs_quota_us", "30000".to_string()),
        ("pids", "pids.max", "32".to_string()),
    ];
    assert_limits(id, &report, &expected);
}

#[test]
fn hugetlb_limits() {
    skip_if!(needs::containers());
    if needs::cgroup_v1("hugetlb").is_some() {
        skip!(
            "hugetlb limits: no cgroup v1 hugetlb hierarchy at /sys/fs/cgroup/hugetlb (on this \
             hybrid host hugetlb is only in the cgroup v2 hierarchy at /sys/fs/cgroup/unified, \
             which does not hold the container's other controllers)"
        );
    }
    let limits = json!({"hugepageLimits": [{"pageSize": "2MB", "limit": 4 * 2 * MIB}]});
    let Fixture { rt, id, .. } = &running_with(limits);
    let report = Report::exec(rt, id, &[]);
    let expected = [("hugetlb", "hugetlb.2MB.limit_in_bytes", (8 * MIB).to_string())];
    assert_limits(id, &report, &expected);
}

#[test]
fn cgroup_v2_limits() {
    skip_if!(needs::containers());
    let controllers = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "memory") {
        skip!(
            "cgroup v2 controllers: /sys/fs/cgroup is not a cgroup v2 hierarchy with the memory \
             controller (this host is cgroups v1 hybrid; /sys/fs/cgroup/unified has only hugetlb)"
        );
    }
    let limits = json!({"memory": {"limit": 64 * MIB}, "pids": {"limit": 64}});
    let Fixture { rt, id, .. } = &running_with(limits);
    let report = Report::exec(rt, id, &[]);
    assert_eq!(report.cgroup_file("memory.max"), Some((64 * MIB).to_string().as_str()));
    assert_eq!(report.cgroup_file("pids.max"), Some("64"));
}

#[test]
fn systemd_cgroups_path_form() {
    skip_if!(needs::containers());
    if !Path::new("/run/systemd/system").is_dir() {
        skip!(
            "systemd cgroup driver (cgroupsPath slice:prefix:name): systemd is not PID 1 on \
             this machine (/run/systemd/system is missing)"
        );
    }
    let mut bundle = checker::bundle_running(SLEEP);
    bundle.clear_cgroups_path();
    let rt = Runtime::under_test().with_globals(&["--systemd-cgroup"]);
    let id = rt.new_id("sd");
    bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
    rt.start_container(&id, &bundle);
    let report = Report::exec(&rt, &id, &[]);
    let scope = format!("rustpod-test-{id}.scope");
    assert!(report.at("/cgroup/membership").to_string().contains(&scope), "not in {scope}: {}", report.at("/cgroup/membership"));
}

/// kubelet's systemd driver sends `slice:prefix:name`; without `--systemd-cgroup` (a CRI that
/// did not pass SystemdCgroup) that must still mean systemd, as crun takes it, and never a
/// directory named with colons at the cgroup root, outside the pod's slice. Here systemd does
/// not run, so create must fail and make nothing.
#[test]
fn systemd_form_never_becomes_a_cgroupfs_directory() {
    skip_if!(needs::containers());
    if Path::new("/run/systemd/system").is_dir() {
        skip!("systemd runs here: the form is checked by systemd_cgroups_path_form");
    }
    let rt = Runtime::under_test();
    let id = rt.new_id("sdform");
    let mut bundle = checker::bundle_running(SLEEP);
    bundle.clear_cgroups_path();
    let path = format!("kubepods-besteffort-pod{id}.slice:cri-containerd:{id}");
    bundle.set("/linux/cgroupsPath", json!(path));
    let out = rt.try_create(&id, &bundle, &[]);
    rustpod_tests::assertions::assert_one_line_error(&out, &["systemd"]);
    assert_no_colon_cgroup(&path);
}

/// On a cgroup v1 host where systemd runs, its driver is refused, with the flag and by the
/// `slice:prefix:name` form alone: the engine's cgroupfs manager made that path a directory at
/// each hierarchy's root, outside the pod's slice and its limits (seen before the fix:
/// `/sys/fs/cgroup/memory/kubepods-besteffort-pod….slice:cri-containerd:…`), and told systemd
/// nothing. systemd is not PID 1 here: the create runs as if it ran
/// (`mount_ns::as_if_systemd_ran`). runc would start a scope over systemd's D-Bus, which is not
/// there, so it is not run.
#[test]
fn systemds_driver_on_a_v1_host_is_refused_and_makes_nothing() {
    skip_if!(needs::containers().or_else(v1_only));
    let rt = Runtime::under_test();
    for (flags, form) in [(&["--systemd-cgroup"][..], "system.slice:rustpod:"), (&[][..], "kubepods-besteffort-pod1.slice:cri-containerd:")]
    {
        let id = rt.new_id("sdv1");
        let path = format!("{form}{id}");
        let mut bundle = checker::bundle_running(SLEEP);
        bundle.clear_cgroups_path().set("/linux/cgroupsPath", json!(path));
        bundle.prepare(&id);
        let create = [&["--root", rt.root()][..], flags, &["create", "--bundle", bundle.path(), &id]].concat();
        let out = rustpod_tests::process::run_with(rt.bin(), &create, b"", |cmd| {
            rustpod_tests::mount_ns::as_if_systemd_ran(cmd);
        });
        rustpod_tests::assertions::assert_one_line_error(&out, &["systemd's cgroup driver", "not supported on a cgroup v1 host"]);
        assert_no_colon_cgroup(&path);
        rt.assert_nothing_left(&id, bundle.path());
    }
}

/// The same through containerd, with the `slice:prefix:name` form kubelet sends: its runc shim
/// driving rustpod, and our shim, each started as if systemd ran. The task is not created, and
/// nothing is made.
#[test]
fn systemds_driver_on_a_v1_host_is_refused_through_containerd() {
    skip_if!(shim::blocker().or_else(v1_only));
    let ctd = ShimContainerd::start_as_if_systemd_ran();
    let (dir, rootfs) = (ScratchDir::new("sdv1"), Bundle::new(SLEEP));
    for (path, mut flags) in shim::paths().into_iter().filter(|(path, _)| *path != "runc-shim-runc") {
        // The shims' /run is not ctr's: its stdio FIFOs go where both see them.
        flags.extend(["--fifo-dir".to_string(), dir.str().to_string()]);
        let id = unique_name(path);
        let mut spec = ctd.oci_spec(&id, &rootfs.rootfs());
        let cgroup = format!("kubepods-besteffort-pod1.slice:cri-containerd:{id}");
        spec["linux"]["cgroupsPath"] = json!(cgroup);
        spec["process"]["args"] = json!(["true"]);
        let out = ctd.run_spec(&dir, &id, &spec, "--rm", &flags);
        assert!(!out.success(), "{path}: ctr run succeeded: {}", out.describe());
        assert!(out.stderr.contains("not supported on a cgroup v1 host"), "{path}: {}", out.describe());
        assert_no_colon_cgroup(&cgroup);
        assert!(ctd.task(&id).is_none(), "{path}: a task is left");
    }
}

/// Why a test of a v1 host cannot run here.
fn v1_only() -> Option<String> {
    rustpod_tests::cgroup::unified().then(|| "a cgroup v2 host: systemd's driver is ours there (systemd_cgroup.rs)".to_string())
}

/// No hierarchy holds `path` as a directory at its root.
#[track_caller]
fn assert_no_colon_cgroup(path: &str) {
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").expect("list cgroup hierarchies").flatten() {
        let colon_dir = hierarchy.path().join(path);
        assert!(!colon_dir.exists(), "{} was created", colon_dir.display());
    }
}

/// Limit files of the v1 controllers, compared between runc and the runtime under test.
const V1_LIMIT_FILES: [(&str, &str); 13] = [
    ("memory", "memory.limit_in_bytes"),
    ("memory", "memory.memsw.limit_in_bytes"),
    ("memory", "memory.soft_limit_in_bytes"),
    ("memory", "memory.swappiness"),
    ("memory", "memory.oom_control"),
    ("cpu", "cpu.shares"),
    ("cpu", "cpu.cfs_quota_us"),
    ("cpu", "cpu.cfs_period_us"),
    ("cpuset", "cpuset.cpus"),
    ("cpuset", "cpuset.mems"),
    ("pids", "pids.max"),
    ("devices", "devices.list"),
    ("freezer", "freezer.state"),
];

/// rustpod sets a new container's v1 cgroups up itself (issue 22, item 3: one mountinfo read,
/// not libcgroups' 12): every limit file must read as runc leaves it, for the resources kubelet,
/// docker and podman set, `disableOOMKiller` and a deny-all device list with exceptions included.
#[test]
fn v1_limits_match_runcs_file_by_file() {
    skip_if!(v1_blocker());
    skip_if!(needs::cgroup_v1("freezer"));
    let runc = rustpod_tests::env::runc_bin();
    skip_if!(needs::program(&runc));
    if rustpod_tests::env::testing_runc_itself() {
        skip!("runc is the runtime under test: nothing to compare with");
    }
    if !Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists() {
        skip!("memory.memsw.limit_in_bytes: the kernel has no swap accounting (swapaccount=0)");
    }
    let resources = json!({
        "memory": {"limit": 64 * MIB, "swap": 96 * MIB, "reservation": 32 * MIB, "swappiness": 10,
                   "disableOOMKiller": true},
        "cpu": {"shares": 512, "quota": 20000, "period": 50000, "cpus": "0", "mems": "0"},
        "pids": {"limit": 64},
        "devices": [
            {"allow": false, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rw"},
            {"allow": true, "type": "b", "major": 7, "access": "r"},
            {"allow": false, "type": "c", "major": 1, "minor": 5, "access": "w"}
        ]
    });
    let read_all = |rt: &Runtime| -> Vec<(String, String)> {
        let mut bundle = checker::bundle_running(SLEEP);
        bundle.set("/linux/resources", resources.clone());
        let id = rt.new_id("cgv1");
        rt.start_container(&id, &bundle);
        V1_LIMIT_FILES.iter().map(|(c, f)| (format!("{c}/{f}"), v1_file(c, &id, f))).collect()
    };
    // devices.list holds a set, in the order each runtime wrote it.
    let sorted = |mut files: Vec<(String, String)>| {
        for (_, content) in files.iter_mut() {
            let mut lines: Vec<&str> = content.lines().collect();
            lines.sort();
            *content = lines.join("\n");
        }
        files
    };
    let ours = sorted(read_all(&Runtime::under_test()));
    let runcs = sorted(read_all(&Runtime::runc()));
    for ((file, got), (_, want)) in ours.iter().zip(&runcs) {
        assert_eq!(got, want, "{file}: the runtime under test wrote {got:?}, runc {want:?}");
    }
}

/// The kernel clamps cpu.shares silently; runc reads it back and fails `create` naming the bound.
/// So must rustpod, leaving nothing behind.
#[test]
fn cpu_shares_out_of_range_fail_create_as_runc() {
    skip_if!(needs::cgroup_v1("cpu"));
    let runc = rustpod_tests::env::runc_bin();
    skip_if!(needs::program(&runc));
    for rt in [Runtime::under_test(), Runtime::runc()] {
        let mut fx = Fixture::on(rt, SLEEP);
        fx.bundle.set("/linux/resources", json!({"cpu": {"shares": 1}}));
        let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
        let bin = fx.rt.bin().display().to_string();
        assert!(!out.status.success(), "{bin}: create with cpu.shares 1 succeeded");
        assert!(out.stderr.contains("the minimum allowed cpu-shares is 2"), "{bin}: {}", out.stderr.trim_end());
        fx.assert_nothing_left();
    }
}

/// A container without `cgroupsPath` goes in `/rustpod/<id>` of every hierarchy; its delete
/// removes that and, once no other container is in it, the `/rustpod` parent its create made.
#[test]
fn delete_removes_the_default_cgroup_and_its_empty_parent() {
    skip_if!(needs::containers());
    let rt = Runtime::under_test();
    let mut bundle = Bundle::new(SLEEP);
    bundle.clear_cgroups_path();
    let id = rt.new_id("defparent");
    rt.create(&id, &bundle);
    let made: Vec<PathBuf> = default_parents().into_iter().map(|p| p.join(&id)).filter(|d| d.is_dir()).collect();
    assert!(!made.is_empty(), "create made no /rustpod/{id} cgroup in {:?}", default_parents());
    rt.cmd(&["delete", "--force", &id]).ok();
    let kept: Vec<&PathBuf> = made.iter().filter(|d| d.exists()).collect();
    assert!(kept.is_empty(), "delete left the container's cgroups: {kept:?}");
    // Another test's container may still be in a parent: only an empty one is a leftover.
    let empty = || -> Vec<PathBuf> {
        let has_child = |p: &PathBuf| std::fs::read_dir(p).into_iter().flatten().flatten().any(|e| e.path().is_dir());
        default_parents().into_iter().filter(|p| p.is_dir() && !has_child(p)).collect()
    };
    assert!(wait::eventually(|| empty().is_empty()), "delete left empty default parents: {:?}", empty());
    rt.assert_nothing_left(&id, bundle.path());
}
