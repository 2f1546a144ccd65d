// What the host keeps and does for a container, attacked from inside the container and as an
// unprivileged host user, each compared with runc in the same test (issue 13.6-13.9):
// - the starter spec (`spec`) and the device cgroup without `linux.resources.devices`: a
//   CAP_MKNOD process makes host device nodes and tries to open them;
// - state modes: a throw-away user must not list containers or read a container's env
//   (DB_PASSWORD=…) from any state file, through the CLI and through the shim;
// - the HOME lookup must not open a FIFO or device the container planted at /etc/passwd;
// - `--pid-file` must replace a planted symlink, not write through it to a host file.

use rustpod_tests::scratch::{unique_name, ScratchDir};
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{checker, env, json, needs, skip, skip_if, wait, Bundle, Fixture, Runtime, Value, SLEEP};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn name(rt: &Runtime) -> String {
    rt.bin().display().to_string()
}

// ---- the starter spec and the device cgroup ----

/// `BIN spec` in a fresh directory.
fn starter_spec(bin: &Path) -> Value {
    let dir = ScratchDir::new("spec");
    let out = Command::new(bin).args(["spec", "--bundle", dir.str()]).output().expect("run spec");
    assert!(out.status.success(), "{} spec: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&fs::read(dir.join("config.json")).expect("spec wrote config.json")).expect("JSON")
}

/// Every leaf as `pointer -> value`; arrays of strings (capability sets) sorted.
fn leaves(value: &Value, pointer: String, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) => map.iter().for_each(|(k, v)| leaves(v, format!("{pointer}/{k}"), out)),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            let mut sorted: Vec<String> = items.iter().filter_map(|v| v.as_str().map(String::from)).collect();
            sorted.sort();
            out.insert(pointer, json!(sorted));
        }
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| leaves(v, format!("{pointer}/{i}"), out)),
        leaf => {
            out.insert(pointer, leaf.clone());
        }
    }
}

/// Field by field, `rustpod spec` is `runc spec` except for what does not confine: the hostname,
/// an empty annotations map, `terminal` (off, so that the starter spec runs without a tty), the
/// spec version (each writes the newest it implements: ours is `features`' ociVersionMax). It
/// follows runc >= 1.2 (1.3.6 in the sid guest) where runc 1.1.5 differs: a cgroup namespace,
/// and no ambient capabilities (tests/RUNC_DIFFERENCES.md); next to runc 1.1.5 those two are
/// taken out of the comparison.
#[test]
fn starter_spec_matches_runc_field_by_field() {
    let runc = env::runc_bin();
    skip_if!(needs::program(&runc));
    if env::is_crun(&runc) {
        skip!("the starter spec is runc's: crun 1.28's orders its namespaces its own way and has version 1.0.0");
    }
    let mut ours = starter_spec(&env::rustpod_bin());
    let mut theirs = starter_spec(&runc);
    if !env::testing_runc_itself() {
        let features = rustpod_tests::process::run(&env::rustpod_bin(), &["features"], b"").ok();
        let features: Value = serde_json::from_str(&features.stdout).expect("features is JSON");
        assert_eq!(ours["ociVersion"], features["ociVersionMax"], "the starter spec's version");
        assert_eq!(ours["process"]["capabilities"].get("ambient"), None, "ambient capabilities in the starter spec");
    }
    for field in ["hostname", "ociVersion"] {
        ours[field] = theirs[field].clone();
    }
    ours["process"]["terminal"] = theirs["process"]["terminal"].clone();
    if ours["annotations"] == json!({}) {
        ours.as_object_mut().unwrap().remove("annotations");
    }
    let older_runc = env::version_of(&runc) < (1, 2, 0) && !env::testing_runc_itself();
    if older_runc {
        ours["linux"]["namespaces"].as_array_mut().expect("namespaces").retain(|ns| ns["type"] != "cgroup");
        theirs["process"]["capabilities"].as_object_mut().expect("capabilities").remove("ambient");
    }
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    leaves(&ours, String::new(), &mut a);
    leaves(&theirs, String::new(), &mut b);
    let differ: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k}: ours {:?}, runc {:?}", a.get(k), b.get(k)))
        .collect();
    assert!(differ.is_empty(), "spec differs from runc spec:\n  {}", differ.join("\n  "));
    assert_eq!(theirs["linux"]["resources"]["devices"], json!([{"allow": false, "access": "rwm"}]));
}

