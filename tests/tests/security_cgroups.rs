// A container's hold on cgroups (issue 13, items 4 and 5), attacked from inside and from the
// host, each case on runc and on the runtime under test: writing limits through the container's
// cgroupfs, the options its cgroup mounts carry, a sub-cgroup that should not outlive `delete -f`,
// a host process sharing the container's cgroup (which `run`, `delete`, `kill KILL` and a failed
// create must leave alone), and the root cgroup as `cgroupsPath`. On a v1 host (this one) the
// attacks go at the pids, memory, cpu… hierarchies; on a pure cgroup v2 host (the sid guest, next
// to runc 1.3.6 and crun 1.28) at the one hierarchy, where the container finds its own cgroup in
// /proc/self/cgroup.

use rustpod_tests::cgroup::unified;
use rustpod_tests::scratch::unique_name;
use rustpod_tests::{env, json, needs, skip, skip_if, wait, Bundle, Output, Runtime, SLEEP};
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The runtime under test, then runc when it is installed (and is not the one under test).
fn runtimes() -> Vec<Runtime> {
    let mut all = vec![Runtime::under_test()];
    if needs::program(&env::runc_bin()).is_none() && !env::testing_runc_itself() {
        all.push(Runtime::runc());
    } else {
        eprintln!("runc not compared: not installed, or it is the runtime under test");
    }
    all
}

/// `runtimes()` but crun: crun 1.28 SIGKILLs every process of the container's cgroup
/// at `delete`, at the end of `run` and after a failed `create`, a process the host
/// put there included (tests/RUNC_DIFFERENCES.md), which runc and rustpod spare.
fn sparing_runtimes() -> Vec<Runtime> {
    let (crun, sparing): (Vec<Runtime>, Vec<Runtime>) = runtimes().into_iter().partition(|rt| env::is_crun(rt.bin()));
    if !crun.is_empty() {
        eprintln!("crun not compared: it kills the host's process in the shared cgroup");
    }
    sparing
}

fn name(rt: &Runtime) -> String {
    rt.bin().display().to_string()
}

/// Why the attacks cannot run here: they need v1's pids and memory hierarchies, or a v2
/// hierarchy offering pids and memory to children.
fn blocker() -> Option<String> {
    let v1 = needs::cgroup_v1("pids").or_else(|| needs::cgroup_v1("memory"))?;
    let v2 = needs::cgroup_v2(&["pids", "memory"])?;
    Some(format!("{v1}; {v2}"))
}

/// The container's own v2 cgroup as its cgroupfs shows it (the root of a cgroup namespace, else
/// the path /proc/self/cgroup names under the host's root).
const OWN_V2_CGROUP: &str = "cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); ";

/// Raising the container's limits, making a sub-cgroup and writing at /sys/fs/cgroup itself (the
/// tmpfs of v1; v2's root cgroup.procs, which would move the shell out of its cgroup).
const WRITE_LIMITS_V1: &str = "echo max > /sys/fs/cgroup/pids/pids.max; echo pids=$?; \
                               echo -1 > /sys/fs/cgroup/memory/memory.limit_in_bytes; echo memory=$?; \
                               mkdir /sys/fs/cgroup/pids/sub; echo mkdir=$?; \
                               touch /sys/fs/cgroup/file; echo root=$?";
const WRITE_LIMITS_V2: &str = "echo max > $cg/pids.max; echo pids=$?; \
                               echo max > $cg/memory.max; echo memory=$?; \
                               mkdir $cg/sub; echo mkdir=$?; \
                               echo $$ > /sys/fs/cgroup/cgroup.procs; echo root=$?";

/// The attack for this host's hierarchy, as a `sh -c` script printing `step=status` lines.
fn write_limits() -> String {
    match unified() {
        true => format!("exec 2>&1; {OWN_V2_CGROUP}{WRITE_LIMITS_V2}"),
        false => format!("exec 2>&1; {WRITE_LIMITS_V1}"),
    }
}

