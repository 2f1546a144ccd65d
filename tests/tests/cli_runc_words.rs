// What clients parse from runc's CLI (issue 15, sections 2 and 2b), checked against runc in the
// same test: the shape of an error on stderr (conformance harnesses look for "error" there), the
// words docker maps to exit codes 127 and 126, and the exec flags runc 1.1.5 takes. runc's words,
// not crun's: the sid guest runs this file next to runc 1.3.6 only. Where runc 1.1.5 and 1.3.6
// word a case differently, rustpod says it as 1.3 does and the test says so (RUNC_DIFFERENCES.md).

use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{env, json, needs, skip_if, Bundle, Output, Runtime, Value, SLEEP};

fn blocker() -> Option<String> {
    needs::containers().or_else(|| needs::program(&env::runc_bin()))
}

/// `(level, msg)` of a logrus text entry `time="…" level=error msg="…"`.
fn logrus_text(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("time=\"")?;
    let (_, rest) = rest.split_once("\" level=")?;
    let (level, msg) = rest.split_once(" msg=")?;
    let msg: String = serde_json::from_str(msg).ok()?;
    Some((level.to_string(), msg))
}

#[track_caller]
fn the_one_stderr_line(out: &Output) -> String {
    assert!(!out.success(), "should have failed: {}", out.describe());
    let lines = out.stderr_lines();
    assert_eq!(lines.len(), 1, "one line on stderr: {}", out.describe());
    lines[0].to_string()
}

/// The message of the error `rt` printed for a process that could not start. rustpod prints
/// that one line; runc 1.2+ first warns of each ambient capability it cannot raise (the test
/// bundle's, from runc 1.1's `spec`, are not inheritable), which rustpod logs to `--log` only.
#[track_caller]
fn start_error(rt: &Runtime, out: &Output) -> String {
    if !env::is_runc(rt.bin()) {
        let line = the_one_stderr_line(out);
        return logrus_text(&line).map(|(_, msg)| msg).unwrap_or(line);
    }
    assert!(!out.success(), "should have failed: {}", out.describe());
    let entries: Vec<(String, String)> = out
        .stderr_lines()
        .into_iter()
        .map(|l| logrus_text(l).unwrap_or_else(|| panic!("not a logrus entry: {}", out.describe())))
        .collect();
    let Some(((level, msg), warnings)) = entries.split_last() else { panic!("nothing on stderr: {}", out.describe()) };
    assert_eq!(level, "error", "{}", out.describe());
    assert!(warnings.iter().all(|(level, _)| level == "warning"), "{}", out.describe());
    msg.clone()
}

/// `bin` is the oracle and a runc older than 1.2 (Debian 12's 1.1.5), whose words and warnings
/// rustpod does not follow where 1.3 changed them.
fn runc_1_1(bin: &std::path::Path) -> bool {
    env::is_runc(bin) && env::version_of(bin) < (1, 2, 0)
}