/// Host devices a CAP_MKNOD process makes in a nodev-less tmpfs and opens: `name type major
/// minor`. fuse, loop0 and the host's console are outside runc's default allow-list; the rest
/// are in it (libcgroups' and crun's lists allow the console too).
const DEVICES: [&str; 9] = [
    "fuse c 10 229",
    "loop0 b 7 0",
    "console c 5 1",
    "null c 1 3",
    "zero c 1 5",
    "full c 1 7",
    "random c 1 8",
    "urandom c 1 9",
    "tun c 10 200",
];

fn mknod_and_open_script() -> String {
    let mut script = String::new();
    for device in DEVICES {
        let name = device.split(' ').next().unwrap();
        script.push_str(&format!(
            "mknod /scratch/{device} && if (exec 3</scratch/{name}) 2>/dev/null; then echo {name} opened; \
             else echo {name} refused; fi; "
        ));
    }
    script
}

fn device_results(rt: &Runtime, configure: impl FnOnce(&mut Bundle)) -> String {
    let mut bundle = Bundle::new(&["sh", "-c", &mknod_and_open_script()]);
    let caps: Vec<String> = ["CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"].map(String::from).into();
    checker::set_all_caps(&mut bundle, &caps);
    bundle.add_mount(json!({"destination": "/scratch", "type": "tmpfs", "source": "tmpfs"}));
    configure(&mut bundle);
    let id = rt.new_id("dev");
    rt.run(&id, &bundle, &[], b"").ok().stdout
}

/// The device cgroup is v1's devices controller on the host and a BPF program on cgroup v2 (the
/// sid guest): the same allow-list either way.
#[test]
fn without_device_rules_only_runc_default_allow_list_opens() {
    skip_if!(needs::containers());
    let mut results = vec![];
    for rt in Runtime::runc_and_under_test() {
        let without = device_results(&rt, |b| {
            b.remove("/linux/resources/devices");
        });
        let starter = device_results(&rt, |_| {});
        assert_eq!(without, starter, "{}: no rules and runc's deny-all differ", name(&rt));
        for denied in ["fuse", "loop0", "console"] {
            assert!(without.contains(&format!("{denied} refused")), "{}: {without}", name(&rt));
        }
        assert!(without.contains("null opened") && without.contains("tun opened"), "{}: {without}", name(&rt));
        results.push((name(&rt), without));
    }
    let first = &results[0].1;
    for (bin, got) in &results {
        assert_eq!(got, first, "{bin} differs from {}", results[0].0);
    }
}

// ---- state modes, and a throw-away unprivileged user ----

/// A host user made for one test and removed on Drop (also when the test fails).
struct ThrowawayUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl ThrowawayUser {
    fn new() -> Option<Self> {
        let name = format!("rp{}", unique_name("u").replace('-', ""));
        let name: String = name.chars().take(30).collect();
        let made = Command::new("useradd")
            .args(["--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", &name])
            .status()
            .ok()?;
        if !made.success() {
            return None;
        }
        // From here on, Drop removes the user whatever happens.
        let mut user = ThrowawayUser { name, uid: 0, gid: 0 };
        let id = |flag: &str, name: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, name]).output().ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        user.uid = id("-u", &user.name)?;
        user.gid = id("-g", &user.name)?;
        Some(user)
    }

    /// `program args` as this user (std drops root's supplementary groups); stdout, and whether
    /// it succeeded.
    fn run(&self, program: &Path, args: &[&str]) -> (bool, String) {
        let out = Command::new(program)
            .args(args)
            .uid(self.uid)
            .gid(self.gid)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {} as {}: {e}", program.display(), self.name));
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// What this user can read of the files under `dir` that mention `secret`.
    fn files_revealing(&self, dir: &Path, secret: &str) -> String {
        let dir = dir.to_str().expect("UTF-8");
        self.run(Path::new("/bin/busybox"), &["grep", "-rls", secret, dir]).1
    }
}

