//! A new time namespace for the init, without the engine's intermediate:
//! the kernel takes a time namespace's offsets only before any process is
//! in it, so the init unshares one for its children, writes
//! `linux.timeOffsets` to its `timens_offsets`, then enters it itself with
//! setns(2) of its own `time_for_children` (a single-threaded caller
//! enters at once, its vDSO clocks too). The engine forked for that.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;

use nix::errno::Errno;
use nix::sched::CloneFlags;
use oci_spec::runtime::LinuxTimeOffset;

use crate::sys::io_errno::errno_of;

/// The clocks a time namespace offsets.
const CLOCKS: [&str; 2] = ["monotonic", "boottime"];

/// Why the time namespace was not made: the step, the call and the errno.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TimeNsError {
    #[error("linux.timeOffsets: {0:?} is no clock a time namespace offsets (monotonic, boottime)")]
    UnknownClock(String),
    #[error("linux.namespaces (time): {call}: {errno}")]
    Call { call: &'static str, errno: Errno },
}

/// CLONE_NEWTIME, which nix 0.29 does not name.
pub fn flag() -> CloneFlags {
    CloneFlags::from_bits_retain(libc::CLONE_NEWTIME)
}

/// The lines `timens_offsets` takes for `offsets`, one per clock, in the
/// kernel's clock names.
pub fn offset_lines(offsets: &HashMap<String, LinuxTimeOffset>) -> Result<Vec<String>, TimeNsError> {
    let mut lines = Vec::new();
    for (clock, offset) in offsets {
        if !CLOCKS.contains(&clock.as_str()) {
            return Err(TimeNsError::UnknownClock(clock.clone()));
        }
        lines.push(format!("{clock} {} {}\n", offset.secs().unwrap_or(0), offset.nanosecs().unwrap_or(0)));
    }
    lines.sort();
    Ok(lines)
}

/// In the init: a new time namespace with `offsets`, entered.
pub fn make_and_enter(offsets: Option<&HashMap<String, LinuxTimeOffset>>) -> Result<(), TimeNsError> {
    let lines = offsets.map(offset_lines).transpose()?.unwrap_or_default();
    nix::sched::unshare(flag()).map_err(|errno| TimeNsError::Call { call: "unshare(CLONE_NEWTIME)", errno })?;
    if !lines.is_empty() {
        let errno = |e: std::io::Error| errno_of(&e);
        let mut file = File::options()
            .write(true)
            .open("/proc/self/timens_offsets")
            .map_err(|e| TimeNsError::Call { call: "open /proc/self/timens_offsets", errno: errno(e) })?;
        for line in &lines {
            file.write_all(line.as_bytes()).map_err(|e| TimeNsError::Call { call: "write /proc/self/timens_offsets", errno: errno(e) })?;
        }
    }
    let ns = File::open("/proc/self/ns/time_for_children")
        .map_err(|e| TimeNsError::Call { call: "open /proc/self/ns/time_for_children", errno: errno_of(&e) })?;
    nix::sched::setns(ns, flag()).map_err(|errno| TimeNsError::Call { call: "setns(time_for_children)", errno })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(value: serde_json::Value) -> HashMap<String, LinuxTimeOffset> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn each_clock_is_one_line_and_an_unknown_one_is_refused() {
        let got = offset_lines(&offsets(serde_json::json!({"monotonic": {"secs": 10}, "boottime": {"secs": 20, "nanosecs": 5}}))).unwrap();
        assert_eq!(got, ["boottime 20 5\n", "monotonic 10 0\n"]);
        let err = offset_lines(&offsets(serde_json::json!({"realtime": {"secs": 1}}))).unwrap_err();
        assert_eq!(err, TimeNsError::UnknownClock("realtime".into()));
    }

    /// The whole step, in a child of the test binary: its clocks move by
    /// the offsets at once, without a fork (root only; skipped otherwise).
    #[test]
    fn the_caller_enters_its_new_time_namespace_at_once() {
        if !nix::unistd::geteuid().is_root() || !std::path::Path::new("/proc/self/ns/time").exists() {
            eprintln!("skipped: needs root and time namespaces");
            return;
        }
        const TEN_YEARS: i64 = 10 * 365 * 86_400;
        let monotonic = || {
            let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: a valid clock and a timespec to fill.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
            now.tv_sec
        };
        // SAFETY: the child only makes syscalls and exits.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let before = monotonic();
                let ok = make_and_enter(Some(&offsets(serde_json::json!({"monotonic": {"secs": TEN_YEARS}})))).is_ok()
                    && monotonic() >= before + TEN_YEARS;
                unsafe { libc::_exit(if ok { 0 } else { 1 }) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                let status = nix::sys::wait::waitpid(child, None).unwrap();
                assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0), "the child's clock did not move by the offset");
            }
        }
    }
}
