// Signal dispositions a container starts with: nothing the runtime ignored
// (Rust ignores SIGPIPE, and an ignored signal survives execve) may leak in.

use rustpod_tests::{needs, skip_if, Fixture};

/// The SigIgn mask of the container's first process, from /proc/self/status.
fn ignored_mask(fx: &Fixture) -> u64 {
    let out = fx.rt.run(&fx.id, &fx.bundle, &[], b"").ok();
    let line = out.stdout.lines().find(|l| l.starts_with("SigIgn:")).unwrap_or_else(|| panic!("no SigIgn line: {}", out.describe()));
    u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).expect("hex mask")
}

#[test]
fn container_starts_with_sigpipe_at_its_default() {
    skip_if!(needs::containers());
    let fx = Fixture::new(&["cat", "/proc/self/status"]);
    let mask = ignored_mask(&fx);
    let sigpipe_bit = 1u64 << (libc::SIGPIPE - 1);
    assert_eq!(mask & sigpipe_bit, 0, "SIGPIPE must not be ignored in the container (SigIgn {mask:#x})");
}
