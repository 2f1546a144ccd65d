// Faults around the shim (issue 7): SIGKILL of the shim during a create, during an exec and
// while a container exits, SIGKILL of containerd during a container's create, and a soak of `ctr run --rm` through one long-lived grouped shim
// that must not leak fds, zombies or mounts. The ShimContainerd guard cleans up by pid on Drop.

use std::path::PathBuf;

use rustpod_tests::process::Spawned;
use rustpod_tests::shim::{blocker, ShimContainerd, IMAGE, RUNTIME};
use rustpod_tests::{leftovers, skip_if, wait};

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| !s.rsplit(") ").next().unwrap_or("").starts_with('Z')).unwrap_or(false)
}

/// Kills a background ctr client by pid when the test ends, even on panic.
struct Client(Option<Spawned>);

impl Client {
    fn take(&mut self) -> Spawned {
        self.0.take().expect("client taken twice")
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            if !child.is_finished() {
                leftovers::kill_pids([child.pid()]);
            }
            let _ = child.try_wait();
        }
    }
}

/// Every cgroup v1 dir process `pid` is in (one per hierarchy), other than the root ones.
fn cgroup_dirs(pid: i32) -> Vec<PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    cgroups
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let controller = controllers.split(',').next()?.trim_start_matches("name=");
            let rel = path.trim_start_matches('/');
            (!rel.is_empty() && !controller.is_empty()).then(|| PathBuf::from("/sys/fs/cgroup").join(controller).join(rel))
        })
        .filter(|d| d.is_dir())
        .collect()
}

/// Pids of processes whose cmdline is exactly `words`.
fn pids_with_cmdline(words: &[&str]) -> Vec<i32> {
    let want = words.join("\0") + "\0";
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes()))
        .filter(|pid| alive(*pid))
        .collect()
}

/// Pids whose parent is `pid`.
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .is_ok_and(|s| s.rsplit(") ").next().unwrap_or("").split(' ').nth(1) == Some(&pid.to_string()))
        })
        .collect()
}

/// The state letter (R, S, T, Z…) of process `pid`, if it exists.
fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(") ").next()?.chars().next()
}

/// Children of `pid`, their children, and so on.
fn descendants(pid: i32) -> Vec<i32> {
    let mut found = children(pid);
    let mut i = 0;
    while i < found.len() {
        found.extend(children(found[i]));
        i += 1;
    }
    found
}

/// The cgroup dirs of `pids` that `parent` is not in: the container's, not the shim's.
fn own_cgroup_dirs(pids: &[i32], parent: i32) -> Vec<PathBuf> {
    let inherited = cgroup_dirs(parent);
    let mut dirs: Vec<PathBuf> = pids.iter().flat_map(|p| cgroup_dirs(*p)).filter(|d| !inherited.contains(d)).collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// Stops a `ctr events` recording and returns its events, as "tasks/exit {…}" lines.
fn recorded_events(mut recorder: Client) -> Vec<String> {
    let recorder = recorder.take();
    leftovers::kill_pids([recorder.pid()]);
    let recorded = recorder.try_wait().expect("ctr events ended").stdout;
    recorded.lines().filter_map(|l| l.split_once(" /").map(|(_, e)| e.to_string())).collect()
}

/// The exit event of task `id`'s init among `events`; panics if there is none.
fn init_exit_event<'a>(events: &'a [String], id: &str) -> &'a str {
    let init = format!("\"id\":\"{id}\"");
    events
        .iter()
        .find(|e| e.starts_with("tasks/exit") && e.contains(&init))
        .unwrap_or_else(|| panic!("no exit event for {id}'s init: {events:#?}"))
}

/// After the shim's death, removes task and container `id` as a user would, and returns
/// what `ctr task rm -f` said.
fn remove_after_dead_shim(ctd: &ShimContainerd, id: &str) -> rustpod_tests::process::Output {
    let listed = ctd.task(id);
    eprintln!("after the shim's death, ctr task ls says: {listed:?}");
    if let Some((_, status)) = &listed {
        assert_eq!(status, "STOPPED", "a task whose shim died must not stay {status}");
    }
    let rm = ctd.ctr(&["task", "rm", "-f", id]);
    eprintln!("ctr task rm -f: {}", rm.describe());
    ctd.ctr(&["containers", "rm", id]).ok();
    rm
}

