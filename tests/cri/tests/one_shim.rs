// Scenario 3: one shim serves a pod: its sandbox and all its containers.

use rustpod_cri_tests::{cri_or_skip, pod_config, sleeper};

#[test]
fn a_pod_with_two_containers_has_one_shim() {
    let cri = cri_or_skip!();
    if cri.handler != "rustpod" {
        rustpod_tests::skip!("counts containerd-shim-rustpod-v1 processes; handler is {}", cri.handler);
    }
    let pod_cfg = pod_config("one-shim");
    let pod = cri.run_pod_ok(&pod_cfg);
    let a = cri.run_container(&pod, &sleeper("a"), &pod_cfg);
    let b = cri.run_container(&pod, &sleeper("b"), &pod_cfg);

    // containerd dials each task at the address its shim wrote: one address for the pod.
    let address = |id: &str| {
        let path = cri.task_dir(id).join("address");
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    };
    let addresses: std::collections::BTreeSet<String> = [&pod, &a, &b].into_iter().map(|id| address(id)).collect();
    assert_eq!(addresses.len(), 1, "sandbox and containers are served by one shim: {addresses:?}");

    // And exactly one shim process serves this containerd (the `start` invocations have exited).
    let shims = rustpod_tests::wait::wait_for("the shim `start` processes to exit", || {
        let pids = cri.shim_pids();
        (pids.len() <= 1).then_some(pids)
    });
    assert_eq!(shims.len(), 1, "one shim process for the pod, found {shims:?}");

    // A second pod gets a shim of its own.
    let mut other = pod_config("other");
    other.metadata.as_mut().unwrap().uid.push_str("-2");
    let pod2 = cri.run_pod(&other).unwrap_or_else(|e| panic!("RunPodSandbox: {e}"));
    let shims = rustpod_tests::wait::wait_for("two shims", || {
        let pids = cri.shim_pids();
        (pids.len() == 2).then_some(pids)
    });
    assert_eq!(shims.len(), 2);
    cri.stop_pod(&pod2).unwrap();
    cri.remove_pod(&pod2).unwrap();
    cri.stop_pod(&pod).unwrap();
    cri.remove_pod(&pod).unwrap();
    rustpod_tests::wait::wait_for("the shims to exit once their pods are gone", || cri.shim_pids().is_empty().then_some(()));
}
