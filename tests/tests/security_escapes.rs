// Known container-escape classes, each a regression test against real containers:
// CVE-2024-21626 (leaked fds, cwd through /proc/self/fd), CVE-2022-29162 (inheritable caps),
// masked/readonly paths with all capabilities, noNewPrivileges and seccomp before the user's
// process, a setuid binary (the static checker, setuid root) under nnp, and CVE-2019-5736
// (overwriting the runtime binary through /proc/<pid>/exe during exec; run on a copy of the
// binary so a failure cannot break it).
// Each attack runs on runc first (`$RUNC_BIN`: runc 1.1.5 on the host, runc 1.3.6 and crun 1.28
// in the sid guest) and then on the runtime under test, checked the same way on both.

use nix::mount::MsFlags;
use rustpod_tests::checker::{self, Report};
use rustpod_tests::host_mount::HostMounts;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{env, json, needs, process, skip_if, wait, Bundle, Fixture, Output, Runtime, Value, SLEEP};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// `run` of the fixture in the foreground: its exit code and output.
fn run(fx: &Fixture) -> Output {
    fx.rt.run(&fx.id, &fx.bundle, &[], b"")
}

/// The runtime's binary, to name it in a failure.
fn who(rt: &Runtime) -> String {
    rt.bin().display().to_string()
}

/// `(fd, target)` for each line `… N -> target` of `ls -l /proc/self/fd`.
fn open_fds(listing: &str) -> Vec<(u32, String)> {
    listing
        .lines()
        .filter_map(|line| {
            let (left, target) = line.split_once(" -> ")?;
            let fd = left.split_whitespace().last()?.parse().ok()?;
            Some((fd, target.to_string()))
        })
        .collect()
}

/// Only stdio and `ls`'s own directory fd (`/proc/<pid>/fd`) are open.
#[track_caller]
fn assert_no_leaked_fds(who: &str, out: &Output) {
    let fds = open_fds(&out.stdout);
    assert!(fds.len() >= 3, "{who}: no fd listing: {}", out.describe());
    let own_dir = |t: &str| {
        t.strip_prefix("/proc/").and_then(|rest| rest.strip_suffix("/fd")).is_some_and(|pid| pid.chars().all(|c| c.is_ascii_digit()))
    };
    let leaked: Vec<_> = fds.iter().filter(|(fd, target)| *fd > 2 && !own_dir(target)).collect();
    assert!(leaked.is_empty(), "{who}: host fds leaked into the container: {leaked:?}\n{}", out.describe());
}

#[test]
fn cve_2024_21626_no_fd_leaks_into_init() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let fx = Fixture::on(rt, &["ls", "-l", "/proc/self/fd"]);
        assert_no_leaked_fds(&who(&fx.rt), &run(&fx).ok());
    }
}

#[test]
fn cve_2024_21626_no_fd_leaks_into_exec() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let fx = running_on(rt, SLEEP);
        assert_no_leaked_fds(&who(&fx.rt), &fx.exec(&["ls", "-l", "/proc/self/fd"]).ok());
    }
}

/// A running container of `args` on `rt`.
fn running_on(rt: Runtime, args: &[&str]) -> Fixture {
    let fx = Fixture::on(rt, args);
    fx.rt.start_container(&fx.id, &fx.bundle);
    fx
}

const MARKER: &str = ".rootfs-marker";
/// Prints INSIDE when `..` from the cwd stops at the container's root (which holds the marker),
/// OUTSIDE when it climbs to the host's root: the cwd is outside the rootfs.
const WHERE_AM_I: &str = "if [ -e ../../../../../../../../../../../../.rootfs-marker ]; \
                          then echo INSIDE; else echo OUTSIDE; fi";
const LEAKED_FD_NUMBERS: std::ops::RangeInclusive<u32> = 3..=12;

/// Either the runtime refused the cwd, or the process runs inside the rootfs.
#[track_caller]
fn assert_cwd_not_outside(who: &str, cwd: &str, out: &Output) {
    eprintln!("{who}: cwd {cwd}: exit {} {} {}", out.code(), out.stdout.trim(), out.stderr.trim());
    assert!(!out.stdout.contains("OUTSIDE"), "{who}: CVE-2024-21626: cwd {cwd} resolved outside the rootfs: {}", out.describe());
}