/// The socket file of the shim serving task `id` (from the address `shim start` wrote).
fn shim_socket(ctd: &ShimContainerd, id: &str) -> PathBuf {
    let address = std::fs::read_to_string(format!("{}/address", bundle_dir(ctd, id)))
        .unwrap_or_else(|e| panic!("read the shim address of {id}: {e}"));
    PathBuf::from(address.trim().trim_start_matches("unix://"))
}

/// The dead shim's socket is gone once containerd has cleaned up (`shim delete` removes it).
#[track_caller]
fn assert_socket_removed(ctd: &ShimContainerd, socket: &std::path::Path) {
    assert!(
        wait::eventually(|| !socket.exists()),
        "the dead shim's socket {} is left; containerd's log says:\n{}",
        socket.display(),
        shim_log_lines(ctd)
    );
}

/// containerd's log lines about shims (what it did after a shim's death), for a failure's
/// message: the log goes with the test's scratch dir.
fn shim_log_lines(ctd: &ShimContainerd) -> String {
    let log = std::fs::read_to_string(format!("{}/containerd.log", ctd.dir())).unwrap_or_default();
    log.lines().filter(|l| l.contains("shim") || l.contains("level=error")).collect::<Vec<_>>().join("\n")
}

fn bundle_dir(ctd: &ShimContainerd, id: &str) -> String {
    format!("{}/state/io.containerd.runtime.v2.task/{}/{id}", ctd.dir(), ctd.namespace)
}

/// Waits (bounded) until container `id` left nothing: no listed container or task, no process,
/// no shim state dir, no cgroup dir, no mount of its bundle.
#[track_caller]
fn assert_nothing_left(ctd: &ShimContainerd, id: &str, pids: &[i32], cgroups: &[PathBuf]) {
    let bundle = bundle_dir(ctd, id);
    let state = ctd.state_root().join(id);
    let find = || {
        let mut left: Vec<String> = pids.iter().filter(|p| alive(**p)).map(|p| format!("process {p}")).collect();
        left.extend(cgroups.iter().filter(|d| d.exists()).map(|d| format!("cgroup {}", d.display())));
        if state.exists() {
            left.push(format!("state dir {}", state.display()));
        }
        left.extend(leftovers::mounts_under(&bundle));
        if ctd.task(id).is_some() {
            left.push(format!("task {id} still listed"));
        }
        let containers = ctd.ctr(&["containers", "ls", "-q"]);
        if containers.stdout.split_whitespace().any(|c| c == id) {
            left.push(format!("container {id} still listed"));
        }
        left
    };
    if wait::eventually(|| find().is_empty()) {
        return;
    }
    panic!("container {id} left behind:\n  {}", find().join("\n  "));
}

/// The pids (host view) of the processes of task `id`, from `ctr task ps`.
fn task_pids(ctd: &ShimContainerd, id: &str) -> Vec<i32> {
    ctd.ctr(&["task", "ps", id]).stdout.lines().skip(1).filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect()
}

