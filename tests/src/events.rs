// containerd's events as `ctr events` prints them, recorded around a test's actions: the topics
// (with their JSON) in order, and where one is.

use crate::leftovers;
use crate::process::Spawned;
use std::time::Duration;

/// Runs `body` while `events` (a spawned `ctr events`) records; stops it by pid and returns
/// each event as "/topic {json}", in order.
pub fn record(events: Spawned, body: impl FnOnce()) -> Vec<String> {
    // ctr subscribes after it starts: events before that are not seen.
    std::thread::sleep(Duration::from_millis(300));
    body();
    // containerd forwards the last events asynchronously.
    std::thread::sleep(Duration::from_millis(500));
    leftovers::kill_pids([events.pid()]);
    let out = events.try_wait().expect("ctr events ended");
    out.stdout.lines().filter_map(|l| l.split_once(" /").map(|(_, rest)| format!("/{rest}"))).collect()
}

/// The index of the first event whose topic starts with `prefix`; panics with all events if none.
#[track_caller]
pub fn position(events: &[String], prefix: &str) -> usize {
    events.iter().position(|e| e.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} event in {events:#?}"))
}

/// The indices of every event whose topic starts with `prefix`.
fn positions(events: &[String], prefix: &str) -> Vec<usize> {
    events.iter().enumerate().filter(|(_, e)| e.starts_with(prefix)).map(|(i, _)| i).collect()
}

/// Checks the events of a container's life (run, one exec, pause, resume, SIGKILL) came in
/// order: create, start, exec-added, exec-started, the exec's exit, paused, resumed, the init's
/// exit with 137. Returns the index of the init's exit; `what` names the path for messages.
#[track_caller]
pub fn assert_task_lifecycle(events: &[String], what: &str) -> usize {
    let create = position(events, "/tasks/create");
    let start = position(events, "/tasks/start");
    let added = position(events, "/tasks/exec-added");
    let started = position(events, "/tasks/exec-started");
    let paused = position(events, "/tasks/paused");
    let resumed = position(events, "/tasks/resumed");
    let exits = positions(events, "/tasks/exit");
    assert_eq!(exits.len(), 2, "{what}: one exit for the exec and one for the init: {events:#?}");
    assert!(create < start && start < added && added < started && started < exits[0], "{what}: {events:#?}");
    assert!(paused < resumed && resumed < exits[1], "{what}: {events:#?}");
    assert!(events[exits[1]].contains("\"exit_status\":137"), "{what}: {}", events[exits[1]]);
    exits[1]
}
