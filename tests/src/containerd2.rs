// A private containerd 2.x for the shim: the binary `$RUSTPOD_CONTAINERD` names (2.x is not in
// Debian 12; hack/sid-packages.sh fetches sid's), its ctr beside it (or `$RUSTPOD_CTR`), a
// `version = 3` config rooted in a scratch dir, rustpod's shim and the 2.x runc shim beside
// containerd first on its PATH, its own namespace with the busybox image. On Drop it removes
// every container, stops containerd by pid, kills leftovers by pid, unmounts and removes what it
// made.

use crate::containerd::{remove_all_containers, remove_namespace_cgroups, remove_runc_shim_root, script};
use crate::process::{self, Output, Spawned};
use crate::scratch::{unique_name, ScratchDir};
use crate::shim::{shim_bin, IMAGE};
use crate::{leftovers, needs, wait};

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const SHIM_NAME: &str = "containerd-shim-rustpod-v1";
const RUNC_SHIM_NAME: &str = "containerd-shim-runc-v2";

/// `$RUSTPOD_CONTAINERD`, the containerd 2.x binary to test with.
fn containerd_bin() -> Option<PathBuf> {
    std::env::var_os("RUSTPOD_CONTAINERD").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// `$RUSTPOD_CTR`, else the `ctr` next to `$RUSTPOD_CONTAINERD`.
fn ctr_bin(containerd: &Path) -> PathBuf {
    std::env::var_os("RUSTPOD_CTR").map(PathBuf::from).unwrap_or_else(|| containerd.with_file_name("ctr"))
}

/// The 2.x runc shim beside `$RUSTPOD_CONTAINERD`. containerd looks for shims on its PATH
/// first: without this one there, it would run the host's 1.6 runc shim, which cannot answer
/// `-info`.
fn runc_shim(containerd: &Path) -> PathBuf {
    containerd.with_file_name(RUNC_SHIM_NAME)
}

/// `containerd --version`'s (major, minor).
fn version_of(containerd: &Path) -> (u32, u32) {
    let (major, minor, _) = crate::env::version_of(containerd);
    (major, minor)
}

/// Why the containerd 2.x tests cannot run here, if they cannot.
pub fn blocker() -> Option<String> {
    let Some(containerd) = containerd_bin() else {
        return Some("RUSTPOD_CONTAINERD is not set (the path of a containerd 2.x binary; 2.x is not in Debian 12)".into());
    };
    needs::containers()
        .or_else(|| needs::program(&containerd))
        .or_else(|| needs::program(&ctr_bin(&containerd)))
        .or_else(|| needs::program(&runc_shim(&containerd)))
        .or_else(|| needs::program(&shim_bin()))
        .or_else(|| needs::program(&script("make-oci-image.sh")))
        .or_else(|| match version_of(&containerd) {
            (major, minor) if major < 2 => Some(format!("{} is containerd {major}.{minor}, not 2.x", containerd.display())),
            _ => None,
        })
}

pub struct Containerd2 {
    dir: ScratchDir,
    pub namespace: String,
    socket: String,
    ctr: PathBuf,
    containerd: PathBuf,
    daemon: Option<Child>,
}

impl Containerd2 {
    /// Starts `$RUSTPOD_CONTAINERD` and imports busybox; panics if it does not answer.
    pub fn start() -> Self {
        let containerd = containerd_bin().expect("RUSTPOD_CONTAINERD is set (check blocker() first)");
        let dir = ScratchDir::new("c2");
        let socket = dir.join_str("containerd.sock");
        let mut ctd = Containerd2 { ctr: ctr_bin(&containerd), namespace: unique_name("ns"), socket, containerd, daemon: None, dir };
        std::fs::write(ctd.dir.join("config.toml"), ctd.config()).expect("write config.toml");
        ctd.link_shims();
        ctd.daemon = Some(ctd.launch());
        ctd.wait_answering();
        let tar = ctd.dir.join_str("busybox.tar");
        process::run(&script("make-oci-image.sh"), &[IMAGE, tar.as_str()], b"").ok();
        ctd.ctr(&["image", "import", &tar]).ok();
        ctd
    }

    /// containerd 2.0-2.2's config format (2.3 reads it too), every path in the scratch dir.
    fn config(&self) -> String {
        let dir = self.dir.str();
        format!(
            "version = 3\nroot = \"{dir}/root\"\nstate = \"{dir}/state\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.cri.v1.runtime\", \"io.containerd.cri.v1.images\"]\n\n\
             [grpc]\n  address = \"{sock}\"\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n\n\
             [plugins.'io.containerd.internal.v1.opt']\n  path = \"{dir}/opt\"\n",
            sock = self.socket
        )
    }

    /// `bin/`: our shim and the 2.x runc shim, for containerd's PATH.
    fn link_shims(&self) {
        let bin = self.dir.join("bin");
        std::fs::create_dir_all(&bin).expect("create shim dir");
        for (target, name) in [(shim_bin(), SHIM_NAME), (runc_shim(&self.containerd), RUNC_SHIM_NAME)] {
            std::os::unix::fs::symlink(&target, bin.join(name))
                .unwrap_or_else(|e| panic!("link {} into {}: {e}", target.display(), bin.display()));
        }
    }

    /// containerd in a session of its own (nothing aimed at the test reaches it), `bin/`
    /// first on its PATH, its output appended to `containerd.log`.
    fn launch(&self) -> Child {
        let bin = self.dir.join("bin");
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("containerd.log")).expect("open containerd.log");
        let mut cmd = Command::new(&self.containerd);
        cmd.args(["--config", &self.dir.join_str("config.toml")])
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log);
        // SAFETY: setsid is async-signal-safe and touches nothing of the parent.
        unsafe {
            cmd.pre_exec(|| nix::unistd::setsid().map(drop).map_err(std::io::Error::from));
        }
        cmd.spawn().unwrap_or_else(|e| panic!("start {}: {e}", self.containerd.display()))
    }

    fn wait_answering(&self) {
        wait::wait_for("containerd 2.x to answer", || self.ctr(&["version"]).success().then_some(()));
    }

    /// SIGKILLs containerd, as a crash would; its shims and containers go on.
    pub fn kill_containerd(&mut self) {
        let Some(mut child) = self.daemon.take() else { return };
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Starts containerd again on the same state (after `kill_containerd`); waits until it answers.
    pub fn restart_containerd(&mut self) {
        assert!(self.daemon.is_none(), "containerd is still running");
        self.daemon = Some(self.launch());
        self.wait_answering();
    }

    /// `ctr -n NS --address SOCK args…` with containerd 2.x's own ctr.
    pub fn ctr(&self, args: &[&str]) -> Output {
        process::run(&self.ctr, &crate::containerd::ctr_argv(&self.namespace, &self.socket, args), b"")
    }

    /// `ctr …` running in the background (`ctr events`).
    pub fn spawn_ctr(&self, args: &[&str]) -> Spawned {
        process::spawn(&self.ctr, &crate::containerd::ctr_argv(&self.namespace, &self.socket, args), b"")
    }

    /// `ctr run -d --runtime rustpod IMAGE id sleep 1000`, then waits until it runs.
    pub fn run_sleeping(&self, id: &str) {
        self.run_sleeping_with(id, &["--runtime", crate::shim::RUNTIME]);
    }

    /// `ctr run -d FLAGS IMAGE id sleep 1000` (FLAGS pick the shim and runtime), then waits
    /// until it runs.
    pub fn run_sleeping_with(&self, id: &str, flags: &[&str]) {
        let args = [&["run", "-d"][..], flags, &[IMAGE, id, "sleep", "1000"]].concat();
        self.ctr(&args).ok();
        self.wait_task(id, "RUNNING");
    }

    /// `ctr plugins inspect-runtime ARGS`: what containerd learnt from the shim's `-info`.
    pub fn inspect_runtime(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ctr(&[&["plugins", "inspect-runtime"][..], args].concat()).ok();
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("inspect-runtime output is not JSON ({e}): {}", out.describe()))
    }

    /// The (major, minor) of the containerd under test.
    pub fn version(&self) -> (u32, u32) {
        version_of(&self.containerd)
    }

    /// The STATUS column of `ctr task ls` for task `id`, if listed.
    pub fn task_status(&self, id: &str) -> Option<String> {
        crate::containerd::task_column(&self.ctr(&["task", "ls"]), id, 2)
    }

    /// The PID column of `ctr task ls` for task `id`; panics if it is not listed.
    #[track_caller]
    pub fn task_pid(&self, id: &str) -> i32 {
        let pid = crate::containerd::task_column(&self.ctr(&["task", "ls"]), id, 1);
        pid.and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("task {id} is not listed"))
    }

    /// Polls (bounded) until task `id` has `status`.
    pub fn wait_task(&self, id: &str, status: &str) {
        wait::wait_for(&format!("task {id} to be {status}"), || (self.task_status(id).as_deref() == Some(status)).then_some(()));
    }

    /// The bundle containerd made for task `id` (where it keeps `bootstrap.json`).
    pub fn bundle(&self, id: &str) -> PathBuf {
        self.dir.join("state/io.containerd.runtime.v2.task").join(&self.namespace).join(id)
    }

    /// The ttrpc address of task `id`'s shim, as containerd recorded it in the bundle.
    pub fn shim_address(&self, id: &str) -> String {
        crate::shim_task::address_in(&self.bundle(id))
    }

    /// Pids of our shim servers serving this containerd.
    pub fn shim_pids(&self) -> Vec<i32> {
        crate::shim::shim_pids_for(&self.socket)
    }

    /// The shim state root for this namespace: under this containerd's state dir.
    pub fn state_root(&self) -> PathBuf {
        self.dir.join("state/rustpod").join(&self.namespace)
    }

    /// The --root containerd's runc shim gives the runtime for this namespace.
    pub fn runc_shim_root(&self) -> PathBuf {
        Path::new(crate::containerd::SHIM_RUNC_ROOT).join(&self.namespace)
    }

    /// SIGTERM, then SIGKILL if it lingers; only the child we started.
    fn stop(&mut self) {
        let Some(mut child) = self.daemon.take() else { return };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if !wait::eventually(|| child.try_wait().is_ok_and(|s| s.is_some())) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Containerd2 {
    fn drop(&mut self) {
        remove_all_containers(|args| self.ctr(args));
        self.stop();
        leftovers::kill_processes_under(self.dir.str());
        for mount_point in leftovers::mount_points_under(self.dir.str()).iter().rev() {
            let _ = nix::mount::umount2(mount_point.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        let _ = std::fs::remove_dir_all(self.state_root());
        remove_runc_shim_root(&self.namespace);
        remove_namespace_cgroups(&self.namespace);
    }
}
