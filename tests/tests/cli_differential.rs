// The same bundle under runc and RUSTPOD_BIN (own roots) must give the same state fields, status
// sequence, exit codes and stdout; with RUSTPOD_BIN=runc this passes trivially. The sid guest runs
// it next to runc 1.3.6, and next to crun 1.28 for all but the state's field names (crun's state
// adds `systemd-scope`).

use rustpod_tests::{env, json, needs, signals, skip_if, Bundle, Runtime, SLEEP, TRAP_TERM};
use std::collections::BTreeSet;
use std::fmt::Debug;

fn blocker() -> Option<String> {
    needs::containers().or_else(|| needs::program(&env::runc_bin()))
}

/// Runs `scenario` on runc, then on the runtime under test; asserts both gave the same result.
#[track_caller]
fn same_on_both<T: PartialEq + Debug>(what: &str, scenario: impl Fn(&Runtime) -> T) -> T {
    let (runc, ours) = (Runtime::runc(), Runtime::under_test());
    let expected = scenario(&runc);
    let got = scenario(&ours);
    assert_eq!(got, expected, "{what}: {} differs from runc", ours.bin().display());
    expected
}

type Keys = BTreeSet<String>;

/// State field names and statuses through create → start → kill KILL.
fn lifecycle(rt: &Runtime, bundle: &Bundle) -> (Keys, Vec<String>) {
    let id = rt.new_id("diff");
    rt.create(&id, bundle);
    let state = rt.state(&id);
    let keys = state.as_object().expect("state is an object").keys().cloned().collect();
    let mut statuses = vec![rt.status(&id)];
    rt.start(&id);
    rt.wait_status(&id, "running");
    statuses.push(rt.status(&id));
    rt.kill(&id, "KILL");
    rt.wait_status(&id, "stopped");
    statuses.push(rt.status(&id));
    rt.delete(&id);
    (keys, statuses)
}

#[test]
fn state_fields_and_status_sequence() {
    skip_if!(blocker());
    let mut bundle = Bundle::new(SLEEP);
    bundle.set_annotations(json!({"org.rustpod.diff": "1"}));
    let (_, statuses) = same_on_both("state fields and statuses", |rt| lifecycle(rt, &bundle));
    assert_eq!(statuses, ["created", "running", "stopped"]);
}

/// Exit code and stdout of a foreground `run` of `bundle`.
fn run_output(rt: &Runtime, bundle: &Bundle) -> (i32, String) {
    let out = rt.run(&rt.new_id("diff"), bundle, &[], b"");
    (out.code(), out.stdout)
}

#[test]
fn run_exit_codes() {
    skip_if!(blocker());
    for code in [0, 7] {
        let script = format!("exit {code}");
        let bundle = Bundle::new(&["sh", "-c", &script]);
        let (got, _) = same_on_both(&script, |rt| run_output(rt, &bundle));
        assert_eq!(got, code);
    }
}

#[test]
fn run_stdout() {
    skip_if!(blocker());
    let commands = ["echo hi", "cat /proc/self/status | grep NoNewPrivs", "hostname", "id"];
    for command in commands {
        let bundle = Bundle::new(&["sh", "-c", command]);
        let (code, stdout) = same_on_both(command, |rt| run_output(rt, &bundle));
        assert_eq!(code, 0, "`{command}` failed");
        assert!(!stdout.is_empty(), "`{command}` printed nothing");
    }
}

/// Exit code of a foreground `run` of `bundle` after the test sends `signal` to the running container.
fn exit_code_after_kill(rt: &Runtime, bundle: &Bundle, signal: &str) -> i32 {
    let id = rt.new_id("diff");
    let is_running = || rt.try_status(&id).as_deref() == Some("running");
    let running = rt.spawn_run(&id, bundle, &[], b"").running_until("the container to run", is_running);
    if signal == "TERM" {
        signals::wait_until_it_catches_term(rt.pid(&id));
    }
    rt.kill(&id, signal);
    running.wait().code()
}

#[test]
fn exit_codes_after_kill() {
    skip_if!(blocker());
    for (args, signal, expected) in [(SLEEP, "KILL", 137), (TRAP_TERM, "TERM", 143)] {
        let bundle = Bundle::new(args);
        let code = same_on_both(&format!("run, then kill {signal}"), |rt| exit_code_after_kill(rt, &bundle, signal));
        assert_eq!(code, expected, "exit code after kill {signal}");
    }
}
