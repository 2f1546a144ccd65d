// Scenario 1: a pod's life as kubelet drives it through CRI, against handler `rustpod`.

use rustpod_cri_tests::cri::{ContainerState, PodSandboxState};
use rustpod_cri_tests::{container, cri_or_skip, pod_config, sleeper};

#[test]
fn two_containers_run_exec_stop_and_remove() {
    let cri = cri_or_skip!();
    let pod_cfg = pod_config("lifecycle");
    let pod = cri.run_pod_ok(&pod_cfg);
    assert_eq!(cri.pod_state(&pod), PodSandboxState::SandboxReady);

    let a = cri.run_container(&pod, &sleeper("a"), &pod_cfg);
    let b = cri.run_container(&pod, &sleeper("b"), &pod_cfg);
    assert_eq!(cri.state(&a), ContainerState::ContainerRunning);
    assert_eq!(cri.state(&b), ContainerState::ContainerRunning);

    // ExecSync: stdout, stderr and the exit code, zero and not.
    let ok = cri.sh(&a, "echo out; echo err >&2");
    assert_eq!((ok.code, ok.stdout.as_str(), ok.stderr.as_str()), (0, "out\n", "err\n"), "{ok:?}");
    let failed = cri.sh(&b, "echo partial; exit 42");
    assert_eq!((failed.code, failed.stdout.as_str()), (42, "partial\n"), "{failed:?}");

    // Stopping: a sleeper dies of the TERM (143)...
    cri.stop_container(&a, 10).unwrap_or_else(|e| panic!("StopContainer a: {e}"));
    let status = cri.status(&a);
    assert_eq!(status.state, ContainerState::ContainerExited as i32, "{status:?}");
    assert_eq!(status.exit_code, 143, "sleep killed by SIGTERM: {status:?}");

    // Remove a; stop and remove twice are not errors.
    cri.stop_container(&a, 10).expect("StopContainer on a stopped container is not an error");
    cri.remove_container(&a).expect("RemoveContainer a");
    cri.remove_container(&a).expect("RemoveContainer twice is not an error");
    assert!(cri.container_status(&a).is_err(), "a removed container has no status");

    // b is left running for StopPodSandbox to stop.
    cri.stop_pod(&pod).expect("StopPodSandbox");
    assert_eq!(cri.pod_state(&pod), PodSandboxState::SandboxNotready);
    assert_eq!(cri.state(&b), ContainerState::ContainerExited);
    cri.stop_pod(&pod).expect("StopPodSandbox twice is not an error");
    cri.remove_pod(&pod).expect("RemovePodSandbox");
    cri.remove_pod(&pod).expect("RemovePodSandbox twice is not an error");
    assert!(cri.pod_status(&pod).is_err(), "a removed sandbox has no status");
    assert!(cri.list_pods().is_empty(), "no pod is left");
}

#[test]
fn stop_with_a_grace_period_kills_a_container_that_ignores_term() {
    let cri = cri_or_skip!();
    let pod_cfg = pod_config("grace");
    let pod = cri.run_pod_ok(&pod_cfg);
    // sh ignores TERM and says when it is ready, so that the TERM cannot come too early.
    let stubborn = cri.run_container(&pod, &container("stubborn", "trap '' TERM; touch /ready; while :; do sleep 1; done"), &pod_cfg);
    rustpod_tests::wait::wait_for("the trap to be set", || (cri.sh(&stubborn, "test -e /ready").code == 0).then_some(()));
    cri.stop_container(&stubborn, 2).unwrap_or_else(|e| panic!("StopContainer stubborn: {e}"));
    let status = cri.status(&stubborn);
    assert_eq!(status.state, ContainerState::ContainerExited as i32, "{status:?}");
    assert_eq!(status.exit_code, 137, "TERM ignored, then SIGKILL: {status:?}");
    assert_eq!(cri.pod_state(&pod), PodSandboxState::SandboxReady, "the pod outlives its container");

    // A container that exits by itself reports its own code.
    let quitter = cri.run_container(&pod, &container("quitter", "exit 7"), &pod_cfg);
    cri.wait_state(&quitter, ContainerState::ContainerExited);
    assert_eq!(cri.status(&quitter).exit_code, 7);
    cri.stop_container(&quitter, 2).expect("StopContainer on an exited container");
    for id in [&stubborn, &quitter] {
        cri.remove_container(id).expect("RemoveContainer");
    }
    cri.stop_pod(&pod).expect("StopPodSandbox");
    cri.remove_pod(&pod).expect("RemovePodSandbox");
}
