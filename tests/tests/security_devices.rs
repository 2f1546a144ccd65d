// Device rules hold on every cgroup version and driver (issue 14, item 1, an escape on v2): a
// container whose config lists /dev/kmsg as a node but allows it no access must not write it,
// and a container with CAP_MKNOD (which containerd and kubelet grant by default) must not make a
// node for an unlisted device, the node's own disk, and read it. Each run is compared with runc
// in the same test; with --systemd-cgroup where systemd runs (hack/guest-sid.sh's guest), and
// through containerd: its runc shim driving runc (the reference) and rustpod, and our shim. A
// node for the host's console bound into a user-namespaced container stays closed too, on each
// of those paths.

use rustpod_tests::cgroup::systemd_blocker;
use rustpod_tests::containerd::lingering;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{json, needs, skip_if, Bundle, Runtime, Value};
use std::path::Path;

/// The attack, from inside: each line says whether the step was `denied`.
const ATTACK: &str = "\
    if echo rustpod-device-test >/dev/kmsg 2>/dev/null; then echo kmsg=written; else echo kmsg=denied; fi; \
    if mknod /tmp/disk b $MAJOR $MINOR 2>/dev/null; then echo mknod=made; else echo mknod=denied; fi; \
    if head -c 512 /tmp/disk >/dev/null 2>&1; then echo disk=read; else echo disk=denied; fi; \
    if mknod /tmp/console c 5 1 2>/dev/null && (exec 3</tmp/console) 2>/dev/null; \
    then echo console=opened; else echo console=denied; fi";

/// What must be denied. runc lets `mknod` of any device through (its default rules allow `m`
/// on every char and block device) and denies opening the node, so `mknod` is compared only.
/// The host's console (c 5:1) is outside runc's default rules; crun 1.28's (and libcgroups')
/// allow it, so next to crun it is asked of us only (tests/RUNC_DIFFERENCES.md).
const DENIED: [&str; 3] = ["kmsg=denied", "disk=denied", "console=denied"];

/// A real block device of this machine (major, minor), the first disk in /sys/block.
fn a_disk() -> Option<(String, String)> {
    let mut disks: Vec<_> = std::fs::read_dir("/sys/block").ok()?.flatten().collect();
    disks.sort_by_key(|d| d.file_name());
    disks.iter().find_map(|d| {
        let name = d.file_name().to_string_lossy().into_owned();
        if ["loop", "ram", "zram", "nbd"].iter().any(|p| name.starts_with(p)) {
            return None;
        }
        let dev = std::fs::read_to_string(d.path().join("dev")).ok()?;
        let (major, minor) = dev.trim().split_once(':')?;
        Some((major.to_string(), minor.to_string()))
    })
}

fn blocker() -> Option<String> {
    needs::containers()
        .or_else(|| needs::program(&rustpod_tests::env::runc_bin()))
        .or_else(|| needs::program(Path::new("/dev/kmsg")))
        .or_else(|| a_disk().is_none().then(|| "no disk in /sys/block to try mknod with".to_string()))
}

/// The attack's report under `rt`, systemd's driver or cgroupfs.
fn attack(rt: &Runtime, systemd: bool) -> String {
    let mut bundle = Bundle::new(&["true"]);
    let mut config = bundle.config().clone();
    arm(&mut config);
    for section in ["process", "linux", "root"] {
        bundle.set(&format!("/{section}"), config[section].clone());
    }
    let id = rt.new_id("dev");
    if systemd {
        bundle.clear_cgroups_path();
        bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
    }
    let out = rt.run(&id, &bundle, &[], b"");
    assert!(out.success(), "{} run: {}", rt.bin().display(), out.describe());
    out.stdout
}

