// SIGKILL of `rustpod create` at each stage: right after the id is claimed, while a
// createRuntime hook runs (init forked, cgroup made, state not "created"), while a prestart hook
// runs, and after the engine created the container but before our metadata is written. After
// each, `delete --force` succeeds, nothing is left (process, cgroup, mount, state), and a new
// create with the same id succeeds.
//
// Pause points are rustpod's `RUSTPOD_DEBUG_PAUSE=<point>` (the process SIGSTOPs itself there);
// hooks are a script that writes its pid to a file, then sleeps. Everything is killed by pid.

use rustpod_tests::assertions::pid_alive;
use rustpod_tests::leftovers::kill_pids;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{cgroup, env, json, needs, process, skip, skip_if, wait, Fixture, SLEEP};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

#[derive(Clone, Copy, Debug)]
enum Stage {
    /// A hook of this kind (`createRuntime`, `prestart`) is running.
    Hook(&'static str),
    /// rustpod stopped itself at this `RUSTPOD_DEBUG_PAUSE` point.
    Pause(&'static str),
}

/// SIGKILLs, on Drop, the process whose pid a hook wrote to the file.
struct HookGuard {
    pid_file: String,
}

impl HookGuard {
    fn pid(&self) -> Option<i32> {
        fs::read_to_string(&self.pid_file).ok()?.trim().parse().ok()
    }
}

impl Drop for HookGuard {
    fn drop(&mut self) {
        kill_pids(self.pid());
    }
}

/// `#!/bin/sh`: writes its pid to `pid_file`, then sleeps as that same process.
fn sleeping_hook(dir: &ScratchDir, pid_file: &str) -> String {
    let script = dir.join_str("hook.sh");
    let text = format!("#!/bin/sh\necho $$ > {pid_file}.tmp\nmv {pid_file}.tmp {pid_file}\nexec sleep 1000\n");
    fs::write(&script, text).expect("write hook script");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod hook");
    script
}

/// The process is stopped (state T), as after raise(SIGSTOP).
fn stopped(pid: i32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T'))
}

fn sigkill_create_at(stage: Stage) {
    let mut fx = Fixture::new(SLEEP);
    let scratch = ScratchDir::new("fault");
    let hook = HookGuard { pid_file: scratch.join_str("hook.pid") };
    let mut env_vars = vec![];
    match stage {
        Stage::Hook(kind) => {
            let script = sleeping_hook(&scratch, &hook.pid_file);
            fx.bundle.set(&format!("/hooks/{kind}"), json!([{"path": script}]));
        }
        Stage::Pause(point) => env_vars.push(format!("RUSTPOD_DEBUG_PAUSE={point}")),
    }
    fx.bundle.prepare(&fx.id);
    let bin = fx.rt.bin().to_str().expect("UTF-8 binary path").to_string();
    let mut args: Vec<&str> = env_vars.iter().map(String::as_str).collect();
    args.extend([bin.as_str(), "--root", fx.rt.root(), "create", "--bundle", fx.bundle.path(), &fx.id]);
    let create = process::spawn(Path::new("/usr/bin/env"), &args, b"");
    let pid = create.pid();
    let create = create.running_until(&format!("create to reach {stage:?}"), || match stage {
        Stage::Hook(_) => hook.pid().is_some_and(pid_alive),
        Stage::Pause(_) => stopped(pid),
    });

    if let Stage::Hook(_) = stage {
        // The premise: the init is forked and its cgroup made, but the container is not created.
        assert!(!cgroup::dirs(&fx.id).is_empty(), "{stage:?}: no cgroup yet");
        assert_ne!(fx.rt.try_status(&fx.id).as_deref(), Some("created"), "{stage:?}");
    }
    kill_pids([pid]);
    let killed = create.wait();
    assert_eq!(killed.code(), 137, "create was SIGKILLed: {}", killed.describe());
    kill_pids(hook.pid());

    let delete = fx.rt.cmd(&["delete", "--force", &fx.id]);
    assert!(delete.success(), "{stage:?}: delete --force after the crash: {}", delete.describe());
    fx.assert_nothing_left();

    fx.bundle.remove("/hooks");
    fx.rt.create(&fx.id, &fx.bundle);
    assert_eq!(fx.status(), "created", "{stage:?}: create again with the same id");
    fx.rt.cmd(&["delete", "--force", &fx.id]).ok();
    fx.assert_nothing_left();
}

/// Pause points exist only in rustpod.
fn pause_points() -> Option<String> {
    env::testing_runc_itself().then(|| "RUSTPOD_DEBUG_PAUSE is rustpod's; runc has none".into())
}

#[test]
fn sigkill_right_after_the_id_is_claimed() {
    skip_if!(needs::containers());
    skip_if!(pause_points());
    sigkill_create_at(Stage::Pause("claimed"));
}

#[test]
fn sigkill_during_create_runtime_hook() {
    skip_if!(needs::containers());
    sigkill_create_at(Stage::Hook("createRuntime"));
}

#[test]
fn sigkill_during_prestart_hook() {
    skip_if!(needs::containers());
    sigkill_create_at(Stage::Hook("prestart"));
}

#[test]
fn sigkill_after_engine_created_before_metadata() {
    skip_if!(needs::containers());
    skip_if!(pause_points());
    sigkill_create_at(Stage::Pause("engine-created"));
}

/// A hook that is killed (not the runtime) fails the create cleanly too.
#[test]
fn hook_killed_fails_create_cleanly() {
    skip_if!(needs::containers());
    let mut fx = Fixture::new(SLEEP);
    let scratch = ScratchDir::new("fault");
    let hook = HookGuard { pid_file: scratch.join_str("hook.pid") };
    let script = sleeping_hook(&scratch, &hook.pid_file);
    fx.bundle.set("/hooks/createRuntime", json!([{"path": script}]));
    fx.bundle.prepare(&fx.id);
    let create = fx
        .rt
        .spawn_stdin(&["create", "--bundle", fx.bundle.path(), &fx.id], b"")
        .running_until("the createRuntime hook to run", || hook.pid().is_some_and(pid_alive));
    kill_pids(hook.pid());
    let out = create.wait();
    if out.success() {
        skip!("the runtime ignores a hook killed by SIGKILL: {}", out.describe());
    }
    eprintln!("create with a killed hook: {}", out.stderr.trim_end());
    fx.assert_nothing_left();
    wait::wait_for("the hook to be gone", || hook.pid().filter(|p| pid_alive(*p)).is_none().then_some(()));
}
