//! Fault injection for the tests: with `RUSTPOD_DEBUG_PAUSE=<point>` the
//! process stops itself (SIGSTOP) at that named point of an operation, so
//! that a test can act exactly there (kill it, or change what it works on).
//! The points are listed where each operation calls [`at`].

/// Stops this process when `RUSTPOD_DEBUG_PAUSE` names `point`.
pub fn at(point: &str) {
    if std::env::var_os("RUSTPOD_DEBUG_PAUSE").is_some_and(|p| p == point) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    }
}