/// The attack's config edits: /dev/kmsg listed as a node with no access, CAP_MKNOD, the disk.
fn arm(config: &mut Value) {
    let (major, minor) = a_disk().expect("a disk");
    config["process"]["args"] = json!(["sh", "-c", ATTACK]);
    append(&mut config["process"]["env"], [json!(format!("MAJOR={major}")), json!(format!("MINOR={minor}"))]);
    // The node exists in the container, but the device rules (deny all, then the runtime's
    // defaults for null, zero, tty…) give it no access.
    config["linux"]["devices"] =
        json!([{"path": "/dev/kmsg", "type": "c", "major": 1, "minor": 11, "fileMode": 0o644, "uid": 0, "gid": 0}]);
    config["linux"]["resources"]["devices"] = json!([{"allow": false, "access": "rwm"}]);
    for set in ["bounding", "effective", "permitted"] {
        append(&mut config["process"]["capabilities"][set], [json!("CAP_MKNOD")]);
    }
    config["root"]["readonly"] = json!(false);
}

/// Appends `items` missing from the list at `list` (made a list if absent).
fn append<const N: usize>(list: &mut Value, items: [Value; N]) {
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("made a list above");
    for item in items {
        if !list.contains(&item) {
            list.push(item);
        }
    }
}

/// runc's report and ours, each with every denial, and the same.
fn assert_same_denials(ours: &str, runc: &str, path: &str) {
    let crun = rustpod_tests::env::is_crun(&rustpod_tests::env::runc_bin());
    let asked_of_runc = |d: &&&str| !(crun && d.starts_with("console="));
    let denied = |report: &str, list: &[&str]| list.iter().all(|d| report.lines().any(|l| l == *d));
    let oracle: Vec<&str> = DENIED.iter().filter(asked_of_runc).copied().collect();
    assert!(denied(runc, &oracle), "runc itself let the attack through, the test is wrong here: {runc:?}");
    assert!(denied(ours, &DENIED), "{path}: the container reached a device its config denies: {ours:?} (runc: {runc:?})");
    let (ours, runc) = if crun {
        eprintln!("crun opens the host's console (its default rules allow c 5:1): compared without that line");
        let without = |r: &str| r.lines().filter(|l| !l.starts_with("console=")).collect::<Vec<_>>().join("\n");
        (without(ours), without(runc))
    } else {
        (ours.to_string(), runc.to_string())
    };
    assert_eq!(ours, runc, "{path}: the attack's report differs from runc's");
}

fn same_as_runc(systemd: bool) {
    let globals: &[&str] = if systemd { &["--systemd-cgroup"] } else { &[] };
    let runc = attack(&Runtime::runc().with_globals(globals), systemd);
    let ours = attack(&Runtime::under_test().with_globals(globals), systemd);
    assert_same_denials(&ours, &runc, "CLI");
}

#[test]
fn denied_devices_stay_denied() {
    skip_if!(blocker());
    same_as_runc(false);
}

#[test]
fn denied_devices_stay_denied_with_systemd() {
    skip_if!(blocker().or_else(systemd_blocker));
    same_as_runc(true);
}

/// The same attack through containerd, with the same spec: containerd's runc shim driving runc
/// (the reference) and rustpod, and our shim (which creates in-process through the library).
#[test]
fn denied_devices_stay_denied_through_the_shims() {
    skip_if!(blocker().or_else(shim::blocker));
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("devspec");
    let reports: Vec<(&str, String)> = shim::paths()
        .into_iter()
        .map(|(path, flags)| {
            // A rootfs each: the attack leaves its node in /tmp.
            let rootfs = Bundle::new(&["true"]);
            let mut config = ctd.oci_spec(path, &rootfs.rootfs());
            arm(&mut config);
            config["process"]["args"] = json!(["sh", "-c", lingering(ATTACK)]);
            (path, ctd.run_spec(&dir, path, &config, "--rm", &flags).ok().stdout)
        })
        .collect();
    let (_, theirs) = &reports[0];
    for (path, ours) in &reports[1..] {
        assert_same_denials(ours, theirs, path);
    }
}

/// Opens the host's console as bound at /dev/hostconsole.
const OPEN_CONSOLE: &str = "if (exec 3</dev/hostconsole) 2>/dev/null; then echo console=opened; else echo console=denied; fi";