impl Drop for ThrowawayUser {
    fn drop(&mut self) {
        let removed = Command::new("userdel").arg(&self.name).status();
        if !removed.is_ok_and(|s| s.success()) {
            eprintln!("warning: userdel {} failed", self.name);
        }
    }
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display())).mode() & 0o7777
}

/// Every directory and regular file under `dir`, with its mode.
fn tree_modes(dir: &Path, out: &mut Vec<(PathBuf, u32)>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            out.push((path.clone(), meta.mode() & 0o7777));
            tree_modes(&path, out);
        } else if meta.is_file() {
            out.push((path, meta.mode() & 0o7777));
        }
    }
}

/// No regular file others can read or write; no directory others can list or write, but the
/// empty directories in `empty_dirs` (each checked empty).
#[track_caller]
fn assert_private_tree(who: &str, dir: &Path, empty_dirs: &[PathBuf]) {
    for empty in empty_dirs {
        let entries = fs::read_dir(empty).unwrap_or_else(|e| panic!("{who}: read_dir {}: {e}", empty.display()));
        assert_eq!(entries.count(), 0, "{who}: {} is not empty", empty.display());
    }
    let mut modes = vec![];
    tree_modes(dir, &mut modes);
    let open: Vec<String> = modes
        .iter()
        .filter(|(path, mode)| mode & 0o066 != 0 && !empty_dirs.contains(path))
        .map(|(p, m)| format!("{} {m:o}", p.display()))
        .collect();
    assert!(open.is_empty(), "{who}: readable by others under {}:\n  {}", dir.display(), open.join("\n  "));
}

/// A secret the container's env carries, unique to this test.
fn secret() -> String {
    format!("DB_PASSWORD=s3cret-{}", unique_name("pw"))
}

#[test]
fn state_is_root_only_and_an_unprivileged_user_reads_nothing() {
    skip_if!(needs::containers());
    let Some(user) = ThrowawayUser::new() else { skip!("useradd failed") };
    let secret = secret();
    for rt in Runtime::runc_and_under_test() {
        let who = name(&rt);
        let root = PathBuf::from(rt.root());
        // Let the runtime make its root itself, as on a fresh host.
        fs::remove_dir(&root).expect("remove the empty scratch root");
        let mut fx = Fixture::on(rt, SLEEP);
        fx.bundle.add_env(&[&secret]);
        fx.rt.start_container(&fx.id, &fx.bundle);
        fx.rt.cmd(&["exec", "-d", &fx.id, "sleep", "1000"]).ok();

        assert_eq!(mode(&root), 0o700, "{who}: root mode");
        // crun 1.28 keeps the container dir 0700, narrower than runc's 0711, and its state in
        // `status`, 0700: owner-only as runc's 0600.
        let (dir_mode, state_file, state_mode) =
            if env::is_crun(fx.rt.bin()) { (0o700, "status", 0o700) } else { (0o711, "state.json", 0o600) };
        let state_path = root.join(&fx.id).join(state_file);
        assert_eq!(mode(&root.join(&fx.id)), dir_mode, "{who}: container dir mode");
        assert_eq!(mode(&state_path), state_mode, "{who}: {state_file} mode");
        // crun 1.28 keeps an empty, read-only dir (0555) in its root: it holds nothing.
        let crun_empty = if env::is_crun(fx.rt.bin()) { vec![root.join(".empty-directory")] } else { vec![] };
        assert_private_tree(&who, &root, &crun_empty);

        let bin = fx.rt.bin().to_path_buf();
        let root_str = root.to_str().unwrap();
        let (_, listed) = user.run(&bin, &["--root", root_str, "list", "-q"]);
        assert!(!listed.contains(&fx.id), "{who}: the user listed {}: {listed}", fx.id);
        let (ok, state) = user.run(&bin, &["--root", root_str, "state", &fx.id]);
        assert!(!ok && state.is_empty(), "{who}: the user read the state: {state}");
        assert_eq!(user.files_revealing(&root, &secret), "", "{who}: files the user read the secret from");
        // Below the root too (if the root's mode were ever widened, nothing would be readable).
        let (ok, text) = user.run(Path::new("/bin/busybox"), &["cat", state_path.to_str().expect("UTF-8")]);
        assert!(!ok && !text.contains(&secret), "{who}: the user read {state_file}");
    }
}

