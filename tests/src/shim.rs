// A private containerd (hack/containerd.sh) whose PATH has rustpod's shim, with its own namespace
// and the busybox image imported, for the shim_* tests. On Drop it removes every container, stops
// containerd, kills leftover shims and container processes by pid, unmounts what is left under
// its dir and removes the shim's state root for the namespace.

use crate::containerd::script;
use crate::process::{self, Output, Spawned};
use crate::scratch::{unique_name, ScratchDir};
use crate::{leftovers, needs, wait};
use std::path::{Path, PathBuf};

pub const IMAGE: &str = "docker.io/library/busybox:latest";
pub const RUNTIME: &str = "io.containerd.rustpod.v1";
const SHIM_NAME: &str = "containerd-shim-rustpod-v1";
const CTR: &str = "/usr/bin/ctr";
const CONTAINERD: &str = "/usr/bin/containerd";
const SCRIPT: &str = "/usr/bin/script";
/// The shim's state root, per namespace, for containerd's default state dir
/// (a private containerd's is under its own state dir).
pub const STATE_ROOT: &str = "/run/containerd/rustpod";
/// Where `oci_spec_with_reports` binds a scratch dir. ctr loses a short-lived process's output
/// now and then on a loaded machine, for runc as for rustpod (containerd 1.6, seen 2026-11-27
/// with a QEMU guest beside the tests), so a test that needs what a process found has it write
/// a file there and reads it with `report`.
pub const REPORTS: &str = "/reports";

/// The report a container wrote as `file` in the dir bound at REPORTS.
pub fn report(dir: &ScratchDir, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("read the report {}: {e}", dir.join_str(file)))
}

/// `$RUSTPOD_SHIM_BIN`, else the shared target dir's debug build.
pub fn shim_bin() -> PathBuf {
    std::env::var_os("RUSTPOD_SHIM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/rustpod-target/debug").join(SHIM_NAME))
}

/// Why this machine cannot run the shim tests, if it cannot.
pub fn blocker() -> Option<String> {
    needs::containers()
        .or_else(|| needs::program(Path::new(CTR)))
        .or_else(|| needs::program(Path::new(CONTAINERD)))
        .or_else(|| needs::program(&shim_bin()))
        .or_else(|| needs::program(&script("containerd.sh")))
        .or_else(|| needs::program(&script("make-oci-image.sh")))
}

/// Pids of our shim servers serving the containerd at `socket` (their command line names it).
pub fn shim_pids_for(socket: &str) -> Vec<i32> {
    leftovers::pids_under(socket)
        .into_iter()
        .filter(|(_, what)| what.contains(SHIM_NAME) && what.contains(" -socket "))
        .map(|(pid, _)| pid)
        .collect()
}

/// Why terminal tests cannot run (they run ctr under `script` for a pty).
pub fn pty_blocker() -> Option<String> {
    needs::program(Path::new(SCRIPT))
}

/// Why the tests that compare our shim with containerd's runc shim driving runc cannot run.
pub fn blocker_with_runc() -> Option<String> {
    blocker().or_else(|| needs::program(&crate::env::runc_bin()))
}

/// `(name, ctr flags)` of the three ways containerd runs a container: containerd's runc shim
/// driving runc (the reference, first) and rustpod, and our shim.
pub fn paths() -> Vec<(&'static str, Vec<String>)> {
    let bin = |p: PathBuf| p.to_string_lossy().into_owned();
    vec![
        ("runc-shim-runc", vec!["--runc-binary".into(), bin(crate::env::runc_bin())]),
        ("runc-shim-rustpod", vec!["--runc-binary".into(), bin(crate::env::rustpod_bin())]),
        ("rustpod-shim", vec!["--runtime".into(), RUNTIME.into()]),
    ]
}

/// Which mount namespace containerd starts in.
enum MountNs {
    Host,
    Private,
    AsIfSystemdRan,
}

pub struct ShimContainerd {
    dir: ScratchDir,
    pub namespace: String,
    socket: String,
}

impl ShimContainerd {
    pub fn start() -> Self {
        Self::start_with_env(&[])
    }

    /// Starts containerd with `env` added to its environment, which its shims (and their
    /// helpers) inherit: for fault points such as `RUSTPOD_DEBUG_PAUSE`.
    pub fn start_with_env(env: &[(&str, &str)]) -> Self {
        Self::start_as(&unique_name("ns"), env, &[], MountNs::Host)
    }

    /// Starts containerd (and so its shims and what they run) as if systemd ran on this host:
    /// [`crate::mount_ns::as_if_systemd_ran`].
    pub fn start_as_if_systemd_ran() -> Self {
        Self::start_as(&unique_name("ns"), &[], &[], MountNs::AsIfSystemdRan)
    }

