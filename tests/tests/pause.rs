// The pod pause binary (runtime/pause) as a container init: it reaps orphaned
// zombies in its PID namespace and exits 0 on SIGTERM and SIGINT.

use std::path::PathBuf;

use rustpod_tests::{signals, skip, skip_if, wait, Fixture};

/// The static pause binary hack/build-pause.sh made (hack/test.sh exports it).
fn pause_bin() -> Option<PathBuf> {
    let path = std::env::var_os("RUSTPOD_PAUSE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/rustpod-target/static/rustpod-pause"));
    path.exists().then_some(path)
}

fn pause_fixture() -> Option<Fixture> {
    let bin = pause_bin()?;
    let fx = Fixture::new(&["/pause"]);
    let dest = format!("{}/pause", fx.bundle.rootfs());
    // A hard link, like the suite's busybox: a copy is open for writing for a moment, and a
    // test thread forking meanwhile keeps that fd until it execs, so executing the copy
    // can fail with ETXTBSY. A link is never open for writing.
    if std::fs::hard_link(&bin, &dest).is_err() {
        std::fs::copy(&bin, &dest).expect("copy pause into rootfs");
    }
    Some(fx)
}

#[test]
fn pause_reaps_orphans_in_its_pid_namespace() {
    skip_if!(rustpod_tests::needs::containers());
    let Some(fx) = pause_fixture() else {
        skip!("no pause binary: run hack/build-pause.sh or set RUSTPOD_PAUSE_BIN");
    };
    fx.rt.start_container(&fx.id, &fx.bundle);
    // The subshell exits at once, so its `sleep` is reparented to PID 1 (pause).
    fx.exec(&["sh", "-c", "(sleep 0.2 &); exit 0"]).ok();
    let reaped = wait::eventually(|| {
        let ps = fx.exec(&["ps", "-o", "pid,stat,comm"]).ok();
        !ps.stdout.contains("sleep") && !ps.stdout.lines().any(|l| l.contains(" Z"))
    });
    assert!(reaped, "the orphaned sleep must exit and be reaped by pause");
}

#[test]
fn pause_exits_zero_on_term_and_int() {
    skip_if!(rustpod_tests::needs::containers());
    for signal in ["TERM", "INT"] {
        let Some(fx) = pause_fixture() else {
            skip!("no pause binary: run hack/build-pause.sh or set RUSTPOD_PAUSE_BIN");
        };
        let run = fx.rt.spawn_run(&fx.id, &fx.bundle, &[], b"");
        let run = run.running_until("pause to be running", || {
            fx.rt.try_status(&fx.id).as_deref() == Some("running") && signals::catches(fx.rt.pid(&fx.id), &[libc::SIGTERM, libc::SIGINT])
        });
        let killed = fx.rt.cmd(&["kill", &fx.id, signal]);
        let out = run.wait();
        assert!(killed.success(), "kill {signal} failed: {}\nthe foreground run had already ended: {}", killed.describe(), out.describe());
        assert_eq!(out.code(), 0, "pause must exit 0 on SIG{signal}: {}", out.describe());
    }
}
