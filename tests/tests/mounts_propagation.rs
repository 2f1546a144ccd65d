// Mount propagation (issue 3): linux.rootfsPropagation, the per-mount propagation options and
// the three kubelet volume modes, seen from inside through the checker's mountinfo and from the
// host. Host dirs that must propagate are bind-mounted onto themselves and made rshared, as
// kubelet does with /var/lib/kubelet; a guard detaches every mount under them afterwards.

use rustpod_tests::checker::{self, Report};
use rustpod_tests::host_mount::{bind_spec, is_mount_point, HostMounts};
use rustpod_tests::{conform, json, leftovers, needs, skip_if, Bundle, Runtime, SLEEP};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Each propagation value and what mountinfo then shows (`shared`, `slave`, …).
const PROPAGATIONS: [(&str, &str); 8] = [
    ("private", "private"),
    ("rprivate", "private"),
    ("slave", "slave"),
    ("rslave", "slave"),
    ("shared", "shared"),
    ("rshared", "shared"),
    ("unbindable", "unbindable"),
    ("runbindable", "unbindable"),
];

/// Puts `bundle`'s rootfs under a shared host mount (as a node's container rootfs is under a
/// shared `/` with systemd), so that slave and shared are distinguishable from private.
/// Returns the guard and the rootfs path the config now names.
fn rootfs_under_shared_mount(bundle: &mut Bundle) -> (HostMounts, PathBuf) {
    let host = HostMounts::new("shared-root");
    let rootfs = host.shared_dir("shared").join("rootfs");
    fs::create_dir(&rootfs).expect("mkdir rootfs mount point");
    host.rbind(Path::new(&bundle.rootfs()), &rootfs);
    bundle.set("/root/path", json!(rootfs));
    (host, rootfs)
}

/// Starts `bundle` (its init must stay up), runs `inspect` on the live container, then deletes it.
fn with_running<T>(rt: &Runtime, bundle: &Bundle, inspect: impl FnOnce(&str) -> T) -> T {
    try_with_running(rt, bundle, inspect).unwrap_or_else(|e| panic!("{e}"))
}

/// `with_running`, or the error of a create that failed.
fn try_with_running<T>(rt: &Runtime, bundle: &Bundle, inspect: impl FnOnce(&str) -> T) -> Result<T, String> {
    let id = rt.new_id("prop");
    let created = rt.try_create(&id, bundle, &[]);
    if !created.success() {
        return Err(format!("create failed: {}", created.stderr.trim()));
    }
    rt.start(&id);
    rt.wait_status(&id, "running");
    let result = inspect(&id);
    rt.cmd(&["delete", "--force", &id]).ok();
    Ok(result)
}

/// Host mounts under `rootfs` other than the rootfs itself: what a container leaked to the host.
fn leaked_into_host(rootfs: &Path) -> Vec<String> {
    let own = rootfs.to_string_lossy();
    leftovers::mount_points_under(&format!("{own}/"))
}

#[test]
fn rootfs_propagation_each_value() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle_running(SLEEP);
    let (_host, rootfs) = rootfs_under_shared_mount(&mut bundle);
    let rt = Runtime::under_test();
    let mut wrong = vec![];
    for (value, expected) in PROPAGATIONS {
        bundle.set("/linux/rootfsPropagation", json!(value));
        let outcome = try_with_running(&rt, &bundle, |id| (Report::exec(&rt, id, &[]), leaked_into_host(&rootfs)));
        let (report, leaked) = match outcome {
            Ok(seen) => seen,
            Err(e) => {
                wrong.push(format!("{value}: {e}"));
                continue;
            }
        };
        let got = report.propagation("/");
        eprintln!("rootfsPropagation {value}: / is {got}");
        if got != expected {
            wrong.push(format!("{value}: / is {got}, want {expected}"));
        }
        assert!(leaked.is_empty(), "rootfsPropagation {value}: container mounts leaked to the host: {leaked:?}");
    }
    conform!(wrong.is_empty(), "rootfsPropagation: {wrong:?}");
}

#[test]
fn rootfs_propagation_default_is_rslave_like_runc() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle_running(SLEEP);
    let (_host, rootfs) = rootfs_under_shared_mount(&mut bundle);
    let rt = Runtime::under_test();
    let (report, leaked) = with_running(&rt, &bundle, |id| (Report::exec(&rt, id, &[]), leaked_into_host(&rootfs)));
    assert_eq!(report.propagation("/"), "slave", "{}", report.mount_table());
    assert!(leaked.is_empty(), "mounts leaked to the host: {leaked:?}");
}

/// A host volume `<shared>/vol` holding a tmpfs at `vol/sub`, under an rshared host dir.
fn shared_volume() -> (HostMounts, PathBuf) {
    let host = HostMounts::new("vol");
    let volume = host.shared_dir("shared").join("vol");
    fs::create_dir_all(volume.join("sub")).expect("mkdir vol/sub");
    host.tmpfs_with_marker(&volume.join("sub"), "sub-marker");
    (host, volume)
}

/// The propagation of /vol and /vol/sub inside, with /vol bound from `volume` with `options`.
fn volume_propagation(rt: &Runtime, volume: &Path, options: &[&str]) -> (String, String) {
    let mut bundle = checker::bundle_running(SLEEP);
    bundle.add_mount(bind_spec(volume, "/vol", options));
    with_running(rt, &bundle, |id| {
        let report = Report::exec(rt, id, &["--path", "/vol/sub/sub-marker"]);
        assert_eq!(report.path("/vol/sub/sub-marker")["exists"], true, "rbind must bring the submount along: {}", report.mount_table());
        let vol = report.propagation("/vol").to_string();
        (vol, report.propagation("/vol/sub").to_string())
    })
}

