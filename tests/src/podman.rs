//! Rootful podman (apt's 4.3 on the host, sid's 5.8 in the sid guest) with a private
//! --root/--runroot/--tmpdir and a `--rootfs` dir, so that it touches no host storage; on Drop:
//! remove containers, kill leftovers, unmount, remove.

use crate::clients::{cgroup_tree, remove_cgroup_tree, unmount_under, OciRuntime};
use crate::process::{self, Output};
use crate::scratch::{unique_name, ScratchDir};
use crate::{env, leftovers, needs};
use std::fs;
use std::path::{Path, PathBuf};

const PODMAN: &str = "/usr/bin/podman";
const CONMON: &str = "/usr/bin/conmon";
/// podman's env goes through env(1): process::run sets no variables.
const ENV: &str = "/usr/bin/env";

/// Why this machine cannot run the podman tests, if it cannot (before trying).
pub fn blocker() -> Option<String> {
    needs::containers()
        .or_else(|| needs::program(Path::new(PODMAN)))
        .or_else(|| needs::program(Path::new(CONMON)))
        .map(|reason| format!("{reason} (hack/install-deps.sh installs podman)"))
}

pub struct Podman {
    cgroup_parent: String,
    dir: ScratchDir,
}

impl Podman {
    /// A scratch dir with private configs and a busybox rootfs (hack/make-rootfs.sh).
    pub fn new() -> Self {
        let podman = Podman { cgroup_parent: format!("/{}", unique_name("rustpod-podman")), dir: ScratchDir::new("pdm") };
        // Private configs: the host's containers.conf and storage.conf must not steer the tests.
        // File locks under the private --tmpdir: podman's default shm locks are one /libpod_lock
        // for every podman, and podman 5 instances starting at once race to create it.
        fs::write(podman.dir.join("containers.conf"), "[engine]\nlock_type = \"file\"\n").expect("write containers.conf");
        let storage = format!(
            "[storage]\ndriver = \"vfs\"\nrunroot = \"{}\"\ngraphroot = \"{}\"\n",
            podman.dir.join_str("run"),
            podman.dir.join_str("root")
        );
        fs::write(podman.dir.join("storage.conf"), storage).expect("write storage.conf");
        let rootfs = podman.dir.join_str("rootfs");
        let make_rootfs = env::repo_root().join("hack/make-rootfs.sh");
        process::run(&make_rootfs, &[rootfs.as_str()], b"").ok();
        podman
    }

    /// Why podman cannot run a container here even with runc, after trying `echo`. Only a
    /// failure past podman's own setup (runc or conmon failed) is the machine's: anything
    /// earlier is this harness's fault and panics, so that it cannot pass as a skip.
    pub fn blocker_after_trying(&self) -> Option<String> {
        let out = self.run_rm(OciRuntime::Runc, &[], &["echo", "hi"]);
        if out.stdout == "hi\n" {
            return None;
        }
        let runc = OciRuntime::Runc.bin().display().to_string();
        let machine = ["OCI", "conmon", runc.as_str()];
        assert!(machine.iter().any(|w| out.stderr.contains(w)), "podman failed before running runc (a harness bug?): {}", out.describe());
        Some(format!("podman cannot run a container here even with runc: {}", out.describe()))
    }

    /// `podman --root … --runtime <bin of rt> args…`, with private configs.
    pub fn podman(&self, rt: OciRuntime, args: &[&str]) -> Output {
        let (conf, storage) = (self.dir.join_str("containers.conf"), self.dir.join_str("storage.conf"));
        let vars = [format!("CONTAINERS_CONF={conf}"), format!("CONTAINERS_STORAGE_CONF={storage}")];
        let globals = self.global_args(rt);
        let argv: Vec<&str> =
            vars.iter().map(String::as_str).chain([PODMAN]).chain(globals.iter().map(String::as_str)).chain(args.iter().copied()).collect();
        process::run(Path::new(ENV), &argv, b"")
    }

    /// Everything podman writes goes under the scratch dir; cgroupfs and file events because
    /// there is no systemd or journald; vfs because `--rootfs` needs no image storage.
    fn global_args(&self, rt: OciRuntime) -> Vec<String> {
        let flag = |name: &str, value: String| format!("--{name}={value}");
        vec![
            flag("root", self.dir.join_str("root")),
            flag("runroot", self.dir.join_str("run")),
            flag("tmpdir", self.dir.join_str("tmp")),
            flag("network-config-dir", self.dir.join_str("cni")),
            flag("cgroup-manager", "cgroupfs".into()),
            flag("events-backend", "file".into()),
            flag("storage-driver", "vfs".into()),
            flag("runtime", rt.bin().display().to_string()),
        ]
    }

