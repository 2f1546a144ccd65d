// runc's `ShimCgroup` option: the shim's `start` must put the server it spawns in that cgroup
// before containerd learns its address, as containerd's own runc shim (containerd-shim-runc-v2,
// 1.6 here, 2.1 in the sid guest) does, driven in the same test the way containerd drives both:
// `start` in a bundle with the runtime options on stdin. A cgroup that does not exist must fail
// `start` and leave no server and no socket behind. The test makes its own cgroups and removes
// them, and kills only the servers it started (by pid), even when it fails.

use containerd_shim_protos::protobuf::well_known_types::any::Any;
use containerd_shim_protos::protobuf::Message;
use containerd_shim_protos::shim::oci::Options;
use containerd_shim_protos::shim::shim::ShutdownRequest;
use rustpod_tests::scratch::{unique_name, ScratchDir};
use rustpod_tests::shim::{shim_bin, STATE_ROOT};
use rustpod_tests::shim_task::Task;
use rustpod_tests::{cgroup, leftovers, needs, skip_if, wait};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use ttrpc::proto::{Request, RequestInit};

const RUNC_SHIM: &str = "/usr/bin/containerd-shim-runc-v2";
/// Held by each test: one counts the sockets the other's servers make.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
const SOCKETS: &str = "/run/containerd/s";

/// One of the two shims under test.
#[derive(Debug, Clone, Copy)]
enum Shim {
    Rustpod,
    /// containerd's runc shim, the reference.
    Runc,
}

impl Shim {
    const BOTH: [Shim; 2] = [Shim::Runc, Shim::Rustpod];

    fn bin(self) -> PathBuf {
        match self {
            Shim::Rustpod => shim_bin(),
            Shim::Runc => PathBuf::from(RUNC_SHIM),
        }
    }
}

/// What a test makes: a bundle, a cgroup in each hierarchy, a namespace of its own.
struct Fixture {
    dir: ScratchDir,
    namespace: String,
    cgroup: String,
    /// The read end of the bundle's `log` fifo, as containerd holds it: runc's shim server
    /// exits at once when it cannot open the write end.
    _log: std::fs::File,
    /// The servers' addresses: runc's shim names no socket on its command line, so
    /// kill_processes_under cannot remove one it leaves.
    addresses: std::cell::RefCell<Vec<String>>,
}