/// A node for the host's console (c 5:1) in `dir` that anyone may open.
fn console_node(dir: &ScratchDir) -> std::path::PathBuf {
    let node = dir.join("console");
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
    nix::sys::stat::mknod(&node, nix::sys::stat::SFlag::S_IFCHR, mode, nix::sys::stat::makedev(5, 1))
        .expect("mknod c 5:1 in the scratch dir");
    // mknod's mode passes through the umask.
    nix::sys::stat::fchmodat(None, &node, mode, nix::sys::stat::FchmodatFlags::FollowSymlink).expect("chmod 0666");
    node
}

/// `config` in a user namespace of its own (0 → 100000, 65536), with `node` bound at
/// /dev/hostconsole.
fn in_a_user_namespace(config: &mut Value, node: &Path) {
    append(&mut config["linux"]["namespaces"], [json!({"type": "user"})]);
    let mapping = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
    config["linux"]["uidMappings"] = mapping.clone();
    config["linux"]["gidMappings"] = mapping;
    append(&mut config["mounts"], [json!({"destination": "/dev/hostconsole", "type": "bind", "source": node, "options": ["bind"]})]);
}

/// Ours denied, and the reference's too unless it is crun, whose default rules allow the host's
/// console (tests/RUNC_DIFFERENCES.md).
#[track_caller]
fn assert_console_denied(ours: &str, reference: &str, path: &str) {
    assert_eq!(ours, "console=denied", "{path}: the container opened the host's console");
    if rustpod_tests::env::is_crun(&rustpod_tests::env::runc_bin()) {
        eprintln!("crun's default rules allow the host's console (c 5:1): not its oracle here ({reference})");
    } else {
        assert_eq!(reference, "console=denied", "runc itself opened the console: the test is wrong here");
    }
}

/// A user namespace takes the engine's own route, where libcgroups sets the cgroup up with its v1
/// device list, which allows the host's console. A node for it that the mapped root may open,
/// bound in from the host, must stay closed by the device rules, as under runc.
#[test]
fn host_console_stays_denied_in_a_user_namespace() {
    skip_if!(needs::containers().or_else(|| needs::program(&rustpod_tests::env::runc_bin())));
    let dir = ScratchDir::new("console");
    let node = console_node(&dir);
    let mut bundle = Bundle::new(&["sh", "-c", OPEN_CONSOLE]);
    let mut config = bundle.config().clone();
    in_a_user_namespace(&mut config, &node);
    for section in ["linux", "mounts"] {
        bundle.set(&format!("/{section}"), config[section].clone());
    }
    let report = |rt: &Runtime| {
        let out = rt.run(&rt.new_id("console"), &bundle, &[], b"");
        assert!(out.success(), "{} run: {}", rt.bin().display(), out.describe());
        out.stdout.trim().to_string()
    };
    let ours = report(&Runtime::under_test());
    assert_console_denied(&ours, &report(&Runtime::runc()), "CLI");
}

/// The same user-namespaced container through containerd, with ctr's own spec: containerd's runc
/// shim driving runc (the reference) and rustpod, and our shim.
#[test]
fn host_console_stays_denied_in_a_user_namespace_through_the_shims() {
    skip_if!(needs::containers().or_else(shim::blocker));
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("console-ctr");
    let node = console_node(&dir);
    let reports: Vec<(&str, String)> = shim::paths()
        .into_iter()
        .map(|(path, flags)| {
            let rootfs = Bundle::new(&["true"]);
            let name = format!("console-{path}");
            let mut config = ctd.oci_spec(&name, &rootfs.rootfs());
            in_a_user_namespace(&mut config, &node);
            let script = format!("{OPEN_CONSOLE}; read -r inside host size </proc/self/uid_map; echo \"$inside $host $size\"");
            config["process"]["args"] = json!(["sh", "-c", lingering(&script)]);
            let out = ctd.run_spec(&dir, &name, &config, "--rm", &flags);
            assert!(out.success(), "{path}: {}", out.describe());
            let (console, uid_map) = out.stdout.trim().split_once('\n').unwrap_or_default();
            assert_eq!(uid_map, "0 100000 65536", "{path}: not in the user namespace asked for: {}", out.describe());
            (path, console.to_string())
        })
        .collect();
    let (_, reference) = &reports[0];
    for (path, ours) in &reports[1..] {
        assert_console_denied(ours, reference, path);
    }
}
