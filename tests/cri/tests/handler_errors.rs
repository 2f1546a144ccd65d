// Scenario 9: errors a runtime handler must report clearly without harming the rest of the pod.

use rustpod_cri_tests::cri::{ContainerState, ImageSpec, PodSandboxState};
use rustpod_cri_tests::{cri_or_skip, pod_config, sleeper, NO_ENTRYPOINT};

#[test]
fn an_unknown_handler_is_rejected() {
    let cri = cri_or_skip!();
    let err = cri.run_pod_with(&pod_config("unknown"), "no-such-handler").expect_err("RunPodSandbox with an unknown handler must fail");
    assert!(err.message().contains("no-such-handler"), "the error names the handler: {err}");
    assert!(cri.list_pods().is_empty(), "no sandbox is left: {:?}", cri.list_pods());
}

#[test]
fn a_missing_entrypoint_fails_clearly_and_the_pod_keeps_running() {
    let cri = cri_or_skip!();
    let pod_cfg = pod_config("no-entrypoint");
    let pod = cri.run_pod_ok(&pod_cfg);
    let good = cri.run_container(&pod, &sleeper("good"), &pod_cfg);

    let mut bad = sleeper("bad");
    bad.command.clear();
    bad.image = Some(ImageSpec { image: NO_ENTRYPOINT.into(), ..Default::default() });
    let err = match cri.create_container(&pod, &bad, &pod_cfg) {
        Err(e) => e,
        Ok(id) => cri.start_container(&id).expect_err("a container whose entrypoint is missing must not start"),
    };
    let msg = err.message();
    assert!(
        msg.contains("/no/such/entrypoint") && (msg.contains("no such file") || msg.contains("not found")),
        "the error names the missing entrypoint: {msg}"
    );

    assert_eq!(cri.pod_state(&pod), PodSandboxState::SandboxReady);
    assert_eq!(cri.state(&good), ContainerState::ContainerRunning);
    assert_eq!(cri.sh_ok(&good, "echo alive"), "alive");
    let again = cri.run_container(&pod, &sleeper("after"), &pod_cfg);
    assert_eq!(cri.state(&again), ContainerState::ContainerRunning);
}
