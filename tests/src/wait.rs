// Bounded polling: wait for a condition so that nothing hangs, without ever asserting
// how long it took.

use std::time::{Duration, Instant};

/// How long any single wait may take before the test fails instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(20);

/// Polls `probe` until it yields a value; panics naming `what` after `DEADLINE`.
pub fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(start.elapsed() < DEADLINE, "timed out after {DEADLINE:?} waiting for {what}");
        std::thread::sleep(POLL);
    }
}

/// Polls `probe` until it is true or `DEADLINE` passes; returns the last answer.
pub fn eventually(mut probe: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !probe() {
        if start.elapsed() >= DEADLINE {
            return false;
        }
        std::thread::sleep(POLL);
    }
    true
}
