// The `process` object (issue 3): user, additionalGids, umask, the five capability sets,
// noNewPrivileges, rlimits, oomScoreAdj (positive works; negative fails naming oom_score_adj
// without CAP_SYS_RESOURCE), env/cwd/args and seccomp, compared with what the checker sees.

use rustpod_tests::assertions::assert_one_line_error;
use rustpod_tests::checker::{self, report_with, strings, Report};
use rustpod_tests::console::ConsoleSocket;
use rustpod_tests::containerd::lingering;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{conform, env, json, needs, skip, skip_if, Bundle, Runtime, Value};
use std::collections::BTreeSet;

fn set_of(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn user_groups_and_umask() {
    skip_if!(needs::containers());
    let report = report_with(&[], |b| {
        b.set("/process/user", json!({"uid": 1000, "gid": 1001, "additionalGids": [5, 2000], "umask": 23}));
    });
    for (field, want) in [("uid", 1000), ("euid", 1000), ("gid", 1001), ("egid", 1001)] {
        assert_eq!(report.at(&format!("/ids/{field}")), want, "{field}");
    }
    let groups: BTreeSet<u64> = report.at("/ids/groups").as_array().expect("groups").iter().filter_map(Value::as_u64).collect();
    assert!(groups.contains(&5) && groups.contains(&2000), "additionalGids [5, 2000] missing from {groups:?}");
    assert_eq!(report.str("/umask"), "0027", "umask 23 (decimal) is 0027");
}

#[test]
fn default_capabilities_and_empty_inheritable() {
    skip_if!(needs::containers());
    let report = report_with(&[], |_| {});
    let default = set_of(&["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]);
    for set in ["bounding", "effective", "permitted"] {
        assert_eq!(report.caps(set), default, "{set}");
    }
    assert!(report.caps("inheritable").is_empty(), "inheritable must stay empty unless asked for: {:?}", report.caps("inheritable"));
}

/// A non-root process keeps exactly what ambient carries across exec, so all five sets differ
/// from each other's defaults and can be checked one by one.
#[test]
fn all_five_capability_sets_for_a_non_root_user() {
    skip_if!(needs::containers());
    let bounding = ["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"];
    let carried = ["CAP_NET_BIND_SERVICE"];
    let report = report_with(&[], |b| {
        b.set("/process/user", json!({"uid": 1000, "gid": 1000}));
        b.set(
            "/process/capabilities",
            json!({"bounding": bounding, "effective": carried, "permitted": carried,
                   "inheritable": carried, "ambient": carried}),
        );
    });
    assert_eq!(report.caps("bounding"), set_of(&bounding));
    for set in ["effective", "permitted", "inheritable", "ambient"] {
        assert_eq!(report.caps(set), set_of(&carried), "{set}");
    }
}

#[test]
fn no_new_privileges_both_ways() {
    skip_if!(needs::containers());
    for nnp in [true, false] {
        let report = report_with(&[], |b| {
            b.set("/process/noNewPrivileges", json!(nnp));
        });
        assert_eq!(report.at("/no_new_privs"), i64::from(nnp), "noNewPrivileges {nnp}");
    }
}

#[test]
fn rlimits() {
    skip_if!(needs::containers());
    let limits = [("RLIMIT_NOFILE", 512, 1024), ("RLIMIT_NPROC", 100, 200), ("RLIMIT_CORE", 0, 4096)];
    let report = report_with(&[], |b| {
        let list: Vec<Value> = limits.iter().map(|(t, soft, hard)| json!({"type": t, "soft": soft, "hard": hard})).collect();
        b.set("/process/rlimits", json!(list));
    });
    for (name, soft, hard) in limits {
        assert_eq!(report.at(&format!("/rlimits/{name}")), &json!({"soft": soft, "hard": hard}), "{name}");
    }
}

#[test]
fn positive_oom_score_adj() {
    skip_if!(needs::containers());
    let report = report_with(&[], |b| {
        b.set("/process/oomScoreAdj", json!(500));
    });
    assert_eq!(report.at("/oom_score_adj"), 500);
}

#[test]
fn negative_oom_score_adj_without_cap_sys_resource_names_oom_score_adj() {
    skip_if!(needs::containers());
    if checker::host_bounding_caps().iter().any(|c| c == "CAP_SYS_RESOURCE") {
        skip!("this machine has CAP_SYS_RESOURCE, so a negative oomScoreAdj is allowed");
    }
    let mut bundle = checker::bundle(&[]);
    bundle.set("/process/oomScoreAdj", json!(-500));
    let rt = Runtime::under_test();
    let id = rt.new_id("oom");
    let out = rt.try_create(&id, &bundle, &[]);
    conform!(out.stderr_lines().len() == 1, "a negative oomScoreAdj must fail with one error line: {}", out.describe());
    assert_one_line_error(&out, &["oom_score_adj"]);
    rt.assert_nothing_left(&id, bundle.path());
}

#[test]
fn env_cwd_and_args() {
    skip_if!(needs::containers());
    let report = report_with(&["--path", "/"], |b| {
        b.add_env(&["GREETING=hello world", "EMPTY="]);
        b.set("/process/cwd", json!("/tmp"));
    });
    let env = strings(report.at("/env"));
    for var in ["GREETING=hello world", "EMPTY=", "TERM=xterm"] {
        assert!(env.contains(var), "{var} missing from {env:?}");
    }
    assert_eq!(report.str("/cwd"), "/tmp");
    assert_eq!(report.at("/args"), &json!([checker::IN_CONTAINER, "--path", "/"]));
}

/// As runc: without HOME in `process.env`, the process gets its user's home from the
/// container's /etc/passwd, and `/` for a uid that has no entry there. The runtime reads
/// the file itself (inside the rootfs), never through glibc's NSS.
#[test]
fn home_comes_from_the_containers_passwd_unless_set() {
    skip_if!(needs::containers());
    let report = report_with(&[], |b| {
        b.set("/process/user", json!({"uid": 65534, "gid": 65534}));
    });
    let env = strings(report.at("/env"));
    assert!(env.contains("HOME=/nonexistent"), "HOME of nobody missing from {env:?}");
    let report = report_with(&[], |b| {
        b.set("/process/user", json!({"uid": 65534, "gid": 65534}));
        b.add_env(&["HOME=/tmp"]);
    });
    let env = strings(report.at("/env"));
    assert!(env.contains("HOME=/tmp") && !env.contains("HOME=/nonexistent"), "{env:?}");
    let report = report_with(&[], |b| {
        b.set("/process/user", json!({"uid": 4242, "gid": 4242}));
    });
    let env = strings(report.at("/env"));
    assert!(env.contains("HOME=/"), "a uid without a passwd entry gets HOME=/: {env:?}");
}

const EOPNOTSUPP: i64 = 95;
const EACCES: i64 = 13;
const ENOSYS: i64 = 38;
const EPERM: i64 = 1;

fn seccomp(rules: Value) -> Value {
    json!({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
           "syscalls": rules})
}

#[test]
fn seccomp_errno_with_errno_ret_and_an_argument_filter() {
    skip_if!(needs::containers());
    let report = report_with(&["--mkdir", "/tmp/any", "--mkdir", "/tmp/private:700", "--mkdir", "/tmp/open:755"], |b| {
        b.set("/root/readonly", json!(false));
        b.set(
            "/linux/seccomp",
            seccomp(json!([
                {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": EACCES,
                 "args": [{"index": 1, "value": 0o700, "op": "SCMP_CMP_EQ"}]},
                {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                 "errnoRet": EOPNOTSUPP,
                 "args": [{"index": 1, "value": 0o777, "op": "SCMP_CMP_EQ"}]}
            ])),
        );
    });
    assert_eq!(report.at("/seccomp"), 2, "seccomp filter mode");
    assert_eq!(report.at("/mkdir/~1tmp~1any"), EOPNOTSUPP, "mode 0777: errnoRet");
    assert_eq!(report.at("/mkdir/~1tmp~1private:700"), EACCES, "mode 0700: the other rule");
    assert_eq!(report.at("/mkdir/~1tmp~1open:755"), 0, "mode 0755 matches no rule");
}

/// `noNewPrivileges: false` given explicitly, a filter, and no CAP_SYS_ADMIN: without
/// no_new_privs only a holder of CAP_SYS_ADMIN may load a filter, so it is loaded before the
/// capabilities go, as runc does (libcontainer's init loaded it after them unless the field was
/// absent), and no_new_privs stays off.
#[test]
fn seccomp_with_no_new_privileges_false_is_loaded_and_leaves_no_new_privs_off() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let mut bundle = Bundle::new(&["grep", "-E", "^(NoNewPrivs|Seccomp):", "/proc/self/status"]);
        bundle
            .set("/process/noNewPrivileges", json!(false))
            .set("/linux/seccomp", seccomp(json!([{"names": ["sethostname"], "action": "SCMP_ACT_ERRNO"}])));
        let out = rt.run(&rt.new_id("nnp"), &bundle, &[], b"").ok();
        let lines: Vec<&str> = out.stdout.lines().map(str::trim_end).collect();
        assert_eq!(lines, ["NoNewPrivs:\t0", "Seccomp:\t2"], "{}", rt.bin().display());
    }
}

/// What a seccomp listener gets, next to runc: one message on a new connection, runtime-spec's
/// containerProcessState (`fds` ["seccompFd"], the listenerMetadata, the init's pid, and the
/// container `creating` with its id and bundle) and the filter's fd. The fd is live: the
/// container's mkdir arrives on it as a notification from the named pid, and the listener's
/// answer (EPERM) is what the process sees. rustpod's init sends it to `create` (no
/// intermediate process), which sends it on.
#[test]
fn the_seccomp_listener_gets_the_containers_state_and_a_live_fd_as_from_runc() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let name = rt.bin().display().to_string();
        let Some(listener) = notify_listener(&rt) else { continue };
        let mut bundle = checker::bundle(&["--mkdir", "/tmp/notified"]);
        bundle.set("/annotations", json!({"org.example.listener": "yes"}));
        notified_mkdir(&mut bundle, &listener);
        let id = rt.new_id("listener");
        let running = rt.spawn_run(&id, &bundle, &[], b"");
        let (message, fd) = listener.receive_message();
        let state: Value = serde_json::from_slice(&message).unwrap_or_else(|e| panic!("{name}: the state is JSON ({e}): {message:?}"));
        assert_eq!(state["fds"], json!(["seccompFd"]), "{name}: {state}");
        assert_eq!(state["metadata"], "rustpod-test", "{name}: {state}");
        assert_eq!(state["state"]["id"], id.as_str(), "{name}: {state}");
        assert_eq!(state["state"]["status"], "creating", "{name}: {state}");
        assert_eq!(state["state"]["bundle"], bundle.path(), "{name}: {state}");
        assert_eq!(state["state"]["annotations"]["org.example.listener"], "yes", "{name}: {state}");
        let pid = state["pid"].as_i64().unwrap_or_else(|| panic!("{name}: a pid: {state}"));
        assert_eq!(state["state"]["pid"].as_i64(), Some(pid), "{name}: {state}");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        assert!(status.contains("Seccomp:\t2"), "{name}: pid {pid} is the filtered init: {status}");
        let caller = answer_one(&fd, libc::EPERM);
        drop(fd);
        let report = Report::from_output(running.wait());
        assert_eq!(report.at("/mkdir/~1tmp~1notified"), EPERM, "{name}: the listener's answer");
        assert_eq!(i64::from(caller), pid, "{name}: the notification came from the container's init (its exec'd program)");
    }
}