#[test]
fn shim_sigkilled_during_an_exec_leaves_nothing_behind() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    ctd.run_detached("victim", &[], &["sleep", "1000"]);
    ctd.wait_task("victim", "RUNNING");
    let (init, _) = ctd.task("victim").expect("victim listed");
    let cgroups = cgroup_dirs(init);
    assert!(!cgroups.is_empty(), "the init {init} is in no cgroup of its own");

    // Record containerd's events from before the exec (its exec-added event proves that the
    // recording covers the shim's death).
    let events = Client(Some(ctd.spawn_ctr(&["events"])));
    std::thread::sleep(std::time::Duration::from_secs(1));
    let mut exec = Client(Some(ctd.spawn_ctr(&["task", "exec", "--exec-id", "long", "victim", "sleep", "999"])));
    let exec_pid = wait::wait_for("the exec to run", || task_pids(&ctd, "victim").into_iter().find(|p| *p != init));
    let shims = ctd.shim_pids();
    assert_eq!(shims.len(), 1, "expected one shim, found {shims:?}");
    let socket = shim_socket(&ctd, "victim");

    leftovers::kill_pids(shims.iter().copied());
    assert!(wait::eventually(|| !alive(shims[0])), "the shim did not die");
    // The exec's client loses its shim and ends (with an error).
    let exec_out = exec.take().try_wait().expect("ctr task exec ended");
    assert!(!exec_out.success(), "exec succeeded without its shim: {}", exec_out.describe());

    // containerd notices the dead shim and runs `shim delete`: it reports the task as exited.
    let rm = remove_after_dead_shim(&ctd, "victim");
    assert_nothing_left(&ctd, "victim", &[init, exec_pid], &cgroups);
    assert_socket_removed(&ctd, &socket);
    // The only exit status containerd can report for a task whose shim is gone is 137 (from
    // `shim delete`); ctr prints it as a warning when the task is removed.
    if rm.stderr.contains("exit code") {
        assert!(rm.stderr.contains("exit code 137"), "exit status of a task with a dead shim: {}", rm.describe());
    }
    assert!(ctd.shim_pids().is_empty(), "a shim is left: {:?}", ctd.shim_pids());

    let events = recorded_events(events);
    eprintln!("events: {events:#?}");
    // exec-added proves the recording covers the exec; exec-started may be lost with the
    // shim, which can die after the process runs and before it published the event.
    assert!(events.iter().any(|e| e.starts_with("tasks/exec-added")), "the recording missed the exec: {events:#?}");
    let init_exit = init_exit_event(&events, "victim");
    assert!(init_exit.contains("\"exit_status\":137"), "the init's exit status: {init_exit}");
}

#[test]
fn shim_sigkilled_during_a_create_leaves_nothing_behind() {
    skip_if!(blocker());
    // The shim's create helper stops itself (SIGSTOP) once the engine has forked the init and
    // made its cgroup, before rustpod's own metadata is written.
    let ctd = ShimContainerd::start_with_env(&[("RUSTPOD_DEBUG_PAUSE", "engine-created")]);
    let mut run = Client(Some(ctd.spawn_ctr(&["run", "-d", "--runtime", RUNTIME, IMAGE, "halfmade", "sleep", "1000"])));
    let (shim, helper) = wait::wait_for("the shim's create helper to stop mid-create", || {
        let shim = *ctd.shim_pids().first()?;
        let helper = descendants(shim).into_iter().find(|p| state_of(*p) == Some('T'))?;
        Some((shim, helper))
    });
    let pids = descendants(shim);
    let cgroups = own_cgroup_dirs(&pids, shim);
    eprintln!("shim {shim}, stopped helper {helper}, its processes {pids:?}, cgroups {cgroups:?}");
    assert!(!cgroups.is_empty(), "the half-made container has no cgroup yet: {pids:?}");

    // The shim dies with everything it forked that is not the container.
    leftovers::kill_pids([shim, helper]);
    assert!(wait::eventually(|| !alive(shim)), "the shim did not die");
    let run_out = run.take().try_wait().expect("ctr run ended");
    assert!(!run_out.success(), "create succeeded without its shim: {}", run_out.describe());
    assert!(ctd.shim_pids().is_empty(), "a shim is left: {:?}", ctd.shim_pids());

    remove_after_dead_shim(&ctd, "halfmade");
    let mut everything = pids.clone();
    everything.push(shim);
    assert_nothing_left(&ctd, "halfmade", &everything, &cgroups);

    // Without the fault point, the same id works.
    ctd.restart_containerd();
    let out = ctd.run_rm("halfmade", &["echo", "again"]).ok();
    assert_eq!(out.stdout, "again\n", "{}", out.describe());
}

