// Assertion helpers shared by the test files: RFC 3339 timestamps, live pids, one-line errors,
// a create that fails as runc's does.

use crate::fixture::{Fixture, SLEEP};
use crate::process::Output;
use crate::{env, Runtime};
use std::path::Path;

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let fixed = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !fixed {
        return false;
    }
    let rest = s[19..].trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
    rest == "Z" || rest == "z" || (rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) && rest.as_bytes()[3] == b':')
}

/// The pid a runtime wrote to a `--pid-file`.
#[track_caller]
pub fn read_pid_file(path: &str) -> i32 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("pid file {path} not written: {e}"));
    text.trim().parse().unwrap_or_else(|e| panic!("pid file {path} holds {text:?}: {e}"))
}

/// A process with this pid exists and is not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).unwrap_or_default();
    let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
    matches!(state, Some(Some(s)) if s != 'Z')
}

/// The command failed with exactly one line on stderr that mentions (case-insensitively) at
/// least one of `needles`; the line is printed so that humans can read each error.
#[track_caller]
pub fn assert_one_line_error(out: &Output, needles: &[&str]) {
    eprintln!("error from `{}` (exit {}): {}", out.cmdline, out.code(), out.stderr.trim_end());
    assert!(!out.success(), "command should have failed: {}", out.describe());
    let lines = out.stderr_lines();
    assert_eq!(lines.len(), 1, "the error should be one line: {}", out.describe());
    let line = lines[0].to_lowercase();
    assert!(
        needles.iter().any(|n| line.contains(&n.to_lowercase())),
        "the error should name the problem (one of {needles:?}): {}",
        out.describe()
    );
}

/// A container of SLEEP with `mounts` added fails create under runc and under the runtime
/// under test (`what`: why it must), leaving nothing behind; the runtime under test says why in
/// one line holding each of `words`.
#[track_caller]
pub fn assert_create_fails_as_runcs(what: &str, mounts: &[serde_json::Value], words: &[&str]) {
    for rt in Runtime::runc_and_under_test() {
        let mut fx = Fixture::on(rt, SLEEP);
        for mount in mounts {
            fx.bundle.add_mount(mount.clone());
        }
        let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
        assert!(!out.success(), "{}: {what}, yet create succeeded", fx.rt.bin().display());
        if !env::is_runc(fx.rt.bin()) {
            assert_one_line_error(&out, words);
            let missing: Vec<&&str> = words.iter().filter(|w| !out.stderr.contains(**w)).collect();
            assert!(missing.is_empty(), "the error should name {missing:?}: {}", out.describe());
        }
        fx.assert_nothing_left();
    }
}

#[cfg(test)]
mod tests {
    use super::is_rfc3339;

    #[test]
    fn rfc3339_forms() {
        assert!(is_rfc3339("2026-11-22T05:39:56.456380971Z"));
        assert!(is_rfc3339("2026-11-22T05:39:56+01:00"));
        assert!(!is_rfc3339("2026-11-22 05:39:56"));
        assert!(!is_rfc3339("yesterday"));
    }
}
