//! docker (apt's docker.io 20.10; sid's 28.5 in the sid guest) driving rustpod as `--runtime
//! rustpod`, with runc (docker's default runtime: 1.1.5, or 1.3.6 in the guest) as the control
//! in the same test and the same private dockerd (one for the tests that run at a time).

use rustpod_tests::clients::{assert_exits_like_runc, OciRuntime};
use rustpod_tests::docker::{self, Dockerd};
use rustpod_tests::{leftovers, signals, skip_if, Output};

/// PID 1 with a TERM handler: exit 3 proves the runtime delivered docker stop's SIGTERM.
const TRAP_TERM_EXIT_3: &[&str] = &["sh", "-c", "trap 'exit 3' TERM; sleep 1000 & wait"];

/// `argv` with `--rm` on both runtimes: runc must exit `expected`, rustpod as runc did.
fn exits_like_runc(dockerd: &Dockerd, argv: &[&str], expected: i32) {
    let outputs = OciRuntime::BOTH.map(|rt| dockerd.run_rm(rt, argv));
    assert_exits_like_runc("docker run", outputs, expected);
}

/// `docker run -d --network none [--runtime rustpod] busybox argv…`: the container's id.
fn run_detached(dockerd: &Dockerd, rt: OciRuntime, argv: &[&str]) -> String {
    let out = dockerd.on_image("run", rt, &["-d", "--network", "none"], argv).ok();
    out.stdout.trim().to_string()
}

/// The host pid of container `id`'s init, from `docker inspect`.
fn init_pid(dockerd: &Dockerd, id: &str) -> i32 {
    let out = dockerd.docker(&["inspect", "-f", "{{.State.Pid}}", id]).ok();
    out.stdout.trim().parse().unwrap_or_else(|e| panic!("docker inspect gave no pid for {id} ({e}): {}", out.describe()))
}

/// `docker inspect`'s "<exit code> <status>" of container `id`.
fn exit_state(dockerd: &Dockerd, id: &str) -> String {
    let format = "{{.State.ExitCode}} {{.State.Status}}";
    let out = dockerd.docker(&["inspect", "-f", format, id]).ok();
    out.stdout.trim().to_string()
}

/// The places docker_run_rm_leaves_no_runtime_state finds empty do hold a running container.
fn assert_running_where_looked(dockerd: &Dockerd, rt: OciRuntime, id: &str) {
    let state = dockerd.runtime_state(id);
    assert!(state.is_dir(), "{rt:?}: no state at {} while running", state.display());
    let cgroups = dockerd.cgroups_left();
    assert!(cgroups.iter().any(|c| c.ends_with(id)), "{rt:?}: no cgroup for {id} in {cgroups:?}");
}

#[test]
fn docker_run_prints_output_like_runc() {
    skip_if!(docker::blocker());
    let dockerd = Dockerd::shared();
    for rt in OciRuntime::BOTH {
        let out = dockerd.run_rm(rt, &["echo", "hi"]).ok();
        assert_eq!(out.stdout, "hi\n", "{rt:?}: {}", out.describe());
    }
}

#[test]
fn docker_run_missing_binary_exits_127_like_runc() {
    skip_if!(docker::blocker());
    let dockerd = Dockerd::shared();
    exits_like_runc(&dockerd, &["/no/such/bin"], 127);
    exits_like_runc(&dockerd, &["no-such-command-in-path"], 127);
}

#[test]
fn docker_run_non_executable_exits_126_like_runc() {
    skip_if!(docker::blocker());
    let dockerd = Dockerd::shared();
    exits_like_runc(&dockerd, &["/etc/passwd"], 126);
}

#[test]
fn docker_exec_returns_exit_code_like_runc() {
    skip_if!(docker::blocker());
    let dockerd = Dockerd::shared();
    let missing: Vec<Output> = OciRuntime::BOTH
        .into_iter()
        .map(|rt| {
            let id = run_detached(&dockerd, rt, &["sleep", "1000"]);
            assert_running_where_looked(&dockerd, rt, &id);
            let out = dockerd.docker(&["exec", &id, "sh", "-c", "echo in; exit 7"]);
            assert_eq!((out.code(), out.stdout.as_str()), (7, "in\n"), "{rt:?}: {}", out.describe());
            let missing = dockerd.docker(&["exec", &id, "/no/such/bin"]);
            dockerd.docker(&["rm", "-f", &id]).ok();
            missing
        })
        .collect();
    let [runc, rustpod]: [Output; 2] = missing.try_into().expect("one output per runtime");
    // docker 20.10 answers any failed exec with 126; docker 28 reads "no such file" in the
    // runtime's error and says 127, as for `run`. rustpod must give the words runc gives.
    let expected = runc.code();
    assert!(matches!(expected, 126 | 127), "runc, the control: {}", runc.describe());
    assert_exits_like_runc("docker exec", [runc, rustpod], expected);
}

#[test]
fn docker_stop_like_runc() {
    skip_if!(docker::blocker());
    let dockerd = Dockerd::shared();
    for rt in OciRuntime::BOTH {
        // sleep as PID 1 ignores SIGTERM: docker stop must fall back to SIGKILL.
        let sleeper = run_detached(&dockerd, rt, &["sleep", "1000"]);
        dockerd.docker(&["stop", "-t", "1", &sleeper]).ok();
        assert_eq!(exit_state(&dockerd, &sleeper), "137 exited", "{rt:?}: sleep after docker stop");
        let trapper = run_detached(&dockerd, rt, TRAP_TERM_EXIT_3);
        signals::wait_until_it_catches_term(init_pid(&dockerd, &trapper));
        dockerd.docker(&["stop", "-t", "60", &trapper]).ok();
        assert_eq!(exit_state(&dockerd, &trapper), "3 exited", "{rt:?}: TERM handler after docker stop");
        dockerd.docker(&["rm", &sleeper, &trapper]).ok();
    }
}

#[test]
fn docker_run_rm_leaves_no_runtime_state() {
    skip_if!(docker::blocker());
    let dockerd = Dockerd::shared();
    for rt in OciRuntime::BOTH {
        let cidfile = dockerd.scratch_file(&format!("cid-{rt:?}"));
        let flags = ["--rm", "--network", "none", "--cidfile", cidfile.as_str()];
        dockerd.on_image("run", rt, &flags, &["true"]).ok();
        let id = std::fs::read_to_string(&cidfile).expect("read --cidfile");
        let state = dockerd.runtime_state(&id);
        assert!(!state.exists(), "{rt:?}: state left in the runtime's root: {}", state.display());
        let cgroups: Vec<_> = dockerd.cgroups_left().into_iter().filter(|c| c.ends_with(&id)).collect();
        assert!(cgroups.is_empty(), "{rt:?}: cgroups left: {cgroups:?}");
        let processes = leftovers::processes_under(&id);
        assert!(processes.is_empty(), "{rt:?}: processes left: {processes:?}");
        let listed = dockerd.docker(&["ps", "-aq", "--no-trunc"]).ok();
        assert!(!listed.stdout.contains(&id), "{rt:?}: docker still lists {id}");
    }
}