    /// Starts containerd (and so its shims and what they run) in a private mount namespace
    /// ([`crate::mount_ns::private`]): what they leave mounted stays there, off the host.
    pub fn start_in_a_private_mount_ns() -> Self {
        Self::start_as(&unique_name("ns"), &[], &[], MountNs::Private)
    }

    /// Starts containerd and uses `namespace` (two containerds may share one).
    pub fn start_in_namespace(namespace: &str) -> Self {
        Self::start_as(namespace, &[], &[], MountNs::Host)
    }

    /// Starts containerd in the supplementary groups `gids`, which its shims (and what they
    /// run) inherit, as they inherit containerd's from whatever started it.
    pub fn start_in_groups(gids: &[u32]) -> Self {
        Self::start_as(&unique_name("ns"), &[], gids, MountNs::Host)
    }

    fn start_as(namespace: &str, env: &[(&str, &str)], gids: &[u32], mount_ns: MountNs) -> Self {
        let dir = ScratchDir::new("sd");
        let shim_dir = dir.join("bin");
        std::fs::create_dir_all(&shim_dir).expect("create shim dir");
        std::os::unix::fs::symlink(shim_bin(), shim_dir.join(SHIM_NAME)).expect("link shim binary");
        let socket = dir.join_str("containerd.sock");
        let ctd = ShimContainerd { dir, namespace: namespace.to_string(), socket };
        let shim_dir = shim_dir.to_str().expect("UTF-8 path").to_string();
        let mut start = std::process::Command::new(script("containerd.sh"));
        start.args(["start", ctd.dir.str(), "--shim-dir", &shim_dir]).envs(env.iter().copied()).stdin(std::process::Stdio::null());
        if !gids.is_empty() {
            use std::os::unix::process::CommandExt;
            let gids: Vec<nix::unistd::Gid> = gids.iter().map(|g| nix::unistd::Gid::from_raw(*g)).collect();
            // SAFETY: the closure makes one setgroups(2) call, async-signal-safe.
            unsafe { start.pre_exec(move || nix::unistd::setgroups(&gids).map_err(std::io::Error::from)) };
        }
        match mount_ns {
            MountNs::Host => &mut start,
            MountNs::Private => crate::mount_ns::private(&mut start),
            MountNs::AsIfSystemdRan => crate::mount_ns::as_if_systemd_ran(&mut start),
        };
        let started = start.output().expect("run hack/containerd.sh");
        assert!(started.status.success(), "hack/containerd.sh start failed: {}", String::from_utf8_lossy(&started.stderr));
        let tar = ctd.dir.join_str("busybox.tar");
        process::run(&script("make-oci-image.sh"), &[IMAGE, tar.as_str()], b"").ok();
        ctd.ctr(&["image", "import", &tar]).ok();
        ctd
    }

    pub fn dir(&self) -> &str {
        self.dir.str()
    }

