// New network and IPC namespaces (issue 22: rustpod's clone3 makes them, where the engine made
// them after the cgroup join): through the CLI, containerd's runc shim with `--runc-binary` and
// our shim, each next to runc, a container's network and IPC namespaces are not the host's, hold
// the devices a new network namespace has under runc (a loopback device, and the fallback
// tunnels of whatever tunnel modules the host has loaded), and do not show a SysV message queue
// the host made.

use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, report, ShimContainerd, REPORTS};
use rustpod_tests::{json, needs, skip_if, Bundle, Runtime};

/// From inside: the namespace links, the network devices, the SysV message queues.
const LOOK: &str = "echo net=$(readlink /proc/self/ns/net); echo ipc=$(readlink /proc/self/ns/ipc); \
    echo devices=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,); \
    echo queues=$(tail -n +2 /proc/sysvipc/msg | wc -l)";

/// A SysV message queue of the host's IPC namespace, removed on drop.
struct HostQueue(i32);

impl HostQueue {
    fn new() -> Self {
        // SAFETY: msgget takes no pointers.
        let id = unsafe { libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o600) };
        assert!(id >= 0, "msgget on the host: {}", std::io::Error::last_os_error());
        let queues = std::fs::read_to_string("/proc/sysvipc/msg").expect("read the host's /proc/sysvipc/msg");
        assert!(
            queues.lines().skip(1).any(|l| l.split_whitespace().nth(1) == Some(&id.to_string())),
            "the host does not list its queue {id}"
        );
        Self(id)
    }
}

impl Drop for HostQueue {
    fn drop(&mut self) {
        // SAFETY: IPC_RMID takes no buffer.
        unsafe { libc::msgctl(self.0, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// The report with each namespace link told as `new` or `host`.
fn shape(report: &str) -> String {
    let host = |ns: &str| std::fs::read_link(format!("/proc/self/ns/{ns}")).expect("host's namespace link").display().to_string();
    report
        .lines()
        .map(|line| match line.split_once('=') {
            Some((ns @ ("net" | "ipc"), link)) => format!("{ns}={}", if link == host(ns) { "host" } else { "new" }),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts what every path must report, then that each reports what runc's path did.
#[track_caller]
fn assert_confined_as_runc(reports: &[(String, String)]) {
    for (who, found) in reports {
        let got = shape(found);
        for want in ["net=new", "ipc=new", "queues=0"] {
            assert!(got.lines().any(|l| l == want), "{who}: no `{want}` in\n{found}");
        }
        assert!(got.contains("devices=lo,"), "{who}: no loopback device in\n{found}");
        assert_eq!(got, shape(&reports[0].1), "{who} differs from {}", reports[0].0);
    }
}

#[test]
fn new_network_and_ipc_namespaces_are_the_containers_own_next_to_runc() {
    skip_if!(needs::containers());
    let _queue = HostQueue::new();
    let mut reports = vec![];
    for rt in Runtime::runc_and_under_test() {
        let who = rt.bin().display().to_string();
        let bundle = Bundle::new(&["sh", "-c", LOOK]);
        let id = rt.new_id("nsnew");
        let out = rt.run(&id, &bundle, &[], b"");
        assert!(out.success(), "{who}: {}", out.describe());
        rt.assert_nothing_left(&id, bundle.path());
        reports.push((who, out.stdout));
    }
    assert_confined_as_runc(&reports);
}

#[test]
fn new_network_and_ipc_namespaces_are_the_containers_own_through_the_shims() {
    skip_if!(needs::containers().or_else(shim::blocker));
    let _queue = HostQueue::new();
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("nsnewspec");
    let mut reports = vec![];
    for (i, (who, flags)) in shim::paths().iter().enumerate() {
        let name = format!("nsnew{i}");
        let rootfs = Bundle::new(&["true"]);
        let mut spec = ctd.oci_spec_with_reports(&name, &rootfs.rootfs(), &dir);
        spec["process"]["args"] = json!(["sh", "-c", format!("exec >{REPORTS}/{name}; {LOOK}")]);
        ctd.run_spec(&dir, &name, &spec, "--rm", flags).ok();
        reports.push((who.to_string(), report(&dir, &name)));
    }
    assert_confined_as_runc(&reports);
}
