// The runtime CLI under test (or runc) with a private --root. On Drop (also when a test panics)
// it force-deletes every container id it handed out, then checks no `<root>/<id>` is left.

use crate::bundle::Bundle;
use crate::process::{self, Output, Spawned};
use crate::scratch::{unique_name, ScratchDir};
use crate::{cgroup, env, leftovers, wait};
use serde_json::Value;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

pub struct Runtime {
    bin: PathBuf,
    root: ScratchDir,
    globals: Vec<String>,
    ids: RefCell<Vec<String>>,
}

impl Runtime {
    /// `$RUSTPOD_BIN` (see `env::rustpod_bin`).
    pub fn under_test() -> Self {
        Self::with_bin(env::rustpod_bin())
    }

    /// The oracle, `$RUNC_BIN`.
    pub fn runc() -> Self {
        Self::with_bin(env::runc_bin())
    }

    /// runc (when installed, and not itself what is under test), then the runtime under test:
    /// for tests that run one scenario on both and check each.
    pub fn runc_and_under_test() -> Vec<Self> {
        let mut all = vec![];
        if crate::needs::program(&env::runc_bin()).is_none() && !env::testing_runc_itself() {
            all.push(Self::runc());
        } else {
            eprintln!("runc is not installed (or is under test): no comparison with it");
        }
        all.push(Self::under_test());
        all
    }

    pub fn with_bin(bin: PathBuf) -> Self {
        assert!(bin.exists(), "runtime binary {} not found: build it (cargo build -p rustpod) or set RUSTPOD_BIN", bin.display());
        Runtime { bin, root: ScratchDir::new("root"), globals: vec![], ids: RefCell::new(vec![]) }
    }

    /// Adds global flags (`--debug`, `--log F`…) to every command, after `--root ROOT`.
    pub fn with_globals(mut self, flags: &[&str]) -> Self {
        self.globals.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The private `--root` state directory.
    pub fn root(&self) -> &str {
        self.root.str()
    }

    /// A fresh container id, removed by this runtime's guard.
    pub fn new_id(&self, prefix: &str) -> String {
        let id = unique_name(prefix);
        self.track(&id);
        id
    }

    /// Makes the guard remove `id` too (an id shared with another runtime).
    pub fn track(&self, id: &str) {
        self.ids.borrow_mut().push(id.to_string());
    }

    /// `BIN --root ROOT [globals] args…`.
    pub fn cmd(&self, args: &[&str]) -> Output {
        self.cmd_stdin(args, b"")
    }

    pub fn cmd_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        self.spawn_stdin(args, stdin).wait()
    }

    /// `cmd`, a failed execve of the binary returned (with the command line), not a panic.
    pub fn try_cmd(&self, args: &[&str]) -> Result<Output, (String, std::io::Error)> {
        process::try_spawn(&self.bin, &self.argv(args), b"").map(Spawned::wait)
    }

    /// Starts `BIN --root ROOT [globals] args…` in the background.
    pub fn spawn_stdin(&self, args: &[&str], stdin: &[u8]) -> Spawned {
        process::spawn(&self.bin, &self.argv(args), stdin)
    }