#[test]
fn cve_2024_21626_cwd_through_proc_self_fd_stays_in_rootfs() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let who = who(&rt);
        let mut fx = Fixture::on(rt, &["sh", "-c", WHERE_AM_I]);
        fs::write(Path::new(&fx.bundle.rootfs()).join(MARKER), "").expect("write marker");
        for fd in LEAKED_FD_NUMBERS {
            let cwd = format!("/proc/self/fd/{fd}");
            fx.bundle.set("/process/cwd", json!(cwd));
            let id = fx.rt.new_id("cwd");
            assert_cwd_not_outside(&who, &cwd, &fx.rt.run(&id, &fx.bundle, &[], b""));
        }
    }
}

#[test]
fn cve_2024_21626_exec_cwd_through_proc_self_fd_stays_in_rootfs() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let fx = Fixture::on(rt, SLEEP);
        fs::write(Path::new(&fx.bundle.rootfs()).join(MARKER), "").expect("write marker");
        fx.rt.start_container(&fx.id, &fx.bundle);
        for fd in LEAKED_FD_NUMBERS {
            let cwd = format!("/proc/self/fd/{fd}");
            let out = fx.exec_with(&["--cwd", &cwd], &["sh", "-c", WHERE_AM_I]);
            assert_cwd_not_outside(&who(&fx.rt), &cwd, &out);
        }
    }
}

/// The hex value of a `Name:\tvalue` line of /proc/self/status in `text`.
fn status_field<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap_or_else(|| panic!("no {name} in:\n{text}")).trim()
}

const STATUS: &[&str] = &["cat", "/proc/self/status"];

/// /proc/self/status as a container's init on `rt` sees it, and as an exec in a second,
/// running container sees it; that container, for more execs.
fn init_and_exec_status(rt: Runtime) -> (String, String, Fixture) {
    let fx = Fixture::on(rt, STATUS);
    let init = run(&fx).ok().stdout;
    let fx = running_on(fx.rt, SLEEP);
    let exec = fx.exec(STATUS).ok().stdout;
    (init, exec, fx)
}

#[test]
fn cve_2022_29162_inheritable_caps_empty_in_init_and_exec() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let who = who(&rt);
        let (init, exec, fx) = init_and_exec_status(rt);
        assert_eq!(status_field(&init, "CapInh"), "0000000000000000", "{who}: init");
        assert_eq!(status_field(&exec, "CapInh"), "0000000000000000", "{who}: exec");
        // runc >= 1.1.2: `exec --cap` adds to bounding, effective and permitted only.
        let with_cap = fx.exec_with(&["--cap", "CAP_NET_ADMIN"], STATUS).ok();
        assert_eq!(status_field(&with_cap.stdout, "CapInh"), "0000000000000000", "{who}: exec --cap");
        assert_ne!(status_field(&with_cap.stdout, "CapEff"), status_field(&exec, "CapEff"), "{who}: exec --cap added nothing");
    }
}

/// Capability names (without CAP_) in bit order: CHOWN is bit 0, CHECKPOINT_RESTORE bit 40.
const ALL_CAPS: &str = "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP \
    LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE \
    SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME \
    SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG \
    WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF CHECKPOINT_RESTORE";

/// Every capability this process may hand out (its bounding set; e.g. CAP_SYS_RESOURCE can be
/// missing), in bounding, effective and permitted (no inheritable, no ambient).
fn all_capabilities(bundle: &mut Bundle) {
    bundle.set("/process/capabilities", every_capability());
}

/// `process.capabilities` with every capability this host's bounding set has.
fn every_capability() -> Value {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let bounding = u64::from_str_radix(status_field(&status, "CapBnd"), 16).expect("CapBnd hex");
    let caps: Vec<String> = ALL_CAPS
        .split_whitespace()
        .enumerate()
        .filter(|(bit, _)| bounding & (1 << bit) != 0)
        .map(|(_, name)| format!("CAP_{name}"))
        .collect();
    let caps = json!(caps);
    json!({"bounding": caps, "effective": caps, "permitted": caps})
}

#[test]
fn masked_and_readonly_paths_hold_with_all_capabilities() {
    skip_if!(needs::containers());
    let script = "test -s /proc/kcore && echo KCORE-READABLE; \
                  ls /sys/firmware | grep -q . && echo FIRMWARE-VISIBLE; \
                  echo x > /proc/sys/kernel/domainname && echo PROC-SYS-WRITABLE; \
                  echo done";
    for rt in Runtime::runc_and_under_test() {
        let who = who(&rt);
        let mut fx = Fixture::on(rt, &["sh", "-c", script]);
        all_capabilities(&mut fx.bundle);
        let out = run(&fx);
        assert!(out.stdout.contains("done"), "{who}: {}", out.describe());
        for breach in ["KCORE-READABLE", "FIRMWARE-VISIBLE", "PROC-SYS-WRITABLE"] {
            assert!(!out.stdout.contains(breach), "{who}: {breach}: {}", out.describe());
        }
    }
}

