// Mount options and the rest of the filesystem setup (issue 3): ro/rro binds, nosuid, nodev,
// noexec, tmpfs size/mode, the atime family, `remount` next to runc, a read-only rootfs,
// maskedPaths, readonlyPaths, default devices and linux.devices, /dev/pts, /dev/shm and
// /dev/mqueue, as the checker sees them in mountinfo, stat and statvfs from inside.

use rustpod_tests::assertions::assert_create_fails_as_runcs;
use rustpod_tests::checker::{self, report_with, strings, Report};
use rustpod_tests::host_mount::{bind_spec, HostMounts};
use rustpod_tests::mount_ns::Held;
use rustpod_tests::{conform, env, json, needs, skip_if, Bundle, Runtime, Value};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

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

/// A tmpfs over a directory the image has takes that directory's mode, as runc gives it, so
/// an unprivileged user of the container cannot write where the image let none; a `mode=` of
/// the spec's wins, and a tmpfs where the image has nothing keeps its own 1777. Before, our
/// rootfs steps made each of them 1777: uid 1000 could write into a tmpfs over a 0755 dir.
#[test]
fn a_tmpfs_over_an_image_directory_keeps_its_mode_as_runcs_does() {
    skip_if!(needs::containers());
    let (runc, ours) = (image_dir_modes(&Runtime::runc(), None), image_dir_modes(&Runtime::under_test(), None));
    assert_image_dir_modes(&runc, &ours);
}

/// The same in a mount namespace joined by path (each container its own, as a container
/// pivots the namespace it joins), where the engine made the rootfs before.
#[test]
fn in_a_joined_mount_namespace_a_tmpfs_keeps_the_image_directorys_mode_too() {
    skip_if!(needs::containers());
    let seen = |rt: &Runtime| image_dir_modes(rt, Some(&Held::unshare()));
    let (runc, ours) = (seen(&Runtime::runc()), seen(&Runtime::under_test()));
    assert_image_dir_modes(&runc, &ours);
}

/// What uid 1000 sees of tmpfs mounts without `mode=` over image directories of 0750 and 0755
/// and over a new one, and of one with `mode=1777` over a 0755 directory: their modes, and
/// whether it may write into the 0755 one. In the mount namespace `joined`, if given.
fn image_dir_modes(rt: &Runtime, joined: Option<&Held>) -> String {
    let script = "stat -c '%a %n' /d750 /d755 /explicit /new; (printf x > /d755/x) 2>&1 | sed 's/.*: //'";
    let mut bundle = Bundle::new(&["sh", "-c", script]);
    bundle.set("/process/user", json!({"uid": 1000, "gid": 1000}));
    for (dir, mode) in [("d750", 0o750), ("d755", 0o755), ("explicit", 0o755)] {
        let path = Path::new(&bundle.rootfs()).join(dir);
        fs::create_dir(&path).expect("mkdir in the image");
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode)).expect("chmod in the image");
    }
    for dest in ["/d750", "/d755", "/new"] {
        bundle.add_mount(tmpfs(dest, &["size=1m"]));
    }
    bundle.add_mount(tmpfs("/explicit", &["mode=1777"]));
    if let Some(held) = joined {
        bundle.edit(|spec| held.join(spec));
    }
    let out = rt.run(&rt.new_id("tmpfs-mode"), &bundle, &[], b"");
    assert_eq!(out.code(), 0, "{}", out.describe());
    out.stdout
}

