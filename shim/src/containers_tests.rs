//! Unit tests of the shim's process registry (no containers, no root): which
//! process a reaped pid is, exits reaped before their pid is known, and when
//! and in what order exit events go out.

use containerd_shim::protos::events::task::TaskExit;
use containerd_shim::protos::protobuf::Message;
use containerd_shim::protos::types::task::Status as TaskStatus;

use super::*;

const INIT_PID: i32 = 100;
const EXEC_PID: i32 = 200;
/// Bounds the wait for an exit a thread of the registry records.
const RECORDED: Duration = Duration::from_secs(10);

fn exit(code: u32) -> ExitStatus {
    ExitStatus { code, at: SystemTime::now() }
}

fn running(exec_id: Option<&str>, pid: i32) -> Process {
    let mut p = Process::new(exec_id, Stdio::default());
    p.pid = pid;
    p.apply(Event::Start, "test process").expect("start");
    p.finish_start(true);
    p
}

fn container(init: Process) -> Container {
    Container {
        bundle: "/bundle".into(),
        kill_all_on_exit: false,
        handle: Arc::default(),
        mounted_rootfs: None,
        init,
        execs: HashMap::new(),
        metrics: None,
        io_owner: None,
        restore_job: None,
        oom: None,
    }
}

/// A registry holding container "c": its init and exec "e" both running.
fn registry() -> Arc<Containers> {
    let shared = Containers::new(PathBuf::from("/nonexistent/rustpod-unit"), Publisher::unforwarded(), Arc::default());
    let mut c = container(running(None, INIT_PID));
    c.execs.insert("e".into(), running(Some("e"), EXEC_PID));
    let mut inner = shared.lock();
    inner.containers.insert("c".into(), c);
    inner.register(INIT_PID, "c", None);
    inner.register(EXEC_PID, "c", Some("e"));
    drop(inner);
    shared
}

/// The (id, exit status) of every exit event queued, in order.
fn exit_events(shared: &Containers) -> Vec<(String, u32)> {
    shared
        .events
        .queued()
        .iter()
        .filter(|e| e.topic == "/tasks/exit")
        .map(|e| {
            let exit = TaskExit::parse_from_bytes(&e.event.value).expect("a TaskExit");
            (exit.id, exit.exit_status)
        })
        .collect()
}