#[test]
fn no_new_privileges_is_set_before_the_user_process() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let who = who(&rt);
        let (init, exec, _fx) = init_and_exec_status(rt);
        assert_eq!(status_field(&init, "NoNewPrivs"), "1", "{who}: init");
        assert_eq!(status_field(&exec, "NoNewPrivs"), "1", "{who}: exec");
    }
}

/// Runs the checker, installed setuid root, on `rt` as uid 65534 with noNewPrivileges `nnp`;
/// the effective uid it reports.
fn suid_euid(rt: &Runtime, nnp: bool) -> u64 {
    let mut bundle = checker::bundle(&[]);
    let bin = Path::new(&bundle.rootfs()).join(checker::IN_CONTAINER.trim_start_matches('/'));
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o4755)).expect("chmod u+s the checker");
    bundle.set("/process/user", json!({"uid": 65534, "gid": 65534}));
    bundle.set("/process/noNewPrivileges", json!(nnp));
    let report = Report::run(rt, &bundle);
    report.at("/ids/euid").as_u64().unwrap_or_else(|| panic!("no euid in {:?}", report.0))
}

#[test]
fn setuid_binary_gains_nothing_under_no_new_privileges() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let who = who(&rt);
        // The control: without nnp the setuid bit works, so the check below means something.
        assert_eq!(suid_euid(&rt, false), 0, "{who}: control run without noNewPrivileges");
        assert_eq!(suid_euid(&rt, true), 65534, "{who}: setuid honoured under nnp");
    }
}

#[test]
fn seccomp_applies_to_the_first_user_process() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let who = who(&rt);
        let mut fx = Fixture::on(rt, &["mkdir", "/tmp/x"]);
        fx.bundle.set(
            "/linux/seccomp",
            json!({
                "defaultAction": "SCMP_ACT_ALLOW",
                "architectures": ["SCMP_ARCH_X86_64"],
                "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 42}]
            }),
        );
        let out = run(&fx);
        // errno 42 is ENOMSG.
        assert!(
            !out.success() && out.stderr.contains("No message of desired type"),
            "{who}: mkdir must fail with the profile's errno from the very first process: {}",
            out.describe()
        );
        assert!(!Path::new(&fx.bundle.rootfs()).join("tmp/x").exists(), "{who}: /tmp/x was made");
    }
}

/// A container loop that, for every other process, keeps an fd to its `/proc/<pid>/exe` and
/// tries to write through it (directly, and later through /proc/self/fd, the CVE-2019-5736
/// trick); it counts its rounds in /tmp/rounds and logs what it managed to open or write.
const EXE_ATTACK: &str = r#"
exec 2>/dev/null
n=0
while :; do
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    { [ "$pid" = 1 ] || [ "$pid" = $$ ]; } && continue
    if command exec 7< "$p/exe"; then
      t=$(readlink /proc/self/fd/7)
      case "$t" in /bin/busybox) ;; *) echo "OPENED $pid $t $(stat -L -c %d:%i /proc/self/fd/7)" >> /tmp/attack.log ;; esac
    fi
    echo PWNED >> "$p/exe" && echo "WROTE $p/exe" >> /tmp/attack.log
  done
  echo PWNED >> /proc/self/fd/7 && echo "WROTE fd 7 $(readlink /proc/self/fd/7)" >> /tmp/attack.log
  n=$((n+1)); echo $n > /tmp/rounds
done
"#;

/// Mounts of `binary` (by their root in mountinfo): whatever a runtime mounts to seal its binary
/// (runc 1.1.5 a read-only bind mount, rustpod a detached overlay) must not stay.
fn mounts_of(binary: &Path) -> Vec<String> {
    let binary = binary.to_string_lossy();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|line| line.split_whitespace().nth(3) == Some(binary.as_ref()))
        .map(str::to_string)
        .collect()
}

