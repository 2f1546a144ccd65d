// Scenario 5: the CRI security context, as the container itself sees it through ExecSync.
// Each test runs on the rustpod handler and then on runc in the same containerd (runc 1.1.5
// on the host, 1.3.6 in the sid guest; then crun 1.28 in the sid guest, where it is a handler):
// all must meet the expectations and see the same.

use rustpod_cri_tests::cri::{Capability, Int64Value};
use rustpod_cri_tests::{cri_or_skip, pod_config, pod_security, security, sleeper, Cri};

/// A field of /proc/self/status inside the container.
fn status_field(cri: &Cri, id: &str, field: &str) -> String {
    cri.sh_ok(id, &format!("grep '^{field}:' /proc/self/status | cut -f2"))
}

fn cap_eff(cri: &Cri, id: &str) -> u64 {
    u64::from_str_radix(&status_field(cri, id, "CapEff"), 16).expect("CapEff is hex")
}

/// Bytes of /proc/timer_list, one of containerd's default masked paths: 0 when masked.
const MASKED: &str = "wc -c </proc/timer_list";

const CAP_CHOWN: u64 = 1 << 0;
const CAP_SYS_TIME: u64 = 1 << 25;
const CAP_SYS_ADMIN: u64 = 1 << 21;

#[test]
fn user_group_readonly_rootfs_caps_and_no_new_privs() {
    let mut cri = cri_or_skip!();
    cri.same_on_each_handler(user_group_readonly_rootfs_caps_and_no_new_privs_on);
}

