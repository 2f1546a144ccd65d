// Scenario 8: containerd dies and comes back mid-pod, SIGKILLed and started again or restarted
// by `systemctl restart` as a node's admin restarts the packaged containerd.service; the pod
// lives on (same processes, ExecSync, logs), a container that exits afterwards is seen exited
// with its own status, and the pod is then stopped and removed cleanly.

use rustpod_cri_tests::cri::{ContainerState, PodSandboxState};
use rustpod_cri_tests::{container, cri_or_skip, sleeper, Cri};
use rustpod_tests::wait::wait_for;

#[test]
fn pod_survives_a_containerd_restart() {
    pod_survives(cri_or_skip!(), Restart::KillAndStart);
}

/// Where systemd is PID 1 (the sid guest): containerd in a unit with KillMode=process, as
/// Debian's containerd.service, and `systemctl restart` of it.
#[test]
fn pod_survives_systemctl_restart_containerd() {
    rustpod_tests::skip_if!(rustpod_cri_tests::blocker()
        .or_else(|| { (!std::path::Path::new("/run/systemd/system").is_dir()).then(|| "systemd is not PID 1 here".to_string()) }));
    pod_survives(Cri::start_as_systemd_unit(), Restart::Systemctl);
}

/// How containerd goes down and comes back.
enum Restart {
    /// SIGKILL, and started again once the pod has gone on without it for a while.
    KillAndStart,
    /// `systemctl restart` of its unit.
    Systemctl,
}

/// Runs a pod, restarts containerd under it, and checks the pod and its containers through the
/// new containerd.
fn pod_survives(mut cri: Cri, restart: Restart) {
    let (pod_cfg, log_dir) = cri.pod_with_logs("restart", "talker");
    let pod = cri.run_pod_ok(&pod_cfg);
    let quiet = cri.run_container(&pod, &sleeper("quiet"), &pod_cfg);
    // Writes to stdout all along: nobody reads its FIFO while containerd is down.
    let mut talker = container("talker", "i=0; while :; do i=$((i+1)); echo tick $i; echo $i >/count; sleep 0.05; done");
    talker.log_path = "talker/0.log".into();
    let talker = cri.run_container(&pod, &talker, &pod_cfg);
    let pids = (cri.pod_pid(&pod), cri.container_pid(&quiet), cri.container_pid(&talker));
    // Exits with 3 once told to: after the restart, its exit must reach the new containerd.
    let quitter = cri.run_container(&pod, &container("quitter", "while [ ! -f /quit ]; do sleep 0.1; done; exit 3"), &pod_cfg);
    let shims = cri.shim_pids();

    // None also while the shell has truncated /count and not yet written it: poll for a value.
    let count = || std::fs::read_to_string(format!("/proc/{}/root/count", pids.2)).ok().and_then(|s| s.trim().parse::<u64>().ok());
    match restart {
        Restart::KillAndStart => {
            cri.kill_containerd();
            // While containerd is down the talker writes more than a pipe holds (64 KiB =
            // ~6000 lines).
            wait_for("the talker to write on while containerd is down", || count().filter(|n| *n > 200).map(drop));
            cri.restart_containerd();
        }
        Restart::Systemctl => cri.systemctl_restart_containerd(),
    }

    assert_eq!(cri.pod_state(&pod), PodSandboxState::SandboxReady);
    for id in [&quiet, &talker] {
        assert_eq!(cri.state(id), ContainerState::ContainerRunning, "{id} after the restart");
    }
    assert_eq!((cri.pod_pid(&pod), cri.container_pid(&quiet), cri.container_pid(&talker)), pids, "same processes");
    if cri.handler == "rustpod" {
        assert_eq!(cri.shim_pids(), shims, "the same shim serves the pod");
    }
    let before = wait_for("the talker's count", count);
    wait_for("the talker to go on writing", || count().filter(|n| *n > before).map(drop));
    assert_eq!(cri.sh_ok(&quiet, "echo exec works"), "exec works");
    cri.sh_ok(&quitter, "touch /quit");
    cri.wait_state(&quitter, ContainerState::ContainerExited);
    assert_eq!(cri.status(&quitter).exit_code, 3, "the quitter's exit status after the restart");
    // Its output after the restart reaches the log again.
    let log = log_dir.join("talker/0.log");
    let last = wait_for("the talker's count", count);
    wait_for("output after the restart in the log", || {
        std::fs::read_to_string(&log)
            .ok()?
            .lines()
            .any(|l| l.rsplit(' ').next().and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n > last))
            .then_some(())
    });

    for id in [&quiet, &talker, &quitter] {
        cri.stop_container(id, 2).unwrap_or_else(|e| panic!("StopContainer {id}: {e}"));
        assert_eq!(cri.state(id), ContainerState::ContainerExited);
        cri.remove_container(id).unwrap_or_else(|e| panic!("RemoveContainer {id}: {e}"));
    }
    cri.stop_pod(&pod).expect("StopPodSandbox");
    cri.remove_pod(&pod).expect("RemovePodSandbox");
    if cri.handler == "rustpod" {
        wait_for("the shim to exit", || cri.shim_pids().is_empty().then_some(()));
    }
}
