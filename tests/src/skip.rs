// Visible skips: a test that cannot run here says so on stderr and in $RUSTPOD_SKIP_LOG,
// so that no test passes silently without doing its job.

use std::fs::OpenOptions;
use std::io::Write;

/// Prints `SKIP <test>: <reason>` to stderr and appends it to `$RUSTPOD_SKIP_LOG` if set.
pub fn record(test: &str, reason: &str) {
    let line = format!("SKIP {test}: {reason}");
    eprintln!("{line}");
    let Some(path) = std::env::var_os("RUSTPOD_SKIP_LOG") else {
        return;
    };
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open RUSTPOD_SKIP_LOG {}: {e}", path.to_string_lossy()));
    // One write of the whole line, so that parallel tests' lines never interleave.
    log.write_all(format!("{line}\n").as_bytes()).unwrap_or_else(|e| panic!("write RUSTPOD_SKIP_LOG: {e}"));
}

/// The running test's name: libtest names each test thread after its test.
pub fn current_test() -> String {
    std::thread::current().name().unwrap_or("<unnamed test>").to_string()
}

/// `skip!("reason {}", x)`: records the skip and returns from the test.
#[macro_export]
macro_rules! skip {
    ($($reason:tt)+) => {{
        $crate::skip::record(&$crate::skip::current_test(), &format!($($reason)+));
        return;
    }};
}

/// `skip_if!(needs::containers())`: skips when the expression yields `Some(reason)`.
#[macro_export]
macro_rules! skip_if {
    ($blocker:expr) => {
        if let Some(reason) = $blocker {
            $crate::skip!("{}", reason);
        }
    };
}