    fn ctr_args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        crate::containerd::ctr_argv(&self.namespace, &self.socket, args)
    }

    /// `ctr -n NS --address SOCK args…`.
    pub fn ctr(&self, args: &[&str]) -> Output {
        process::run(Path::new(CTR), &self.ctr_args(args), b"")
    }

    pub fn ctr_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        process::run(Path::new(CTR), &self.ctr_args(args), stdin)
    }

    pub fn spawn_ctr(&self, args: &[&str]) -> Spawned {
        process::spawn(Path::new(CTR), &self.ctr_args(args), b"")
    }

    /// ctr under `script`, so that it has a terminal (for `-t`).
    pub fn ctr_in_pty(&self, args: &[&str]) -> Output {
        let cmd = std::iter::once(CTR).chain(self.ctr_args(args)).map(shell_quote).collect::<Vec<_>>().join(" ");
        process::run(Path::new(SCRIPT), &["-qec", cmd.as_str(), "/dev/null"], b"")
    }

    /// `ctr run -d --runtime rustpod [extra…] IMAGE id args…`; panics on failure.
    pub fn run_detached(&self, id: &str, extra: &[&str], args: &[&str]) {
        let mut all = vec!["run", "-d", "--runtime", RUNTIME];
        all.extend_from_slice(extra);
        all.extend_from_slice(&[IMAGE, id]);
        all.extend_from_slice(args);
        self.ctr(&all).ok();
    }

    /// `ctr run --rm --runtime rustpod IMAGE id args…`.
    pub fn run_rm(&self, id: &str, args: &[&str]) -> Output {
        let mut all = vec!["run", "--rm", "--runtime", RUNTIME, IMAGE, id];
        all.extend_from_slice(args);
        self.ctr(&all)
    }

    /// `ctr oci spec` running `sleep 1000` from busybox `rootfs`, in cgroup `/<namespace>/<name>`
    /// (ctr's own default puts every container at `/default`): a full spec for `run_config`.
    pub fn oci_spec(&self, name: &str, rootfs: &str) -> serde_json::Value {
        let text = self.ctr(&["oci", "spec"]).ok().stdout;
        let mut spec: serde_json::Value = serde_json::from_str(&text).expect("ctr oci spec prints JSON");
        spec["process"]["args"] = serde_json::json!(["sleep", "1000"]);
        spec["process"]["env"] = serde_json::json!(["PATH=/bin:/sbin:/usr/bin:/usr/sbin"]);
        spec["root"] = serde_json::json!({"path": rootfs});
        spec["linux"]["cgroupsPath"] = serde_json::json!(format!("/{}/{name}", self.namespace));
        spec
    }

    /// `oci_spec` with `dir` bound at REPORTS.
    pub fn oci_spec_with_reports(&self, name: &str, rootfs: &str, dir: &ScratchDir) -> serde_json::Value {
        let mut spec = self.oci_spec(name, rootfs);
        let mounts = spec["mounts"].as_array_mut().expect("ctr's spec has mounts");
        mounts.push(serde_json::json!({"destination": REPORTS, "type": "bind", "source": dir.path(),
                                       "options": ["rbind", "rw"]}));
        spec
    }

    /// `ctr run MODE --config FILE flags… name` (MODE `-d` or `--rm`), FILE being `spec` written
    /// in `dir`.
    pub fn run_spec(&self, dir: &ScratchDir, name: &str, spec: &serde_json::Value, mode: &str, flags: &[String]) -> Output {
        let file = write_spec(dir, name, spec);
        self.ctr(&run_spec_args(&file, name, mode, flags))
    }

    /// `run_spec` in the background.
    pub fn spawn_run_spec(&self, dir: &ScratchDir, name: &str, spec: &serde_json::Value, mode: &str, flags: &[String]) -> Spawned {
        let file = write_spec(dir, name, spec);
        self.spawn_ctr(&run_spec_args(&file, name, mode, flags))
    }

    /// `ctr run -d --config CONFIG flags… id`: a container from a full spec file.
    pub fn run_config(&self, config: &str, flags: &[String], id: &str) -> Output {
        self.ctr(&run_config_args(config, flags, id))
    }

    /// `run_config` in the background.
    pub fn spawn_run_config(&self, config: &str, flags: &[String], id: &str) -> Spawned {
        self.spawn_ctr(&run_config_args(config, flags, id))
    }

    /// The PID and STATUS columns of `ctr task ls` for task `id`, if listed.
    pub fn task(&self, id: &str) -> Option<(i32, String)> {
        let ls = self.ctr(&["task", "ls"]);
        let pid = crate::containerd::task_column(&ls, id, 1)?.parse().ok()?;
        Some((pid, crate::containerd::task_column(&ls, id, 2)?))
    }

    pub fn task_status(&self, id: &str) -> Option<String> {
        self.task(id).map(|(_, status)| status)
    }

    /// Polls (bounded) until task `id` has `status` (RUNNING, STOPPED…).
    pub fn wait_task(&self, id: &str, status: &str) {
        wait::wait_for(&format!("task {id} to be {status}"), || (self.task_status(id).as_deref() == Some(status)).then_some(()));
    }

    /// Deletes stopped task `id` and returns its exit status: ctr 1.6 prints it only as the
    /// warning "exit with non-zero exit code N" (nothing for 0).
    pub fn delete_task(&self, id: &str) -> i32 {
        let out = self.ctr(&["task", "delete", id]).ok();
        out.stderr.split("exit code ").nth(1).and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()).unwrap_or(0)
    }

    /// Pids of our shim processes serving this containerd.
    pub fn shim_pids(&self) -> Vec<i32> {
        shim_pids_for(&self.socket)
    }

    /// The pid of containerd, from its pid file.
    pub fn containerd_pid(&self) -> Option<i32> {
        crate::containerd::pid_in(&self.dir)
    }

    /// SIGKILLs containerd (hack/containerd.sh kill).
    pub fn kill_containerd(&self) {
        crate::containerd::control("kill", &self.dir);
    }

    /// Starts containerd again on the same state (after `kill_containerd`).
    pub fn restart_containerd(&self) {
        crate::containerd::control("restart", &self.dir);
    }

    /// The shim state root for this namespace: under this containerd's state dir.
    pub fn state_root(&self) -> PathBuf {
        self.dir.join("state/rustpod").join(&self.namespace)
    }

    /// The ttrpc address of task `id`'s shim, as containerd recorded it in the bundle.
    pub fn shim_address(&self, id: &str) -> String {
        crate::shim_task::address_in(&self.dir.join("state/io.containerd.runtime.v2.task").join(&self.namespace).join(id))
    }

    fn remove_all_containers(&self) {
        crate::containerd::remove_all_containers(|args| self.ctr(args));
    }

    fn stop(&self) {
        let stopped = process::spawn(&script("containerd.sh"), &["stop", self.dir.str()], b"").try_wait();
        if !stopped.is_ok_and(|out| out.success()) {
            let is_ours = |pid: &i32| leftovers::pids_under(self.dir.str()).iter().any(|(p, _)| p == pid);
            leftovers::kill_pids(self.containerd_pid().filter(is_ours));
        }
    }
}