/// runc 1.1.5 leaves v1's tmpfs at /sys/fs/cgroup writable (tests/RUNC_DIFFERENCES.md); the
/// controllers' mounts under it are read-only.
fn writable_root_tmpfs(rt: &Runtime) -> bool {
    !unified() && rt.bin() == env::runc_bin()
}

/// Whether the container gets a cgroup namespace of its own, as `rustpod spec` and `runc spec`
/// give it: then each hierarchy is a new cgroup filesystem rooted at the container's cgroup, not
/// a bind of it.
const CGROUPNS: [bool; 2] = [false, true];

fn in_cgroupns(bundle: &mut Bundle, cgroupns: bool) {
    if cgroupns {
        let mut namespaces = bundle.config()["linux"]["namespaces"].as_array().cloned().unwrap_or_default();
        namespaces.push(json!({"type": "cgroup"}));
        bundle.set("/linux/namespaces", json!(namespaces));
    }
}

#[test]
fn limits_cannot_be_written_through_a_read_only_cgroupfs() {
    skip_if!(blocker());
    for (rt, cgroupns) in runtimes().iter().flat_map(|rt| CGROUPNS.map(|ns| (rt, ns))) {
        let mut bundle = Bundle::new(&["sh", "-c", &write_limits()]);
        in_cgroupns(&mut bundle, cgroupns);
        bundle.set("/linux/resources", json!({"pids": {"limit": 64}, "memory": {"limit": 67108864}}));
        let id = rt.new_id("cgro");
        let out = rt.run(&id, &bundle, &[], b"").ok();
        eprintln!("{} (cgroupns {cgroupns}): {}", name(rt), out.stdout);
        for step in ["pids", "memory", "mkdir", "root"] {
            let denied = !out.stdout.contains(&format!("{step}=0")) || (step == "root" && writable_root_tmpfs(rt));
            assert!(denied, "{} (cgroupns {cgroupns}): {step} write succeeded: {}", name(rt), out.stdout);
        }
        assert!(out.stdout.matches("Read-only file system").count() >= 3, "{} (cgroupns {cgroupns}): not EROFS: {}", name(rt), out.stdout);
    }
}

/// In a cgroup namespace the container's cgroupfs is rooted at its own cgroup, in every v1
/// hierarchy or in v2's: /proc/self/cgroup names only `/`, the limits at the root are the
/// container's, and no cgroup of the host or of another container shows. On a v1 host each
/// hierarchy is a new cgroup filesystem of its controllers there.
#[test]
fn in_a_cgroup_namespace_the_cgroupfs_holds_the_containers_own_cgroup_only() {
    skip_if!(blocker());
    let pids = if unified() { "/sys/fs/cgroup" } else { "/sys/fs/cgroup/pids" };
    let script = format!("cat /proc/self/cgroup; echo max=$(cat {pids}/pids.max); echo dirs=$(find {pids} -mindepth 1 -type d | wc -l)");
    for rt in runtimes() {
        let mut bundle = Bundle::new(&["sh", "-c", &script]);
        in_cgroupns(&mut bundle, true);
        bundle.set("/linux/resources", json!({"pids": {"limit": 64}}));
        let id = rt.new_id("cgns");
        let out = rt.run(&id, &bundle, &[], b"").ok();
        let paths: Vec<_> = out.stdout.lines().filter(|l| l.contains(":/")).collect();
        assert!(!paths.is_empty(), "{}: no /proc/self/cgroup: {}", name(&rt), out.stdout);
        for line in paths {
            assert!(line.ends_with(":/"), "{}: a cgroup outside the namespace's root: {line}", name(&rt));
        }
        assert!(out.stdout.contains("max=64\n"), "{}: not the container's pids.max: {}", name(&rt), out.stdout);
        assert!(out.stdout.contains("dirs=0\n"), "{}: other cgroups show: {}", name(&rt), out.stdout);
    }
}

/// `mount point -> per-mount options` for the mounts at and under /sys/fs/cgroup.
fn cgroup_mount_options(mountinfo: &str) -> Vec<(String, Vec<String>)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let point = fields.nth(4)?.to_string();
            let options = fields.next()?.split(',').map(str::to_string).collect();
            point.starts_with("/sys/fs/cgroup").then_some((point, options))
        })
        .collect()
}

