// kubelet's containers under a handler with `NoPivotRoot = true` in its options (runc's
// --no-pivot): the rustpod handler, whose options reach our shim as TOML (containerd 2.x sends
// the table; 1.6 drops it, so hack/containerd.sh names a file of them by ConfigPath), then
// runc's, in one containerd. As tests/tests/security_no_pivot.rs checks for the CLI and containerd's shims: the
// root was moved, not pivoted into (else the option was dropped), no full procfs or sysfs of the
// host's is left in the container's mount namespace (a procfs the test mounts on the host
// included), and an unprivileged process there cannot mount a procfs from a user namespace.

use rustpod_cri_tests::cri::Int64Value;
use rustpod_cri_tests::{blocker, pod_config, security, sleeper, Cri};
use rustpod_tests::no_pivot::{self, ATTACK};
use rustpod_tests::skip_if;

/// kubelet's default masked and read-only paths (the CRI request carries them; containerd adds
/// none): without them the container's own procfs is a full one, and any procfs may be mounted.
const MASKED: [&str; 11] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];
const READONLY: [&str; 5] = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

#[test]
fn a_handler_with_no_pivot_root_moves_the_root_and_hides_the_host_procfs() {
    skip_if!(blocker().or_else(no_pivot::blocker));
    let (_mounts, proc) = no_pivot::extra_host_procfs();
    let mut cri = Cri::start_with_no_pivot();
    let untried = cri.same_on_each_handler(|cri| {
        let who = format!("handler {}", cri.handler);
        let pod_cfg = pod_config("nopivot");
        let pod = cri.run_pod_ok(&pod_cfg);
        let mut sleeper = sleeper("nopivot");
        let sc = security(&mut sleeper);
        sc.run_as_user = Some(Int64Value { value: 1000 });
        sc.masked_paths = MASKED.map(String::from).to_vec();
        sc.readonly_paths = READONLY.map(String::from).to_vec();
        let id = cri.run_container(&pod, &sleeper, &pod_cfg);
        no_pivot::assert_hidden(cri.container_pid(&id), &proc, &who);
        let out = cri.sh(&id, ATTACK).stdout;
        let untried = no_pivot::untried(&out);
        if untried.is_none() {
            no_pivot::assert_refused(&out, &who);
        }
        cri.stop_pod(&pod).unwrap_or_else(|e| panic!("{who}: StopPodSandbox: {e}"));
        cri.remove_pod(&pod).unwrap_or_else(|e| panic!("{who}: RemovePodSandbox: {e}"));
        untried
    });
    skip_if!(untried);
}