#[test]
fn mount_propagation_each_option() {
    skip_if!(needs::containers());
    let (_host, volume) = shared_volume();
    let rt = Runtime::under_test();
    let (_, sub_baseline) = volume_propagation(&rt, &volume, &["rbind"]);
    let mut wrong = vec![];
    for (option, expected) in PROPAGATIONS {
        let (vol, sub) = volume_propagation(&rt, &volume, &["rbind", option]);
        eprintln!("{option}: /vol {vol}, /vol/sub {sub} (plain rbind: {sub_baseline})");
        // The r-forms apply to the submount too; the others leave it as a plain rbind has it.
        let sub_expected = if option.starts_with('r') { expected } else { sub_baseline.as_str() };
        // A slave made shared is `shared+slave`: both count as shared.
        let matches = |got: &str, want: &str| got == want || got.starts_with(&format!("{want}+"));
        if !matches(&vol, expected) || !matches(&sub, sub_expected) {
            wrong.push(format!("{option}: /vol {vol} (want {expected}), /vol/sub {sub} (want {sub_expected})"));
        }
    }
    conform!(wrong.is_empty(), "per-mount propagation: {wrong:?}");
}

/// kubelet's layout: `<tmp>/var/lib/kubelet` bound onto itself and rshared, and an empty-dir
/// volume `pods/<uid>/volumes/kubernetes.io~empty-dir/<name>` (mode 0750) under it.
struct KubeletVolume {
    host: HostMounts,
    path: PathBuf,
}

impl KubeletVolume {
    fn new() -> Self {
        let host = HostMounts::new("kubelet");
        let kubelet = host.shared_dir("var/lib/kubelet");
        let path = kubelet.join("pods/0f6c3e7a-5b1d-4c2e-9a8f-3d2b1c0e9f7a/volumes/kubernetes.io~empty-dir/data");
        fs::create_dir_all(path.join("late")).expect("mkdir volume");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o750)).expect("chmod volume");
        fs::write(path.join("before"), "before").expect("write volume file");
        KubeletVolume { host, path }
    }

    /// A bundle with this volume at /vol with `options` and root propagation `root`.
    fn bundle(&self, options: &[&str], root: Option<&str>) -> Bundle {
        let mut bundle = checker::bundle_running(SLEEP);
        bundle.add_mount(bind_spec(&self.path, "/vol", options));
        if let Some(root) = root {
            bundle.set("/linux/rootfsPropagation", json!(root));
        }
        bundle
    }

    /// Mounts a tmpfs on the host at `<volume>/late` and reports whether the running container
    /// `id` sees its marker file at /vol/late.
    fn host_mount_seen_inside(&self, rt: &Runtime, id: &str) -> bool {
        let before = Report::exec(rt, id, &["--path", "/vol/before", "--path", "/vol/late/late"]);
        assert_eq!(before.path("/vol/before")["content"], "before", "the volume is not bound at /vol: {}", before.mount_table());
        assert_eq!(before.path("/vol/late/late")["exists"], false);
        self.host.tmpfs_with_marker(&self.path.join("late"), "late");
        let after = Report::exec(rt, id, &["--path", "/vol/late/late"]);
        after.path("/vol/late/late")["exists"] == true
    }
}

#[test]
fn kubelet_private_volume_hides_later_host_mounts() {
    skip_if!(needs::containers());
    let volume = KubeletVolume::new();
    let bundle = volume.bundle(&["rbind", "rprivate"], None);
    let rt = Runtime::under_test();
    let seen = with_running(&rt, &bundle, |id| volume.host_mount_seen_inside(&rt, id));
    assert!(!seen, "PRIVATE (rbind,rprivate): a host mount made after start must not appear inside");
}

#[test]
fn kubelet_host_to_container_volume_shows_later_host_mounts() {
    skip_if!(needs::containers());
    let volume = KubeletVolume::new();
    let bundle = volume.bundle(&["rbind", "rslave"], Some("rslave"));
    let rt = Runtime::under_test();
    let seen = with_running(&rt, &bundle, |id| volume.host_mount_seen_inside(&rt, id));
    conform!(seen, "HOST_TO_CONTAINER (rbind,rslave, root rslave): a host mount made after start must appear inside");
}

#[test]
fn kubelet_bidirectional_volume_shows_container_mounts_on_host() {
    skip_if!(needs::containers());
    let volume = KubeletVolume::new();
    let mut bundle = volume.bundle(&["rbind", "rshared"], Some("rshared"));
    checker::set_all_caps(&mut bundle, &checker::host_bounding_caps());
    let (_root_host, rootfs) = rootfs_under_shared_mount(&mut bundle);
    fs::create_dir_all(volume.path.join("inner")).expect("mkdir volume/inner");
    fs::create_dir_all(rootfs.join("tmp/elsewhere")).expect("mkdir rootfs/tmp/elsewhere");
    let rt = Runtime::under_test();
    with_running(&rt, &bundle, |id| {
        let mount_inside = |dir: &str| {
            let script = format!("mount -t tmpfs -o size=1m tmpfs {dir} && echo inside > {dir}/m");
            rt.exec(id, &["sh", "-c", &script]).ok();
        };
        mount_inside("/vol/inner");
        mount_inside("/tmp/elsewhere");
        let inner = volume.path.join("inner");
        conform!(
            is_mount_point(&inner),
            "BIDIRECTIONAL: a mount made inside under the volume must appear on the host at {}",
            inner.display()
        );
        assert_eq!(fs::read_to_string(inner.join("m")).unwrap_or_default(), "inside\n");
        let leaked = leaked_into_host(&rootfs);
        assert!(leaked.is_empty(), "BIDIRECTIONAL: mounts made inside outside the volume leaked to the host: {leaked:?}");
    });
}
