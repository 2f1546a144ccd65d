// critest's seccomp scenarios, checked where kubelet's exec probes and `kubectl exec` run:
// through ExecSync. Each test runs on the rustpod handler and then on runc in the same
// containerd (and on crun where it is a handler, as in the sid guest): all must meet the
// expectations and see the same.

use rustpod_cri_tests::cri::security_profile::ProfileType;
use rustpod_cri_tests::cri::{Capability, SecurityProfile};
use rustpod_cri_tests::{cri_or_skip, pod_config, security, sleeper, Cri};
use rustpod_tests::scratch::ScratchDir;

fn seccomp_mode(cri: &Cri, id: &str) -> String {
    cri.sh_ok(id, "grep '^Seccomp:' /proc/self/status | cut -f2")
}

/// A container of a fresh pod with `profile` and the capabilities `add` added; its id.
fn container_with(cri: &Cri, name: &str, profile: ProfileType, localhost_ref: &str, add: &[&str]) -> String {
    let pod_cfg = pod_config(name);
    let pod = cri.run_pod_ok(&pod_cfg);
    let mut c = sleeper(name);
    let sc = security(&mut c);
    sc.seccomp = Some(SecurityProfile { profile_type: profile as i32, localhost_ref: localhost_ref.into() });
    let add_capabilities = add.iter().map(|c| c.to_string()).collect();
    sc.capabilities = Some(Capability { add_capabilities, ..Default::default() });
    cri.run_container(&pod, &c, &pod_cfg)
}

#[test]
fn runtime_default_seccomp_confines_exec() {
    let mut cri = cri_or_skip!();
    cri.same_on_each_handler(|cri| {
        let id = container_with(cri, "seccomp-default", ProfileType::RuntimeDefault, "", &[]);
        let mode = seccomp_mode(cri, &id);
        assert_eq!(mode, "2", "an ExecSync process runs without the default profile (handler {})", cri.handler);
        // The default profile allows unshare(2) only with CAP_SYS_ADMIN, where the kernel lets
        // any process make a user namespace: the unconfined control shows it does here.
        let control = container_with(cri, "seccomp-unconfined", ProfileType::Unconfined, "", &[]);
        assert_eq!(seccomp_mode(cri, &control), "0", "Unconfined (handler {})", cri.handler);
        cri.sh_ok(&control, "unshare -U true");
        let unshare = cri.sh(&id, "unshare -U true");
        assert_ne!(unshare.code, 0, "unshare passed the default profile (handler {}): {unshare:?}", cri.handler);
        assert!(unshare.stderr.contains("not permitted"), "{unshare:?}");
        (mode, unshare.stderr)
    });
}

#[test]
fn localhost_profile_blocks_sethostname_with_sys_admin() {
    let mut cri = cri_or_skip!();
    let dir = ScratchDir::new("seccomp-profile");
    let path = dir.join_str("deny-sethostname.json");
    let profile = serde_json::json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["sethostname"], "action": "SCMP_ACT_ERRNO"}]
    });
    std::fs::write(&path, profile.to_string()).expect("write seccomp profile");
    cri.same_on_each_handler(|cri| {
        // CAP_SYS_ADMIN added: only seccomp can stop sethostname.
        let id = container_with(cri, "seccomp-localhost", ProfileType::Localhost, &path, &["SYS_ADMIN"]);
        let mode = seccomp_mode(cri, &id);
        assert_eq!(mode, "2", "handler {}", cri.handler);
        let before = cri.sh_ok(&id, "hostname");
        let set = cri.sh(&id, "hostname rustpod-escaped");
        assert_ne!(set.code, 0, "sethostname passed the localhost profile (handler {}): {set:?}", cri.handler);
        assert!(set.stderr.contains("not permitted"), "{set:?}");
        assert_eq!(cri.sh_ok(&id, "hostname"), before);
        (mode, set.stderr)
    });
}
