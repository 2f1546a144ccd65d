// A container whose init was reaped (by `run --keep` here; on a node by containerd's runc shim,
// which reaps the init before it calls `delete`) keeps its state until `delete`, and the kernel
// may give the init's pid to any other process meanwhile: pid_max is 32,768 on this host. runc
// compares the start time it recorded; a runtime that trusts the pid alone reports the container
// running, signals that process on `kill` and `delete`, and runs an `exec` in its namespaces (the
// host's, seen here before the fix: the exec'd shell read the host's mount namespace). A host
// process takes the pid (ns_last_pid, as CRIU restores pids); each runtime must then say stopped,
// refuse exec and kill, delete cleanly and never signal that process.

use rustpod_tests::{needs, skip, skip_if, Bundle, Runtime, SLEEP};
use std::fs;
use std::process::{Child, Command, Stdio};

/// A host process holding `pid`, made by asking the kernel for the pid after `pid - 1`; None if
/// other processes (the suite's, in parallel) hold it or take it first for ten seconds.
fn take_pid(pid: i32) -> Option<Child> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if fs::metadata(format!("/proc/{pid}")).is_ok() {
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).expect("write ns_last_pid");
        let mut child = Command::new("sleep")
            .arg("1000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        if child.id() as i32 == pid {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

/// Kills the process holding the pid, by its pid, when the test ends, whatever happened.
struct Holder(Child);

impl Holder {
    /// Whether it ended: a signal to it ends it at once, so half a second is plenty.
    fn signalled(&mut self) -> bool {
        (0..50).any(|_| {
            let ended = self.0.try_wait().ok().flatten().is_some();
            std::thread::sleep(std::time::Duration::from_millis(10));
            ended
        })
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn blocker() -> Option<String> {
    needs::containers().or_else(|| {
        fs::OpenOptions::new()
            .write(true)
            .open("/proc/sys/kernel/ns_last_pid")
            .err()
            .map(|e| format!("/proc/sys/kernel/ns_last_pid: {e}: a host process cannot be given the init's pid"))
    })
}

#[derive(Debug, PartialEq)]
struct Seen {
    status: String,
    pid: i64,
    exec_failed: bool,
    kill_failed: bool,
    delete_ok: bool,
    holder_signalled: bool,
}

#[test]
fn a_reaped_inits_pid_held_by_a_host_process_is_not_the_container() {
    skip_if!(blocker());
    let mut seen = Vec::new();
    for rt in Runtime::runc_and_under_test() {
        let bundle = Bundle::new(SLEEP);
        let id = rt.new_id("reused");
        let cli = rt.spawn_run(&id, &bundle, &["--keep"], b"");
        let cli = cli.running_until("the container runs", || rt.try_status(&id).as_deref() == Some("running"));
        let init = rt.pid(&id);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(init), nix::sys::signal::Signal::SIGKILL).expect("kill the init");
        // `run --keep` reaps the init and leaves the state.
        cli.try_wait().expect("run --keep returns once its init is reaped");
        let Some(holder) = take_pid(init) else {
            skip!("pid {init} could not be given to a host process: another process took it");
        };
        let mut holder = Holder(holder);
        let state = rt.state(&id);
        let exec = rt.exec(&id, &["sh", "-c", "readlink /proc/self/ns/mnt"]);
        let kill = rt.cmd(&["kill", &id, "KILL"]);
        let delete = rt.cmd(&["delete", "--force", &id]);
        let holder_signalled = holder.signalled();
        seen.push((
            rt.bin().display().to_string(),
            Seen {
                status: state["status"].as_str().unwrap_or_default().to_string(),
                pid: state["pid"].as_i64().unwrap_or(-1),
                exec_failed: !exec.success(),
                kill_failed: !kill.success(),
                delete_ok: delete.success(),
                holder_signalled,
            },
        ));
        assert!(!holder_signalled, "{}: signalled the host process that took the init's pid: {seen:?}", rt.bin().display());
    }
    // The oracle (runc 1.1.5 here, runc 1.3.6 or crun 1.28 in the sid guest) must hold the
    // container stopped and the process untouched; rustpod answers as runc does.
    let (oracle, ours) = (&seen[0], &seen[1]);
    let safe = |s: &Seen| s.status == "stopped" && s.pid == 0 && s.exec_failed && s.delete_ok && !s.holder_signalled;
    assert!(safe(&oracle.1), "{}: the oracle trusted the reused pid: {seen:?}", oracle.0);
    let want = Seen { status: "stopped".into(), pid: 0, exec_failed: true, kill_failed: true, delete_ok: true, holder_signalled: false };
    assert_eq!(ours.1, want, "{}", ours.0);
}

/// The same through containerd, where the shim reaps the init: containerd's runc shim driving
/// runc (the reference) and rustpod, and our shim. With the task stopped and its init's pid taken
/// by a host process, `ctr task kill` and `ctr task delete` must never reach that process, and
/// the delete must succeed as on runc.
#[test]
fn through_containerd_a_reaped_inits_pid_held_by_a_host_process_is_never_signalled() {
    use rustpod_tests::scratch::ScratchDir;
    use rustpod_tests::shim::{self, ShimContainerd};
    skip_if!(blocker().or_else(shim::blocker_with_runc));
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("reused");
    let rootfs = Bundle::new(SLEEP);
    let mut seen = Vec::new();
    for (i, (who, flags)) in shim::paths().iter().enumerate() {
        let name = format!("reused{i}");
        let spec = ctd.oci_spec(&name, &rootfs.rootfs());
        ctd.run_spec(&dir, &name, &spec, "-d", flags).ok();
        ctd.wait_task(&name, "RUNNING");
        let (init, _) = ctd.task(&name).expect("the task is listed");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(init), nix::sys::signal::Signal::SIGKILL).expect("kill the init");
        ctd.wait_task(&name, "STOPPED");
        let Some(holder) = take_pid(init) else {
            skip!("pid {init} could not be given to a host process: another process took it");
        };
        let mut holder = Holder(holder);
        let _ = ctd.ctr(&["task", "kill", "-s", "SIGKILL", &name]);
        let deleted = ctd.ctr(&["task", "delete", &name]).success();
        let signalled = holder.signalled();
        let _ = ctd.ctr(&["container", "rm", &name]);
        seen.push((*who, deleted, signalled));
    }
    for (who, deleted, signalled) in &seen {
        assert!(!signalled, "{who}: signalled the host process that took the init's pid: {seen:?}");
        assert!(deleted, "{who}: ctr task delete failed: {seen:?}");
    }
}

/// SIGKILLs the process by its pid when the test ends, whatever happened (it is our child and
/// never reaped before this, so the pid is still its own).
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGKILL);
    }
}

