// Pods outlive containerd: containers keep running (and their output flowing) while containerd is
// SIGKILLed and restarted, exits during the outage are reported after it, and a SIGKILLed shim is
// cleaned up completely by `ctr task rm -f` + `ctr c rm` (containerd runs `shim delete`).

use std::time::Duration;

use rustpod_tests::shim::{blocker, ShimContainerd};
use rustpod_tests::{leftovers, skip_if, wait};

const CHATTY: &[&str] = &["sh", "-c", "while true; do echo line; done"];

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| !s.rsplit(") ").next().unwrap_or("").starts_with('Z')).unwrap_or(false)
}

#[test]
fn shim_containers_survive_a_containerd_restart() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("chatty", &[], CHATTY);
    ctd.run_detached("quiet", &[], &["sleep", "1000"]);
    ctd.wait_task("chatty", "RUNNING");
    ctd.wait_task("quiet", "RUNNING");
    let (chatty, _) = ctd.task("chatty").expect("chatty listed");
    let (quiet, _) = ctd.task("quiet").expect("quiet listed");

    ctd.kill_containerd();
    std::thread::sleep(Duration::from_secs(3));
    assert!(alive(chatty), "the chatty container died while containerd was down");
    assert!(alive(quiet), "the quiet container died while containerd was down");

    ctd.restart_containerd();
    ctd.wait_task("chatty", "RUNNING");
    ctd.wait_task("quiet", "RUNNING");

    // Output resumes: attach to the chatty one's FIFOs and read lines.
    let attach = ctd.spawn_ctr(&["task", "attach", "chatty"]);
    let attach_pid = attach.pid();
    std::thread::sleep(Duration::from_secs(2));
    leftovers::kill_pids([attach_pid]);
    let out = attach.try_wait().expect("attach ended");
    assert!(out.stdout.contains("line\nline\n"), "no output after the restart: {}", out.describe());
    assert!(alive(chatty), "the chatty container died when output resumed");

    for id in ["chatty", "quiet"] {
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", id]).ok();
        ctd.wait_task(id, "STOPPED");
        assert_eq!(ctd.delete_task(id), 137, "exit status of {id}");
    }
}

#[test]
fn shim_reports_an_exit_that_happened_while_containerd_was_down() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("brief", &[], &["sh", "-c", "sleep 2; exit 9"]);
    ctd.wait_task("brief", "RUNNING");
    let (pid, _) = ctd.task("brief").expect("brief listed");
    ctd.kill_containerd();
    assert!(wait::eventually(|| !alive(pid)), "the container did not exit");
    std::thread::sleep(Duration::from_millis(500));
    ctd.restart_containerd();
    ctd.wait_task("brief", "STOPPED");
    assert_eq!(ctd.delete_task("brief"), 9);
}

#[test]
fn shim_killed_shim_is_cleaned_up_by_containerd() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("orphan", &[], &["sleep", "1000"]);
    ctd.wait_task("orphan", "RUNNING");
    let (pid, _) = ctd.task("orphan").expect("orphan listed");
    let shims = ctd.shim_pids();
    assert_eq!(shims.len(), 1, "expected one shim, found {shims:?}");
    let memory_cgroup = rustpod_tests::shim::cgroup_dir(pid, "memory");

    leftovers::kill_pids(shims.iter().copied());
    assert!(wait::eventually(|| !alive(shims[0])), "the shim did not die");
    let _ = ctd.ctr(&["task", "rm", "-f", "orphan"]);
    ctd.ctr(&["containers", "rm", "orphan"]).ok();

    assert!(wait::eventually(|| !alive(pid)), "container process {pid} survived");
    let state = ctd.state_root().join("orphan");
    assert!(wait::eventually(|| !state.exists()), "state left at {}", state.display());
    assert!(wait::eventually(|| !memory_cgroup.exists()), "cgroup left at {}", memory_cgroup.display());
    let bundle_dir = format!("{}/state/io.containerd.runtime.v2.task/{}/orphan", ctd.dir(), ctd.namespace);
    assert!(
        wait::eventually(|| leftovers::mount_points_under(&bundle_dir).is_empty()),
        "mounts left: {:?}",
        leftovers::mount_points_under(&bundle_dir)
    );
}
