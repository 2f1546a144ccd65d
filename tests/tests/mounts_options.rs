// Mount options and the rest of the filesystem setup (issue 3): ro/rro binds, nosuid, nodev,
// noexec, tmpfs size/mode, the atime family, a read-only rootfs, maskedPaths, readonlyPaths,
// default devices and linux.devices, /dev/pts, /dev/shm and /dev/mqueue, as the checker sees
// them in mountinfo, stat and statvfs from inside.

use rustpod_tests::checker::{self, report_with, strings, Report};
use rustpod_tests::host_mount::{bind_spec, HostMounts};
use rustpod_tests::{conform, json, needs, skip_if, Bundle, Runtime, Value};
use std::collections::BTreeSet;
use std::fs;

const EROFS: i64 = 30;
const EACCES: i64 = 13;

fn tmpfs(destination: &str, options: &[&str]) -> Value {
    json!({"destination": destination, "type": "tmpfs", "source": "tmpfs", "options": options})
}

/// Whether `options` of the mount at `at` include all of `want`.
#[track_caller]
fn has_options(report: &Report, at: &str, want: &[&str]) -> bool {
    let got = report.mount_options(at);
    want.iter().all(|o| got.contains(*o))
}

#[test]
fn bind_ro_rro_nosuid_nodev_noexec() {
    skip_if!(needs::containers());
    let host = HostMounts::new("binds");
    let source = host.mkdir("src");
    fs::create_dir(source.join("sub")).expect("mkdir sub");
    host.tmpfs_with_marker(&source.join("sub"), "m");
    fs::copy("/bin/busybox", source.join("busybox")).expect("copy busybox");
    let args = ["--exec", "/flags/busybox", "--exec", "/ro/busybox"];
    let report = report_with(&args, |b| {
        b.add_mount(bind_spec(&source, "/ro", &["rbind", "ro"]));
        b.add_mount(bind_spec(&source, "/rro", &["rbind", "rro"]));
        b.add_mount(bind_spec(&source, "/flags", &["rbind", "nosuid", "nodev", "noexec"]));
    });
    assert!(has_options(&report, "/ro", &["ro"]), "{}", report.mount_table());
    assert!(has_options(&report, "/flags", &["nosuid", "nodev", "noexec"]));
    assert_eq!(report.at("/exec/~1flags~1busybox"), EACCES, "noexec");
    assert_eq!(report.at("/exec/~1ro~1busybox"), 0, "exec allowed without noexec");
    assert!(has_options(&report, "/rro", &["ro"]));
    conform!(has_options(&report, "/rro/sub", &["ro"]), "rro must make the submount read-only too: {}", report.mount_table());
}

#[test]
fn tmpfs_size_mode_and_the_atime_family() {
    skip_if!(needs::containers());
    let report = report_with(&["--path", "/t"], |b| {
        b.add_mount(tmpfs("/t", &["size=2m", "mode=1750"]));
        for (dest, option) in
            [("/noatime", "noatime"), ("/strictatime", "strictatime"), ("/relatime", "relatime"), ("/nodiratime", "nodiratime")]
        {
            b.add_mount(tmpfs(dest, &[option]));
        }
    });
    assert_eq!(report.path("/t")["mode"], "1750");
    let supers = strings(&report.expect_mount("/t")["super_options"]);
    assert!(supers.contains("size=2048k"), "tmpfs size: {supers:?}");
    assert!(has_options(&report, "/noatime", &["noatime"]));
    assert!(has_options(&report, "/relatime", &["relatime"]));
    assert!(has_options(&report, "/nodiratime", &["nodiratime"]));
    let strict = report.mount_options("/strictatime");
    assert!(!strict.contains("relatime") && !strict.contains("noatime"), "strictatime: {strict:?}");
}

#[test]
fn readonly_rootfs_both_ways() {
    skip_if!(needs::containers());
    for readonly in [true, false] {
        let report = report_with(&["--write", "/probe"], |b| {
            b.set("/root/readonly", json!(readonly));
        });
        let ro = report.mount_options("/").contains("ro");
        assert_eq!(ro, readonly, "root.readonly {readonly}: {}", report.mount_table());
        let errno = report.at("/write/~1probe").as_i64();
        assert_eq!(errno, Some(if readonly { EROFS } else { 0 }), "write to /");
    }
}

/// Runs the checker in `bundle` with `args` and a `--path` probe of each of `paths`.
fn probe(bundle: &mut Bundle, args: &[&str], paths: &BTreeSet<String>) -> Report {
    let mut argv = args.to_vec();
    for path in paths {
        argv.extend(["--path", path.as_str()]);
    }
    bundle.set_args(&checker::argv(&argv));
    Report::run(&Runtime::under_test(), bundle)
}