/// An exec'd process under the container's notify filter loads a filter of its own and sends its
/// fd too: the state names the container `running` with its init's pid, and the exec'd process's
/// pid beside it; the listener's answer is what the exec'd process sees. Next to runc; rustpod
/// execs it without an intermediate process.
#[test]
fn an_exec_sends_its_own_notify_fd_with_the_container_running_as_from_runc() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let name = rt.bin().display().to_string();
        let Some(listener) = notify_listener(&rt) else { continue };
        let mut bundle = Bundle::new(&["sleep", "100"]);
        notified_mkdir(&mut bundle, &listener);
        let id = rt.new_id("exec-notify");
        // The init's listener fd, held until the end: the container's own mkdir would wait on it.
        // runc and rustpod send it during `create`, crun 1.28 once `start` lets its init load the
        // filter.
        let (_, init_fd) = std::thread::scope(|scope| {
            let received = scope.spawn(|| listener.receive_message());
            rt.create(&id, &bundle);
            rt.start(&id);
            received.join().expect("the init's message")
        });
        let execing = rt.spawn_stdin(&["exec", &id, "mkdir", "/tmp/by-exec"], b"");
        let (message, fd) = listener.receive_message();
        let state: Value = serde_json::from_slice(&message).unwrap_or_else(|e| panic!("{name}: the state is JSON ({e}): {message:?}"));
        assert_eq!(state["fds"], json!(["seccompFd"]), "{name}: {state}");
        assert_eq!(state["state"]["id"], id.as_str(), "{name}: {state}");
        assert_eq!(state["state"]["status"], "running", "{name}: {state}");
        let caller = answer_one(&fd, libc::EPERM);
        drop(fd);
        if env::is_crun(rt.bin()) {
            // crun 1.28 names pid 0 for both and bundle "." (tests/RUNC_DIFFERENCES.md).
            eprintln!("{name}: an exec's state, for the record: {state}");
        } else {
            assert_eq!(state["state"]["pid"].as_i64(), Some(i64::from(rt.pid(&id))), "{name}: the init's pid: {state}");
            assert_eq!(state["state"]["bundle"], bundle.path(), "{name}: {state}");
            let pid = state["pid"].as_i64().unwrap_or_else(|| panic!("{name}: a pid: {state}"));
            assert_ne!(pid, i64::from(rt.pid(&id)), "{name}: the exec'd process's own pid: {state}");
            assert_eq!(i64::from(caller), pid, "{name}: the notification came from the exec'd process");
        }
        let out = execing.wait();
        assert!(!out.success() && out.stderr.contains("Operation not permitted"), "{name}: the listener's answer: {}", out.describe());
        drop(init_fd);
    }
}

