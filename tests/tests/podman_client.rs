//! Rootful podman (apt's 4.3; sid's 5.8 in the sid guest) driving rustpod as `--runtime
//! $RUSTPOD_BIN`, with runc ($RUNC_BIN: runc 1.3.6 in the guest; crun works too) as the
//! control in the same test: output, exit codes of failed execs, exec, stop, nothing left.

use rustpod_tests::clients::{assert_exits_like_runc, OciRuntime};
use rustpod_tests::podman::{self, Podman};
use rustpod_tests::{leftovers, signals, skip, skip_if};

/// `Podman::new()`, or a loud skip when podman cannot run a container here even with runc.
macro_rules! podman_or_skip {
    () => {{
        skip_if!(podman::blocker());
        let podman = Podman::new();
        if let Some(reason) = podman.blocker_after_trying() {
            skip!("{reason}");
        }
        podman
    }};
}

/// PID 1 with a TERM handler: exit 3 proves the runtime delivered podman stop's SIGTERM.
const TRAP_TERM_EXIT_3: &[&str] = &["sh", "-c", "trap 'exit 3' TERM; sleep 1000 & wait"];

/// `argv` with `--rm` on both runtimes: runc must exit `expected`, rustpod as runc did.
fn exits_like_runc(podman: &Podman, argv: &[&str], expected: i32) {
    let outputs = OciRuntime::BOTH.map(|rt| podman.run_rm(rt, &[], argv));
    assert_exits_like_runc("podman run", outputs, expected);
}

/// `podman run -d … argv…` on `rt`: the container's id.
fn run_detached(podman: &Podman, rt: OciRuntime, argv: &[&str]) -> String {
    podman.run(rt, &["-d"], argv).ok().stdout.trim().to_string()
}

/// podman's cgroupfs manager names a container's cgroup `<parent>/libpod-<id>`.
fn container_cgroups(podman: &Podman, id: &str) -> Vec<std::path::PathBuf> {
    let name = format!("libpod-{id}");
    podman.cgroups_left().into_iter().filter(|c| c.ends_with(&name)).collect()
}

/// The places podman_run_rm_leaves_no_runtime_state finds empty do hold a running container.
fn assert_running_where_looked(podman: &Podman, rt: OciRuntime, id: &str) {
    let state = podman.runtime_state(rt, id);
    assert!(state.is_dir(), "{rt:?}: no state at {} while running", state.display());
    assert!(!container_cgroups(podman, id).is_empty(), "{rt:?}: no cgroup for {id}");
}

#[test]
fn podman_run_prints_output_like_runc() {
    let podman = podman_or_skip!();
    for rt in OciRuntime::BOTH {
        let out = podman.run_rm(rt, &[], &["echo", "hi"]).ok();
        assert_eq!(out.stdout, "hi\n", "{rt:?}: {}", out.describe());
    }
}

#[test]
fn podman_run_failed_exec_exits_like_runc() {
    let podman = podman_or_skip!();
    exits_like_runc(&podman, &["/no/such/bin"], 127);
    exits_like_runc(&podman, &["no-such-command-in-path"], 127);
    exits_like_runc(&podman, &["/etc/passwd"], 126);
}

#[test]
fn podman_exec_returns_exit_code_like_runc() {
    let podman = podman_or_skip!();
    for rt in OciRuntime::BOTH {
        let id = run_detached(&podman, rt, &["sleep", "1000"]);
        assert_running_where_looked(&podman, rt, &id);
        let out = podman.podman(rt, &["exec", &id, "sh", "-c", "echo in; exit 7"]);
        assert_eq!((out.code(), out.stdout.as_str()), (7, "in\n"), "{rt:?}: {}", out.describe());
        let missing = podman.podman(rt, &["exec", &id, "/no/such/bin"]);
        assert_eq!(missing.code(), 127, "{rt:?}: exec of a missing binary: {}", missing.describe());
        podman.podman(rt, &["rm", "-f", "-t", "0", &id]).ok();
    }
}

/// The host pid of container `id`'s init, from `podman inspect`.
fn init_pid(podman: &Podman, rt: OciRuntime, id: &str) -> i32 {
    let out = podman.podman(rt, &["inspect", "-f", "{{.State.Pid}}", id]).ok();
    out.stdout.trim().parse().unwrap_or_else(|e| panic!("{rt:?}: podman inspect gave no pid for {id} ({e}): {}", out.describe()))
}

/// `podman stop -t TIMEOUT`s running container `id`, removes it: its "<exit code> <status>".
fn stopped_state(podman: &Podman, rt: OciRuntime, id: &str, timeout: &str) -> String {
    podman.podman(rt, &["stop", "-t", timeout, id]).ok();
    let format = "{{.State.ExitCode}} {{.State.Status}}";
    let state = podman.podman(rt, &["inspect", "-f", format, id]).ok();
    podman.podman(rt, &["rm", id]).ok();
    state.stdout.trim().to_string()
}

#[test]
fn podman_stop_like_runc() {
    let podman = podman_or_skip!();
    for rt in OciRuntime::BOTH {
        // sleep as PID 1 ignores SIGTERM: podman stop must fall back to SIGKILL.
        let sleeper = run_detached(&podman, rt, &["sleep", "1000"]);
        assert_eq!(stopped_state(&podman, rt, &sleeper, "1"), "137 exited", "{rt:?}: sleep after podman stop");
        let trapper = run_detached(&podman, rt, TRAP_TERM_EXIT_3);
        signals::wait_until_it_catches_term(init_pid(&podman, rt, &trapper));
        assert_eq!(stopped_state(&podman, rt, &trapper, "60"), "3 exited", "{rt:?}: TERM handler after podman stop");
    }
}

