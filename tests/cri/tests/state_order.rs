// What kubelet (and critest, which polls container state once a second) sees right after each
// lifecycle call: RUNNING as soon as StartContainer returned, EXITED as soon as StopContainer or
// StopPodSandbox returned, even when the container left children holding its stdout. A status
// that lags its call costs a poller a whole interval. Each test runs handler rustpod and then
// runc in the same containerd and wants the same answers from both.

use rustpod_cri_tests::cri::{ContainerState, NamespaceMode, PodSandboxConfig};
use rustpod_cri_tests::{compared_handlers, container, cri_or_skip, namespaces, pod_config, pod_security, security, Cri};

/// A pod on `handler` whose containers get PID namespace `pid`.
struct Pod<'a> {
    cri: &'a Cri,
    handler: &'a str,
    pid: NamespaceMode,
    id: String,
    config: PodSandboxConfig,
}

impl<'a> Pod<'a> {
    fn run(cri: &'a Cri, handler: &'a str, pid: NamespaceMode) -> Self {
        let mut config = pod_config("order");
        pod_security(&mut config).namespace_options = Some(namespaces(pid));
        let id = cri.run_pod_with(&config, handler).unwrap_or_else(|e| panic!("RunPodSandbox ({handler}, pid {pid:?}): {e}"));
        Pod { cri, handler, pid, id, config }
    }

    /// Creates and starts `sh -c script`; the state ContainerStatus gives right after
    /// StartContainer returned.
    fn start(&self, name: &str, script: &str) -> (String, ContainerState) {
        let mut c = container(name, script);
        security(&mut c).namespace_options = Some(namespaces(self.pid));
        let what = format!("{name} ({self})");
        let id = self.cri.create_container(&self.id, &c, &self.config).unwrap_or_else(|e| panic!("CreateContainer {what}: {e}"));
        self.cri.start_container(&id).unwrap_or_else(|e| panic!("StartContainer {what}: {e}"));
        let state = self.cri.state(&id);
        (id, state)
    }

    /// (state, exit code) of container `id`.
    fn status(&self, id: &str) -> (ContainerState, i32) {
        let status = self.cri.status(id);
        let state = ContainerState::try_from(status.state).expect("a known state");
        (state, status.exit_code)
    }
}

/// `handler rustpod, pid Pod`; with `{:#}` only the PID mode (what both handlers share).
impl std::fmt::Display for Pod<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            return write!(f, "pid {:?}", self.pid);
        }
        write!(f, "handler {}, pid {:?}", self.handler, self.pid)
    }
}

impl Drop for Pod<'_> {
    fn drop(&mut self) {
        let _ = self.cri.stop_pod(&self.id);
        let _ = self.cri.remove_pod(&self.id);
    }
}

/// What a handler answered, to compare with runc's: (container, state, exit code).
type Seen = Vec<(String, ContainerState, i32)>;

/// Runs `check` in a fresh pod for each PID mode on each handler, then asserts that runc
/// answered as rustpod did.
fn on_each_handler(cri: &Cri, pids: &[NamespaceMode], check: impl Fn(&Pod, &mut Seen)) {
    let mut results: Vec<(&str, Seen)> = Vec::new();
    for handler in compared_handlers() {
        let mut seen = Seen::new();
        for &pid in pids {
            check(&Pod::run(cri, handler, pid), &mut seen);
        }
        results.push((handler, seen));
    }
    let (first, expected) = &results[0];
    for (handler, seen) in &results[1..] {
        assert_eq!(seen, expected, "{handler} and {first} disagree");
    }
}

#[test]
fn running_as_soon_as_start_container_returned() {
    let cri = cri_or_skip!();
    let pids = [NamespaceMode::Pod, NamespaceMode::Node, NamespaceMode::Container];
    on_each_handler(&cri, &pids, |pod, seen| {
        // A second container in the same pod, as critest's multi-container spec has.
        for name in ["first", "second"] {
            let (_, state) = pod.start(name, "exec sleep 100000");
            assert_eq!(state, ContainerState::ContainerRunning, "{name} ({pod})");
            seen.push((format!("{name} {pod:#}"), state, 0));
        }
    });
}

/// Containers StopContainer ends: a sleeper that dies of the TERM; a shell that dies of it and
/// leaves two children holding its stdout (they go with it: no PID namespace of its own, or
/// the kernel's); one that ignores TERM and is killed after a one-second grace period.
const STOPPED: [(&str, &str, i64, i32); 3] = [
    ("sleeper", "touch /up; exec sleep 100000", 10, 143),
    ("parent", "sleep 100000 & sleep 100000 & touch /up; wait", 10, 143),
    ("stubborn", "trap '' TERM; touch /up; while :; do sleep 1; done", 1, 137),
];

#[test]
fn exited_as_soon_as_stop_container_returned() {
    let cri = cri_or_skip!();
    on_each_handler(&cri, &[NamespaceMode::Pod, NamespaceMode::Node], |pod, seen| {
        for (name, script, timeout, code) in STOPPED {
            let (id, _) = pod.start(name, script);
            // The trap (or the children) must be in place before the TERM comes.
            rustpod_tests::wait::wait_for(&format!("{name} to be up"), || (cri.sh(&id, "test -f /up").code == 0).then_some(()));
            cri.stop_container(&id, timeout).unwrap_or_else(|e| panic!("StopContainer {name} ({pod}): {e}"));
            let (state, exit) = pod.status(&id);
            let what = format!("{name} ({pod}) right after StopContainer");
            assert_eq!(state, ContainerState::ContainerExited, "{what}");
            assert_eq!(exit, code, "{what}: exit code");
            seen.push((format!("{name} {pod:#}"), state, exit));
        }
    });
}

#[test]
fn every_container_exited_as_soon_as_stop_pod_sandbox_returned() {
    let cri = cri_or_skip!();
    on_each_handler(&cri, &[NamespaceMode::Pod, NamespaceMode::Node], |pod, seen| {
        let ids: Vec<(String, &str)> = STOPPED[..2].iter().map(|&(name, script, ..)| (pod.start(name, script).0, name)).collect();
        cri.stop_pod(&pod.id).unwrap_or_else(|e| panic!("StopPodSandbox ({pod}): {e}"));
        for (id, name) in ids {
            let (state, exit) = pod.status(&id);
            let what = format!("{name} ({pod}) right after StopPodSandbox");
            assert_eq!(state, ContainerState::ContainerExited, "{what}");
            // StopPodSandbox kills without a grace period.
            assert_eq!(exit, 137, "{what}: exit code");
            seen.push((format!("{name} {pod:#}"), state, exit));
        }
    });
}

/// A container whose process exits by itself while a child it left holds its stdout is EXITED
/// with its own exit code once that exit is seen, not once the child ends (it never would by
/// itself: it sleeps for days, so only the harness's bounded wait could end the poll).
#[test]
fn exited_with_its_code_while_a_leftover_child_held_its_stdout() {
    let cri = cri_or_skip!();
    on_each_handler(&cri, &[NamespaceMode::Pod, NamespaceMode::Node], |pod, seen| {
        let (id, _) = pod.start("leaver", "sleep 100000 & echo left; exit 3");
        cri.wait_state(&id, ContainerState::ContainerExited);
        let (state, exit) = pod.status(&id);
        assert_eq!(exit, 3, "leaver ({pod})");
        seen.push((format!("leaver {pod:#}"), state, exit));
    });
}
