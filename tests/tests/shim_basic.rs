// containerd-shim-rustpod-v1 under a real containerd: `ctr run` output, exit codes, and bad
// input that must fail clearly while the shim keeps serving its other containers.

use rustpod_tests::shim::{blocker, ShimContainerd, IMAGE, RUNTIME};
use rustpod_tests::skip_if;

#[test]
fn shim_run_echo_hello() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let out = ctd.run_rm("hello", &["echo", "hello"]).ok();
    assert_eq!(out.stdout, "hello\n", "{}", out.describe());
    assert!(
        ctd.shim_pids().is_empty() || rustpod_tests::wait::eventually(|| ctd.shim_pids().is_empty()),
        "the shim outlived its last container"
    );
    assert!(!ctd.state_root().join("hello").exists(), "state left in {}", ctd.state_root().display());
}

#[test]
fn shim_exit_codes_come_back() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    assert_eq!(ctd.run_rm("zero", &["sh", "-c", "exit 0"]).code(), 0);
    assert_eq!(ctd.run_rm("seven", &["sh", "-c", "exit 7"]).code(), 7);
    ctd.run_detached("killed", &[], &["sleep", "1000"]);
    ctd.wait_task("killed", "RUNNING");
    ctd.ctr(&["task", "kill", "-s", "SIGKILL", "killed"]).ok();
    ctd.wait_task("killed", "STOPPED");
    assert_eq!(ctd.delete_task("killed"), 137);
    ctd.ctr(&["containers", "delete", "killed"]).ok();
}

#[test]
fn shim_stdin_reaches_the_container() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let out = ctd
        .ctr_stdin(
            // ctr 1.6 never closes a piped stdin (not with the runc shim either), so read a line.
            &["run", "--rm", "--runtime", RUNTIME, IMAGE, "reader", "sh", "-c", "read l; echo got $l"],
            b"piped input\n",
        )
        .ok();
    assert_eq!(out.stdout, "got piped input\n", "{}", out.describe());
}

#[test]
fn shim_bad_input_fails_clearly_and_the_shim_keeps_serving() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let group = ["--annotation", "io.kubernetes.cri.sandbox-id=bad-input"];
    ctd.run_detached("healthy", &group, &["sleep", "1000"]);
    ctd.wait_task("healthy", "RUNNING");

    let mut args = vec!["run", "--rm", "--runtime", RUNTIME];
    args.extend_from_slice(&group);
    args.extend_from_slice(&[IMAGE, "noentry", "/no/such/binary"]);
    let out = ctd.ctr(&args).failed();
    assert!(out.stderr.contains("/no/such/binary"), "the error should name the missing program: {}", out.describe());

    let out = ctd.ctr(&["task", "kill", "--exec-id", "nope", "healthy"]).failed();
    assert!(out.stderr.contains("nope"), "the error should name the exec id: {}", out.describe());

    let out = ctd.ctr(&["task", "exec", "--exec-id", "x", "healthy", "/no/such/exec"]).failed();
    assert!(out.stderr.contains("/no/such/exec"), "the error should name the missing program: {}", out.describe());

    assert_eq!(ctd.task_status("healthy").as_deref(), Some("RUNNING"));
    let out = ctd.ctr(&["task", "exec", "--exec-id", "ok", "healthy", "echo", "still-serving"]).ok();
    assert_eq!(out.stdout, "still-serving\n");

    // Nothing the failures left (a Wait on the exec that never started, say) keeps the shim
    // alive once its last container is gone.
    ctd.ctr(&["task", "kill", "-s", "SIGKILL", "healthy"]).ok();
    ctd.wait_task("healthy", "STOPPED");
    ctd.delete_task("healthy");
    ctd.ctr(&["containers", "rm", "healthy"]).ok();
    assert!(
        rustpod_tests::wait::eventually(|| ctd.shim_pids().is_empty()),
        "the shim did not exit after its last container: {:?}",
        ctd.shim_pids()
    );
}

#[test]
fn the_shim_stays_in_the_cgroup_containerd_started_it_in() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("stay", &[], &["sleep", "1000"]);
    ctd.wait_task("stay", "RUNNING");
    // An exec too: the shim re-writes its own pid into its own cgroup before each helper it
    // starts (to get the kernel's wait for a cgroup migration over with early).
    ctd.ctr(&["task", "exec", "--exec-id", "e1", "stay", "true"]).ok();
    let cgroups = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let containerd = ctd.containerd_pid().expect("containerd runs");
    let shims = ctd.shim_pids();
    assert_eq!(shims.len(), 1, "one shim: {shims:?}");
    assert_eq!(cgroups(shims[0]), cgroups(containerd), "the shim left containerd's cgroups");
}

#[test]
fn shim_binary_log_uri_hands_the_output_to_the_logger() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let dir = rustpod_tests::scratch::ScratchDir::new("logger");
    let logger = dir.join("logger");
    // containerd's logging-binary protocol: stdout on fd 3, stderr on fd 4, ready once fd 5 closes.
    let script = format!(
        "#!/bin/sh\necho \"$CONTAINER_NAMESPACE/$CONTAINER_ID $*\" > {d}/env\nexec 5>&-\n\
         cat <&3 > {d}/out &\ncat <&4 > {d}/err &\nexec 3<&- 4<&-\nwait\n",
        d = dir.str()
    );
    std::fs::write(&logger, script).unwrap();
    std::fs::set_permissions(&logger, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let uri = format!("binary://{}?--tag=a%20b", logger.display());
    let args = ["run", "--rm", "--runtime", RUNTIME, "--log-uri", uri.as_str(), IMAGE, "logged"];
    let out = ctd.ctr(&[&args[..], &["sh", "-c", "echo to-out; echo to-err >&2; exit 3"]].concat());
    assert_eq!(out.status.code(), Some(3), "{}", out.describe());
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    rustpod_tests::wait::wait_for("the logger to write both streams", || {
        (read("out") == "to-out\n" && read("err") == "to-err\n").then_some(())
    });
    assert_eq!(read("env"), format!("{}/logged --tag a b\n", ctd.namespace));

    // A logger that cannot start fails the create with its path, and leaves the shim serving.
    let missing = format!("binary://{}/no-such-logger", dir.str());
    let args = ["run", "--rm", "--runtime", RUNTIME, "--log-uri", missing.as_str(), IMAGE, "unlogged", "true"];
    let out = ctd.ctr(&args);
    assert!(!out.status.success(), "{}", out.describe());
    assert!(out.stderr.contains("no-such-logger"), "{}", out.describe());
    // So does one that is there but not executable.
    let plain = dir.join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let uri = format!("binary://{}", plain.display());
    let args = ["run", "--rm", "--runtime", RUNTIME, "--log-uri", uri.as_str(), IMAGE, "unlogged2", "true"];
    let out = ctd.ctr(&args);
    assert!(!out.status.success(), "{}", out.describe());
    assert!(out.stderr.contains("not-executable"), "{}", out.describe());
    assert_eq!(ctd.run_rm("after", &["echo", "still serving"]).ok().stdout, "still serving\n");
}
