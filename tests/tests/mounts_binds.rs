// Bind mounts as kubelet uses them (issue 3): single-file binds (the termination log), sources
// that are symlinks, missing sources, and mount targets that are symlinks pointing out of the
// rootfs (the CVE-2021-30465 class): the mount must land inside the rootfs, never on the host.

use rustpod_tests::assertions::assert_one_line_error;
use rustpod_tests::checker::{self, Report};
use rustpod_tests::host_mount::bind_spec;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{json, leftovers, needs, skip_if, Runtime, Value};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

fn bind(source: &Path, destination: &str) -> Value {
    bind_spec(source, destination, &["rbind", "rprivate"])
}

#[test]
fn single_file_bind_like_the_termination_log() {
    skip_if!(needs::containers());
    let host = ScratchDir::new("termlog");
    let log = host.join("termination-log");
    fs::write(&log, "").expect("create termination log");
    fs::set_permissions(&log, fs::Permissions::from_mode(0o666)).expect("chmod 0666");
    let mut bundle = checker::bundle(&[]);
    bundle.add_mount(bind(&log, "/dev/termination-log"));
    let script = format!("{} --path /dev/termination-log && echo 'exit reason' > /dev/termination-log", checker::IN_CONTAINER);
    bundle.set_args(&["sh", "-c", &script]);
    let report = Report::run(&Runtime::under_test(), &bundle);
    let inside = report.path("/dev/termination-log");
    assert_eq!(inside["kind"], "file", "{inside}");
    assert_eq!(inside["mode"], "0666", "{inside}");
    assert_eq!(inside["mount"]["mount_point"], "/dev/termination-log", "{inside}");
    assert_eq!(fs::read_to_string(&log).expect("read termination log"), "exit reason\n", "a write inside must reach the host file");
}

#[test]
fn symlink_sources_are_resolved() {
    skip_if!(needs::containers());
    let host = ScratchDir::new("symsrc");
    fs::create_dir(host.join("real-dir")).expect("mkdir real-dir");
    fs::write(host.join("real-dir/inside"), "dir content").expect("write");
    fs::write(host.join("real-file"), "file content").expect("write");
    symlink(host.join("real-dir"), host.join("link-dir")).expect("symlink dir");
    symlink("real-file", host.join("link-file")).expect("symlink file");
    let mut bundle = checker::bundle(&["--path", "/vol/inside", "--path", "/file"]);
    bundle.add_mount(bind(&host.join("link-dir"), "/vol"));
    bundle.add_mount(bind(&host.join("link-file"), "/file"));
    let report = Report::run(&Runtime::under_test(), &bundle);
    assert_eq!(report.path("/vol/inside")["content"], "dir content");
    assert_eq!(report.path("/file")["content"], "file content");
    assert_eq!(report.path("/file")["kind"], "file", "a file, not a link");
    // mountinfo's root is the source as the kernel resolved it.
    for (dest, real) in [("/vol", "/real-dir"), ("/file", "/real-file")] {
        let root = report.expect_mount(dest)["root"].as_str().unwrap_or_default();
        assert!(root.ends_with(real), "{dest} is bound from {root}");
    }
}

/// A relative bind source is the bundle's, as runc resolves it (after a chdir into the bundle),
/// never one in the caller's working directory: here the package's directory, which has none.
#[test]
fn a_relative_bind_source_is_in_the_bundle_like_runc() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let mut bundle = checker::bundle(&["--path", "/vol/inside"]);
        let shared = Path::new(bundle.path()).join("shared-in-bundle");
        fs::create_dir(&shared).expect("mkdir the bundle's shared dir");
        fs::write(shared.join("inside"), "the bundle's").expect("write");
        bundle.add_mount(bind(Path::new("shared-in-bundle"), "/vol"));
        let report = Report::run(&rt, &bundle);
        assert_eq!(report.path("/vol/inside")["content"], "the bundle's", "{}", rt.bin().display());
    }
}

#[test]
fn missing_bind_source_fails_create_and_leaves_nothing() {
    skip_if!(needs::containers());
    let host = ScratchDir::new("nosrc");
    let missing = host.join("does-not-exist");
    let mut bundle = checker::bundle(&[]);
    bundle.add_mount(bind(&missing, "/vol"));
    let rt = Runtime::under_test();
    let id = rt.new_id("nosrc");
    let out = rt.try_create(&id, &bundle, &[]);
    assert_one_line_error(&out, &[&missing.to_string_lossy()]);
    rt.assert_nothing_left(&id, bundle.path());
}