#[test]
fn masked_paths_files_and_directories() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle(&[]);
    let etc = std::path::Path::new(&bundle.rootfs()).join("etc");
    fs::write(etc.join("secret-file"), "secret").expect("write secret-file");
    fs::create_dir(etc.join("secret-dir")).expect("mkdir secret-dir");
    fs::write(etc.join("secret-dir/inside"), "secret").expect("write secret-dir/inside");
    let mut masked = strings(&bundle.config()["linux"]["maskedPaths"]);
    masked.extend(["/etc/secret-file".to_string(), "/etc/secret-dir".to_string()]);
    bundle.set("/linux/maskedPaths", json!(masked));
    let report = probe(&mut bundle, &[], &masked);
    for path in &masked {
        let probe = report.path(path);
        // A default path the kernel here lacks (e.g. /proc/kcore) has nothing to mask.
        if probe["exists"] == false && !path.starts_with("/etc/") {
            continue;
        }
        assert_eq!(probe["masked"], true, "{path} is not masked: {probe}");
        assert_ne!(probe["content"], "secret", "{path} shows its content");
    }
}

#[test]
fn readonly_paths() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle(&[]);
    let readonly = strings(&bundle.config()["linux"]["readonlyPaths"]);
    let report = probe(&mut bundle, &["--write", "/proc/sys/kernel/hostname"], &readonly);
    for path in &readonly {
        let probe = report.path(path);
        if probe["exists"] == true {
            assert_eq!(probe["readonly"], true, "{path}: {probe}");
        }
    }
    assert_eq!(report.at("/write/~1proc~1sys~1kernel~1hostname"), EROFS, "/proc/sys is read-only");
}

#[test]
fn default_devices_and_linux_devices() {
    skip_if!(needs::containers());
    let defaults = [
        ("/dev/null", [1, 3]),
        ("/dev/zero", [1, 5]),
        ("/dev/full", [1, 7]),
        ("/dev/random", [1, 8]),
        ("/dev/urandom", [1, 9]),
        ("/dev/tty", [5, 0]),
    ];
    let mut args = vec!["--path", "/dev/mydev", "--write", "/dev/mydev"];
    for (path, _) in defaults {
        args.extend(["--path", path]);
    }
    let report = report_with(&args, |b| {
        b.set(
            "/linux/devices",
            json!([{"path": "/dev/mydev", "type": "c", "major": 1, "minor": 5,
                    "fileMode": 0o640, "uid": 0, "gid": 5}]),
        );
        b.set(
            "/linux/resources/devices",
            json!([{"allow": false, "access": "rwm"},
                   {"allow": true, "type": "c", "major": 1, "minor": 5, "access": "rw"}]),
        );
    });
    for (path, rdev) in defaults {
        let probe = report.path(path);
        assert_eq!(probe["kind"], "char", "{path}: {probe}");
        assert_eq!(probe["rdev"], json!(rdev), "{path}: {probe}");
    }
    let mydev = report.path("/dev/mydev");
    assert_eq!(mydev["kind"], "char", "{mydev}");
    assert_eq!(mydev["rdev"], json!([1, 5]));
    assert_eq!(mydev["mode"], "0640");
    assert_eq!(mydev["gid"], 5);
    assert_eq!(report.at("/write/~1dev~1mydev"), 0, "allowed by the device cgroup");
}

#[test]
fn dev_pts_shm_and_mqueue() {
    skip_if!(needs::containers());
    let report = report_with(&["--path", "/dev/shm", "--path", "/dev/ptmx"], |_| {});
    let set = |v: &Value| strings(v);
    let pts = report.expect_mount("/dev/pts");
    assert_eq!(pts["fstype"], "devpts");
    let pts_super = set(&pts["super_options"]);
    let want: BTreeSet<String> = ["mode=620", "ptmxmode=666", "gid=5"].map(String::from).into();
    assert!(want.is_subset(&pts_super), "devpts options: {pts_super:?}");
    assert!(has_options(&report, "/dev/pts", &["nosuid", "noexec"]));

    let shm = report.expect_mount("/dev/shm");
    assert_eq!(shm["fstype"], "tmpfs");
    assert!(set(&shm["super_options"]).contains("size=65536k"), "{shm}");
    assert!(has_options(&report, "/dev/shm", &["nosuid", "noexec", "nodev"]));
    assert_eq!(report.path("/dev/shm")["mode"], "1777");

    assert_eq!(report.expect_mount("/dev/mqueue")["fstype"], "mqueue");
    assert!(has_options(&report, "/dev/mqueue", &["nosuid", "noexec", "nodev"]));
    assert_eq!(report.path("/dev/ptmx")["exists"], true, "/dev/ptmx (a link to pts/ptmx)");
}