#[test]
fn podman_run_rm_leaves_no_runtime_state() {
    let podman = podman_or_skip!();
    for rt in OciRuntime::BOTH {
        let name = rustpod_tests::scratch::unique_name("pdm-rm");
        podman.run_rm(rt, &["--name", &name], &["true"]).ok();
        let id = podman.id_from_events(rt, &name);
        let state = podman.runtime_state(rt, &id);
        assert!(!state.exists(), "{rt:?}: state left in the runtime's root: {}", state.display());
        let cgroups = container_cgroups(&podman, &id);
        assert!(cgroups.is_empty(), "{rt:?}: cgroups left: {cgroups:?}");
        // podman's own conmon and its `container cleanup --rm` may still be finishing when
        // `run --rm` returns (seen under load): wait for them, boundedly, then look.
        rustpod_tests::wait::eventually(|| leftovers::processes_under(&id).is_empty());
        let processes = leftovers::processes_under(&id);
        assert!(processes.is_empty(), "{rt:?}: processes left: {processes:?}");
    }
}

/// CAP_SYS_RESOURCE's bit in /proc's capability masks (linux/capability.h).
const CAP_SYS_RESOURCE: u32 = 24;

/// Whether this process may raise a hard rlimit (CAP_SYS_RESOURCE in CapEff).
fn may_raise_rlimits() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .expect("CapEff in /proc/self/status");
    cap_eff & (1 << CAP_SYS_RESOURCE) != 0
}

/// podman's own default on a host without CAP_SYS_RESOURCE: an RLIMIT_NOFILE above the hard
/// limit. Both runtimes must refuse it (podman says 126, "OCI permission denied"), and the
/// error must name the step, as runc's `error setting rlimit type 7: operation not permitted`.
#[test]
fn podman_rlimit_above_the_hard_limit_fails_like_runc() {
    let podman = podman_or_skip!();
    if may_raise_rlimits() {
        skip!("CAP_SYS_RESOURCE is effective here: raising a hard rlimit succeeds on both");
    }
    let over = podman::hard_nofile() + 1;
    let [runc, rustpod] = OciRuntime::BOTH.map(|rt| podman.run_with_nofile(rt, over, &["--rm"], &["true"]));
    assert_eq!((runc.code(), runc.stderr.contains("rlimit")), (126, true), "runc, the control: {}", runc.describe());
    assert_eq!(rustpod.code(), runc.code(), "exit code: {}", rustpod.describe());
    assert!(
        rustpod.stderr.contains("error setting rlimit type 7: operation not permitted"),
        "rustpod's error does not name the rlimit step as runc's does \
         (`error setting rlimit type 7: operation not permitted`): {}",
        rustpod.describe()
    );
}

/// A container in a user namespace of its own (`--uidmap`/`--gidmap`, what podman's
/// `--userns=auto` hands the runtime): the maps and root inside, the file root makes owned by
/// root there, the init's ids seen from the host (the mapped 100000), and an exec that joins the
/// same user namespace; as with runc. rustpod's init makes the user namespace in its own clone.
#[test]
fn podman_user_namespace_like_runc() {
    let podman = podman_or_skip!();
    let maps = ["--uidmap", "0:100000:65536", "--gidmap", "0:100000:65536"];
    let inside = "cat /proc/self/uid_map /proc/self/gid_map; id -u; id -g; touch /tmp/made && stat -c %u:%g /tmp/made";
    let outs = OciRuntime::BOTH.map(|rt| podman.run_rm(rt, &maps, &["sh", "-c", inside]).ok().stdout);
    let squeezed: Vec<String> = outs.iter().map(|o| o.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    assert_eq!(squeezed[0], "0 100000 65536 0 100000 65536 0 0 0:0", "runc: {}", outs[0]);
    assert_eq!(squeezed[1], squeezed[0], "rustpod as runc");
    for rt in OciRuntime::BOTH {
        let flags = [&["-d"][..], &maps[..]].concat();
        let id = podman.run(rt, &flags, &["sleep", "1000"]).ok().stdout.trim().to_string();
        let pid = podman.podman(rt, &["inspect", "-f", "{{.State.Pid}}", &id]).ok().stdout.trim().to_string();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_else(|e| panic!("{rt:?}: /proc/{pid}/status: {e}"));
        let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or_default().split_whitespace().skip(1).collect::<Vec<_>>();
        assert_eq!(uids, ["100000"; 4], "{rt:?}: the init's ids on the host");
        let user_ns = std::fs::read_link(format!("/proc/{pid}/ns/user")).expect("the init's user namespace");
        let exec = podman.podman(rt, &["exec", &id, "sh", "-c", "cat /proc/self/uid_map; readlink /proc/self/ns/user"]).ok().stdout;
        assert!(exec.contains("100000") && exec.contains(&*user_ns.to_string_lossy()), "{rt:?}: the exec is not in it: {exec}");
        podman.podman(rt, &["rm", "-f", "-t", "0", &id]).ok();
        assert!(container_cgroups(&podman, &id).is_empty(), "{rt:?}: a cgroup of {id} is left");
    }
}
