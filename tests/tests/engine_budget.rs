// The shape of one `run` of /bin/true under `strace -ff` (issue 22's budget, counted, never
// timed): the CLI and the container's init are the only processes, no binary of ours is
// executed again, the init reads neither mountinfo nor /proc/self/cgroup and makes few
// statx/fstatfs checks, and the CLI reads each of those two files at most once. A spec that
// silently fell back to the engine's route (its intermediate process, its rootfs through
// pathrs' checked procfs: ~300 statx+fstatfs) fails here. Run on the test harness's spec and on
// the one `rustpod spec` writes, which a user's first `rustpod run` takes; on this v1 host and
// in the sid guest on v2. An `exec` of /bin/true has the same shape: one process of ours into
// the container, which drops the bounding set without reading it and reads no /proc file.

use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{needs, skip_if, Bundle, Runtime, Value};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

/// statx, newfstatat and fstatfs the init may make before its exec: today 30–45, the type of
/// each mount target and masked path, /dev/null's and stdio's checks, the program's lookup. The
/// engine's rootfs made ~300; this catches a spec that falls back to it, not one call more.
const INIT_STAT_BUDGET: usize = 60;

/// The strace the blocker looks for is the one run (Debian's, from hack/install-deps.sh).
const STRACE: &str = "/usr/bin/strace";

/// One process of the trace: its calls in order, up to the container's exec for the init.
struct Process {
    calls: Vec<String>,
    is_init: bool,
}

/// `rustpod run` of `bundle` under `strace -ff`, one entry per process (threads with theirs).
fn traced_run(rt: &Runtime, id: &str, bundle: &Bundle) -> Vec<Process> {
    bundle.prepare(id);
    traced(rt, &["run", "--bundle", bundle.path(), id])
}