#[test]
fn shim_sigkilled_while_its_container_exits_reports_137_and_leaves_nothing() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    let script = "while [ ! -e /go ]; do sleep 0.05; done; exit 3";
    ctd.run_detached("exiting", &[], &["sh", "-c", script]);
    ctd.wait_task("exiting", "RUNNING");
    let (init, _) = ctd.task("exiting").expect("exiting listed");
    let cgroups = cgroup_dirs(init);
    let shims = ctd.shim_pids();
    assert_eq!(shims.len(), 1, "expected one shim, found {shims:?}");
    let shim = shims[0];
    let socket = shim_socket(&ctd, "exiting");
    let events = Client(Some(ctd.spawn_ctr(&["events"])));
    std::thread::sleep(std::time::Duration::from_secs(1));

    // Freeze the shim, let the container exit 3, and kill the shim before it can reap it: the
    // status dies with the shim.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(shim), nix::sys::signal::Signal::SIGSTOP).expect("stop the shim");
    std::fs::write(format!("/proc/{init}/root/go"), "").expect("let the container exit");
    wait::wait_for("the container's init to exit", || (state_of(init) == Some('Z')).then_some(()));
    leftovers::kill_pids([shim]);
    assert!(wait::eventually(|| !alive(shim)), "the shim did not die");

    let rm = remove_after_dead_shim(&ctd, "exiting");
    assert_nothing_left(&ctd, "exiting", &[init], &cgroups);
    assert_socket_removed(&ctd, &socket);
    assert!(ctd.shim_pids().is_empty(), "a shim is left: {:?}", ctd.shim_pids());
    if rm.stderr.contains("exit code") {
        assert!(rm.stderr.contains("exit code 137"), "{}", rm.describe());
    }
    let events = recorded_events(events);
    eprintln!("events: {events:#?}");
    if !events.iter().any(|e| e.starts_with("tasks/exit")) {
        eprintln!("no exit event; containerd's log says:\n{}", shim_log_lines(&ctd));
    }
    let exit = init_exit_event(&events, "exiting");
    assert!(exit.contains("\"exit_status\":137"), "an exit status the shim never saw is reported as 137: {exit}");
}

#[test]
fn containerd_sigkilled_during_create_never_orphans_the_container() {
    skip_if!(blocker());
    let ctd = ShimContainerd::start();
    // A command line no other test (or parallel run) has, to find orphans by.
    let seconds = (800_000 + std::process::id()).to_string();
    let command = ["sleep", seconds.as_str()];
    let mut args = vec!["run", "-d", "--runtime", RUNTIME, IMAGE, "caught"];
    args.extend_from_slice(&command);
    let mut run = Client(Some(ctd.spawn_ctr(&args)));
    // Kill containerd once the create is under way: the bundle exists (containerd made it).
    let bundle = bundle_dir(&ctd, "caught");
    wait::wait_for("containerd to start creating the container", || {
        (std::path::Path::new(&bundle).exists() || run.0.as_mut().is_some_and(|c| c.is_finished())).then_some(())
    });
    ctd.kill_containerd();
    let run_out = run.take().try_wait().expect("ctr run ended");
    eprintln!("ctr run: {}", run_out.describe());

    ctd.restart_containerd();
    let listed = ctd.ctr(&["containers", "ls", "-q"]).ok();
    let task = ctd.task("caught");
    eprintln!("after the restart: container listed: {}, task: {task:?}", listed.stdout.split_whitespace().any(|c| c == "caught"));
    let mut cgroups = vec![];
    let mut pids = pids_with_cmdline(&command);
    match &task {
        Some((pid, status)) if status == "RUNNING" => {
            assert!(alive(*pid), "task listed RUNNING but its pid {pid} is dead");
            assert_eq!(pids, vec![*pid], "the container's command runs outside its task");
            cgroups = cgroup_dirs(*pid);
            ctd.ctr(&["task", "kill", "-s", "SIGKILL", "caught"]).ok();
            ctd.wait_task("caught", "STOPPED");
            assert_eq!(ctd.delete_task("caught"), 137);
        }
        Some((_, status)) => {
            // Any other state must still be removable; its process must not run unreported.
            eprintln!("task caught is {status}");
            let _ = ctd.ctr(&["task", "kill", "-s", "SIGKILL", "caught"]);
            ctd.ctr(&["task", "rm", "-f", "caught"]).ok();
        }
        None => {
            assert!(pids.is_empty(), "container not running per containerd, but its command runs: {pids:?}");
            let _ = ctd.ctr(&["task", "rm", "-f", "caught"]);
        }
    }
    let idle_shims = if task.is_none() { ctd.shim_pids() } else { vec![] };
    if listed.stdout.split_whitespace().any(|c| c == "caught") {
        ctd.ctr(&["containers", "rm", "caught"]).ok();
    }
    pids.extend(pids_with_cmdline(&command));
    assert_nothing_left(&ctd, "caught", &pids, &cgroups);
    assert!(wait::eventually(|| pids_with_cmdline(&command).is_empty()), "orphaned container processes: {:?}", pids_with_cmdline(&command));
    // When containerd died before the task was created, containerd 1.6 never shuts the shim it
    // started down (the runc.v2 shim lingers the same way): tolerate it only if it serves nothing.
    for shim in &idle_shims {
        assert!(children(*shim).is_empty(), "the lingering shim {shim} has children: {:?}", children(*shim));
        eprintln!("shim {shim} lingers with no task (containerd 1.6 does not shut it down)");
    }
    assert!(wait::eventually(|| ctd.shim_pids().iter().all(|p| idle_shims.contains(p))), "a shim is left: {:?}", ctd.shim_pids());
    // The id is free again and works, unless containerd died before the task existed: then
    // containerd 1.6 keeps the shim and its bundle, and refuses the id ("task caught: already
    // exists") with the runc.v2 shim just the same.
    if idle_shims.is_empty() {
        let out = ctd.run_rm("caught", &["echo", "again"]).ok();
        assert_eq!(out.stdout, "again\n", "{}", out.describe());
    }
}

