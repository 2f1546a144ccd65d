// Scenario 7: container output in the CRI log file, and ReopenContainerLog after rotation.

use rustpod_cri_tests::{container, cri_or_skip};
use rustpod_tests::wait::wait_for;
use std::path::Path;

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Waits for a line `<RFC 3339 time> <stream> F <msg>` in `path` and checks its format.
fn wait_line(path: &Path, stream: &str, msg: &str) {
    let line = wait_for(&format!("`{msg}` on {stream} in {}", path.display()), || {
        lines(path).into_iter().find(|l| l.ends_with(&format!(" {stream} F {msg}")))
    });
    let time = line.split(' ').next().unwrap();
    assert!(
        time.len() >= 20 && time.as_bytes()[4] == b'-' && time.contains('T') && (time.ends_with('Z') || time.contains('+')),
        "CRI log line starts with an RFC 3339 time: {line}"
    );
}

#[test]
fn output_in_cri_format_and_reopen_after_rotation() {
    let cri = cri_or_skip!();
    let (pod_cfg, log_dir) = cri.pod_with_logs("logs", "talker");
    let pod = cri.run_pod_ok(&pod_cfg);
    let mut c = container("talker", "echo first; echo oops >&2; while [ ! -e /go ]; do sleep 0.1; done; echo second; exec sleep 100000");
    c.log_path = "talker/0.log".into();
    let c = cri.run_container(&pod, &c, &pod_cfg);
    let log = log_dir.join("talker/0.log");
    wait_line(&log, "stdout", "first");
    wait_line(&log, "stderr", "oops");
    assert_eq!(cri.status(&c).log_path, log.to_str().unwrap());

    // Rotate as kubelet does: rename, then ask for a new file.
    let rotated = log_dir.join("talker/0.log.20260101-000000");
    std::fs::rename(&log, &rotated).unwrap();
    cri.reopen_log(&c).unwrap_or_else(|e| panic!("ReopenContainerLog (handler {}): {e}", cri.handler));
    assert!(log.exists(), "ReopenContainerLog created {}", log.display());
    cri.sh_ok(&c, "touch /go");
    wait_line(&log, "stdout", "second");
    assert!(!lines(&rotated).iter().any(|l| l.ends_with(" second")), "nothing is written to the rotated file after reopening");
}
