// Device rules hold on every cgroup version and driver (issue 14, item 1, an escape on v2): a
// container whose config lists /dev/kmsg as a node but allows it no access must not write it,
// and a container with CAP_MKNOD (which containerd and kubelet grant by default) must not make a
// node for an unlisted device, the node's own disk, and read it. Each run is compared with runc
// in the same test; with --systemd-cgroup where systemd runs (hack/guest-systemd.sh's guest).

use rustpod_tests::cgroup::systemd_blocker;
use rustpod_tests::{json, needs, skip_if, Bundle, Runtime};
use std::path::Path;

/// The attack, from inside: each line says whether the step was `denied`.
const ATTACK: &str = "\
    if echo rustpod-device-test >/dev/kmsg 2>/dev/null; then echo kmsg=written; else echo kmsg=denied; fi; \
    if mknod /tmp/disk b $MAJOR $MINOR 2>/dev/null; then echo mknod=made; else echo mknod=denied; fi; \
    if head -c 512 /tmp/disk >/dev/null 2>&1; then echo disk=read; else echo disk=denied; fi";

/// What must be denied. runc lets `mknod` of any device through (its default rules allow `m`
/// on every char and block device) and denies opening the node, so `mknod` is compared only.
const DENIED: [&str; 2] = ["kmsg=denied", "disk=denied"];

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
    let (major, minor) = a_disk().expect("a disk");
    let mut bundle = Bundle::new(&["sh", "-c", ATTACK]);
    bundle.add_env(&[&format!("MAJOR={major}"), &format!("MINOR={minor}")]);
    // The node exists in the container, but the device rules (deny all, then runc's defaults
    // for null, zero, tty…) give it no access.
    bundle.set(
        "/linux/devices",
        json!([{"path": "/dev/kmsg", "type": "c", "major": 1, "minor": 11, "fileMode": 0o644, "uid": 0, "gid": 0}]),
    );
    bundle.set("/linux/resources/devices", json!([{"allow": false, "access": "rwm"}]));
    for set in ["bounding", "effective", "permitted"] {
        let pointer = format!("/process/capabilities/{set}");
        let mut caps = bundle.config().pointer(&pointer).cloned().unwrap_or_else(|| json!([]));
        caps.as_array_mut().expect("a capability list").push(json!("CAP_MKNOD"));
        bundle.set(&pointer, caps);
    }
    bundle.set("/root/readonly", json!(false));
    let id = rt.new_id("dev");
    if systemd {
        bundle.clear_cgroups_path();
        bundle.set("/linux/cgroupsPath", json!(format!("system.slice:rustpod-test:{id}")));
    }
    let out = rt.run(&id, &bundle, &[], b"");
    assert!(out.success(), "{} run: {}", rt.bin().display(), out.describe());
    out.stdout
}

fn same_as_runc(systemd: bool) {
    let globals: &[&str] = if systemd { &["--systemd-cgroup"] } else { &[] };
    let runc = attack(&Runtime::runc().with_globals(globals), systemd);
    let denied = |report: &str| DENIED.iter().all(|d| report.lines().any(|l| l == *d));
    assert!(denied(&runc), "runc itself let the attack through, the test is wrong here: {runc:?}");
    let ours = attack(&Runtime::under_test().with_globals(globals), systemd);
    assert!(denied(&ours), "the container reached a device its config denies: {ours:?} (runc: {runc:?})");
    assert_eq!(ours, runc, "the attack's report differs from runc's");
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