    /// `podman run <flags> … --rootfs <busybox> argv…` on `rt`, with what every run needs here.
    pub fn run(&self, rt: OciRuntime, flags: &[&str], argv: &[&str]) -> Output {
        self.run_with_nofile(rt, hard_nofile().min(1024), flags, argv)
    }

    /// `run` with RLIMIT_NOFILE `nofile` (soft and hard): above `hard_nofile()` it needs
    /// CAP_SYS_RESOURCE.
    pub fn run_with_nofile(&self, rt: OciRuntime, nofile: u64, flags: &[&str], argv: &[&str]) -> Output {
        let nproc = hard_limit(libc::RLIMIT_NPROC).min(1024);
        let limits = [format!("nofile={nofile}:{nofile}"), format!("nproc={nproc}:{nproc}")];
        let rootfs = self.dir.join_str("rootfs");
        let common = ["--network", "none", "--cgroup-parent", self.cgroup_parent.as_str()];
        let mut args: Vec<&str> = [&["run"][..], &common, flags].concat();
        args.extend(limits.iter().flat_map(|l| ["--ulimit", l.as_str()]));
        args.extend(["--rootfs", rootfs.as_str()]);
        args.extend(argv);
        self.podman(rt, &args)
    }

    /// `podman run --rm …`.
    pub fn run_rm(&self, rt: OciRuntime, flags: &[&str], argv: &[&str]) -> Output {
        self.run(rt, &[&["--rm"][..], flags].concat(), argv)
    }

    /// Where `rt` keeps container `id`'s state: podman passes no --root, so the runtime's default.
    pub fn runtime_state(&self, rt: OciRuntime, id: &str) -> PathBuf {
        // RUSTPOD_BIN=runc validates the suite against runc itself; RUNC_BIN=crun keeps crun's.
        let root = match rt {
            OciRuntime::Rustpod if !env::testing_runc_itself() => "/run/rustpod",
            _ if rt.bin().file_name().is_some_and(|name| name == "crun") => "/run/crun",
            _ => "/run/runc",
        };
        Path::new(root).join(id)
    }

    /// The id of the container `name`, from podman's event log: it outlives `run --rm`,
    /// where podman 5 also removes the `--cidfile`.
    pub fn id_from_events(&self, rt: OciRuntime, name: &str) -> String {
        let filter = format!("container={name}");
        let events = self.podman(rt, &["events", "--stream=false", "--filter", &filter, "--format", "{{.ID}}"]).ok();
        let ids: std::collections::BTreeSet<String> =
            events.stdout.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
        assert_eq!(ids.len(), 1, "one container named {name} in podman's events: {}", events.stdout);
        ids.into_iter().next().unwrap_or_default()
    }

    /// The cgroup dirs left under this podman's `--cgroup-parent`, in every hierarchy.
    pub fn cgroups_left(&self) -> Vec<PathBuf> {
        cgroup_tree(&self.cgroup_parent)
    }

    fn remove_all_containers(&self) {
        for rt in OciRuntime::BOTH {
            let _ = self.podman(rt, &["rm", "--all", "--force", "--time", "0"]);
        }
    }
}

impl Default for Podman {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        self.remove_all_containers();
        leftovers::kill_processes_under(self.dir.str());
        unmount_under(self.dir.str());
        remove_cgroup_tree(&self.cgroup_parent);
    }
}

/// This process's hard RLIMIT_NOFILE. Every run stays at or below its hard limits: rootful
/// podman 4.3 asks for RLIMIT_NOFILE 1048576 and RLIMIT_NPROC 32768, and above the hard limit
/// that needs CAP_SYS_RESOURCE (runc: `error setting rlimit type 7: operation not permitted`).
pub fn hard_nofile() -> u64 {
    hard_limit(libc::RLIMIT_NOFILE)
}

/// getrlimit(2)'s hard limit (nix's resource feature is not enabled in the workspace).
fn hard_limit(resource: libc::__rlimit_resource_t) -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only into the rlimit it is given.
    let rc = unsafe { libc::getrlimit(resource, &mut limit) };
    assert_eq!(rc, 0, "getrlimit({resource}): {}", std::io::Error::last_os_error());
    limit.rlim_max
}
