// Concurrent creates: many distinct ids at once all succeed and leave nothing after delete;
// two creates racing for one id have exactly one winner, the loser says "already exists",
// and the winner's container is intact (state, start).

use rustpod_tests::assertions::assert_one_line_error;
use rustpod_tests::process::Spawned;
use rustpod_tests::{needs, skip_if, Bundle, Runtime, SLEEP};

const PARALLEL: usize = 50;
const RACES: usize = 20;

/// Starts `create` of `id` from `bundle` in the background (the config must be prepared).
fn spawn_create(rt: &Runtime, id: &str, bundle: &Bundle) -> Spawned {
    rt.spawn_stdin(&["create", "--bundle", bundle.path(), id], b"")
}

#[test]
fn fifty_parallel_creates_with_distinct_ids() {
    skip_if!(needs::containers());
    let rt = Runtime::under_test();
    let containers: Vec<(String, Bundle)> = (0..PARALLEL).map(|_| (rt.new_id("par"), Bundle::new(SLEEP))).collect();
    let running: Vec<Spawned> = containers
        .iter()
        .map(|(id, bundle)| {
            bundle.prepare(id);
            spawn_create(&rt, id, bundle)
        })
        .collect();
    let failed: Vec<String> = running.into_iter().map(Spawned::wait).filter(|out| !out.success()).map(|out| out.describe()).collect();
    assert!(failed.is_empty(), "{} of {PARALLEL} parallel creates failed:\n{}", failed.len(), failed.join("\n"));
    for (id, _) in &containers {
        assert_eq!(rt.status(id), "created", "container {id}");
    }
    let deleting: Vec<Spawned> = containers.iter().map(|(id, _)| rt.spawn_stdin(&["delete", "--force", id], b"")).collect();
    deleting.into_iter().for_each(|d| drop(d.wait().ok()));
    for (id, bundle) in &containers {
        rt.assert_nothing_left(id, bundle.path());
    }
}

#[test]
fn same_id_race_has_exactly_one_winner() {
    skip_if!(needs::containers());
    let rt = Runtime::under_test();
    let bundle = Bundle::new(SLEEP);
    for round in 0..RACES {
        let id = rt.new_id("race");
        bundle.prepare(&id);
        let pair = [spawn_create(&rt, &id, &bundle), spawn_create(&rt, &id, &bundle)];
        let [a, b] = pair.map(Spawned::wait);
        let (winner, loser) = match (a.success(), b.success()) {
            (true, false) => (a, b),
            (false, true) => (b, a),
            _ => panic!("round {round}: exactly one create of {id} must succeed:\n{}\n{}", a.describe(), b.describe()),
        };
        assert!(winner.stderr.trim().is_empty(), "{}", winner.describe());
        assert_one_line_error(&loser, &["already exists"]);
        // The winner's container is intact: its state reads, and it starts.
        assert_eq!(rt.status(&id), "created", "round {round}");
        rt.start(&id);
        rt.wait_status(&id, "running");
        rt.cmd(&["delete", "--force", &id]).ok();
        rt.assert_nothing_left(&id, bundle.path());
    }
}