#[test]
fn an_existing_world_readable_root_is_narrowed_on_create() {
    skip_if!(needs::containers());
    skip_if!(env::testing_runc_itself().then(|| "runc leaves an existing root's mode alone: this is rustpod's".to_string()));
    let fx = Fixture::new(SLEEP);
    let root = Path::new(fx.rt.root());
    fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fx.rt.create(&fx.id, &fx.bundle);
    assert_eq!(mode(root), 0o700, "create left the existing root world-readable");
}

/// The shim's state under /run/containerd/rustpod/<ns> and its ttrpc socket, against
/// containerd's runc shim (io.containerd.runc.v2) in the same containerd.
#[test]
fn shim_state_and_socket_are_root_only() {
    skip_if!(shim::blocker());
    let Some(user) = ThrowawayUser::new() else { skip!("useradd failed") };
    let secret = secret();
    // Declared before containerd, so that it is dropped after containerd removed the tasks.
    let mut runc_state_guard = RemoveOnDrop(PathBuf::new());
    let ctd = ShimContainerd::start();
    let runc_state = Path::new("/run/containerd/runc").join(&ctd.namespace);
    runc_state_guard.0 = runc_state.clone();
    let mut runs = vec![(shim::RUNTIME, ctd.state_root())];
    if needs::program(Path::new("/usr/bin/containerd-shim-runc-v2")).is_none() {
        runs.push(("io.containerd.runc.v2", runc_state));
    } else {
        eprintln!("containerd-shim-runc-v2 is not installed: no comparison with it");
    }
    for (n, (runtime, state)) in runs.iter().enumerate() {
        let id = format!("st{n}");
        ctd.ctr(&["run", "-d", "--runtime", runtime, "--env", &secret, shim::IMAGE, &id, "sleep", "1000"]).ok();
        ctd.wait_task(&id, "RUNNING");
        ctd.ctr(&["task", "exec", "--exec-id", "e1", &id, "true"]).ok();
        assert_eq!(mode(state), 0o700, "{runtime}: {} mode", state.display());
        assert_private_tree(runtime, state, &[]);
        assert_eq!(user.files_revealing(state, &secret), "", "{runtime}: files the user read the secret from");
        let socket = shim_socket(&ctd, &id);
        assert!(fs::symlink_metadata(&socket).unwrap().file_type().is_socket());
        assert_eq!(mode(&socket), 0o600, "{runtime}: ttrpc socket {}", socket.display());
    }
}

/// The shim's socket, from the address containerd keeps for task `id` (containerd 2.x's runc
/// shim records it only in bootstrap.json).
fn shim_socket(ctd: &ShimContainerd, id: &str) -> PathBuf {
    PathBuf::from(ctd.shim_address(id).trim_start_matches("unix://"))
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

// ---- HOME: what the container planted at /etc/passwd is not opened on the host ----

/// A running container that may mknod and write its rootfs, with `plant` run first.
fn planting_container(rt: Runtime, plant: &str) -> Fixture {
    let script = format!("rm /etc/passwd && {plant} && touch /tmp/planted && exec sleep 1000");
    let mut fx = Fixture::on(rt, &["sh", "-c", &script]);
    let caps: Vec<String> = ["CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"].map(String::from).into();
    checker::set_all_caps(&mut fx.bundle, &caps);
    fx.bundle.set("/root/readonly", json!(false));
    fx.rt.start_container(&fx.id, &fx.bundle);
    let planted = Path::new(&fx.bundle.rootfs()).join("tmp/planted");
    wait::wait_for("the container to plant /etc/passwd", || planted.exists().then_some(()));
    fx
}

#[test]
fn a_device_planted_at_etc_passwd_gives_home_slash() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let fx = planting_container(rt, "mknod /etc/passwd c 1 11");
        let out = fx.exec(&["sh", "-c", "echo $HOME"]).ok();
        assert_eq!(out.stdout, "/\n", "{}: {}", name(&fx.rt), out.describe());
    }
}

/// The syscall process `pid` is blocked in (`/proc/<pid>/syscall`'s number), or "running".
fn blocked_in(pid: i32) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    text.split_whitespace().next().unwrap_or("gone").to_string()
}