impl Fixture {
    fn new() -> Self {
        let dir = ScratchDir::new("shimcg");
        std::fs::create_dir_all(dir.join("bundle")).expect("create bundle");
        std::fs::write(dir.join("bundle/config.json"), r#"{"ociVersion":"1.0.2"}"#).expect("write config.json");
        let log = dir.join("bundle/log");
        nix::unistd::mkfifo(&log, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo the bundle's log");
        let _log = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&log).expect("open the log fifo for reading");
        Fixture {
            dir,
            namespace: unique_name("ns"),
            cgroup: format!("/{}", unique_name("rustpod-test-shimcg")),
            _log,
            addresses: Default::default(),
        }
    }

    /// Makes the cgroup in every hierarchy a shim joins (each v1 one; the one v2 hierarchy).
    fn make_cgroup(&self) -> Vec<PathBuf> {
        let dirs = cgroup_dirs(&self.cgroup);
        for dir in &dirs {
            std::fs::create_dir(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
            // A v1 cpuset cgroup takes no process before it has cpus and mems (ENOSPC); a v2
            // one inherits its parent's, and the v2 root has no cpuset.cpus to copy.
            let v1 = !cgroup::unified();
            for file in ["cpuset.cpus", "cpuset.mems"].into_iter().filter(|f| v1 && dir.join(f).exists()) {
                let parent = dir.parent().expect("a hierarchy root").join(file);
                let value = std::fs::read_to_string(&parent).unwrap_or_else(|e| panic!("read {}: {e}", parent.display()));
                std::fs::write(dir.join(file), value).unwrap_or_else(|e| panic!("write {}/{file}: {e}", dir.display()));
            }
        }
        dirs
    }

    /// `SHIM -namespace NS -address A -publish-binary /bin/true -id ID start` in the bundle with
    /// runc's options asking for `shim_cgroup` on stdin, as containerd 1.6 to 2.2 pipe them.
    fn start(&self, shim: Shim, id: &str, shim_cgroup: &str) -> std::process::Output {
        let options = Options { shim_cgroup: shim_cgroup.to_string(), ..Default::default() };
        let any = Any {
            type_url: "containerd.runc.v1.Options".into(),
            value: options.write_to_bytes().expect("encode options"),
            ..Default::default()
        };
        let address = self.dir.join_str("containerd.sock");
        let mut child = Command::new(shim.bin())
            .args(["-namespace", &self.namespace, "-address", &address, "-publish-binary", "/bin/true", "-id", id, "start"])
            .current_dir(self.dir.join("bundle"))
            .env("TTRPC_ADDRESS", format!("{address}.ttrpc"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {shim:?}'s start: {e}"));
        child.stdin.take().expect("stdin").write_all(&any.write_to_bytes().expect("encode Any")).expect("write stdin");
        let out = child.wait_with_output().expect("wait for start");
        self.addresses.borrow_mut().push(address_of(&out.stdout));
        out
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // The servers name the scratch dir in their -address.
        leftovers::kill_processes_under(self.dir.str());
        for address in self.addresses.borrow().iter().filter_map(|a| a.strip_prefix("unix://")) {
            if wait::eventually(|| std::os::unix::net::UnixStream::connect(address).is_err()) {
                let _ = std::fs::remove_file(address);
            }
        }
        wait::eventually(|| {
            cgroup_dirs(&self.cgroup).iter().for_each(|d| drop(std::fs::remove_dir(d)));
            cgroup_dirs(&self.cgroup).iter().all(|d| !d.exists())
        });
        let _ = std::fs::remove_dir(Path::new(STATE_ROOT).join(&self.namespace));
    }
}

/// `cgroup` in each v1 hierarchy under /sys/fs/cgroup (not the symlinks to them, nor a hybrid
/// host's unified one), or in /sys/fs/cgroup itself on a pure v2 host.
fn cgroup_dirs(cgroup: &str) -> Vec<PathBuf> {
    let relative = cgroup.trim_start_matches('/');
    if cgroup::unified() {
        return vec![Path::new("/sys/fs/cgroup").join(relative)];
    }
    let v1 = nix::sys::statfs::CGROUP_SUPER_MAGIC;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/sys/fs/cgroup")
        .expect("read /sys/fs/cgroup")
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|h| nix::sys::statfs::statfs(h).is_ok_and(|s| s.filesystem_type() == v1))
        .map(|h| h.join(relative))
        .collect();
    dirs.sort();
    dirs
}

/// The server's address in `start`'s answer: plain (containerd 1.6's runc shim, and ours to
/// 1.6-2.2), or in 2.x's runc shim's JSON bootstrap params.
fn address_of(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout).trim().to_string();
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(params) => params["address"].as_str().unwrap_or_default().to_string(),
        Err(_) => text,
    }
}

fn pids_in(dir: &Path) -> Vec<i32> {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    procs.lines().filter_map(|p| p.trim().parse().ok()).collect()
}

fn sockets() -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(SOCKETS).into_iter().flatten().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// Shuts the server at `address` down through the task API it serves (v2 for containerd 1.6's
/// runc shim) and waits until no process of it is left in `dirs`.
fn shut_down(address: &str, dirs: &[PathBuf]) {
    let task = Task::connect(address, "none");
    let mut req = <Request as RequestInit>::init_request(task.service.into(), "Shutdown".into(), 10_000_000_000, vec![]);
    let shutdown = ShutdownRequest { now: true, ..Default::default() };
    RequestInit::set_payload(&mut req, shutdown.write_to_bytes().expect("encode Shutdown"));
    // The server may close the connection while answering its last request.
    let _ = task.client.request(req);
    wait::wait_for("the shim's server to exit", || dirs.iter().all(|d| pids_in(d).is_empty()).then_some(()));
}

fn blocker() -> Option<String> {
    needs::containers().or_else(|| needs::program(&shim_bin())).or_else(|| needs::program(Path::new(RUNC_SHIM)))
}

#[test]
fn start_puts_the_server_in_shim_cgroup_like_runcs_shim() {
    skip_if!(blocker());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fixture = Fixture::new();
    let dirs = fixture.make_cgroup();
    assert!(!dirs.is_empty(), "no cgroup hierarchy to make {} in", fixture.cgroup);
    for shim in Shim::BOTH {
        let out = fixture.start(shim, &unique_name("c"), &fixture.cgroup);
        let address = address_of(&out.stdout);
        assert!(out.status.success(), "{shim:?}: start failed: {address} {}", String::from_utf8_lossy(&out.stderr));
        // The server and nothing else, in every hierarchy.
        let placed: Vec<(PathBuf, Vec<i32>)> = dirs.iter().map(|d| (d.clone(), pids_in(d))).collect();
        let server = placed[0].1.first().copied().unwrap_or_else(|| panic!("{shim:?}: no process in {}", dirs[0].display()));
        for (dir, pids) in &placed {
            assert_eq!(pids, &vec![server], "{shim:?}: {} holds {pids:?}, not its server {server} alone", dir.display());
        }
        let exe = std::fs::read_link(format!("/proc/{server}/exe")).expect("the server's exe");
        assert_eq!(exe, shim.bin(), "{shim:?}: process {server} in {} is not its server", fixture.cgroup);
        shut_down(&address, &dirs);
    }
}

#[test]
fn a_missing_shim_cgroup_fails_start_and_leaves_no_server_like_runcs_shim() {
    skip_if!(blocker());
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fixture = Fixture::new();
    let missing = format!("{}/none", fixture.cgroup);
    for shim in Shim::BOTH {
        let before = sockets();
        let out = fixture.start(shim, &unique_name("c"), &missing);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "{shim:?}: start with ShimCgroup {missing} succeeded: {stdout}");
        eprintln!("{shim:?}, ShimCgroup {missing}: {}", stderr.trim());
        let left = wait::eventually(|| leftovers::processes_under(fixture.dir.str()).is_empty());
        assert!(left, "{shim:?}: start failed but left {:?}", leftovers::processes_under(fixture.dir.str()));
        assert_eq!(sockets(), before, "{shim:?}: start failed but left a socket in {SOCKETS}");
        if let Shim::Rustpod = shim {
            let expected = format!("ShimCgroup {missing}: no such cgroup under /sys/fs/cgroup");
            assert!(stderr.trim().ends_with(&expected) && stderr.trim().lines().count() == 1, "{stderr}");
        }
    }
}