/// The same agent through containerd: its runc shim driving runc (the reference) and rustpod, and
/// our shim (whose create helper runs our init steps). Each listener gets the init's fd with the
/// container `creating` under its containerd name, and its EPERM is what the container's mkdir
/// sees.
#[test]
fn the_seccomp_listener_gets_the_fd_through_containerd_runc_shim_and_our_shim() {
    skip_if!(shim::blocker());
    let ctd = ShimContainerd::start();
    let rootfs = Bundle::new(&["true"]);
    let dir = ScratchDir::new("notify-ctr");
    for (path, flags) in shim::paths() {
        let listener = ConsoleSocket::new();
        let name = format!("notify-{path}");
        let mut spec = ctd.oci_spec(&name, &rootfs.rootfs());
        spec["root"]["readonly"] = json!(false);
        spec["process"]["args"] = json!(["sh", "-c", lingering("mkdir /tmp/by-shim 2>&1; true")]);
        let mut filter = seccomp(json!([{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_NOTIFY"}]));
        filter["listenerPath"] = json!(listener.path());
        spec["linux"]["seccomp"] = filter;
        let running = ctd.spawn_run_spec(&dir, &name, &spec, "--rm", &flags);
        let (message, fd) = listener.receive_message();
        let state: Value = serde_json::from_slice(&message).unwrap_or_else(|e| panic!("{path}: the state is JSON ({e}): {message:?}"));
        assert_eq!(state["fds"], json!(["seccompFd"]), "{path}: {state}");
        assert_eq!(state["state"]["id"], name.as_str(), "{path}: {state}");
        assert_eq!(state["state"]["status"], "creating", "{path}: {state}");
        answer_one(&fd, libc::EPERM);
        drop(fd);
        let out = running.wait();
        assert!(out.success() && out.stdout.contains("Operation not permitted"), "{path}: the listener's answer: {}", out.describe());
    }
}

/// A seccomp agent's socket, where `rt` lists SCMP_ACT_NOTIFY in `features` (else said, and None).
fn notify_listener(rt: &Runtime) -> Option<ConsoleSocket> {
    let listed = rt.cmd(&["features"]).stdout.contains("SCMP_ACT_NOTIFY");
    if !listed {
        eprintln!("{} does not list SCMP_ACT_NOTIFY in `features`: not run", rt.bin().display());
    }
    listed.then(ConsoleSocket::new)
}

/// `bundle`'s mkdir and mkdirat notified to `listener` (metadata "rustpod-test"), its root writable.
fn notified_mkdir(bundle: &mut Bundle, listener: &ConsoleSocket) {
    bundle.set("/root/readonly", json!(false));
    let mut filter = seccomp(json!([{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_NOTIFY"}]));
    filter["listenerPath"] = json!(listener.path());
    filter["listenerMetadata"] = json!("rustpod-test");
    bundle.set("/linux/seccomp", filter);
}

/// Waits (bounded) for one notification on the seccomp listener `fd`, answers it with `errno`,
/// and returns the pid it came from.
fn answer_one(fd: &std::os::fd::OwnedFd, errno: i32) -> u32 {
    use std::os::fd::{AsFd, AsRawFd};
    let mut poll = [nix::poll::PollFd::new(fd.as_fd(), nix::poll::PollFlags::POLLIN)];
    let ready = nix::poll::poll(&mut poll, nix::poll::PollTimeout::from(10_000u16)).expect("poll the seccomp listener");
    assert_eq!(ready, 1, "no notification within 10 s");
    // SAFETY: plain C structs the ioctls fill and read.
    let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) };
    assert_eq!(rc, 0, "SECCOMP_IOCTL_NOTIF_RECV: {}", std::io::Error::last_os_error());
    let resp = libc::seccomp_notif_resp { id: req.id, val: 0, error: -errno, flags: 0 };
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
    assert_eq!(rc, 0, "SECCOMP_IOCTL_NOTIF_SEND: {}", std::io::Error::last_os_error());
    req.pid
}

/// SCMP_ACT_NOTIFY with listenerPath: the runtime sends the notify fd to the listener; when the
/// listener closes it, the filtered syscall fails with ENOSYS.
#[test]
fn seccomp_notify_sends_the_fd_to_the_listener() {
    skip_if!(needs::containers());
    let rt = Runtime::under_test();
    let listener = ConsoleSocket::new();
    let mut bundle = checker::bundle(&["--mkdir", "/tmp/notified"]);
    bundle.set("/root/readonly", json!(false));
    let mut filter = seccomp(json!([{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_NOTIFY"}]));
    filter["listenerPath"] = json!(listener.path());
    bundle.set("/linux/seccomp", filter);
    if !rt.cmd(&["features"]).stdout.contains("SCMP_ACT_NOTIFY") {
        skip!("{} does not list SCMP_ACT_NOTIFY in `features`", rt.bin().display());
    }
    let running = rt.spawn_run(&rt.new_id("notify"), &bundle, &[], b"");
    drop(listener.receive_master());
    let report = Report::from_output(running.wait());
    assert_eq!(report.at("/mkdir/~1tmp~1notified"), ENOSYS);
}
