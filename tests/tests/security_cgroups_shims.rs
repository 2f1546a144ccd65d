// The container's cgroupfs through both shims (issue 13, item 4): mounted as containerd's CRI
// mounts it (`nosuid,noexec,nodev,relatime,ro`; ctr's own default spec has no cgroup mount); writing a limit from inside must
// fail (the mount is read-only), through containerd's runc shim (with RUSTPOD_BIN, compared with runc) and
// through containerd-shim-rustpod-v1. On v1 the attack writes the pids hierarchy's pids.max; on
// a pure v2 host (the sid guest, containerd 2.1) the container's own pids.max, found through
// /proc/self/cgroup.

use rustpod_tests::containerd::{self, Containerd, IMAGE};
use rustpod_tests::shim::{self, ShimContainerd, RUNTIME};

/// The cgroup mount containerd's CRI adds, in `ctr run --mount` form.
const CRI_CGROUP_MOUNT: &str = "type=cgroup,src=cgroup,dst=/sys/fs/cgroup,options=nosuid:noexec:nodev:relatime:ro";
use rustpod_tests::cgroup::unified;
use rustpod_tests::scratch::{unique_name, ScratchDir};
use rustpod_tests::{env, json, needs, skip_if, Bundle, Output, SLEEP};

/// Raises pids.max and lists the cgroup mounts.
const ATTACK_V1: &str = "echo max > /sys/fs/cgroup/pids/pids.max; echo pids=$?; grep cgroup /proc/self/mountinfo";
const ATTACK_V2: &str = "cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); \
                         echo max > $cg/pids.max; echo pids=$?; grep cgroup /proc/self/mountinfo";

/// The attack for this host's hierarchy and the mount point its pids.max is under.
fn attack() -> [&'static str; 3] {
    ["sh", "-c", if unified() { ATTACK_V2 } else { ATTACK_V1 }]
}

fn pids_mount_point() -> &'static str {
    if unified() {
        " /sys/fs/cgroup "
    } else {
        " /sys/fs/cgroup/pids "
    }
}

/// v1's pids hierarchy, or a v2 hierarchy offering pids to children.
fn blocker() -> Option<String> {
    let v1 = needs::cgroup_v1("pids")?;
    let v2 = needs::cgroup_v2(&["pids"])?;
    Some(format!("{v1}; {v2}"))
}

#[track_caller]
fn assert_read_only(who: &str, out: &Output) {
    assert!(out.stdout.contains("pids=1"), "{who}: pids.max was written: {}", out.describe());
    let mount = out.stdout.lines().find(|l| l.contains(pids_mount_point())).unwrap_or_default();
    let options = mount.split_whitespace().nth(5).unwrap_or_default();
    for flag in ["ro", "nosuid", "nodev", "noexec"] {
        assert!(options.split(',').any(|o| o == flag), "{who}: pids mount lacks {flag}: {mount:?}\n{}", out.describe());
    }
}

#[test]
fn containerd_runc_shim_keeps_the_cgroupfs_read_only() {
    skip_if!(containerd::blocker().or_else(blocker));
    let ctd = Containerd::start();
    let mut bins = vec![env::rustpod_bin()];
    if needs::program(&env::runc_bin()).is_none() {
        bins.push(env::runc_bin());
    }
    for (i, bin) in bins.iter().enumerate() {
        let bin = bin.to_string_lossy();
        let id = format!("cgro{i}");
        let flags = ["run", "--runc-binary", &bin, "--rm", "--mount", CRI_CGROUP_MOUNT, IMAGE, &id];
        let script = containerd::lingering(attack()[2]);
        let out = ctd.ctr(&[&flags[..], &["sh", "-c", &script]].concat());
        assert_read_only(&bin, &out);
    }
}

#[test]
fn rustpod_shim_keeps_the_cgroupfs_read_only() {
    skip_if!(shim::blocker().or_else(blocker));
    let ctd = ShimContainerd::start();
    let flags = ["run", "--rm", "--runtime", RUNTIME, "--mount", CRI_CGROUP_MOUNT, IMAGE, "cgro"];
    let out = ctd.ctr(&[&flags[..], &attack()].concat());
    assert_read_only("containerd-shim-rustpod-v1", &out);
}

/// A spec with a cgroup namespace and CRI's read-only cgroup mount, on containerd's three paths
/// (its runc shim driving runc, then rustpod, and our shim): the cgroupfs stays read-only, and
/// holds the container's own cgroup only: /proc/self/cgroup names `/`, the root's pids.max is the
/// container's, no other cgroup shows; what the container sees is runc's.
#[test]
fn in_a_cgroup_namespace_every_path_shows_the_containers_own_cgroup_only() {
    skip_if!(shim::blocker_with_runc().or_else(blocker));
    let ctd = ShimContainerd::start();
    let (dir, rootfs) = (ScratchDir::new("cgns"), Bundle::new(SLEEP));
    let pids = if unified() { "/sys/fs/cgroup" } else { "/sys/fs/cgroup/pids" };
    let script = containerd::lingering(&format!(
        "cat /proc/self/cgroup; echo max=$(cat {pids}/pids.max); echo dirs=$(find {pids} -mindepth 1 -type d | wc -l); \
         echo max > {pids}/pids.max; echo pids=$?; grep cgroup /proc/self/mountinfo"
    ));
    let mut reference = None;
    for (path, flags) in shim::paths() {
        let id = unique_name(path);
        let mut spec = ctd.oci_spec(&id, &rootfs.rootfs());
        spec["process"]["args"] = json!(["sh", "-c", script]);
        spec["linux"]["namespaces"].as_array_mut().expect("ctr's spec has namespaces").push(json!({"type": "cgroup"}));
        spec["mounts"].as_array_mut().expect("ctr's spec has mounts").push(json!({"destination": "/sys/fs/cgroup",
            "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}));
        spec["linux"]["resources"]["pids"] = json!({"limit": 64});
        let out = ctd.run_spec(&dir, &id, &spec, "--rm", &flags);
        assert_read_only(path, &out);
        let seen: Vec<&str> = out.stdout.lines().filter(|l| l.contains(":/") || l.starts_with("max=") || l.starts_with("dirs=")).collect();
        assert!(seen.iter().any(|l| l.contains(":/")), "{path}: no /proc/self/cgroup: {}", out.describe());
        for line in seen.iter().filter(|l| l.contains(":/")) {
            assert!(line.ends_with(":/"), "{path}: a cgroup outside the namespace's root: {line}");
        }
        assert!(seen.contains(&"max=64") && seen.contains(&"dirs=0"), "{path}: not the container's own cgroup: {}", out.describe());
        let seen: Vec<String> = seen.iter().map(|l| l.to_string()).collect();
        assert_eq!(&seen, reference.get_or_insert_with(|| seen.clone()), "{path}: next to runc's");
    }
}
