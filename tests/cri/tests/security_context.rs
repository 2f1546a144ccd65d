// Scenario 5: the CRI security context, as the container itself sees it through ExecSync.

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
    let cri = cri_or_skip!();
    let pod_cfg = pod_config("security");
    let pod = cri.run_pod_ok(&pod_cfg);

    let mut user = sleeper("user");
    let sc = security(&mut user);
    sc.run_as_user = Some(Int64Value { value: 1234 });
    sc.run_as_group = Some(Int64Value { value: 5678 });
    sc.readonly_rootfs = true;
    sc.no_new_privs = true;
    let user = cri.run_container(&pod, &user, &pod_cfg);
    assert_eq!(cri.sh_ok(&user, "id -u"), "1234");
    assert_eq!(cri.sh_ok(&user, "id -g"), "5678");
    let write = cri.sh(&user, "touch /rootfs-write");
    assert_ne!(write.code, 0, "readonly_rootfs: writing / fails: {write:?}");
    assert!(write.stderr.contains("Read-only file system"), "{write:?}");
    assert_eq!(status_field(&cri, &user, "NoNewPrivs"), "1");

    let mut caps = sleeper("caps");
    let sc = security(&mut caps);
    sc.capabilities = Some(Capability {
        add_capabilities: vec!["SYS_TIME".into()],
        drop_capabilities: vec!["CHOWN".into()],
        ..Default::default()
    });
    // kubelet passes the masked and read-only paths (containerd adds none of its own).
    sc.masked_paths = vec!["/proc/timer_list".into(), "/sys/firmware".into()];
    sc.readonly_paths = vec!["/proc/sys".into()];
    let caps = cri.run_container(&pod, &caps, &pod_cfg);
    let eff = cap_eff(&cri, &caps);
    assert_eq!(
        eff & CAP_SYS_TIME,
        CAP_SYS_TIME,
        "SYS_TIME added: CapEff {eff:x}"
    );
    assert_eq!(eff & CAP_CHOWN, 0, "CHOWN dropped: CapEff {eff:x}");
    assert_eq!(
        eff & CAP_SYS_ADMIN,
        0,
        "SYS_ADMIN is not a default: CapEff {eff:x}"
    );
    assert_eq!(
        status_field(&cri, &caps, "NoNewPrivs"),
        "0",
        "no_new_privs unset"
    );
    let chown = cri.sh(&caps, "touch /f && chown 1:1 /f");
    assert_ne!(chown.code, 0, "chown without CAP_CHOWN fails: {chown:?}");
    // Unprivileged: /sys and the read-only paths are read-only, the masked paths masked.
    assert_ne!(cri.sh(&caps, "touch /sys/kernel/rustpod-probe").code, 0);
    let sysctl = cri.sh(&caps, "echo 1 >/proc/sys/kernel/ns_last_pid");
    assert!(
        sysctl.stderr.contains("Read-only file system"),
        "/proc/sys is read-only: {sysctl:?}"
    );
    assert_eq!(
        cri.sh_ok(&caps, "ls -A /sys/firmware"),
        "",
        "/sys/firmware is masked"
    );
    assert_eq!(cri.sh_ok(&caps, MASKED), "0", "/proc/timer_list is masked");
}

#[test]
fn privileged_gets_every_capability_and_the_host_devices() {
    let cri = cri_or_skip!();
    let mut pod_cfg = pod_config("privileged");
    pod_security(&mut pod_cfg).privileged = true;
    let pod = cri.run_pod_ok(&pod_cfg);
    let mut c = sleeper("privileged");
    security(&mut c).privileged = true;
    let c = cri.run_container(&pod, &c, &pod_cfg);

    // Every capability this host can give (here the bounding set lacks CAP_SYS_RESOURCE).
    let host = std::fs::read_to_string("/proc/self/status").unwrap();
    let bounding = host
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .expect("CapBnd");
    let all = u64::from_str_radix(bounding.trim(), 16).unwrap();
    assert_eq!(
        cap_eff(&cri, &c),
        all,
        "privileged: every capability of the host's bounding set"
    );
    assert_eq!(
        status_field(&cri, &c, "Seccomp"),
        "0",
        "privileged: no seccomp"
    );
    // /sys is read-write, nothing under /proc is masked, every host device is there.
    let sys = cri.sh_ok(&c, "grep ' /sys ' /proc/self/mounts | cut -d' ' -f4");
    assert!(
        sys.split(',').any(|o| o == "rw"),
        "privileged: /sys is rw ({sys})"
    );
    assert_ne!(
        cri.sh_ok(&c, MASKED),
        "0",
        "privileged: /proc/timer_list is not masked"
    );
    for dev in ["/dev/kmsg", "/dev/mem"] {
        if std::path::Path::new(dev).exists() {
            cri.sh_ok(&c, &format!("test -c {dev}"));
        }
    }
    // The device cgroup lets it make and use a device node.
    cri.sh_ok(&c, "mknod /tmp/null-again c 1 3 && echo x >/tmp/null-again");
}
