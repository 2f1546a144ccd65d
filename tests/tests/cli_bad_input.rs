// Bad input: each case exits non-zero with a one-line stderr error naming the problem (printed for
// humans; runc's are logrus lines `time=… level=error msg=…`), and a failed create leaves nothing.

use rustpod_tests::assertions::assert_one_line_error;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{json, needs, skip_if, Fixture, SLEEP};

/// `create` of the fixture fails naming one of `needles`, and leaves nothing behind.
#[track_caller]
fn assert_create_fails(fx: &Fixture, needles: &[&str]) {
    let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
    assert_one_line_error(&out, needles);
    fx.assert_nothing_left();
}

#[test]
fn missing_bundle_dir() {
    skip_if!(needs::containers());
    let fx = Fixture::new(SLEEP);
    let gone = ScratchDir::new("gone");
    let missing = gone.join_str("no-such-bundle");
    let out = fx.rt.cmd(&["create", "--bundle", &missing, &fx.id]);
    assert_one_line_error(&out, &[&missing, "no such file", "not exist", "not found"]);
    fx.rt.assert_nothing_left(&fx.id, &missing);
}

#[test]
fn missing_config_json() {
    skip_if!(needs::containers());
    let fx = Fixture::new(SLEEP);
    std::fs::remove_file(fx.bundle.config_path()).expect("remove config.json");
    // Bundle::prepare would write it again: call the CLI directly.
    let out = fx.rt.cmd(&["create", "--bundle", fx.bundle.path(), &fx.id]);
    assert_one_line_error(&out, &["config.json"]);
    fx.assert_nothing_left();
}

#[test]
fn invalid_json_config() {
    skip_if!(needs::containers());
    let mut fx = Fixture::new(SLEEP);
    fx.bundle.write_raw_config("{bad");
    // runc: "invalid character 'b' looking for beginning of object key string" (no file name;
    // rustpod should name config.json).
    assert_create_fails(&fx, &["config.json", "json", "invalid character"]);
}

#[test]
fn oci_version_of_wrong_type() {
    skip_if!(needs::containers());
    let mut fx = Fixture::new(SLEEP);
    fx.bundle.set("/ociVersion", json!(1));
    assert_create_fails(&fx, &["ociVersion"]);
}

#[test]
fn executable_not_found() {
    skip_if!(needs::containers());
    // runc 1.1 checks the executable at create: `exec: "/no/such/bin": stat /no/such/bin: …`.
    let fx = Fixture::new(&["/no/such/bin"]);
    assert_create_fails(&fx, &["/no/such/bin"]);
}

#[test]
fn unknown_namespace_type() {
    skip_if!(needs::containers());
    let mut fx = Fixture::new(SLEEP);
    let mut namespaces = fx.bundle.config()["linux"]["namespaces"].clone();
    namespaces.as_array_mut().expect("namespaces array").push(json!({"type": "bogus"}));
    fx.bundle.set("/linux/namespaces", namespaces);
    assert_create_fails(&fx, &["bogus"]);
}

#[test]
fn duplicate_id() {
    skip_if!(needs::containers());
    let fx = Fixture::created(SLEEP);
    let again = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
    assert_one_line_error(&again, &["already exists"]);
    assert_eq!(fx.status(), "created", "the first container must be untouched");
}

#[test]
fn unknown_id() {
    skip_if!(needs::containers());
    let fx = Fixture::new(SLEEP);
    for command in [&["state"][..], &["start"], &["kill"], &["kill", "--all"], &["delete"], &["pause"], &["ps"]] {
        let out = fx.rt.cmd(&[command, &["no-such-id"]].concat());
        assert_one_line_error(&out, &["not exist"]);
    }
}

#[test]
fn unknown_signal() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    assert_one_line_error(&fx.rt.cmd(&["kill", &fx.id, "SIGFOO"]), &["SIGFOO"]);
    assert_eq!(fx.status(), "running");
}

#[test]
fn start_of_running_container() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    assert_one_line_error(&fx.rt.cmd(&["start", &fx.id]), &["running"]);
    assert_eq!(fx.status(), "running");
}

#[test]
fn delete_of_running_container_without_force() {
    skip_if!(needs::containers());
    let fx = Fixture::running(SLEEP);
    assert_one_line_error(&fx.rt.cmd(&["delete", &fx.id]), &["running", "not stopped"]);
    assert_eq!(fx.status(), "running");
}