#[derive(Debug)]
struct ShimCounts {
    fds: usize,
    rss_kb: u64,
    zombies: usize,
    mounts: usize,
}

fn shim_counts(shim: i32, task_dir: &str) -> ShimCounts {
    let fds = std::fs::read_dir(format!("/proc/{shim}/fd")).expect("read the shim's fds").count();
    let status = std::fs::read_to_string(format!("/proc/{shim}/status")).expect("shim status");
    let rss_kb =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).expect("VmRSS");
    let zombies = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let rest: Vec<&str> = stat.rsplit(") ").next().unwrap_or("").split(' ').collect();
            rest.first() == Some(&"Z") && rest.get(1) == Some(&shim.to_string().as_str())
        })
        .count();
    let mounts = leftovers::mount_points_under(task_dir).len();
    ShimCounts { fds, rss_kb, zombies, mounts }
}

#[test]
fn shim_soak_through_one_grouped_shim_leaks_nothing() {
    skip_if!(blocker());
    let cycles: usize = std::env::var("RUSTPOD_SHIM_SOAK_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let ctd = ShimContainerd::start();
    let group = ["--annotation", "io.containerd.runc.v2.group=soak"];
    ctd.run_detached("anchor", &group, &["sleep", "100000"]);
    ctd.wait_task("anchor", "RUNNING");
    let shims = ctd.shim_pids();
    assert_eq!(shims.len(), 1, "expected one shim, found {shims:?}");
    let shim = shims[0];
    let task_dir = format!("{}/state/io.containerd.runtime.v2.task/{}", ctd.dir(), ctd.namespace);

    let run = |i: usize| {
        let id = format!("soak{i}");
        let mut args = vec!["run", "--rm", "--runtime", RUNTIME];
        args.extend_from_slice(&group);
        args.extend_from_slice(&[IMAGE, id.as_str(), "echo", "cycle"]);
        // The exit is reported only once the output has reached ctr's FIFO: nothing is lost,
        // even under load.
        let out = ctd.ctr(&args).ok();
        assert_eq!(out.stdout, "cycle\n", "cycle {i} lost its output: {}", out.describe());
    };
    // One warm-up cycle, so that lazily made things (clients, thread pools) are in the baseline.
    run(0);
    let before = shim_counts(shim, &task_dir);
    for i in 1..=cycles {
        run(i);
    }
    // Removal is synchronous in ctr, but the shim reaps and closes asynchronously: poll.
    let settled = wait::eventually(|| {
        let now = shim_counts(shim, &task_dir);
        now.fds <= before.fds && now.zombies == 0 && now.mounts <= before.mounts
    });
    let after = shim_counts(shim, &task_dir);
    eprintln!("shim {shim} soak of {cycles} cycles: before {before:?}, after {after:?}");
    assert_eq!(ctd.shim_pids(), vec![shim], "the grouped shim changed during the soak");
    assert!(settled, "the shim leaked over {cycles} cycles: before {before:?}, after {after:?}");
    // RSS: allow allocator slack (4 MiB), but not growth per cycle.
    assert!(after.rss_kb <= before.rss_kb + 4096, "the shim's RSS grew: before {before:?}, after {after:?}");
    for i in 0..=cycles {
        let id = format!("soak{i}");
        assert!(!ctd.state_root().join(&id).exists(), "state left for {id}");
    }
    assert_eq!(ctd.task_status("anchor").as_deref(), Some("RUNNING"));
}