/// The words `bin` gives a program it cannot run: rustpod and runc 1.2+ (built with Go 1.20+,
/// whose exec.LookPath says EISDIR for a directory) say `is a directory`, runc 1.1.5 (Go 1.19)
/// `permission denied`; dockerd maps both to 126.
fn cannot_run_words(bin: &std::path::Path, program: &str) -> String {
    match program {
        "/etc" if runc_1_1(bin) => r#"exec: "/etc": permission denied"#.into(),
        "/etc" => r#"exec: "/etc": is a directory"#.into(),
        "/etc/passwd" => r#"exec: "/etc/passwd": permission denied"#.into(),
        "/no/such/bin" => r#"exec: "/no/such/bin": stat /no/such/bin: no such file or directory"#.into(),
        name => format!(r#"exec: "{name}": executable file not found in $PATH"#),
    }
}

/// Each failing command, on both runtimes: stderr is one logrus entry at level error.
#[test]
fn errors_on_stderr_are_logrus_entries_as_runc_writes_them() {
    skip_if!(blocker());
    for rt in [Runtime::runc(), Runtime::under_test()] {
        let (running, bundle) = (rt.new_id("words"), Bundle::new(SLEEP));
        rt.start_container(&running, &bundle);
        let failing: [&[&str]; 4] =
            [&["delete", "no-such-container"], &["kill", "no-such-container", "KILL"], &["delete", &running], &["state", ""]];
        for args in failing {
            let line = the_one_stderr_line(&rt.cmd(args));
            let (level, msg) =
                logrus_text(&line).unwrap_or_else(|| panic!("{}: {args:?} printed no logrus entry: {line}", rt.bin().display()));
            assert_eq!(level, "error", "{line}");
            assert!(!msg.is_empty(), "{line}");
        }
        let json_line = the_one_stderr_line(&rt.cmd(&["--log-format", "json", "delete", "no-such-container"]));
        let entry: Value = serde_json::from_str(&json_line).expect("a JSON entry");
        assert_eq!(entry["level"], "error", "{json_line}");
        assert!(entry["msg"].as_str().is_some_and(|m| m.contains("does not exist")), "{json_line}");
    }
}

/// Runs `args` as a container's process on `rt`: the error line's message.
fn run_error(rt: &Runtime, args: &[&str]) -> String {
    let mut bundle = Bundle::new(args);
    bundle.set("/process/terminal", json!(false));
    let out = rt.run(&rt.new_id("words"), &bundle, &[], b"");
    start_error(rt, &out)
}

/// dockerd maps "no such file or directory" and "executable file not found" to exit 127 and
/// "permission denied" and "is a directory" to 126; kubelet and containerd map the same words to
/// ContainerCannotRun.
#[test]
fn a_program_that_cannot_run_is_worded_as_runc_words_it() {
    skip_if!(blocker());
    for program in ["/no/such/bin", "nosuchprogram", "/etc/passwd", "/etc"] {
        for rt in [Runtime::runc(), Runtime::under_test()] {
            let msg = run_error(&rt, &[program]);
            let words = cannot_run_words(rt.bin(), program);
            assert!(msg.contains(&words), "{}: {program:?}: {msg:?} lacks {words:?}", rt.bin().display());
        }
    }
}

#[test]
fn exec_of_a_program_that_cannot_run_is_worded_as_runc_words_it() {
    skip_if!(blocker());
    for rt in [Runtime::runc(), Runtime::under_test()] {
        let (id, bundle) = (rt.new_id("words"), Bundle::new(SLEEP));
        rt.start_container(&id, &bundle);
        for program in ["/no/such/bin", "/etc"] {
            let msg = start_error(&rt, &rt.exec(&id, &[program]));
            let words = cannot_run_words(rt.bin(), program);
            assert!(msg.contains(&words), "{}: {program:?}: {msg:?} lacks {words:?}", rt.bin().display());
        }
    }
}

/// `exec --ignore-paused` and `exec --cgroup`, which runc 1.1.5 takes. (An exec that really
/// runs in a paused container stays frozen, with runc too, so it is not tried.)
#[test]
fn exec_takes_ignore_paused_and_cgroup_as_runc() {
    skip_if!(blocker());
    for rt in [Runtime::runc(), Runtime::under_test()] {
        let (id, bundle) = (rt.new_id("words"), Bundle::new(SLEEP));
        rt.start_container(&id, &bundle);
        rt.cmd(&["pause", &id]).ok();
        let refused = the_one_stderr_line(&rt.cmd(&["exec", &id, "true"]));
        assert!(refused.contains("paused"), "{}: {refused}", rt.bin().display());
        rt.cmd(&["resume", &id]).ok();
        rt.cmd(&["exec", "--ignore-paused", &id, "true"]).ok();
        let root = rt.cmd(&["exec", "--cgroup", "/", &id, "cat", "/proc/self/cgroup"]).ok();
        assert!(!root.stdout.is_empty(), "{}", root.describe());
    }
}

/// A capability the host cannot give (this machine lacks CAP_SYS_RESOURCE): runc says
/// "unable to apply caps: operation not permitted"; so must we, not "failed syscall".
#[test]
fn a_capability_the_host_lacks_is_worded_as_runc_words_it() {
    skip_if!(blocker());
    let ours = rustpod_tests::checker::host_bounding_caps();
    let Some(lacking) =
        ["CAP_SYS_RESOURCE", "CAP_SYS_MODULE", "CAP_SYS_BOOT", "CAP_MAC_ADMIN"].into_iter().find(|cap| !ours.iter().any(|c| c == cap))
    else {
        rustpod_tests::skip!("this host's bounding set has every capability tried");
    };
    for rt in [Runtime::runc(), Runtime::under_test()] {
        let mut bundle = Bundle::new(&["true"]);
        bundle.set("/process/terminal", json!(false));
        let caps = json!(["CAP_CHOWN", lacking]);
        bundle.set("/process/capabilities", json!({"bounding": caps, "effective": caps, "permitted": caps}));
        let out = rt.run(&rt.new_id("words"), &bundle, &[], b"");
        let msg = start_error(&rt, &out);
        assert!(msg.contains("unable to apply caps") && msg.contains("operation not permitted"), "{}: {msg}", rt.bin().display());
    }
}

/// proc and sysfs on a symlink in the rootfs (which could point them at the host).
#[test]
fn kernel_filesystems_on_a_symlink_are_refused_in_runcs_words() {
    skip_if!(blocker());
    for target in ["proc", "sys"] {
        for rt in [Runtime::runc(), Runtime::under_test()] {
            let mut bundle = Bundle::new(&["true"]);
            bundle.set("/process/terminal", json!(false));
            let link = std::path::Path::new(&bundle.rootfs()).join(target);
            std::fs::remove_dir(&link).expect("remove the rootfs dir");
            std::os::unix::fs::symlink("/tmp", &link).expect("plant the symlink");
            let out = rt.run(&rt.new_id("words"), &bundle, &[], b"");
            let msg = start_error(&rt, &out);
            assert!(msg.contains("must be mounted on ordinary directory"), "{}: {msg}", rt.bin().display());
        }
    }
}

/// An ambient capability that is not inheritable cannot be raised (prctl PR_CAP_AMBIENT_RAISE
/// says EPERM): runc 1.2+ logs a warning for each and runs the process; so does rustpod (its
/// engine's words carry the capability and the errno as fields), at logrus's level `warning`.
/// runc 1.1.5 raises none and says nothing.
#[test]
fn an_ambient_capability_that_cannot_be_raised_is_a_warning_in_the_log() {
    skip_if!(blocker());
    for rt in [Runtime::runc(), Runtime::under_test()] {
        let dir = ScratchDir::new("log");
        let log = dir.join_str("log.json");
        let rt = rt.with_globals(&["--log", &log, "--log-format", "json"]);
        let mut bundle = Bundle::new(&["grep", "CapAmb", "/proc/self/status"]);
        bundle.set("/process/terminal", json!(false));
        let caps = json!(["CAP_KILL"]);
        bundle.set("/process/capabilities", json!({"bounding": caps, "effective": caps, "permitted": caps, "ambient": caps}));
        let out = rt.run(&rt.new_id("words"), &bundle, &[], b"").ok();
        assert_eq!(out.stdout.trim(), "CapAmb:\t0000000000000000", "{}: raised none", rt.bin().display());
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let about_ambient: Vec<Value> = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|entry| entry.to_string().contains("ambient"))
            .collect();
        if runc_1_1(rt.bin()) {
            assert!(about_ambient.is_empty(), "runc 1.1 is silent: {text}");
            continue;
        }
        let warned = |entry: &Value| {
            entry["level"] == "warning"
                && entry["msg"].as_str().is_some_and(|m| m.starts_with("can't raise ambient capability"))
                && entry.to_string().contains("CAP_KILL")
        };
        assert!(!about_ambient.is_empty() && about_ambient.iter().all(warned), "{}: {text}", rt.bin().display());
    }
}