    /// `--root ROOT [globals] args…`.
    fn argv<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut full = vec!["--root", self.root()];
        full.extend(self.globals.iter().map(String::as_str));
        full.extend_from_slice(args);
        full
    }

    /// `create [flags] --bundle B id`, after writing the bundle's config for `id`.
    pub fn try_create(&self, id: &str, bundle: &Bundle, flags: &[&str]) -> Output {
        bundle.prepare(id);
        self.cmd(&[&["create"][..], flags, &["--bundle", bundle.path(), id]].concat())
    }

    pub fn create(&self, id: &str, bundle: &Bundle) {
        self.try_create(id, bundle, &[]).ok();
    }

    /// `run [flags] --bundle B id` with `stdin`, after writing the bundle's config for `id`.
    pub fn run(&self, id: &str, bundle: &Bundle, flags: &[&str], stdin: &[u8]) -> Output {
        self.spawn_run(id, bundle, flags, stdin).wait()
    }

    pub fn spawn_run(&self, id: &str, bundle: &Bundle, flags: &[&str], stdin: &[u8]) -> Spawned {
        bundle.prepare(id);
        self.spawn_stdin(&[&["run"][..], flags, &["--bundle", bundle.path(), id]].concat(), stdin)
    }

    /// `run --bundle B id`, its caller leaving each of `signals` ignored or at its default.
    pub fn run_with_signals(&self, id: &str, bundle: &Bundle, signals: &[(i32, bool)]) -> Output {
        bundle.prepare(id);
        let argv = self.argv(&["run", "--bundle", bundle.path(), id]);
        process::spawn_with_signals(&self.bin, &argv, b"", signals).wait()
    }

    pub fn start(&self, id: &str) {
        self.cmd(&["start", id]).ok();
    }

    /// create + start, then waits until the container is running.
    pub fn start_container(&self, id: &str, bundle: &Bundle) {
        self.create(id, bundle);
        self.start(id);
        self.wait_status(id, "running");
    }

    pub fn state(&self, id: &str) -> Value {
        self.cmd(&["state", id]).ok().stdout_json()
    }

    pub fn status(&self, id: &str) -> String {
        self.state(id)["status"].as_str().expect("state has a status string").to_string()
    }

    /// `ps --format json`: the pids of the container's processes.
    pub fn pids(&self, id: &str) -> Vec<i32> {
        let json = self.cmd(&["ps", "--format", "json", id]).ok().stdout_json();
        serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("ps --format json is not an array of pids ({e}): {json}"))
    }

    /// The status, or None while `state` fails (not created yet, or gone).
    pub fn try_status(&self, id: &str) -> Option<String> {
        let out = self.cmd(&["state", id]);
        let state: Value = serde_json::from_str(&out.stdout).ok()?;
        state["status"].as_str().map(str::to_string)
    }

    pub fn pid(&self, id: &str) -> i32 {
        self.state(id)["pid"].as_i64().expect("state has a pid number") as i32
    }

    /// Polls (bounded) until `state` reports `status`.
    pub fn wait_status(&self, id: &str, status: &str) {
        let reached = || (self.try_status(id).as_deref() == Some(status)).then_some(());
        wait::wait_for(&format!("container {id} to be {status}"), reached);
    }

    pub fn kill(&self, id: &str, signal: &str) {
        self.cmd(&["kill", id, signal]).ok();
    }

    pub fn delete(&self, id: &str) {
        self.cmd(&["delete", id]).ok();
    }

    /// `exec id argv…`.
    pub fn exec(&self, id: &str, argv: &[&str]) -> Output {
        self.cmd(&[&["exec", id][..], argv].concat())
    }

    /// Checks (bounded wait) that container `id` with bundle dir `bundle` left nothing behind.
    #[track_caller]
    pub fn assert_nothing_left(&self, id: &str, bundle: &str) {
        leftovers::assert_nothing_left(self.root(), id, bundle);
    }

    /// delete --force, then kill by pid whatever still runs in its cgroup and remove the cgroup.
    fn force_remove(&self, id: &str) -> Vec<String> {
        let mut problems = vec![];
        if let Err(e) = self.spawn_stdin(&["delete", "--force", id], b"").try_wait() {
            problems.push(e);
        }
        let state_dir = self.root.join(id);
        if state_dir.exists() {
            problems.push(format!("state dir {}", state_dir.display()));
        }
        problems.extend(cgroup::dirs(id).iter().map(|d| format!("cgroup {}", d.display())));
        cgroup::kill_processes(id);
        let stuck = cgroup::remove_dirs(id);
        problems.extend(stuck.iter().map(|d| format!("cannot remove cgroup {}", d.display())));
        problems
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let ids = std::mem::take(&mut *self.ids.borrow_mut());
        let problems: Vec<String> = ids.iter().flat_map(|id| self.force_remove(id)).collect();
        for id in &ids {
            crate::cgroup::remove_parent(id);
        }
        if problems.is_empty() {
            return;
        }
        let report = format!("{} left behind after delete --force:\n  {}", self.bin.display(), problems.join("\n  "));
        if std::thread::panicking() {
            eprintln!("{report}");
        } else {
            panic!("{report}");
        }
    }
}
