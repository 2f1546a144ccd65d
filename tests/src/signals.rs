// Which signals a process catches, from /proc/PID/status. A namespace's PID 1 drops every
// signal it has no handler for, so a test that signals a trapping init must first wait for
// the trap: "running" comes before the shell has run `trap`.

use crate::wait;

/// Whether `pid` has a handler installed for every one of `signals` (false once it is gone).
pub fn catches(pid: i32, signals: &[libc::c_int]) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    let Some(mask) = status.lines().find_map(|l| l.strip_prefix("SigCgt:")) else { return false };
    let caught = u64::from_str_radix(mask.trim(), 16).unwrap_or(0);
    signals.iter().all(|&sig| caught & (1u64 << (sig - 1)) != 0)
}

/// Waits (bounded) until `pid` catches SIGTERM.
pub fn wait_until_it_catches_term(pid: i32) {
    wait::wait_for("the init to catch SIGTERM", || catches(pid, &[libc::SIGTERM]).then_some(()));
}