#[test]
fn every_cgroup_mount_keeps_ro_nosuid_nodev_noexec() {
    skip_if!(blocker());
    for cgroupns in CGROUPNS {
        cgroup_mounts_keep_their_flags(cgroupns);
    }
}

fn cgroup_mounts_keep_their_flags(cgroupns: bool) {
    let mut per_runtime = vec![];
    for rt in runtimes() {
        let mut bundle = Bundle::new(&["cat", "/proc/self/mountinfo"]);
        in_cgroupns(&mut bundle, cgroupns);
        let id = rt.new_id("cgmo");
        let out = rt.run(&id, &bundle, &[], b"").ok();
        let mounts = cgroup_mount_options(&out.stdout);
        // v1: the tmpfs and a mount per hierarchy; v2: the one cgroup2 mount.
        let expected = if unified() { mounts.len() == 1 } else { mounts.len() > 1 };
        assert!(expected, "{} (cgroupns {cgroupns}): cgroup mounts: {mounts:?}\n{}", name(&rt), out.stdout);
        for (point, options) in &mounts {
            // rustpod makes v1's tmpfs read-only too.
            let wanted: &[&str] = if point == "/sys/fs/cgroup" && writable_root_tmpfs(&rt) {
                &["nosuid", "nodev", "noexec"]
            } else {
                &["ro", "nosuid", "nodev", "noexec"]
            };
            for flag in wanted {
                assert!(options.iter().any(|o| o == flag), "{} (cgroupns {cgroupns}): {point} lacks {flag}: {options:?}", name(&rt));
            }
        }
        let mut compared: Vec<_> = mounts.into_iter().filter(|(p, _)| unified() || p != "/sys/fs/cgroup").collect();
        if env::is_crun(rt.bin()) {
            // crun 1.28 adds nosymfollow; a cgroupfs holds no symlinks, so it changes nothing.
            compared.iter_mut().for_each(|(_, options)| options.retain(|o| o != "nosymfollow"));
        }
        per_runtime.push(compared);
    }
    if let [ours, runc] = &per_runtime[..] {
        assert_eq!(ours, runc, "the cgroup mounts differ from runc's (cgroupns {cgroupns})");
    }
}

#[test]
fn a_container_joining_a_pid_namespace_gets_a_read_only_cgroupfs() {
    skip_if!(blocker());
    for rt in runtimes() {
        let sandbox = Bundle::new(SLEEP);
        let sandbox_id = rt.new_id("cgsb");
        rt.start_container(&sandbox_id, &sandbox);
        let ns = format!("/proc/{}/ns/pid", rt.pid(&sandbox_id));
        let mut bundle = Bundle::new(&["sh", "-c", &write_limits()]);
        let mut namespaces = bundle.config()["linux"]["namespaces"].as_array().cloned().unwrap_or_default();
        for n in namespaces.iter_mut().filter(|n| n["type"] == "pid") {
            n["path"] = json!(ns);
        }
        bundle.set("/linux/namespaces", json!(namespaces));
        let id = rt.new_id("cgjn");
        let out = rt.run(&id, &bundle, &[], b"").ok();
        for step in ["pids", "memory", "mkdir", "root"] {
            let denied = !out.stdout.contains(&format!("{step}=0")) || (step == "root" && writable_root_tmpfs(&rt));
            assert!(denied, "{}: {step} write succeeded: {}", name(&rt), out.stdout);
        }
        rt.cmd(&["delete", "--force", &sandbox_id]).ok();
    }
}

/// A container (cgroupfs mounted read-write) that makes sub-cgroups two deep and moves itself
/// (and its children) there: in each v1 hierarchy, or under its own v2 cgroup.
const MAKE_SUB_CGROUPS_V1: &str = "for c in pids memory freezer devices cpu; do \
                                   mkdir -p /sys/fs/cgroup/$c/sub/deeper || exit 1; \
                                   echo $$ > /sys/fs/cgroup/$c/sub/deeper/cgroup.procs || exit 1; done; \
                                   sleep 1000 & wait";