/// The exit events once `n` are queued (or whatever is queued after RECORDED).
fn exit_events_once(shared: &Containers, n: usize) -> Vec<(String, u32)> {
    let deadline = std::time::Instant::now() + RECORDED;
    loop {
        let events = exit_events(shared);
        if events.len() >= n || std::time::Instant::now() > deadline {
            return events;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn state_of(shared: &Containers, exec_id: Option<&str>) -> State {
    shared.lock().containers["c"].process(exec_id).expect("process known").state()
}

#[test]
fn a_reaped_exec_stops_that_exec_only() {
    let shared = registry();
    shared.on_exit(EXEC_PID, exit(3));
    assert_eq!(state_of(&shared, Some("e")), State::Stopped);
    assert_eq!(state_of(&shared, None), State::Running);
    assert_eq!(shared.lock().containers["c"].execs["e"].exited().map(|e| e.code), Some(3));
    assert!(!shared.known_pids().contains(&EXEC_PID), "a reaped pid is forgotten (it may be reused)");
    assert_eq!(exit_events(&shared), [("e".to_string(), 3)]);
}

#[test]
fn the_init_exit_goes_out_after_those_of_its_running_execs() {
    let shared = registry();
    let init_cell = Arc::clone(&shared.lock().containers["c"].init.exit);
    shared.on_exit(INIT_PID, exit(0));
    // The init's exit waits for the exec still running.
    assert!(exit_events(&shared).is_empty(), "{:?}", exit_events(&shared));
    shared.on_exit(EXEC_PID, exit(137));
    init_cell.wait_timeout(RECORDED).expect("the init's exit is recorded once its exec exited");
    // The exit is recorded (waiters wake) just before its event is queued, as in the Go shim.
    let events = exit_events_once(&shared, 2);
    assert_eq!(events, [("e".to_string(), 137), ("c".to_string(), 0)]);
}

#[test]
fn an_init_without_running_execs_exits_at_once() {
    let shared = registry();
    shared.on_exit(EXEC_PID, exit(1));
    shared.on_exit(INIT_PID, exit(2));
    assert_eq!(state_of(&shared, None), State::Stopped);
    assert_eq!(exit_events(&shared), [("e".to_string(), 1), ("c".to_string(), 2)]);
}

#[test]
fn an_exit_reaped_before_its_pid_is_known_is_kept_while_a_helper_runs() {
    let shared = registry();
    shared.lock().spawning += 1;
    shared.on_exit(300, exit(7));
    let mut inner = shared.lock();
    let early = inner.register(300, "c", Some("e2")).expect("the early exit is handed over");
    assert_eq!(early.code, 7);
    assert!(!inner.pids.contains_key(&300), "an exited pid is not kept");
    inner.end_spawn();
    assert_eq!(inner.spawning, 0);
}

#[test]
fn early_exits_are_dropped_only_when_the_last_helper_ends() {
    let shared = registry();
    shared.lock().spawning = 2;
    shared.on_exit(301, exit(0));
    shared.lock().end_spawn();
    assert_eq!(shared.lock().early_exits.len(), 1, "another helper may still report pid 301");
    shared.lock().end_spawn();
    assert!(shared.lock().early_exits.is_empty());
}

#[test]
fn an_unknown_exit_is_ignored_when_no_helper_runs() {
    let shared = registry();
    shared.on_exit(999, exit(0));
    assert!(shared.lock().early_exits.is_empty());
    assert!(shared.events.queued().is_empty());
    assert_eq!(state_of(&shared, None), State::Running);
}

#[test]
fn an_exit_during_a_start_waits_for_the_start_then_goes_out_once() {
    let events = Publisher::unforwarded();
    let mut p = Process::new(None, Stdio::default());
    p.pid = INIT_PID;
    p.apply(Event::Start, "container c").expect("start");
    assert!(!p.set_exited(exit(9)), "no exit event before the start event");
    // ctr's `task delete --force` waits, then asks the state: it must say stopped by then.
    assert!(p.exit.wait_timeout(Duration::ZERO).is_none(), "a Wait returned while the start was in flight");
    p.finish_start(true);
    assert_eq!(p.state(), State::Stopped);
    assert_eq!(p.exit.wait_timeout(Duration::ZERO).map(|e| e.code), Some(9));
    flush_exit(&mut p, "c", &events);
    flush_exit(&mut p, "c", &events);
    assert_eq!(events.queued().iter().filter(|e| e.topic == "/tasks/exit").count(), 1);
    assert!(!p.set_exited(exit(9)), "an exit is published once");
}

#[test]
fn a_process_that_never_ran_ends_its_waiters_with_255() {
    let p = Process::new(Some("e"), Stdio::default());
    release_waiters(&p);
    assert_eq!(p.exit.wait_timeout(Duration::ZERO).map(|e| e.code), Some(255));

    let ran = running(Some("e"), EXEC_PID);
    ran.exit.set(exit(0));
    release_waiters(&ran);
    assert_eq!(ran.exited().map(|e| e.code), Some(0), "a real exit stays");
}

#[test]
fn the_first_exit_recorded_wins() {
    let cell = ExitCell::default();
    assert!(cell.wait_timeout(Duration::ZERO).is_none());
    cell.set(exit(1));
    cell.set(exit(2));
    assert_eq!(cell.wait().code, 1);
}

#[test]
fn status_words_follow_the_process_and_the_pause() {
    let mut c = container(Process::new(None, Stdio::default()));
    assert_eq!(c.task_status(&c.init), TaskStatus::CREATED);
    assert!(c.init.apply(Event::Pause, "container c").is_err(), "only a running process is paused");
    c.init.apply(Event::Start, "container c").expect("start");
    assert_eq!(c.task_status(&c.init), TaskStatus::CREATED, "a start in flight");
    c.init.finish_start(true);
    c.execs.insert("e".into(), running(Some("e"), EXEC_PID));
    assert_eq!(c.task_status(&c.execs["e"]), TaskStatus::RUNNING);
    c.init.apply(Event::Pause, "container c").expect("pause");
    assert_eq!(c.task_status(&c.init), TaskStatus::PAUSED);
    assert_eq!(c.task_status(&c.execs["e"]), TaskStatus::PAUSED, "an exec of a paused container is paused");
    c.init.apply(Event::Resume, "container c").expect("resume");
    assert_eq!(c.task_status(&c.init), TaskStatus::RUNNING);
    c.init.set_exited(exit(0));
    assert_eq!(c.task_status(&c.init), TaskStatus::STOPPED);
}

#[test]
fn no_exec_id_is_the_init() {
    let c = registry();
    let inner = c.lock();
    let c = &inner.containers["c"];
    assert_eq!(c.process(None).map(|p| p.pid), Some(INIT_PID));
    assert_eq!(c.process(Some("e")).map(|p| p.pid), Some(EXEC_PID));
    assert!(c.process(Some("missing")).is_none());
}

#[test]
fn state_root_follows_containerds_state_dir() {
    let bundle = Path::new("/var/lib/ctd2/state/io.containerd.runtime.v2.task/ns1/c1");
    assert_eq!(state_root("ns1", bundle), Path::new("/var/lib/ctd2/state/rustpod/ns1"));
    let default = Path::new("/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1");
    assert_eq!(state_root("k8s.io", default), Path::new("/run/containerd/rustpod/k8s.io"));
    // Not containerd's layout (or another namespace's bundle): the default.
    assert_eq!(state_root("ns1", Path::new("/tmp/bundle")), Path::new("/run/containerd/rustpod/ns1"));
    assert_eq!(state_root("ns2", bundle), Path::new("/run/containerd/rustpod/ns2"));
}

/// A Create with a checkpoint runs nothing: the init is created with no pid
/// (as containerd's runc shim has it until Start restores), and its Delete
/// reports no exit.
#[test]
fn a_create_from_a_checkpoint_is_recorded_and_deleted_without_a_process() {
    let shared = Containers::new(PathBuf::from("/nonexistent/rustpod-unit"), Publisher::unforwarded(), Arc::default());
    let restore = crate::checkpoint::Restore { image_path: "/nonexistent/cp".into(), work_path: "/nonexistent/work".into() };
    let req = NewContainer {
        id: "r".into(),
        bundle: "/nonexistent/bundle".into(),
        stdio: Stdio::default(),
        rootfs: Vec::new(),
        systemd_cgroup: false,
        no_pivot: false,
        io_owner: None,
        restore: Some(restore),
    };
    assert_eq!(shared.create(req).expect("recorded"), 0);
    let view = shared.state("r", None).expect("state");
    assert_eq!((view.pid, view.status), (0, TaskStatus::CREATED));
    assert!(shared.lock().pids.is_empty(), "no pid to reap");
    assert_eq!(shared.lock().creating, 0, "the Create is over: Shutdown may exit");
    let (pid, exit) = shared.delete("r", None).expect("deleted");
    assert_eq!((pid, exit.map(|e| e.code)), (0, None));
    assert!(matches!(shared.state("r", None), Err(Error::NoContainer(_))), "gone after Delete");
}