#[track_caller]
fn assert_image_dir_modes(runc: &str, ours: &str) {
    // runc before 1.2 chmods the tmpfs to the directory's mode after mounting it, over the
    // spec's own mode= too; runc ≥ 1.2 puts mode= first in the data, so the spec's wins.
    let without_explicit = |out: &str| out.lines().filter(|l| !l.ends_with(" /explicit")).map(String::from).collect::<Vec<_>>();
    match env::runc_before(Runtime::runc().bin(), (1, 2, 0)) {
        true => assert_eq!(without_explicit(ours), without_explicit(runc), "{} differs from runc", Runtime::under_test().bin().display()),
        false => assert_eq!(ours, runc, "{} differs from runc", Runtime::under_test().bin().display()),
    }
    assert_eq!(ours, "750 /d750\n755 /d755\n1777 /explicit\n1777 /new\nPermission denied\n");
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

/// Each mount the container sees at one of `at`, in mountinfo order, without the ids that
/// differ between runs: its mount point, own options, type and source, then apart its
/// superblock options.
fn mounts_seen(info: &str, at: &[&str]) -> Vec<(String, String)> {
    info.lines()
        .filter_map(|line| {
            let (own, fs) = line.split_once(" - ")?;
            let own: Vec<&str> = own.split(' ').collect();
            let fs: Vec<&str> = fs.split(' ').collect();
            at.contains(&own[4]).then(|| (format!("{} {} - {} {}", own[4], own[5], fs[0], fs[1]), fs[2..].join(" ")))
        })
        .collect()
}

/// The script a remount container runs: its mountinfo, then a write to each file of `writes`
/// (the shell's error, its errno's words alone).
fn remount_probe(writes: &[&str]) -> String {
    let writes: String = writes.iter().map(|f| format!("; (printf x > {f}) 2>&1 | sed 's/.*: //'")).collect();
    format!("cat /proc/self/mountinfo; echo ==={writes}")
}

/// One container of `remount_changes_the_mount_already_there_as_runcs_does`.
struct RemountCase<'a> {
    what: &'a str,
    mounts: Vec<Value>,
    /// Where it looks in mountinfo.
    at: &'a [&'a str],
    /// The files it writes to.
    writes: &'a [&'a str],
    /// In a user namespace of its own (`hostUsers: false`), where the host side of `create`
    /// makes plain binds: a remount must still change the one already there.
    userns: bool,
    /// In a mount namespace joined by path (with `userns`, the user namespace that owns it
    /// too), where the engine made the rootfs before.
    joined: bool,
}

/// The mounts `case`'s container sees at its places, and how its writes fail, under `rt`.
fn remounted(rt: &Runtime, case: &RemountCase) -> (Vec<(String, String)>, Vec<String>) {
    let mut bundle = Bundle::new(&["sh", "-c", &remount_probe(case.writes)]);
    for m in &case.mounts {
        bundle.add_mount(m.clone());
    }
    let held = match (case.joined, case.userns) {
        (false, _) => None,
        (true, false) => Some(Held::unshare()),
        (true, true) => Some(Held::unshare_with_user()),
    };
    match &held {
        Some(held) => bundle.edit(|spec| held.join(spec)),
        None if case.userns => bundle.add_user_namespace(),
        None => &mut bundle,
    };
    if case.userns {
        // The container's root cannot make them in a root-owned image.
        for dest in case.at {
            fs::create_dir(Path::new(&bundle.rootfs()).join(&dest[1..])).expect("mkdir a destination in the image");
        }
    }
    let out = rt.run(&rt.new_id("remount"), &bundle, &[], b"");
    assert_eq!(out.code(), 0, "{}: {}", case.what, out.describe());
    let (info, writes) = out.stdout.split_once("===\n").unwrap_or_else(|| panic!("{}: {}", case.what, out.describe()));
    // Sorted: where a bind is moved in from the host side, it is listed in another order.
    let mut mounts = mounts_seen(info, case.at);
    mounts.sort();
    (mounts, writes.lines().map(String::from).collect())
}