/// What a container showed, to compare with what runc's showed: (what, value).
type Seen = Vec<(&'static str, String)>;

fn user_group_readonly_rootfs_caps_and_no_new_privs_on(cri: &Cri) -> Seen {
    let pod_cfg = pod_config("security");
    let pod = cri.run_pod_ok(&pod_cfg);

    let mut user = sleeper("user");
    let sc = security(&mut user);
    sc.run_as_user = Some(Int64Value { value: 1234 });
    sc.run_as_group = Some(Int64Value { value: 5678 });
    sc.readonly_rootfs = true;
    sc.no_new_privs = true;
    let user = cri.run_container(&pod, &user, &pod_cfg);
    let ids = cri.sh_ok(&user, "echo $(id -u):$(id -g)");
    assert_eq!(ids, "1234:5678");
    let write = cri.sh(&user, "touch /rootfs-write");
    assert_ne!(write.code, 0, "readonly_rootfs: writing / fails: {write:?}");
    assert!(write.stderr.contains("Read-only file system"), "{write:?}");
    let nnp = status_field(cri, &user, "NoNewPrivs");
    assert_eq!(nnp, "1");

    let mut caps = sleeper("caps");
    let sc = security(&mut caps);
    sc.capabilities =
        Some(Capability { add_capabilities: vec!["SYS_TIME".into()], drop_capabilities: vec!["CHOWN".into()], ..Default::default() });
    // kubelet passes the masked and read-only paths (containerd adds none of its own).
    sc.masked_paths = vec!["/proc/timer_list".into(), "/sys/firmware".into()];
    sc.readonly_paths = vec!["/proc/sys".into()];
    let caps = cri.run_container(&pod, &caps, &pod_cfg);
    let eff = cap_eff(cri, &caps);
    assert_eq!(eff & CAP_SYS_TIME, CAP_SYS_TIME, "SYS_TIME added: CapEff {eff:x}");
    assert_eq!(eff & CAP_CHOWN, 0, "CHOWN dropped: CapEff {eff:x}");
    assert_eq!(eff & CAP_SYS_ADMIN, 0, "SYS_ADMIN is not a default: CapEff {eff:x}");
    let caps_nnp = status_field(cri, &caps, "NoNewPrivs");
    assert_eq!(caps_nnp, "0", "no_new_privs unset");
    let chown = cri.sh(&caps, "touch /f && chown 1:1 /f");
    assert_ne!(chown.code, 0, "chown without CAP_CHOWN fails: {chown:?}");
    // Unprivileged: /sys and the read-only paths are read-only, the masked paths masked.
    let sys = cri.sh(&caps, "touch /sys/kernel/rustpod-probe");
    assert_ne!(sys.code, 0, "/sys is read-only: {sys:?}");
    let sysctl = cri.sh(&caps, "echo 1 >/proc/sys/kernel/ns_last_pid");
    assert!(sysctl.stderr.contains("Read-only file system"), "/proc/sys is read-only: {sysctl:?}");
    let firmware = cri.sh_ok(&caps, "ls -A /sys/firmware");
    assert_eq!(firmware, "", "/sys/firmware is masked");
    let timer_list = cri.sh_ok(&caps, MASKED);
    assert_eq!(timer_list, "0", "/proc/timer_list is masked");
    vec![
        ("uid:gid", ids),
        ("write to a read-only rootfs", write.stderr),
        ("NoNewPrivs", nnp),
        ("CapEff with SYS_TIME added, CHOWN dropped", format!("{eff:x}")),
        ("NoNewPrivs unset", caps_nnp),
        ("chown without CAP_CHOWN", chown.stderr),
        ("touch under /sys", sys.stderr),
        ("write to /proc/sys", sysctl.stderr),
        ("ls /sys/firmware", firmware),
        ("bytes of /proc/timer_list", timer_list),
    ]
}

#[test]
fn privileged_gets_every_capability_and_the_host_devices() {
    let mut cri = cri_or_skip!();
    cri.same_on_each_handler(privileged_gets_every_capability_and_the_host_devices_on);
}

fn privileged_gets_every_capability_and_the_host_devices_on(cri: &Cri) -> Seen {
    let mut pod_cfg = pod_config("privileged");
    pod_security(&mut pod_cfg).privileged = true;
    let pod = cri.run_pod_ok(&pod_cfg);
    let mut c = sleeper("privileged");
    security(&mut c).privileged = true;
    let c = cri.run_container(&pod, &c, &pod_cfg);

    // Every capability this host can give (here the bounding set lacks CAP_SYS_RESOURCE).
    let host = std::fs::read_to_string("/proc/self/status").unwrap();
    let bounding = host.lines().find_map(|l| l.strip_prefix("CapBnd:")).expect("CapBnd");
    let all = u64::from_str_radix(bounding.trim(), 16).unwrap();
    let eff = cap_eff(cri, &c);
    assert_eq!(eff, all, "privileged: every capability of the host's bounding set");
    let seccomp = status_field(cri, &c, "Seccomp");
    assert_eq!(seccomp, "0", "privileged: no seccomp");
    // /sys is read-write, nothing under /proc is masked, every host device is there.
    let sys = cri.sh_ok(&c, "grep ' /sys ' /proc/self/mounts | cut -d' ' -f4");
    assert!(sys.split(',').any(|o| o == "rw"), "privileged: /sys is rw ({sys})");
    // Its size changes with time: only whether it is empty is compared.
    let timer_list_masked = cri.sh_ok(&c, MASKED) == "0";
    assert!(!timer_list_masked, "privileged: /proc/timer_list is not masked");
    let mut devices = Vec::new();
    for dev in ["/dev/kmsg", "/dev/mem"] {
        if std::path::Path::new(dev).exists() {
            cri.sh_ok(&c, &format!("test -c {dev}"));
            devices.push(dev);
        }
    }
    // The device cgroup lets it make and use a device node.
    cri.sh_ok(&c, "mknod /tmp/null-again c 1 3 && echo x >/tmp/null-again");
    vec![
        ("CapEff", format!("{eff:x}")),
        ("Seccomp", seccomp),
        ("/sys options", sys),
        ("/proc/timer_list masked", timer_list_masked.to_string()),
        ("host devices there", devices.join(" ")),
    ]
}