/// Mount targets that go through symlinks out of the rootfs: `/up -> ..`, `/slash -> /`, and
/// `/evilproc -> /proc`. Resolved on the host, `/up/escaped` would be `<bundle>/escaped` and
/// `/slash<escape>` the host's `<escape>` (a scratch dir, so a broken runtime harms nothing).
#[test]
fn symlinked_mount_targets_stay_inside_the_rootfs() {
    skip_if!(needs::containers());
    let escape = ScratchDir::new("escape");
    let host_target = escape.join("target");
    let host_target_str = host_target.to_string_lossy().into_owned();
    let mut bundle = checker::bundle(&["--path", "/escaped/m", "--path", &host_target_str]);
    let rootfs = bundle.rootfs();
    symlink("..", Path::new(&rootfs).join("up")).expect("symlink up -> ..");
    symlink("/", Path::new(&rootfs).join("slash")).expect("symlink slash -> /");
    let tmpfs = |dest: &str| json!({"destination": dest, "type": "tmpfs", "source": "tmpfs"});
    bundle.add_mount(tmpfs("/up/escaped"));
    bundle.add_mount(tmpfs(&format!("/slash{host_target_str}")));
    let rt = Runtime::under_test();
    let out = checker::try_run(&rt, &bundle);
    let escaped_on_host = Path::new(bundle.path()).join("escaped");
    assert!(!escaped_on_host.exists(), "`/up/escaped` (up -> ..) was created on the host at {}", escaped_on_host.display());
    assert!(
        !host_target.exists() && leftovers::mount_points_under(escape.str()).is_empty(),
        "`/slash…` (slash -> /) reached the host path {host_target_str}"
    );
    let report = Report::from_output(out);
    for inside in ["/escaped", host_target_str.as_str()] {
        let mount = report.expect_mount(inside);
        assert_eq!(mount["fstype"], "tmpfs", "{inside}: {mount}");
    }
}

/// The count of mounts at /proc in the test's (the host's) mount namespace.
fn host_proc_mounts() -> usize {
    fs::read_to_string("/proc/self/mountinfo").expect("read mountinfo").lines().filter(|l| l.split(' ').nth(4) == Some("/proc")).count()
}

#[test]
fn mount_target_symlink_to_proc_never_reaches_host_proc() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle(&["--path", "/proc/self"]);
    symlink("/proc", Path::new(&bundle.rootfs()).join("evilproc")).expect("symlink");
    bundle.add_mount(json!({"destination": "/evilproc", "type": "tmpfs", "source": "tmpfs"}));
    let before = host_proc_mounts();
    let rt = Runtime::under_test();
    let out = checker::try_run(&rt, &bundle);
    assert_eq!(host_proc_mounts(), before, "a mount at /evilproc (-> /proc) landed on the host's /proc");
    assert!(fs::read_to_string("/proc/self/status").is_ok_and(|s| s.contains("CapBnd")), "the host's /proc is no longer procfs");
    // Refusing the mount is fine; if it ran, the tmpfs covers the container's own /proc (so
    // /proc/self is gone in there) or sits at /evilproc.
    if out.success() {
        let report = Report::from_output(out);
        assert!(
            report.path("/proc/self")["exists"] == false || report.mount("/evilproc").is_some(),
            "the tmpfs for /evilproc is nowhere inside: {}",
            report.mount_table()
        );
    } else {
        eprintln!("create refused /evilproc: {}", out.stderr.trim());
    }
}

/// A mount whose destination lies under a regular file (`/etc/passwd/x`) fails in the engine's
/// rootfs step, the same step a lost symlink race fails in (security_races.rs): runc and the
/// runtime under test both refuse it with one line that names the destination and why, the
/// syscall and the errno (libcontainer alone says only "failed to prepare rootfs"), and leave
/// nothing behind.
#[test]
fn a_failed_rootfs_mount_names_the_destination_the_syscall_and_the_errno() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let mut bundle = checker::bundle(&[]);
        bundle.add_mount(json!({"destination": "/etc/passwd/x", "type": "tmpfs", "source": "tmpfs"}));
        let id = rt.new_id("rootfs-err");
        let out = rt.try_create(&id, &bundle, &[]);
        assert_one_line_error(&out, &["/etc/passwd/x"]);
        // Both print it as a logrus entry, its quotes escaped.
        let line = out.stderr.to_lowercase().replace("\\\"", "\"");
        assert!(
            line.contains("error mounting \"tmpfs\" to rootfs at \"/etc/passwd/x\""),
            "{}: the mount: {}",
            rt.bin().display(),
            out.describe()
        );
        // runc says the errno in Go's words, we in its name and words.
        assert!(line.contains("not a directory"), "{}: the errno: {}", rt.bin().display(), out.describe());
        assert!(
            ["mkdir", "mkdirat", "openat", "openat2"].iter().any(|call| line.contains(&format!(": {call} "))),
            "{}: the syscall: {}",
            rt.bin().display(),
            out.describe()
        );
        rt.assert_nothing_left(&id, bundle.path());
    }
}
