// Device rules (linux.resources.devices) attacked from inside the container, on rustpod and
// runc alike: writing a device the config denies, and with CAP_MKNOD making an unlisted device
// node and opening it. On cgroup v1 the devices controller enforces them; on a pure cgroup v2
// host only an eBPF program attached to the container's cgroup does (issue 14 item 1), which is
// why hack/guest-v2.sh runs this file in a v2 guest.

use rustpod_tests::{env, json, needs, skip_if, Bundle, Runtime, Value};

/// Each step prints `<step>: ok` or `<step>: EPERM` (or the error it got instead).
const ATTACK: &str = r#"
try() { step=$1; shift
  if "$@" 2>/dev/shm/err; then echo "$step: ok"
  elif grep -q 'Operation not permitted' /dev/shm/err; then echo "$step: EPERM"
  else echo "$step: $(cat /dev/shm/err)"; fi; }
try kmsg-write sh -c 'echo rustpod-device-test > /dev/kmsg'
try mknod-mem mknod /dev/mem-x c 1 1
try mem-read sh -c 'head -c 1 /dev/mem-x >/dev/null'
try mknod-kmsg mknod /dev/kmsg-x c 1 11
try kmsg-x-write sh -c 'echo rustpod-device-test > /dev/kmsg-x'
try mknod-disk mknod /dev/disk-x b 8 0
try disk-read sh -c 'head -c 1 /dev/disk-x >/dev/null'
try null-write sh -c 'echo x > /dev/null'
try zero-read sh -c 'head -c 1 /dev/zero >/dev/null'
"#;

fn blocker() -> Option<String> {
    needs::containers().or_else(|| needs::program(&env::runc_bin()))
}

/// runc's default config plus CAP_MKNOD (containerd and kubelet grant it) and a /dev/kmsg node;
/// `extra_rules` follow the default deny-all rule.
fn attack_bundle(extra_rules: &[Value]) -> Bundle {
    let mut bundle = Bundle::new(&["sh", "-c", ATTACK]);
    let caps = json!(["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_MKNOD"]);
    for set in ["bounding", "effective", "permitted"] {
        bundle.set(&format!("/process/capabilities/{set}"), caps.clone());
    }
    bundle
        .set("/linux/devices", json!([{"path": "/dev/kmsg", "type": "c", "major": 1, "minor": 11, "fileMode": 0o666, "uid": 0, "gid": 0}]));
    let mut rules = vec![json!({"allow": false, "access": "rwm"})];
    rules.extend_from_slice(extra_rules);
    bundle.set("/linux/resources/devices", Value::Array(rules));
    bundle
}

/// Runs the attack in a foreground container; its report lines.
fn attack(rt: &Runtime, bundle: &Bundle) -> Vec<String> {
    let id = rt.new_id("dev");
    let out = rt.run(&id, bundle, &[], b"").ok();
    out.stdout.lines().map(str::to_string).collect()
}

const STEPS: [&str; 9] =
    ["kmsg-write", "mknod-mem", "mem-read", "mknod-kmsg", "kmsg-x-write", "mknod-disk", "disk-read", "null-write", "zero-read"];

/// Runs the attack on runc and on rustpod with `extra_rules`; both must report `expected`
/// (one result per step of `STEPS`), but for the steps of `crun_differs` that crun as the
/// oracle reports otherwise (tests/RUNC_DIFFERENCES.md).
#[track_caller]
fn assert_attack(extra_rules: &[Value], expected: [&str; 9], crun_differs: &[(&str, &str)]) {
    let bundle = attack_bundle(extra_rules);
    let oracle = Runtime::runc();
    let differs = if env::is_crun(oracle.bin()) { crun_differs } else { &[] };
    let line = |(step, result): (&&str, &str)| {
        let result = differs.iter().find(|(d, _)| d == step).map_or(result, |(_, theirs)| *theirs);
        format!("{step}: {result}")
    };
    let oracle_expected: Vec<String> = STEPS.iter().zip(expected).map(line).collect();
    assert_eq!(attack(&oracle, &bundle), oracle_expected, "{}", oracle.bin().display());
    let ours = attack(&Runtime::under_test(), &bundle);
    let expected: Vec<String> = STEPS.iter().zip(expected).map(|(s, r)| format!("{s}: {r}")).collect();
    assert_eq!(ours, expected, "rustpod");
}

#[test]
fn denied_devices_cannot_be_opened_even_after_mknod() {
    skip_if!(blocker());
    // mknod of any node is allowed, as runc does; opening it is not.
    assert_attack(&[], ["EPERM", "ok", "EPERM", "ok", "EPERM", "ok", "EPERM", "ok", "ok"], &[]);
}

