// A private containerd per test (hack/containerd.sh) with its own namespace and the busybox image;
// on Drop: remove containers, stop it, kill leftovers by pid, unmount, remove its dir.

use crate::process::{self, Output, Spawned};
use crate::scratch::{unique_name, ScratchDir};
use crate::{env, leftovers, needs, wait};
use std::path::{Path, PathBuf};

/// The image `hack/make-oci-image.sh` builds and every test imports.
pub const IMAGE: &str = "docker.io/library/busybox:latest";
const CTR: &str = "/usr/bin/ctr";
const CONTAINERD: &str = "/usr/bin/containerd";
/// Where containerd 1.6's runc shim keeps the runtime's --root, per namespace.
pub const SHIM_RUNC_ROOT: &str = "/run/containerd/runc";

pub struct Containerd {
    dir: ScratchDir,
    namespace: String,
    socket: String,
}

/// A script of hack/.
pub fn script(name: &str) -> PathBuf {
    env::repo_root().join("hack").join(name)
}

/// `script` for `sh -c` in a process whose output a test reads from ctr through containerd's
/// runc shim: the shell keeps its stdout open a second after `script` ends, with `script`'s exit
/// status. That shim can report the exit of a process that exits right after writing before its
/// last output has reached ctr, which then prints nothing (CI runs 31 and 49, on a loaded
/// machine, for runc as for rustpod). Our shim reports an exit only after its output
/// (`reliability_shim`'s soak checks that), so tests of our shim alone do not linger.
pub fn lingering(script: &str) -> String {
    format!("trap 'sleep 1' EXIT; {script}")
}

/// `-n NS --address SOCK args…`, what every ctr call of a private containerd starts with.
pub fn ctr_argv<'a>(namespace: &'a str, socket: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    [&["-n", namespace, "--address", socket][..], args].concat()
}

/// The pid of the private containerd in `dir`, from hack/containerd.sh's pid file.
pub fn pid_in(dir: &ScratchDir) -> Option<i32> {
    std::fs::read_to_string(dir.join("containerd.pid")).ok()?.trim().parse().ok()
}

/// `hack/containerd.sh ACTION DIR` (kill, restart, …), errors ignored.
pub fn control(action: &str, dir: &ScratchDir) {
    process::run(&script("containerd.sh"), &[action, dir.str()], b"").ok();
}

/// Why this machine cannot run the containerd tests, if it cannot.
pub fn blocker() -> Option<String> {
    needs::containers()
        .or_else(|| needs::program(Path::new(CTR)))
        .or_else(|| needs::program(Path::new(CONTAINERD)))
        .or_else(|| needs::program(&script("containerd.sh")))
        .or_else(|| needs::program(&script("make-oci-image.sh")))
}

/// Column `n` (0: ID, 1: PID, 2: STATUS) of task `id`'s row in `ctr task ls` output.
pub fn task_column(ls: &Output, id: &str, n: usize) -> Option<String> {
    ls.stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&id))
        .and_then(|cols| cols.get(n).map(|s| s.to_string()))
}

/// Kills, deletes and removes every container `ctr` lists, errors ignored (cleanup).
pub fn remove_all_containers(ctr: impl Fn(&[&str]) -> Output) {
    let listed = ctr(&["containers", "ls", "-q"]);
    for id in listed.stdout.split_whitespace() {
        let _ = ctr(&["task", "kill", "-s", "SIGKILL", id]);
        let _ = ctr(&["task", "delete", "--force", id]);
        let _ = ctr(&["containers", "delete", id]);
    }
}

impl Containerd {
    /// Starts a private containerd and imports the busybox image into a fresh namespace.
    pub fn start() -> Self {
        let dir = ScratchDir::new("ctd");
        let socket = dir.join_str("containerd.sock");
        let ctd = Containerd { dir, namespace: unique_name("ns"), socket };
        process::run(&script("containerd.sh"), &["start", ctd.dir.str()], b"").ok();
        let tar = ctd.dir.join_str("busybox.tar");
        process::run(&script("make-oci-image.sh"), &[IMAGE, tar.as_str()], b"").ok();
        ctd.ctr(&["image", "import", &tar]).ok();
        ctd
    }

    fn ctr_args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        ctr_argv(&self.namespace, &self.socket, args)
    }

    /// `ctr -n NS --address SOCK args…`.
    pub fn ctr(&self, args: &[&str]) -> Output {
        process::run(Path::new(CTR), &self.ctr_args(args), b"")
    }

    pub fn spawn_ctr(&self, args: &[&str]) -> Spawned {
        process::spawn(Path::new(CTR), &self.ctr_args(args), b"")
    }

    /// The STATUS column of `ctr task ls` for task `id`, if listed.
    pub fn task_status(&self, id: &str) -> Option<String> {
        task_column(&self.ctr(&["task", "ls"]), id, 2)
    }

    /// Polls (bounded) until task `id` has `status` (RUNNING, STOPPED…).
    pub fn wait_task(&self, id: &str, status: &str) {
        wait::wait_for(&format!("task {id} to be {status}"), || (self.task_status(id).as_deref() == Some(status)).then_some(()));
    }

    fn remove_all_containers(&self) {
        remove_all_containers(|args| self.ctr(args));
    }

    fn stop(&self) {
        let stopped = process::spawn(&script("containerd.sh"), &["stop", self.dir.str()], b"").try_wait();
        if !stopped.is_ok_and(|out| out.success()) {
            let pid = std::fs::read_to_string(self.dir.join("containerd.pid")).unwrap_or_default();
            let is_ours = |pid: &i32| leftovers::pids_under(self.dir.str()).iter().any(|(p, _)| p == pid);
            leftovers::kill_pids(pid.trim().parse::<i32>().ok().filter(is_ours));
        }
    }

    fn unmount_leftovers(&self) {
        for mount_point in leftovers::mount_points_under(self.dir.str()).iter().rev() {
            let _ = nix::mount::umount2(mount_point.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.remove_all_containers();
        self.stop();
        leftovers::kill_processes_under(self.dir.str());
        self.unmount_leftovers();
        remove_runc_shim_root(&self.namespace);
        remove_namespace_cgroups(&self.namespace);
    }
}

/// containerd's runc shim (1.6 and 2.x) runs the runtime with --root
/// `<SHIM_RUNC_ROOT>/<namespace>`; rustpod's `@engine` dir stays there: removes both if empty.
pub fn remove_runc_shim_root(namespace: &str) {
    let root = Path::new(SHIM_RUNC_ROOT).join(namespace);
    let _ = std::fs::remove_dir(root.join("@engine"));
    let _ = std::fs::remove_dir(&root);
}

/// ctr puts containers in cgroup `/<namespace>/<id>`: removes the (now empty) parents a
/// test's unique namespace made in every hierarchy.
pub fn remove_namespace_cgroups(namespace: &str) {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else { return };
    for h in hierarchies.flatten() {
        let _ = std::fs::remove_dir(h.path().join(namespace));
    }
}