/// The init reaped while an exec begins, after the state's start time was checked and before
/// `/proc/<pid>/ns/*` are opened, and its pid taken by a host process: an exec that trusted the
/// pid there joined that process's namespaces, the host's (seen before the fix: the exec'd
/// readlink printed the host's mount namespace). rustpod holds the init by a pidfd from its
/// check and refuses once it is reaped. The window is milliseconds long; rustpod stops itself
/// in it (`RUSTPOD_DEBUG_PAUSE=exec-init-held`). runc has the same window and no such point, so
/// it is not compared here.
#[test]
fn an_init_reaped_as_exec_begins_is_not_joined_through_its_reused_pid() {
    skip_if!(blocker());
    if rustpod_tests::env::testing_runc_itself() {
        skip!("RUSTPOD_DEBUG_PAUSE is rustpod's; runc has none");
    }
    let Some((out, host_mnt)) = exec_racing_a_reaped_init(false) else { return };
    assert!(
        !out.stdout.contains(&host_mnt),
        "the exec joined the host's mount namespace through the init's pid, now a host process's: {}",
        out.describe()
    );
    assert!(!out.success(), "exec ran with its init gone: {}", out.describe());
    assert!(out.stderr.contains("cannot exec in a stopped container"), "runc's words for it: {}", out.describe());
}

/// The same with a time namespace, which the exec'd child joins itself since issue 22 (it took
/// the engine's exec route, where the engine opened the namespaces and the init was checked only
/// after its fork): refused before the fork, in runc's words, the host's namespaces never joined.
#[test]
fn with_a_time_namespace_an_exec_racing_its_reaped_init_is_refused_before_it_forks() {
    skip_if!(blocker());
    if rustpod_tests::env::testing_runc_itself() {
        skip!("RUSTPOD_DEBUG_PAUSE is rustpod's; runc has none");
    }
    if fs::metadata("/proc/self/ns/time").is_err() {
        skip!("this kernel has no time namespaces");
    }
    let Some((out, host_mnt)) = exec_racing_a_reaped_init(true) else { return };
    assert!(!out.stdout.contains(&host_mnt), "the exec joined the host's mount namespace: {}", out.describe());
    assert!(!out.success(), "exec succeeded with its init gone: {}", out.describe());
    assert!(out.stderr.contains("cannot exec in a stopped container"), "runc's words for it: {}", out.describe());
}

/// Runs a container (with a time namespace: `time_ns`), stops an exec of `readlink
/// /proc/self/ns/mnt` at `exec-init-held`, kills the init (`run --keep` reaps it), gives its pid
/// to a host process and lets the exec go on; returns what the exec said, and the host's mount
/// namespace as readlink prints it. None, with the skip recorded, when the pid could not be given.
fn exec_racing_a_reaped_init(time_ns: bool) -> Option<(rustpod_tests::Output, String)> {
    let rt = Runtime::under_test();
    let mut bundle = Bundle::new(SLEEP);
    if time_ns {
        let mut namespaces = bundle.config()["linux"]["namespaces"].as_array().cloned().unwrap_or_default();
        namespaces.push(rustpod_tests::json!({"type": "time"}));
        bundle.set("/linux/namespaces", rustpod_tests::Value::Array(namespaces));
    }
    let id = rt.new_id("exec-race");
    let cli = rt.spawn_run(&id, &bundle, &["--keep"], b"");
    let cli = cli.running_until("the container runs", || rt.try_status(&id).as_deref() == Some("running"));
    let init = rt.pid(&id);
    let host_mnt = fs::read_link("/proc/self/ns/mnt").expect("readlink our mount namespace").to_string_lossy().into_owned();
    let bin = rt.bin().display().to_string();
    let argv = ["RUSTPOD_DEBUG_PAUSE=exec-init-held", &bin, "--root", rt.root(), "exec", &id, "readlink", "/proc/self/ns/mnt"];
    let exec = rustpod_tests::process::spawn(std::path::Path::new("/usr/bin/env"), &argv, b"");
    let exec_pid = exec.pid();
    let _stopped_exec = KillOnDrop(exec_pid);
    let stopped = || {
        let stat = fs::read_to_string(format!("/proc/{exec_pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
    };
    let exec = exec.running_until("exec stops at exec-init-held", stopped);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(init), nix::sys::signal::Signal::SIGKILL).expect("kill the init");
    cli.try_wait().expect("run --keep returns once its init is reaped");
    let Some(holder) = take_pid(init) else {
        let why = format!("pid {init} could not be given to a host process: another process took it");
        rustpod_tests::skip::record(&rustpod_tests::skip::current_test(), &why);
        return None;
    };
    let _holder = Holder(holder);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(exec_pid), nix::sys::signal::Signal::SIGCONT).expect("SIGCONT the exec");
    Some((exec.wait(), host_mnt))
}