const MAKE_SUB_CGROUPS_V2: &str = "mkdir -p $cg/sub/deeper || exit 1; \
                                   echo $$ > $cg/sub/deeper/cgroup.procs || exit 1; \
                                   sleep 1000 & wait";

/// The container's cgroup dir on the host, in the cpu hierarchy of v1 or the one of v2.
fn host_cgroup_dir(cgroups_path: &str) -> PathBuf {
    let hierarchy = if unified() { PathBuf::from("/sys/fs/cgroup") } else { PathBuf::from("/sys/fs/cgroup/cpu") };
    hierarchy.join(cgroups_path.trim_start_matches('/'))
}

#[test]
fn delete_force_removes_sub_cgroups_the_container_made() {
    skip_if!(blocker());
    let script = match unified() {
        true => format!("{OWN_V2_CGROUP}{MAKE_SUB_CGROUPS_V2}"),
        false => MAKE_SUB_CGROUPS_V1.to_string(),
    };
    for rt in runtimes() {
        let mut bundle = Bundle::new(&["sh", "-c", &script]);
        let mounts: Vec<_> = bundle.config()["mounts"].as_array().cloned().unwrap_or_default();
        let rw: Vec<_> = mounts
            .into_iter()
            .map(|mut m| {
                if m["type"] == "cgroup" {
                    m["options"] = json!(["nosuid", "noexec", "nodev", "rw"]);
                }
                m
            })
            .collect();
        bundle.set("/mounts", json!(rw));
        let id = rt.new_id("cgsub");
        rt.start_container(&id, &bundle);
        let deeper = host_cgroup_dir(&rustpod_tests::cgroup::cgroups_path(&id)).join("sub/deeper/cgroup.procs");
        let moved = || fs::read_to_string(&deeper).is_ok_and(|p| !p.trim().is_empty());
        wait::wait_for("the container to move into its sub-cgroups", || moved().then_some(()));
        let out = rt.cmd(&["delete", "--force", &id]);
        assert!(out.success(), "{}: {}", name(&rt), out.describe());
        let left = rustpod_tests::cgroup::dirs(&id);
        assert!(left.is_empty(), "{}: cgroups left: {left:?}", name(&rt));
        rt.assert_nothing_left(&id, bundle.path());
    }
}

/// A host `sleep` moved into a cgroup made for the test (in every v1 hierarchy, or in the v2 one);
/// Drop kills it by pid and removes the cgroup, sub-cgroups first.
struct HostProcessInCgroup {
    child: Child,
    path: String,
}

const CONTROLLERS: &[&str] = &["pids", "memory", "freezer", "devices", "cpu", "cpuacct", "blkio", "systemd"];

impl HostProcessInCgroup {
    fn start() -> Self {
        let child = Command::new("sleep")
            .arg("1000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        HostProcessInCgroup { child, path: format!("/{}", unique_name("rustpod-test-shared")) }
    }

    fn dirs(&self) -> Vec<PathBuf> {
        let relative = self.path.trim_start_matches('/');
        if unified() {
            return vec![PathBuf::from("/sys/fs/cgroup").join(relative)];
        }
        CONTROLLERS.iter().map(|c| PathBuf::from("/sys/fs/cgroup").join(c).join(relative)).collect()
    }

    /// The cgroup.procs of its cgroup in v1's pids hierarchy or in v2's.
    fn procs(&self) -> PathBuf {
        self.dirs()[0].join("cgroup.procs")
    }

    /// Moves the sleep into the cgroup, making it where it does not exist yet.
    fn join(&self) {
        for dir in self.dirs() {
            if dir.parent().is_some_and(|p| p.is_dir()) {
                fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
                fs::write(dir.join("cgroup.procs"), self.child.id().to_string())
                    .unwrap_or_else(|e| panic!("move sleep into {}: {e}", dir.display()));
            }
        }
    }

    #[track_caller]
    fn assert_alive(&mut self, after: &str) {
        let status = self.child.try_wait().expect("try_wait");
        assert!(status.is_none(), "{after} killed the host process in the shared cgroup ({status:?})");
    }
}

impl Drop for HostProcessInCgroup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        wait::eventually(|| {
            for dir in self.dirs() {
                let _ = fs::remove_dir(&dir);
            }
            self.dirs().iter().all(|d| !d.exists())
        });
    }
}

