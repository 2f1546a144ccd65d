//! A private dockerd (apt's docker.io 20.10 on the host, sid's 28.5 in the sid guest) on a
//! private containerd, with rustpod added as a runtime, shared by the tests of a file that run
//! at the same time; when the last of them lets go: remove containers, stop both daemons by
//! pid, unmount, remove their dirs.

use crate::clients::{cgroup_tree, remove_cgroup_tree, unmount_under, OciRuntime};
use crate::containerd::{self, script};
use crate::process::{self, Output};
use crate::scratch::{unique_name, ScratchDir};
use crate::{env, leftovers, needs, wait};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The dockerd that the running tests share: a start costs about 20 s under TCG (two daemons
/// and an image load), and a file's tests each look only at their own containers.
static SHARED: Mutex<Weak<Dockerd>> = Mutex::new(Weak::new());

const DOCKERD: &str = "/usr/sbin/dockerd";
/// The client of the same package: /usr/local/bin may hold a newer one that speaks another API.
const DOCKER: &str = "/usr/bin/docker";
/// The image every test loads: `hack/make-oci-image.sh` writes docker's archive format too.
pub const IMAGE: &str = "busybox:latest";
/// The name rustpod is registered under with `--add-runtime`.
const RUSTPOD: &str = "rustpod";

/// Why this machine cannot run the docker tests, if it cannot.
pub fn blocker() -> Option<String> {
    containerd::blocker()
        .or_else(|| needs::program(Path::new(DOCKERD)))
        .or_else(|| needs::program(Path::new(DOCKER)))
        .map(|reason| format!("{reason} (hack/install-deps.sh installs docker.io)"))
}

pub struct Dockerd {
    daemon: Option<Child>,
    cgroup_parent: String,
    dir: ScratchDir,
}

impl Dockerd {
    /// The dockerd another running test holds, or a new one. It is stopped and cleaned up when
    /// the last holder drops it, also when that holder's test panics.
    pub fn shared() -> Arc<Self> {
        // A test that panicked inside start() poisoned the lock; its Weak is still valid.
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dockerd) = shared.upgrade() {
            return dockerd;
        }
        let dockerd = Arc::new(Self::start());
        *shared = Arc::downgrade(&dockerd);
        dockerd
    }

    /// Starts containerd and dockerd in a fresh scratch dir and loads the busybox image.
    fn start() -> Self {
        // Built first, so that Drop cleans up whatever step below panics.
        let mut dockerd = Dockerd { daemon: None, cgroup_parent: format!("/{}", unique_name("rustpod-dkr")), dir: ScratchDir::new("dkr") };
        let ctd = dockerd.dir.join_str("ctd");
        process::run(&script("containerd.sh"), &["start", ctd.as_str()], b"").ok();
        dockerd.launch();
        dockerd.load_image();
        dockerd
    }

    /// overlay2 as docker's users have it; vfs where the scratch fs cannot hold overlays.
    fn launch(&mut self) {
        if let Err(overlay) = self.try_launch("overlay2") {
            eprintln!("dockerd with overlay2 failed, trying vfs: {overlay}");
            self.try_launch("vfs").unwrap_or_else(|e| panic!("{e}"));
        }
    }

    fn try_launch(&mut self, driver: &str) -> Result<(), String> {
        let args = self.daemon_args(driver);
        let log = fs::File::create(self.dir.join("dockerd.log")).expect("create dockerd.log");
        let child = Command::new(DOCKERD)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup dockerd.log"))
            .stderr(log)
            // Its own process group: a ^C of the test run must not reach it before Drop does.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run {DOCKERD}: {e}"))?;
        self.daemon = Some(child);
        self.wait_ready().inspect_err(|_| self.stop_daemon())
    }

    /// Everything dockerd writes goes under the scratch dir, except /run/docker/plugins,
    /// which dockerd 20.10 always creates.
    fn daemon_args(&self, driver: &str) -> Vec<String> {
        // The trust key would go to /etc/docker/key.json; only the config file can move it.
        let key = serde_json::json!({ "deprecated-key-path": self.dir.join_str("key.json") });
        let config = self.dir.join_str("daemon.json");
        fs::write(&config, key.to_string()).expect("write daemon.json");
        let flag = |name: &str, value: String| format!("--{name}={value}");
        vec![
            flag("config-file", config),
            flag("data-root", self.dir.join_str("data")),
            flag("exec-root", self.dir.join_str("exec")),
            flag("pidfile", self.dir.join_str("dockerd.pid")),
            flag("host", format!("unix://{}", self.socket())),
            flag("containerd", self.dir.join_str("ctd/containerd.sock")),
            flag("storage-driver", driver.to_string()),
            flag("cgroup-parent", self.cgroup_parent.clone()),
            // dockerd 28 picks systemd's driver where systemd is PID 1 (the sid guest), which
            // wants a slice as the parent; the cgroupfs parent keeps each test's cgroups its own.
            "--exec-opt=native.cgroupdriver=cgroupfs".into(),
            flag("add-runtime", format!("{RUSTPOD}={}", env::rustpod_bin().display())),
            "--bridge=none".into(),
            "--iptables=false".into(),
            "--ip6tables=false".into(),
        ]
    }

    fn socket(&self) -> String {
        self.dir.join_str("docker.sock")
    }

    /// Polls (bounded) until the API answers; errs with the log's tail if dockerd exits first.
    fn wait_ready(&mut self) -> Result<(), String> {
        let socket = PathBuf::from(self.socket());
        wait::wait_for("dockerd to answer on its socket", || {
            if let Ok(Some(status)) = self.daemon.as_mut()?.try_wait() {
                return Some(Err(format!("dockerd exited ({status}): {}", self.log_tail())));
            }
            (socket.exists() && self.docker(&["version"]).success()).then_some(Ok(()))
        })
    }

    fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.dir.join("dockerd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    fn load_image(&self) {
        let tar = self.dir.join_str("busybox.tar");
        process::run(&script("make-oci-image.sh"), &[IMAGE, tar.as_str()], b"").ok();
        self.docker(&["load", "-i", &tar]).ok();
    }

    /// `docker --config <private> -H unix://<sock> args…` (the client of docker.io).
    pub fn docker(&self, args: &[&str]) -> Output {
        let (config, host) = (self.dir.join_str("client"), format!("unix://{}", self.socket()));
        let global = ["--config", config.as_str(), "-H", host.as_str()];
        process::run(Path::new(DOCKER), &[&global[..], args].concat(), b"")
    }

    /// `docker <verb> [--runtime rustpod] flags… busybox argv…`: runc is docker's default.
    pub fn on_image(&self, verb: &str, rt: OciRuntime, flags: &[&str], argv: &[&str]) -> Output {
        let runtime: &[&str] = match rt {
            OciRuntime::Runc => &[],
            OciRuntime::Rustpod => &["--runtime", RUSTPOD],
        };
        self.docker(&[&[verb][..], runtime, flags, &[IMAGE], argv].concat())
    }

    /// `docker run --rm --network none …` of `argv` on `rt`.
    pub fn run_rm(&self, rt: OciRuntime, argv: &[&str]) -> Output {
        self.on_image("run", rt, &["--rm", "--network", "none"], argv)
    }

    /// Where the runtime keeps its state for container `id`: dockerd 20.10 gives every runtime
    /// `--root <exec-root>/runtime-runc/moby` through containerd's runc shim.
    pub fn runtime_state(&self, id: &str) -> PathBuf {
        self.dir.join("exec/runtime-runc/moby").join(id)
    }

    /// A file in the scratch dir (for `--cidfile`), as a string.
    pub fn scratch_file(&self, name: &str) -> String {
        self.dir.join_str(name)
    }

    /// The cgroup dirs left under this dockerd's `--cgroup-parent`, in every hierarchy.
    pub fn cgroups_left(&self) -> Vec<PathBuf> {
        cgroup_tree(&self.cgroup_parent)
    }

    fn remove_all_containers(&self) {
        let listed = self.docker(&["ps", "-aq"]);
        let ids: Vec<&str> = listed.stdout.split_whitespace().collect();
        if !ids.is_empty() {
            let _ = self.docker(&[&["rm", "-f"][..], &ids].concat());
        }
    }

    /// SIGTERM to dockerd's pid, SIGKILL if it outlives the deadline, then reaps it.
    fn stop_daemon(&mut self) {
        let Some(mut child) = self.daemon.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if !wait::eventually(|| matches!(child.try_wait(), Ok(Some(_)))) {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        if self.daemon.is_some() {
            self.remove_all_containers();
        }
        self.stop_daemon();
        let ctd = self.dir.join_str("ctd");
        let _ = process::spawn(&script("containerd.sh"), &["stop", ctd.as_str()], b"").try_wait();
        leftovers::kill_processes_under(self.dir.str());
        unmount_under(self.dir.str());
        remove_cgroup_tree(&self.cgroup_parent);
    }
}