/// `remount` changes what an earlier mount (or the spec's /proc) put at the destination, as
/// runc's mount(2) with MS_REMOUNT does: one mount there, not a second on top, with the new
/// flags and data, and writes refused. Before, the engine mounted a fresh filesystem over it.
#[test]
fn remount_changes_the_mount_already_there_as_runcs_does() {
    skip_if!(needs::containers());
    let host = HostMounts::new("remount");
    let source = host.mkdir("src");
    let tmpfs_and_bind = || {
        vec![
            tmpfs("/t", &["size=1m"]),
            tmpfs("/t", &["remount", "ro", "size=2m"]),
            bind_spec(&source, "/b", &["rbind"]),
            bind_spec(&source, "/b", &["bind", "remount", "ro", "nosuid"]),
        ]
    };
    let tmpfs_and_bind =
        |what, userns, joined| RemountCase { what, mounts: tmpfs_and_bind(), at: &["/t", "/b"], writes: &["/t/x", "/b/x"], userns, joined };
    let cases = [
        tmpfs_and_bind("a tmpfs and a bind remounted read-only", false, false),
        tmpfs_and_bind("in a user namespace, a tmpfs and a bind remounted read-only", true, false),
        tmpfs_and_bind("in a mount namespace joined by path, a tmpfs and a bind remounted read-only", false, true),
        tmpfs_and_bind("in user and mount namespaces joined by path, a tmpfs and a bind remounted read-only", true, true),
        RemountCase {
            what: "/proc remounted read-only",
            mounts: vec![json!({"destination": "/proc", "type": "proc", "source": "proc", "options": ["remount", "ro", "nosuid"]})],
            at: &["/proc"],
            writes: &["/proc/self/comm"],
            userns: false,
            joined: false,
        },
    ];
    // crun 1.28 makes a remounted /proc's mount read-only but leaves its superblock rw, where
    // runc remounts both; runc before 1.2 gives a tmpfs its directory's mode by chmod, not as
    // `mode=` in its data: next to either the superblock options are left out.
    let oracle = Runtime::runc();
    let without_superblocks = |seen: &(Vec<(String, String)>, Vec<String>)| -> (Vec<String>, Vec<String>) {
        (seen.0.iter().map(|(mount, _)| mount.clone()).collect(), seen.1.clone())
    };
    for case in &cases {
        let ours = remounted(&Runtime::under_test(), case);
        let differs = format!("{}: {} differs from {}", case.what, Runtime::under_test().bin().display(), oracle.bin().display());
        let crun = env::is_crun(oracle.bin());
        // crun 1.28 in a user namespace mounts the remounted bind anew, over the first (two
        // mounts at /b, as our engine did): there rustpod is held to runc's answer alone.
        if !(crun && case.userns) {
            let theirs = remounted(&oracle, case);
            match crun || env::runc_before(oracle.bin(), (1, 2, 0)) {
                true => assert_eq!(without_superblocks(&ours), without_superblocks(&theirs), "{differs}"),
                false => assert_eq!(ours, theirs, "{differs}"),
            }
        }
        let (mounts, writes) = without_superblocks(&ours);
        for dest in case.at {
            let here: Vec<&String> = mounts.iter().filter(|m| m.starts_with(&format!("{dest} "))).collect();
            assert_eq!(here.len(), 1, "{}: one mount at {dest}, remounted: {mounts:?}", case.what);
            let read_only = here[0].split(' ').nth(1).is_some_and(|o| o.split(',').any(|f| f == "ro"));
            assert!(read_only, "{}: {dest} read-only: {here:?}", case.what);
        }
        assert_eq!(writes, vec!["Read-only file system"; case.writes.len()], "{}: writes", case.what);
    }
}

/// A remount where nothing is mounted fails create as runc's does (EINVAL); ours names the
/// mount, mount(2) and the errno in one line, and leaves nothing behind.
#[test]
fn a_remount_with_nothing_mounted_there_fails_and_leaves_nothing() {
    skip_if!(needs::containers());
    let mount = tmpfs("/t", &["remount", "ro"]);
    assert_create_fails_as_runcs("nothing is mounted at /t", &[mount], &["\\\"/t\\\"", "mount(MS_REMOUNT)", "EINVAL"]);
}

/// `tmpcopyup` on a remount: runc fails create (its copy-up tmpfs gets MS_REMOUNT, EINVAL);
/// ours refuses it at create in one line naming the mount and option, and leaves nothing behind.
#[test]
fn tmpcopyup_on_a_remount_fails_as_runcs_and_leaves_nothing() {
    skip_if!(needs::containers());
    let mounts = [tmpfs("/t", &["size=1m"]), tmpfs("/t", &["remount", "tmpcopyup"])];
    assert_create_fails_as_runcs("a remount makes no tmpfs to copy into", &mounts, &["mounts[", "(/t)", "tmpcopyup"]);
}