/// A bundle whose container has the shared cgroup.
fn shared_bundle(args: &[&str], host: &HostProcessInCgroup) -> Bundle {
    let mut bundle = Bundle::new(args);
    bundle.clear_cgroups_path();
    bundle.set("/linux/cgroupsPath", json!(host.path));
    bundle
}

#[test]
fn delete_of_a_created_container_spares_a_host_process_in_its_cgroup() {
    skip_if!(blocker());
    for rt in sparing_runtimes() {
        let mut host = HostProcessInCgroup::start();
        let bundle = shared_bundle(SLEEP, &host);
        let id = rt.new_id("cgdel");
        rt.create(&id, &bundle);
        host.join();
        let out = rt.cmd(&["delete", &id]);
        host.assert_alive(&format!("{} delete", name(&rt)));
        if rt.bin() == env::runc_bin() && !out.success() {
            // runc >= 1.2 keeps a container whose cgroup it cannot remove (rmdir: EBUSY, the
            // host's process is in it); rustpod deletes it and leaves the cgroup to its other
            // process, as runc 1.1.5 (tests/RUNC_DIFFERENCES.md).
            let busy = !env::runc_before(rt.bin(), (1, 2, 0)) && out.stderr.contains("device or resource busy");
            assert!(busy, "{}: {}", name(&rt), out.describe());
            continue;
        }
        assert!(out.success(), "{}: {}", name(&rt), out.describe());
        assert!(rt.try_status(&id).is_none(), "{}: state left", name(&rt));
    }
}

#[test]
fn a_foreground_run_spares_a_host_process_in_its_cgroup() {
    skip_if!(blocker());
    for rt in sparing_runtimes() {
        let mut host = HostProcessInCgroup::start();
        let bundle = shared_bundle(&["sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.05; done"], &host);
        let id = rt.new_id("cgrun");
        let run = rt.spawn_run(&id, &bundle, &[], b"");
        let tmp = PathBuf::from(bundle.rootfs()).join("tmp");
        wait::wait_for("the container to start", || (rt.try_status(&id).as_deref() == Some("running")).then_some(()));
        host.join();
        fs::write(tmp.join("go"), "").expect("write go");
        let out = run.wait();
        assert_eq!(out.code(), 0, "{}: {}", name(&rt), out.describe());
        host.assert_alive(&format!("{} run", name(&rt)));
    }
}

/// A container without a PID namespace of its own, with two processes, in the cgroup `host`'s
/// sleep then joins; `end` (a delete --force or a kill KILL, `ID` standing for the container)
/// must kill both and spare the sleep.
fn without_a_pid_namespace_spares_a_host_process(end: &[&str]) {
    let rt = Runtime::under_test();
    let mut host = HostProcessInCgroup::start();
    let mut bundle = shared_bundle(&["sh", "-c", "sleep 1000 & sleep 1000"], &host);
    let namespaces: Vec<_> =
        bundle.config()["linux"]["namespaces"].as_array().cloned().unwrap_or_default().into_iter().filter(|n| n["type"] != "pid").collect();
    bundle.set("/linux/namespaces", json!(namespaces));
    let id = rt.new_id("cgnopid");
    rt.start_container(&id, &bundle);
    let procs = host.procs();
    let in_cgroup = || -> Vec<i32> {
        let text = fs::read_to_string(&procs).unwrap_or_default();
        text.lines().filter_map(|l| l.trim().parse().ok()).collect()
    };
    // The init and its child (a process in another mount namespace shows no root a host can
    // match, so they are found by their cgroup).
    let ours: Vec<i32> = wait::wait_for("the container's two processes", || {
        let pids = in_cgroup();
        (pids.len() >= 2).then_some(pids)
    });
    host.join();
    let args: Vec<&str> = end.iter().map(|a| if *a == "ID" { id.as_str() } else { a }).collect();
    rt.cmd(&args).ok();
    // runc SIGKILLs everything in the cgroup here (see tests/RUNC_DIFFERENCES.md).
    let spared = host.child.try_wait().expect("try_wait").is_none();
    rustpod_tests::conform!(spared, "{end:?} killed the host process in the shared cgroup");
    let left = || -> Vec<i32> { in_cgroup().into_iter().filter(|p| ours.contains(p)).collect() };
    // runc 1.1's kill KILL signals only the init (1.2 and later every process).
    let all_gone = wait::eventually(|| left().is_empty());
    rustpod_tests::conform!(all_gone, "{end:?} left container processes running: {:?}", left());
}