/// A FIFO at /etc/passwd with a writer blocked opening it: any open for reading, even
/// non-blocking, wakes that writer (and it then touches /tmp/opened). rustpod reads /etc/passwd
/// from the host and must not open it at all. Not compared with runc: runc 1.1.5 reads it inside
/// the container on every exec, HOME set or not, and its exec then blocks on the FIFO (confined,
/// but a container can hang it).
#[test]
fn a_fifo_planted_at_etc_passwd_is_not_opened_from_the_host() {
    skip_if!(needs::containers());
    skip_if!(env::testing_runc_itself()
        .then(|| "runc reads /etc/passwd in the container (1.1.5 blocks on the FIFO): this is rustpod's".to_string()));
    let scratch = ScratchDir::new("fifo");
    let fx = planting_container(Runtime::under_test(), "mkfifo /etc/passwd");
    let pid_file = scratch.join_str(&unique_name("writer"));
    let writer = "exec 3>/etc/passwd; exec 3>&-; touch /tmp/opened; exec sleep 1000";
    // HOME is set for the writer, so that its own exec looks nothing up.
    fx.exec_with(&["-d", "--pid-file", &pid_file, "--env", "HOME=/root"], &["sh", "-c", writer]).ok();
    let pid = rustpod_tests::assertions::read_pid_file(&pid_file);
    let opening = wait::wait_for("the writer to block opening the FIFO", || {
        let syscall = blocked_in(pid);
        (syscall == "2" || syscall == "257").then_some(syscall)
    });
    let out = fx.exec(&["sh", "-c", "echo $HOME"]).ok();
    assert_eq!(out.stdout, "/\n", "{}: {}", name(&fx.rt), out.describe());
    let opened = Path::new(&fx.bundle.rootfs()).join("tmp/opened");
    // A wakeup makes the writer runnable before the opener's open returns: no race here.
    assert_eq!(blocked_in(pid), opening, "the exec opened the FIFO at /etc/passwd on the host");
    assert!(!opened.exists(), "the exec opened the FIFO at /etc/passwd on the host");
    // The control: our own non-blocking open does wake it.
    let fifo = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(Path::new(&fx.bundle.rootfs()).join("etc/passwd"))
        .expect("open the FIFO");
    wait::wait_for("the writer to see the control's open", || opened.exists().then_some(()));
    drop(fifo);
}

// ---- --pid-file through a planted symlink ----

/// `path` is a regular file holding a pid, and `victim` still holds "keep".
#[track_caller]
fn assert_replaced_not_followed(who: &str, path: &Path, victim: &Path) {
    assert_eq!(fs::read_to_string(victim).unwrap(), "keep", "{who}: wrote through the symlink to {}", victim.display());
    let meta = fs::symlink_metadata(path).unwrap();
    assert!(meta.is_file(), "{who}: {} is not a regular file", path.display());
    let pid: i32 = fs::read_to_string(path).unwrap().trim().parse().expect("a pid");
    assert!(pid > 0);
}

#[test]
fn pid_file_symlink_is_replaced_not_followed() {
    skip_if!(needs::containers());
    let scratch = ScratchDir::new("pidfile");
    let victim = scratch.join("victim");
    let planted = |name: &str| -> PathBuf {
        fs::write(&victim, "keep").unwrap();
        let link = scratch.join(&unique_name(name));
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        link
    };
    for rt in Runtime::runc_and_under_test() {
        let who = name(&rt);
        let fx = Fixture::on(rt, SLEEP);
        let create_pid = planted("create");
        fx.rt.try_create(&fx.id, &fx.bundle, &["--pid-file", create_pid.to_str().unwrap()]).ok();
        assert_replaced_not_followed(&who, &create_pid, &victim);
        fx.rt.start(&fx.id);
        let exec_pid = planted("exec");
        fx.exec_with(&["-d", "--pid-file", exec_pid.to_str().unwrap()], &["sleep", "1000"]).ok();
        assert_replaced_not_followed(&who, &exec_pid, &victim);

        let run_pid = planted("run");
        let id = fx.rt.new_id("pidrun");
        fx.rt.run(&id, &fx.bundle, &["-d", "--pid-file", run_pid.to_str().unwrap()], b"").ok();
        assert_replaced_not_followed(&who, &run_pid, &victim);
    }
}