/// Why a container holding the inode of `bin` (run as `run_bin`) is not a finding, if it is not.
/// A write open of an inode takes write access on it before a read-only mount refuses it, and an
/// execve of the binary in that moment fails with ETXTBSY; a filesystem read-only as a whole
/// refuses the open first.
fn inode_exemption(bin: &Path, run_bin: &Path) -> Option<&'static str> {
    if env::runc_before(bin, (1, 2, 0)) {
        return Some("runc before 1.2 runs from a read-only bind mount of its binary (RUNC_DIFFERENCES.md)");
    }
    if env::is_crun(bin) {
        return Some("crun 1.28 runs from a read-only bind mount of its binary (RUNC_DIFFERENCES.md)");
    }
    let super_options = process::run(Path::new("findmnt"), &["-n", "-o", "FS-OPTIONS", "-T", &run_bin.to_string_lossy()], b"");
    if super_options.stdout.trim().split(',').any(|o| o == "ro") {
        return Some("the binary is on a filesystem that is read-only as a whole");
    }
    None
}

/// `dev:ino` as busybox's `stat -c %d:%i` prints it.
fn inode_of(path: &Path) -> String {
    use std::os::linux::fs::MetadataExt;
    let meta = fs::metadata(path).expect("stat the runtime binary");
    format!("{}:{}", meta.st_dev(), meta.st_ino())
}

fn checksum(path: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let data = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}

fn rounds(rootfs: &str) -> u64 {
    fs::read_to_string(Path::new(rootfs).join("tmp/rounds")).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

// CVE-2019-5736: rustpod re-executes create/run/exec from its binary opened through a detached
// read-only overlay of its directory (runtime/src/engine/process/sealed_exe.rs), so /proc/<pid>/exe
// of a runtime process in the container is an overlay inode, and nothing stays mounted. Before the
// first fix the binary's checksum changed. With a read-only bind mount instead of the overlay, the
// container held the binary's own inode: its open for writing took write access on it for a moment
// before EROFS, and an exec of the binary on the host then failed with ETXTBSY (sid guest, CI). runc
// runs from such an overlay, crun from a sealed copy; the same attack runs on a copy of each.
#[test]
fn cve_2019_5736_container_cannot_overwrite_runtime_binary_during_exec() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        exe_attack(&rt);
    }
}

/// The CVE-2019-5736 attack on a copy of `rt`'s binary: the container loops over every other
/// process's /proc/<pid>/exe while 10 execs run in it (it catches a runtime process at nearly
/// every one). The container must not get hold of the
/// binary's own inode either (see `inode_exemption`).
fn exe_attack(rt: &Runtime) {
    let copy_dir = ScratchDir::new("bin");
    let bin = copy_dir.join("runtime-copy");
    fs::copy(rt.bin(), &bin).expect("copy the runtime binary");
    exe_attack_on(&who(rt), &bin, 10, inode_exemption(rt.bin(), &bin));
}

/// The attack with `bin` as the runtime, during `execs` execs.
fn exe_attack_on(who: &str, bin: &Path, execs: usize, exemption: Option<&str>) {
    let before = checksum(bin);
    let mut fx = Fixture::on(Runtime::with_bin(bin.to_path_buf()), &["sh", "-c", EXE_ATTACK]);
    all_capabilities(&mut fx.bundle);
    fx.bundle.set("/root/readonly", Value::Bool(false));
    fx.rt.start_container(&fx.id, &fx.bundle);
    let rootfs = fx.bundle.rootfs();
    let mut busy = 0;
    exec_during_attack(&rootfs, execs, |_| match fx.rt.try_cmd(&["exec", &fx.id, "true"]) {
        Ok(_) => {}
        // The container's write open of the binary's own inode took write access on it.
        Err((cmdline, e)) if e.raw_os_error() == Some(libc::ETXTBSY) => {
            assert!(
                exemption.is_some(),
                "{who}: CVE-2019-5736: `{cmdline}` failed with ETXTBSY: the container took write access on the runtime binary"
            );
            busy += 1;
        }
        Err((cmdline, e)) => panic!("cannot run `{cmdline}`: {e}"),
    });
    eprintln!("{who}: {busy} of {execs} execs of the binary failed with ETXTBSY ({exemption:?})");
    fx.rt.kill(&fx.id, "KILL");
    fx.rt.wait_status(&fx.id, "stopped");
    assert_attack_failed(who, &rootfs, bin, before, exemption);
}