#[test]
fn delete_force_without_a_pid_namespace_spares_a_host_process_in_its_cgroup() {
    skip_if!(blocker());
    without_a_pid_namespace_spares_a_host_process(&["delete", "--force", "ID"]);
}

#[test]
fn kill_without_a_pid_namespace_spares_a_host_process_in_its_cgroup() {
    skip_if!(blocker());
    without_a_pid_namespace_spares_a_host_process(&["kill", "ID", "KILL"]);
}

#[test]
fn a_failed_create_spares_a_host_process_in_its_cgroup() {
    skip_if!(blocker());
    for rt in sparing_runtimes() {
        let mut host = HostProcessInCgroup::start();
        host.join();
        let bundle = shared_bundle(&["/does-not-exist"], &host);
        let id = rt.new_id("cgfail");
        let out = rt.try_create(&id, &bundle, &[]).failed();
        eprintln!("{}: {}", name(&rt), out.stderr);
        host.assert_alive(&format!("{} failed create", name(&rt)));
        assert!(rt.try_status(&id).is_none(), "{}: state left", name(&rt));
    }
}

#[test]
fn a_cgroup_that_already_holds_processes_is_refused() {
    skip_if!(blocker());
    if env::runc_before(&env::rustpod_bin(), (1, 2, 0)) {
        skip!("runc differs (see tests/RUNC_DIFFERENCES.md): 1.1.5 only warns, runc 1.2 refuses");
    }
    // runc 1.1.5 (this host's) only warns and crun 1.28 creates it (tests/RUNC_DIFFERENCES.md):
    // the comparison is with runc >= 1.2 (the sid guest's 1.3.6).
    let runtimes = runtimes().into_iter().filter(|rt| !env::runc_before(rt.bin(), (1, 2, 0)) && !env::is_crun(rt.bin()));
    for rt in runtimes {
        let mut host = HostProcessInCgroup::start();
        host.join();
        let bundle = shared_bundle(SLEEP, &host);
        let id = rt.new_id("cgused");
        let out = rt.try_create(&id, &bundle, &[]).failed();
        assert_one_line(&out, "container's cgroup is not empty: 1 process(es) found");
        host.assert_alive(&format!("{}: a refused create", name(&rt)));
        rt.assert_nothing_left(&id, bundle.path());
    }
}

#[test]
fn the_root_cgroup_is_refused() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        // Not even to compare: runc 1.1.5 accepts it, and its cleanup then tries to remove
        // every cgroup of the host, depth-first.
        skip!("runc differs (see tests/RUNC_DIFFERENCES.md): it accepts cgroupsPath \"/\"");
    }
    let rt = Runtime::under_test();
    for path in ["/", "/a/.."] {
        let mut bundle = Bundle::new(SLEEP);
        bundle.clear_cgroups_path();
        bundle.set("/linux/cgroupsPath", json!(path));
        let id = rt.new_id("cgroot");
        let out = rt.try_create(&id, &bundle, &[]).failed();
        assert_one_line(&out, "linux.cgroupsPath");
        rt.assert_nothing_left(&id, bundle.path());
    }
}

#[track_caller]
fn assert_one_line(out: &Output, needle: &str) {
    let lines = out.stderr_lines();
    assert_eq!(lines.len(), 1, "not one line: {}", out.describe());
    assert!(lines[0].contains(needle), "{needle:?} not in {:?}", lines[0]);
}