/// The CLI with `args` under `strace -ff`, one entry per process (threads with theirs).
fn traced(rt: &Runtime, args: &[&str]) -> Vec<Process> {
    let dir = ScratchDir::new("strace");
    let prefix = dir.join("t");
    let out = Command::new(STRACE)
        .args(["-ff", "-qq", "-o"])
        .arg(&prefix)
        .arg(rt.bin())
        .args(["--root", rt.root()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run strace");
    assert!(out.status.success(), "{args:?} under strace: {}", String::from_utf8_lossy(&out.stderr));
    processes(dir.path())
}

fn processes(dir: &Path) -> Vec<Process> {
    let mut per_pid = BTreeMap::new();
    for entry in fs::read_dir(dir).expect("read the trace dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("t.").and_then(|p| p.parse::<u32>().ok()) else { continue };
        let text = fs::read_to_string(entry.path()).expect("read a trace");
        per_pid.insert(pid, text.lines().map(str::to_string).collect::<Vec<_>>());
    }
    // A thread's file folds into the process that cloned it.
    let threads: Vec<u32> = per_pid
        .values()
        .flatten()
        .filter(|l| l.starts_with("clone") && l.contains("CLONE_THREAD"))
        .filter_map(|l| l.rsplit("= ").next()?.trim().parse().ok())
        .collect();
    per_pid
        .into_iter()
        .filter(|(pid, _)| !threads.contains(pid))
        .map(|(_, lines)| {
            let exec = lines.iter().position(|l| l.starts_with("execve(") && l.contains("[\"/bin/true\"]") && l.ends_with("= 0"));
            let calls = lines.into_iter().take(exec.map_or(usize::MAX, |i| i + 1)).collect();
            Process { calls, is_init: exec.is_some() }
        })
        .collect()
}

fn count(p: &Process, syscalls: &[&str]) -> usize {
    p.calls.iter().filter(|l| syscalls.iter().any(|s| l.starts_with(&format!("{s}(")))).count()
}

/// Successful opens of a process's /proc file (`/proc/self/cgroup`, `/proc/thread-self/…`,
/// `/proc/<pid>/…`, or the bare name opened under a /proc descriptor): not `sys/fs/cgroup`.
fn opens_of(p: &Process, file: &str) -> usize {
    let of_a_process = |path: &str| {
        let rest = path.strip_prefix("/proc/").unwrap_or(path);
        let rest = match rest.split_once('/') {
            Some((who, rest)) if who == "self" || who == "thread-self" || who.parse::<u32>().is_ok() => rest,
            _ => rest,
        };
        rest == file
    };
    p.calls
        .iter()
        .filter(|l| l.starts_with("open") && !l.contains("= -1"))
        .filter_map(|l| l.split('"').nth(1))
        .filter(|path| of_a_process(path))
        .count()
}

fn check_budget(spec_name: &str, rt: &Runtime, bundle: &Bundle) {
    let id = rt.new_id("budget");
    let procs = traced_run(rt, &id, bundle);
    let inits: Vec<_> = procs.iter().filter(|p| p.is_init).collect();
    assert_eq!(inits.len(), 1, "{spec_name}: not one process exec'd the container's program");
    let init = inits[0];
    assert_eq!(procs.len(), 2, "{spec_name}: processes besides the CLI and the init (an intermediate?): {}", procs.len());
    let bin = rt.bin().to_string_lossy().into_owned();
    for p in &procs {
        let mut again = p.calls.iter().filter(|l| l.starts_with("execve") && (l.contains("/proc/self/exe") || l.contains(&bin)));
        // The CLI's own exec is the first line of its trace.
        assert!(again.nth(usize::from(!p.is_init)).is_none(), "{spec_name}: a binary of ours executed again");
    }
    let stats = count(init, &["statx", "newfstatat", "fstatfs"]);
    eprintln!("{spec_name}: init {} calls, {stats} statx/newfstatat/fstatfs", init.calls.len());
    assert!(stats <= INIT_STAT_BUDGET, "{spec_name}: the init made {stats} stat checks (budget {INIT_STAT_BUDGET})");
    for file in ["mountinfo", "cgroup"] {
        assert_eq!(opens_of(init, file), 0, "{spec_name}: the init opened {file}");
    }
    let cli = procs.iter().find(|p| !p.is_init).unwrap();
    let opens = ["mountinfo", "cgroup"].map(|file| (file, opens_of(cli, file)));
    eprintln!("{spec_name}: the CLI opened {opens:?}");
    for (file, n) in opens {
        assert!(n <= 1, "{spec_name}: the CLI opened {file} {n} times");
    }
}

fn blocker() -> Option<String> {
    needs::program(Path::new(STRACE)).map(|why| format!("{why}: the budget counts calls under strace"))
}

#[test]
fn a_run_of_the_test_spec_stays_within_the_budget() {
    skip_if!(blocker());
    let rt = Runtime::under_test();
    check_budget("the test spec", &rt, &Bundle::new(&["/bin/true"]));
}

/// What `rustpod spec` writes (a cgroup namespace and a read-only cgroup mount; no
/// cgroupsPath, so the CLI finds its own cgroup), as a user's first `run` takes it.
#[test]
fn a_run_of_the_default_spec_stays_within_the_budget() {
    skip_if!(blocker());
    let rt = Runtime::under_test();
    let dir = ScratchDir::new("spec");
    let out = rt.cmd(&["spec", "--bundle", dir.str()]);
    assert!(out.success(), "rustpod spec: {}", out.describe());
    let spec: Value = serde_json::from_str(&fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let mut bundle = Bundle::new(&["/bin/true"]);
    for key in ["mounts", "linux"] {
        bundle.set(&format!("/{key}"), spec[key].clone());
    }
    bundle.set("/process/terminal", Value::Bool(false));
    bundle.clear_cgroups_path();
    check_budget("rustpod spec", &rt, &bundle);
}

/// A `tmpcopyup` tmpfs (podman's `--tmpfs` default), read-only too, and a `lazytime` one: our
/// rootfs steps copy the image's files into the first before it is attached and give the second
/// its flag through fsconfig, so no createContainer re-exec of ours copies or remounts and the
/// engine's rootfs is not taken.
#[test]
fn a_run_with_tmpcopyup_and_lazytime_stays_within_the_budget() {
    skip_if!(blocker());
    let rt = Runtime::under_test();
    let mut bundle = Bundle::new(&["/bin/true"]);
    // The copy's fstatat of each of /etc's ~10 entries counts in the stat budget.
    bundle
        .add_mount(serde_json::json!({"destination": "/etc", "type": "tmpfs", "source": "tmpfs", "options": ["tmpcopyup", "ro"]}))
        .add_mount(serde_json::json!({"destination": "/lazy", "type": "tmpfs", "source": "tmpfs", "options": ["lazytime"]}));
    check_budget("tmpcopyup and lazytime", &rt, &bundle);
}

/// `exec` of /bin/true in a running container with capabilities, additionalGids (as docker sends
/// them) and a seccomp filter: the CLI and the exec'd process only, no binary of ours again, and
/// that process reads no capability of its bounding set (libcontainer's init as a tenant read all
/// 41 before dropping any: 82 of its 122 calls were prctl) and opens no /proc file
/// (setgroups, mountinfo, cgroup: the engine opened setgroups through a newly checked procfs).
#[test]
fn an_exec_stays_within_the_budget() {
    skip_if!(blocker().or_else(needs::containers));
    let rt = Runtime::under_test();
    let mut bundle = Bundle::new(rustpod_tests::SLEEP);
    bundle.set("/process/user/additionalGids", serde_json::json!([10, 20])).set(
        "/linux/seccomp",
        serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["sethostname"], "action": "SCMP_ACT_ERRNO"}]}),
    );
    let id = rt.new_id("budget-exec");
    rt.create(&id, &bundle);
    rt.start(&id);
    let procs = traced(&rt, &["exec", &id, "/bin/true"]);
    let exec: Vec<_> = procs.iter().filter(|p| p.is_init).collect();
    assert_eq!(exec.len(), 1, "not one process exec'd /bin/true");
    assert_eq!(procs.len(), 2, "processes besides the CLI and the exec'd one (an intermediate?): {}", procs.len());
    let exec = exec[0];
    let prctl = count(exec, &["prctl"]);
    let reads = exec.calls.iter().filter(|l| l.starts_with("prctl(PR_CAPBSET_READ")).count();
    eprintln!("exec: {} calls, {prctl} prctl, {reads} PR_CAPBSET_READ", exec.calls.len());
    assert_eq!(reads, 0, "the exec'd process read its bounding set before dropping it");
    for file in ["setgroups", "mountinfo", "cgroup"] {
        assert_eq!(opens_of(exec, file), 0, "the exec'd process opened {file}");
    }
}