/// A binary on a read-only bind mount of a writable filesystem (as a host may mount /usr) must
/// be re-executed all the same: the mount refuses a write open only after the open took write
/// access on the inode. rustpod ran such a binary as it was until this test.
#[test]
fn cve_2019_5736_binary_on_a_read_only_bind_mount() {
    skip_if!(needs::containers());
    let mounts = HostMounts::new("ro-bin");
    let dir = mounts.mkdir("bin");
    let runtimes = Runtime::runc_and_under_test();
    let copies: Vec<_> = runtimes
        .iter()
        .enumerate()
        .map(|(n, rt)| {
            let copy = dir.join(format!("runtime-{n}"));
            fs::copy(rt.bin(), &copy).expect("copy the runtime binary");
            copy
        })
        .collect();
    mounts.bind_self(&dir);
    let read_only = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    nix::mount::mount(None::<&str>, &dir, None::<&str>, read_only, None::<&str>).expect("make the bind mount read-only");
    for (rt, copy) in runtimes.iter().zip(&copies) {
        exe_attack_on(&format!("{} (read-only bind mount)", who(rt)), copy, 4, inode_exemption(rt.bin(), copy));
    }
}

/// The same attack through containerd: its runc shim driving runc and rustpod, and our shim
/// (whose helpers enter the container). Each runs the real binary, whose inode is checked.
#[test]
fn cve_2019_5736_through_containerd_shims() {
    skip_if!(shim::blocker());
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("exe-attack");
    for (path, flags) in shim::paths() {
        let bin = match path {
            "runc-shim-runc" => env::runc_bin(),
            "runc-shim-rustpod" => env::rustpod_bin(),
            _ => shim::shim_bin(),
        };
        let exemption = inode_exemption(&bin, &bin);
        let before = checksum(&bin);
        let bundle = Bundle::new(&["sh", "-c", EXE_ATTACK]);
        let id = format!("{path}-exe");
        let mut spec = ctd.oci_spec(&id, &bundle.rootfs());
        spec["process"]["args"] = json!(["sh", "-c", EXE_ATTACK]);
        spec["process"]["capabilities"] = every_capability();
        spec["root"]["readonly"] = json!(false);
        let config = dir.join_str(&format!("{id}.json"));
        fs::write(&config, spec.to_string()).expect("write the spec");
        ctd.run_config(&config, &flags, &id).ok();
        ctd.wait_task(&id, "RUNNING");
        let rootfs = bundle.rootfs();
        exec_during_attack(&rootfs, 4, |n| {
            ctd.ctr(&["task", "exec", "--exec-id", &format!("x{n}"), &id, "true"]).ok();
        });
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", &id]).ok();
        ctd.wait_task(&id, "STOPPED");
        ctd.delete_task(&id);
        assert_attack_failed(path, &rootfs, &bin, before, exemption);
    }
}

/// Runs `count` execs through `exec` during the attack, letting it go on two rounds after each.
fn exec_during_attack(rootfs: &str, count: usize, mut exec: impl FnMut(usize)) {
    for n in 0..count {
        let seen = rounds(rootfs);
        exec(n);
        // Let the loop finish two more rounds after each exec, so it tries the grabbed fd.
        wait::wait_for("the attack loop to go on", || (rounds(rootfs) > seen + 1).then_some(()));
    }
}

/// The attack in `rootfs` left `bin` as it was (`before` its checksum), wrote no runtime exe,
/// left no mount of it and, but for an `exemption`, never held its inode.
fn assert_attack_failed(who: &str, rootfs: &str, bin: &Path, before: u64, exemption: Option<&str>) {
    let log = fs::read_to_string(Path::new(rootfs).join("tmp/attack.log")).unwrap_or_default();
    eprintln!("{who}: attack log:\n{log}");
    assert_eq!(checksum(bin), before, "{who}: CVE-2019-5736: the container overwrote the runtime binary:\n{log}");
    assert!(!log.contains("WROTE"), "{who}: the container wrote a runtime exe:\n{log}");
    assert_eq!(mounts_of(bin), Vec::<String>::new(), "{who}: mounts of the runtime binary are left");
    if let Some(why) = exemption {
        eprintln!("{who}: the inode the container held is not checked: {why}");
        return;
    }
    let own_inode = inode_of(bin);
    let held: Vec<&str> = log.lines().filter(|line| line.split_whitespace().nth(3) == Some(own_inode.as_str())).collect();
    assert!(
        held.is_empty(),
        "{who}: the container opened the runtime binary's own inode {own_inode} {} times: {:?}",
        held.len(),
        &held[..held.len().min(3)]
    );
}
