// Terminals: with process.terminal the runtime sends the pty master over --console-socket (one fd,
// SCM_RIGHTS) for create and for `exec --tty`; the test reads the container's output from it.

use rustpod_tests::console::{read_until, ConsoleSocket};
use rustpod_tests::{json, needs, skip_if, Fixture, SLEEP};

/// The program every terminal test runs: a marker line, then `tty`.
fn tty_script(marker: &str) -> [String; 3] {
    ["sh".into(), "-c".into(), format!("echo {marker}; tty")]
}

/// The pty shows `marker` (with the pty's \r\n line end) and a `tty` that starts with `tty_prefix`.
#[track_caller]
fn assert_terminal_output(console: &ConsoleSocket, marker: &str, tty_prefix: &str) {
    let master = console.receive_master();
    let seen = read_until(&master, &[marker, tty_prefix]);
    let line = format!("{marker}\r\n");
    assert!(seen.contains(&line), "terminal output lacks {line:?}: {seen:?}");
    assert!(seen.contains(tty_prefix), "stdio must be a pty ({tty_prefix}…): {seen:?}");
}

#[test]
fn create_sends_pty_master_to_console_socket() {
    skip_if!(needs::containers());
    let script = tty_script("tty-ok");
    let mut fx = Fixture::new(&script.each_ref().map(String::as_str));
    fx.bundle.set("/process/terminal", json!(true));
    let console = ConsoleSocket::new();
    let flags = ["--console-socket".to_string(), console.path()];
    fx.rt.try_create(&fx.id, &fx.bundle, &flags.each_ref().map(String::as_str)).ok();
    fx.rt.start(&fx.id);
    assert_terminal_output(&console, "tty-ok", "/dev/pts/0");
}

#[test]
fn exec_tty_sends_pty_master_to_console_socket() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    let console = ConsoleSocket::new();
    let socket = console.path();
    let script = tty_script("exec-tty-ok");
    let flags = ["--detach", "--tty", "--console-socket", socket.as_str()];
    fx.exec_with(&flags, &script.each_ref().map(String::as_str)).ok();
    assert_terminal_output(&console, "exec-tty-ok", "/dev/pts/");
}
