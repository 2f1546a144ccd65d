// Scenario 2: the containers of a pod join the namespaces its sandbox (pause) holds. Each test
// runs on the rustpod handler and then on runc in the same containerd (and on crun 1.28 in the
// sid guest, where it is a handler): all must meet the expectations and see the same.

use rustpod_cri_tests::cri::NamespaceMode;
use rustpod_cri_tests::{cri_or_skip, namespaces, pod_config, pod_security, security, sleeper, Cri};

fn host_ns(pid: i32, ns: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/{ns}"))
        .unwrap_or_else(|e| panic!("readlink /proc/{pid}/ns/{ns}: {e}"))
        .to_string_lossy()
        .into_owned()
}

/// A pod with PID namespace `pid` and two sleepers; (pod, pause pid, a, b).
fn pod_of_two(cri: &Cri, pid: NamespaceMode) -> (String, i32, String, String) {
    let mut pod_cfg = pod_config("ns");
    pod_security(&mut pod_cfg).namespace_options = Some(namespaces(pid));
    let pod = cri.run_pod_ok(&pod_cfg);
    let run = |name: &str| {
        let mut c = sleeper(name);
        security(&mut c).namespace_options = Some(namespaces(pid));
        cri.run_container(&pod, &c, &pod_cfg)
    };
    let (a, b) = (run("a"), run("b"));
    let pause = cri.pod_pid(&pod);
    (pod, pause, a, b)
}

#[test]
fn pid_pod_shares_pid_ipc_and_network_with_pause() {
    let mut cri = cri_or_skip!();
    cri.same_on_each_handler(pid_pod_shares_pid_ipc_and_network_with_pause_on);
}

/// What the containers showed, to compare with what runc's showed: (what, value).
type Seen = Vec<(String, String)>;

fn pid_pod_shares_pid_ipc_and_network_with_pause_on(cri: &Cri) -> Seen {
    let mut seen = Seen::new();
    let (_pod, pause, a, b) = pod_of_two(cri, NamespaceMode::Pod);
    for id in [&a, &b] {
        let pid1 = cri.sh_ok(id, "tr '\\0' ' ' </proc/1/cmdline");
        assert_eq!(pid1, "/pause", "PID 1 of a pid: POD container is the pause process");
        seen.push(("PID 1".into(), pid1));
        for ns in ["pid", "ipc", "net"] {
            let inside = cri.sh_ok(id, &format!("readlink /proc/self/ns/{ns}"));
            assert_eq!(inside, host_ns(pause, ns), "{ns} namespace of {id} is the sandbox's");
            seen.push((format!("{ns} is the sandbox's"), "yes".into()));
        }
    }
    // Host network: the sandbox's network namespace is the host's.
    assert_eq!(host_ns(pause, "net"), host_ns(std::process::id() as i32, "net"));
    // Each container still sees the other's processes: the PID namespace is one.
    let seen_procs = cri.sh_ok(&a, "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done");
    let sleepers = seen_procs.lines().filter(|l| l.trim() == "sleep 100000").count();
    assert!(sleepers >= 2, "a sees both sleepers:\n{seen_procs}");
    seen.push(("sleepers a sees".into(), sleepers.to_string()));
    seen
}

#[test]
fn pid_container_keeps_its_own_pid_namespace() {
    let mut cri = cri_or_skip!();
    cri.same_on_each_handler(pid_container_keeps_its_own_pid_namespace_on);
}

fn pid_container_keeps_its_own_pid_namespace_on(cri: &Cri) -> Seen {
    let mut seen = Seen::new();
    let (_pod, pause, a, b) = pod_of_two(cri, NamespaceMode::Container);
    let a_pid = cri.sh_ok(&a, "readlink /proc/self/ns/pid");
    let b_pid = cri.sh_ok(&b, "readlink /proc/self/ns/pid");
    assert_ne!(a_pid, host_ns(pause, "pid"), "pid: CONTAINER is not the sandbox's PID namespace");
    assert_ne!(a_pid, b_pid, "pid: CONTAINER containers do not share PID namespaces");
    let pid1 = cri.sh_ok(&a, "tr '\\0' ' ' </proc/1/cmdline");
    assert_eq!(pid1, "sleep 100000", "PID 1 is the container's own process");
    seen.push(("PID 1".into(), pid1));
    // IPC and network are still the pod's.
    for ns in ["ipc", "net"] {
        for id in [&a, &b] {
            let inside = cri.sh_ok(id, &format!("readlink /proc/self/ns/{ns}"));
            assert_eq!(inside, host_ns(pause, ns), "{ns} namespace of {id} is the sandbox's");
            seen.push((format!("{ns} is the sandbox's"), "yes".into()));
        }
    }
    seen
}