fn run_config_args<'a>(config: &'a str, flags: &'a [String], id: &'a str) -> Vec<&'a str> {
    let mut args = vec!["run", "-d", "--config", config];
    args.extend(flags.iter().map(String::as_str));
    args.push(id);
    args
}

/// Binds the host dir `report` at /report in `spec` (hooks and containers report there).
pub fn bind_report(spec: &mut serde_json::Value, report: &str) {
    spec["mounts"]
        .as_array_mut()
        .expect("spec has mounts")
        .push(serde_json::json!({"destination": "/report", "type": "bind", "source": report, "options": ["rbind", "rw"]}));
}

/// Writes `spec` to `<dir>/<name>.json`, for `run_config`; returns that path.
pub fn write_spec(dir: &ScratchDir, name: &str, spec: &serde_json::Value) -> String {
    let path = dir.join_str(&format!("{name}.json"));
    std::fs::write(&path, spec.to_string()).expect("write spec");
    path
}

/// `run MODE --config FILE flags… name`.
fn run_spec_args<'a>(file: &'a str, name: &'a str, mode: &'a str, flags: &'a [String]) -> Vec<&'a str> {
    let mut args = vec!["run", mode, "--config", file];
    args.extend(flags.iter().map(String::as_str));
    args.push(name);
    args
}

fn shell_quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', "'\\''"))
}

impl Drop for ShimContainerd {
    fn drop(&mut self) {
        if self.containerd_pid().is_some() {
            self.remove_all_containers();
        }
        self.stop();
        // Shims and containers mention the socket path (under dir) or live in a rootfs under it.
        leftovers::kill_processes_under(self.dir.str());
        for mount_point in leftovers::mount_points_under(self.dir.str()).iter().rev() {
            let _ = nix::mount::umount2(mount_point.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        let _ = std::fs::remove_dir_all(self.state_root());
        crate::containerd::remove_namespace_cgroups(&self.namespace);
    }
}

/// Process `pid`'s cgroup directory: its v1 `controller` hierarchy's on a v1 or hybrid host,
/// its unified one on a pure v2 host. Panics when it has neither: the caller's check would
/// otherwise pass without looking.
#[track_caller]
pub fn cgroup_dir(pid: i32, controller: &str) -> PathBuf {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_else(|e| panic!("read /proc/{pid}/cgroup: {e}"));
    let v1 = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| Path::new("/sys/fs/cgroup").join(controller).join(path.trim_start_matches('/')))
    });
    let unified_host = !Path::new("/sys/fs/cgroup").join(controller).exists();
    let v2 = || {
        let path = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
        Some(Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/')))
    };
    v1.or_else(|| if unified_host { v2() } else { None }).unwrap_or_else(|| panic!("process {pid} has no {controller} cgroup: {cgroups}"))
}

/// Whether process `pid`'s cgroup is frozen: v1's freezer.state or v2's cgroup.events.
#[track_caller]
pub fn is_frozen(pid: i32) -> bool {
    let dir = cgroup_dir(pid, "freezer");
    let read = |name: &str| std::fs::read_to_string(dir.join(name));
    match read("freezer.state") {
        Ok(state) => state.trim() == "FROZEN",
        Err(_) => read("cgroup.events")
            .unwrap_or_else(|e| panic!("{}: neither freezer.state nor cgroup.events: {e}", dir.display()))
            .lines()
            .any(|l| l == "frozen 1"),
    }
}

/// `<mount>/<path>/<file>` of process `pid`'s cgroup v1 `controller`, if it has one.
pub fn cgroup_v1_file(pid: i32, controller: &str, file: &str) -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let rel = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == controller).then(|| path.trim_start_matches('/').to_string())
    })?;
    let dir = Path::new("/sys/fs/cgroup").join(controller).join(rel);
    Some(dir.join(file)).filter(|p| p.exists())
}