#[test]
fn an_allow_rule_opens_only_its_device_and_access() {
    skip_if!(blocker());
    let rule = json!({"allow": true, "type": "c", "major": 1, "minor": 11, "access": "w"});
    assert_attack(&[rule], ["ok", "ok", "EPERM", "ok", "ok", "ok", "EPERM", "ok", "ok"], &[]);
}

#[test]
fn allow_all_then_deny_one_keeps_that_one_denied() {
    skip_if!(blocker());
    let rules = [
        json!({"allow": true, "access": "rwm"}),
        json!({"allow": false, "type": "c", "major": 1, "minor": 11, "access": "w"}),
        json!({"allow": false, "type": "c", "major": 1, "minor": 1, "access": "rwm"}),
        json!({"allow": false, "type": "b", "access": "rw"}),
    ];
    // A deny exception loses only what a rule for the same device gives back: the default
    // "c *:* m" is another device, so mknod of 1:1 stays denied (as on v1).
    let no_node = "head: /dev/mem-x: No such file or directory";
    // crun 1.28 lets the container make the 1:1 node despite the deny rule's `m`; opening it
    // is still denied, so /dev/mem stays out of reach under both.
    let crun_makes_the_node = [("mknod-mem", "ok"), ("mem-read", "EPERM")];
    let expected = ["EPERM", "EPERM", no_node, "ok", "EPERM", "ok", "EPERM", "ok", "ok"];
    assert_attack(&rules, expected, &crun_makes_the_node);
}

/// Installs a seccomp filter that fails bpf(2) with EPERM, as a host whose policy denies BPF.
fn deny_bpf() -> std::io::Result<()> {
    use libc::{sock_filter, sock_fprog};
    let stmt = |code: u16, k: u32| sock_filter { code, jt: 0, jf: 0, k };
    let jeq = |k: u32, jt: u8, jf: u8| sock_filter { code: 0x15, jt, jf, k };
    let filter = [
        stmt(0x20, 4),          // ld arch
        jeq(0xc000_003e, 1, 0), // x86_64, else allow
        stmt(0x06, libc::SECCOMP_RET_ALLOW),
        stmt(0x20, 0), // ld nr
        jeq(libc::SYS_bpf as u32, 0, 1),
        stmt(0x06, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(0x06, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut sock_filter };
    // SAFETY: prctl with a valid, live filter program; runs in the forked child before exec.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `create` by `rt` with bpf(2) denied; its exit status and stderr.
fn create_without_bpf(rt: &Runtime, id: &str, bundle: &Bundle) -> (bool, String) {
    use std::os::unix::process::CommandExt;
    bundle.prepare(id);
    let err = rustpod_tests::scratch::ScratchDir::new("nobpf");
    let err_file = std::fs::File::create(err.join("stderr")).expect("create stderr file");
    let mut cmd = std::process::Command::new(rt.bin());
    cmd.args(["--root", rt.root(), "create", "--bundle", bundle.path(), id])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(err_file);
    // SAFETY: deny_bpf only calls prctl, which is async-signal-safe.
    unsafe { cmd.pre_exec(deny_bpf) };
    let mut child = cmd.spawn().expect("spawn create");
    let status = rustpod_tests::wait::wait_for("create with bpf(2) denied to exit", || child.try_wait().ok().flatten());
    (status.success(), std::fs::read_to_string(err.join("stderr")).unwrap_or_default())
}

#[test]
fn a_denied_bpf_syscall_fails_create_and_leaves_nothing() {
    skip_if!(blocker());
    // Only eBPF confines devices on a pure cgroup v2 hierarchy.
    if !rustpod_tests::cgroup::unified() {
        rustpod_tests::skip!(
            "bpf(2) denied: /sys/fs/cgroup is not cgroup v2 here, where the v1 devices controller \
             confines devices without bpf(2) (hack/guest-v2.sh runs this in a v2 guest)"
        );
    }
    let bundle = attack_bundle(&[]);
    let runc = Runtime::runc();
    let runc_id = runc.new_id("nobpf");
    let (runc_ok, runc_err) = create_without_bpf(&runc, &runc_id, &bundle);
    assert!(!runc_ok, "runc created a container with bpf(2) denied");
    rustpod_tests::cgroup::remove_crun_leftover(runc.bin(), &runc_id);
    let rt = Runtime::under_test();
    let id = rt.new_id("nobpf");
    let (ok, stderr) = create_without_bpf(&rt, &id, &bundle);
    assert!(!ok, "create succeeded with bpf(2) denied (runc: {runc_err})");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "want one error line: {stderr}");
    assert!(lines[0].contains("bpf(2) BPF_PROG_LOAD") && lines[0].contains("EPERM"), "the error names neither bpf(2) nor EPERM: {stderr}");
    rt.assert_nothing_left(&id, bundle.path());
}
