// Ids and process fields that would let a process out of its confinement, each attacked through
// every way in (config.json for create/run, `exec --user`/`--additional-gids`/`--env`/`--cwd`,
// `exec --process FILE`) on runc and on the runtime under test:
// - uid/gid 4294967295 is `setresuid(-1)`, "unchanged": the process would stay root (issue 13.3);
//   runc >= 1.2 (1.3.6 in the sid guest) hands every other id to the kernel, which runs it, where
//   runc 1.1.5 refused every id above 2147483647; rustpod follows 1.3 (tests/RUNC_DIFFERENCES.md);
// - duplicate namespaces, env entries without `=`, device paths with `..`;
// - cwd errors must name the path, the syscall and the errno.

use rustpod_tests::assertions::assert_one_line_error;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{env, json, needs, skip_if, Bundle, Fixture, Output, Runtime, Value, SLEEP};

/// runc 1.1.5's words for an id outside 0..=2147483647.
const ID_RANGE: &str = "uids and gids must be in range 0-2147483647";
/// runc >= 1.2's words when the kernel refuses id -1 (EINVAL: unmapped), as setuid, setgid and
/// setgroups see it; rustpod's error ends with the same.
const UNMAPPED_UID: &str = "cannot setuid to unmapped uid 4294967295";
const UNMAPPED_GID: &str = "cannot setgid to unmapped gid 4294967295";
const SETGROUPS_EINVAL: &str = "setgroups: invalid argument";
/// An id above runc 1.1.5's range that the kernel maps (the host's user namespace maps 0 to
/// 4294967294).
const ABOVE_I32: u32 = 4294967294;

/// `rt` is a runc older than 1.2: it refuses every id above 2147483647 up front, and words
/// env errors its own way.
fn runc_before_1_2(rt: &Runtime) -> bool {
    is_runc(rt) && env::version_of(rt.bin()) < (1, 2, 0)
}

/// `modern` for runc >= 1.2 and rustpod; runc 1.1.5 says ID_RANGE for every out-of-range id.
fn id_words<'a>(rt: &Runtime, modern: &'a str) -> &'a str {
    if runc_before_1_2(rt) {
        ID_RANGE
    } else {
        modern
    }
}

/// `run` of a bundle changed by `configure`; the bundle runs `id -u; id -G`.
fn run_with(rt: &Runtime, configure: impl FnOnce(&mut Bundle)) -> (Output, String, Bundle) {
    let mut bundle = Bundle::new(&["sh", "-c", "id -u; id -g; id -G"]);
    configure(&mut bundle);
    let id = rt.new_id("ids");
    let out = rt.run(&id, &bundle, &[], b"");
    (out, id, bundle)
}

/// The config is refused with runc's words (and ours name the field); nothing is left.
#[track_caller]
fn assert_refused(rt: &Runtime, configure: impl FnOnce(&mut Bundle), words: &str, field: &str) {
    let (out, id, bundle) = run_with(rt, configure);
    assert!(!out.success(), "{} ran the container: {}", rt.bin().display(), out.describe());
    assert!(out.stderr.contains(words), "{}: error lacks {words:?}: {}", rt.bin().display(), out.describe());
    if !is_runc(rt) {
        assert_one_line_error(&out, &[field]);
    }
    rt.assert_nothing_left(&id, bundle.path());
}

fn is_runc(rt: &Runtime) -> bool {
    rt.bin() == env::runc_bin()
}

#[test]
fn config_ids_outside_the_range_are_refused() {
    skip_if!(needs::containers());
    let users = [
        ("uid", json!({"uid": 4294967295u32, "gid": 0}), UNMAPPED_UID),
        ("gid", json!({"uid": 0, "gid": 4294967295u32}), UNMAPPED_GID),
        ("additionalGids", json!({"uid": 0, "gid": 0, "additionalGids": [5, 4294967295u32]}), SETGROUPS_EINVAL),
    ];
    for rt in Runtime::runc_and_under_test() {
        for (field, user, words) in &users {
            assert_refused(
                &rt,
                |b| {
                    b.set("/process/user", user.clone());
                },
                id_words(&rt, words),
                field,
            );
        }
    }
}

#[test]
fn config_ids_at_the_top_of_the_range_run_as_those_ids() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        for top in [2147483647u32, 2147483648, ABOVE_I32] {
            let user = json!({"uid": top, "gid": top, "additionalGids": [top]});
            if top > 2147483647 && runc_before_1_2(&rt) {
                assert_refused(
                    &rt,
                    |b| {
                        b.set("/process/user", user);
                    },
                    ID_RANGE,
                    "uid",
                );
                continue;
            }
            let (out, _id, _bundle) = run_with(&rt, |b| {
                b.set("/process/user", user);
            });
            let out = out.ok();
            assert_eq!(out.stdout, format!("{top}\n{top}\n{top}\n"), "{}: {}", rt.bin().display(), out.describe());
        }
    }
}

/// A uid-1000 container: an exec must not get root through an out-of-range id.
fn non_root_container(rt: Runtime) -> Fixture {
    let mut fx = Fixture::on(rt, SLEEP);
    fx.bundle.set("/process/user", json!({"uid": 1000, "gid": 1000}));
    fx.rt.start_container(&fx.id, &fx.bundle);
    fx
}

#[test]
fn exec_ids_outside_the_range_are_refused() {
    skip_if!(needs::containers());
    let flags: [(&[&str], &str); 4] = [
        (&["--user", "4294967295:4294967295"], UNMAPPED_GID),
        (&["--user", "1000:4294967295"], UNMAPPED_GID),
        (&["--user", "4294967295"], UNMAPPED_UID),
        (&["--additional-gids", "4294967295"], SETGROUPS_EINVAL),
    ];
    for rt in Runtime::runc_and_under_test() {
        let fx = non_root_container(rt);
        for (flag, words) in flags {
            let out = fx.exec_with(flag, &["id", "-u"]);
            assert!(!out.success(), "{flag:?} ran: {}", out.describe());
            let words = id_words(&fx.rt, words);
            assert!(out.stderr.contains(words), "{flag:?}: lacks {words:?}: {}", out.describe());
        }
        // The controls: an id the kernel maps runs as that id; `--user UID` keeps the
        // container's gid (1000), not root's group.
        let out = fx.exec_with(&["--user", "1234:1234"], &["id", "-u"]).ok();
        assert_eq!(out.stdout, "1234\n");
        let out = fx.exec_with(&["--user", "1234"], &["sh", "-c", "id -u; id -g"]).ok();
        assert_eq!(out.stdout, "1234\n1000\n", "{}: --user without a gid", fx.rt.bin().display());
        let above = format!("{ABOVE_I32}:{ABOVE_I32}");
        let out = fx.exec_with(&["--user", &above], &["id", "-u"]);
        if runc_before_1_2(&fx.rt) {
            assert!(out.stderr.contains(ID_RANGE), "{}", out.describe());
        } else {
            assert_eq!(out.ok().stdout, format!("{ABOVE_I32}\n"));
        }
    }
}

#[test]
fn exec_process_file_ids_outside_the_range_are_refused() {
    skip_if!(needs::containers());
    let scratch = ScratchDir::new("process");
    let users = [
        (json!({"uid": 4294967295u32, "gid": 0}), UNMAPPED_UID),
        (json!({"uid": 1000, "gid": 4294967295u32}), UNMAPPED_GID),
        (json!({"uid": 1000, "gid": 1000, "additionalGids": [4294967295u32]}), SETGROUPS_EINVAL),
    ];
    for rt in Runtime::runc_and_under_test() {
        let fx = non_root_container(rt);
        for (n, (user, words)) in users.iter().enumerate() {
            let file = scratch.join_str(&format!("p{n}.json"));
            let process = json!({"args": ["id", "-u"], "cwd": "/", "user": user,
                                 "env": ["PATH=/bin"]});
            std::fs::write(&file, process.to_string()).expect("write process.json");
            let out = fx.exec_with(&["--process", &file], &[]);
            assert!(!out.success(), "{user} ran: {}", out.describe());
            let words = id_words(&fx.rt, words);
            assert!(out.stderr.contains(words), "{user}: lacks {words:?}: {}", out.describe());
        }
    }
}

#[test]
fn duplicate_namespaces_are_refused() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let add_second_pid = |b: &mut Bundle| {
            let mut namespaces = b.config()["linux"]["namespaces"].as_array().cloned().unwrap_or_default();
            namespaces.push(json!({"type": "pid"}));
            b.set("/linux/namespaces", Value::Array(namespaces));
        };
        assert_refused(&rt, add_second_pid, "duplicated ns", "linux.namespaces");
    }
}

#[test]
fn env_entries_without_equals_or_name_are_refused() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        // runc 1.1.5's words, then runc >= 1.2's (rustpod's).
        let (no_equals, no_name) = if runc_before_1_2(&rt) {
            ("invalid environment variable", "environment variable name can't be empty")
        } else {
            ("invalid environment variable: missing '='", "invalid environment variable: name cannot be empty")
        };
        assert_refused(
            &rt,
            |b| {
                b.add_env(&["NOEQUALS"]);
            },
            no_equals,
            "process.env",
        );
        assert_refused(
            &rt,
            |b| {
                b.add_env(&["=x"]);
            },
            no_name,
            "process.env",
        );
        let fx = Fixture::on(rt, SLEEP);
        fx.rt.start_container(&fx.id, &fx.bundle);
        let out = fx.exec_with(&["--env", "NOEQUALS"], &["true"]);
        assert!(out.stderr.contains(no_equals), "{}", out.describe());
    }
}

/// runc clamps `/dev/../../x` into the rootfs and makes `/x`; we refuse it with an error that
/// names the field (tests/RUNC_DIFFERENCES.md).
#[test]
fn device_paths_with_dotdot_are_refused() {
    skip_if!(needs::containers());
    skip_if!(env::testing_runc_itself().then(|| "runc clamps the path: this is rustpod's refusal".to_string()));
    let rt = Runtime::under_test();
    let device = json!([{"path": "/dev/../../x", "type": "c", "major": 1, "minor": 3}]);
    let (out, id, bundle) = run_with(&rt, |b| {
        b.set("/linux/devices", device);
    });
    assert_one_line_error(&out, &["linux.devices[0].path /dev/../../x"]);
    assert!(!std::path::Path::new(&bundle.rootfs()).join("x").exists(), "/x was made in the rootfs");
    rt.assert_nothing_left(&id, bundle.path());
}

/// A cwd with a file in the way: runc says `mkdir /bin/busybox: not a directory`; we name the
/// field, the syscall and the errno in one line. A relative cwd: runc's "Cwd must be an absolute path".
#[test]
fn cwd_errors_name_the_path_the_syscall_and_the_errno() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let (out, id, bundle) = run_with(&rt, |b| {
            b.set("/process/cwd", json!("/bin/busybox/sub"));
        });
        assert!(out.stderr.contains("mkdir /bin/busybox"), "{}", out.describe());
        assert!(out.stderr.contains("not a directory"), "{}", out.describe());
        if !is_runc(&rt) {
            assert_one_line_error(&out, &["process.cwd /bin/busybox/sub"]);
        }
        rt.assert_nothing_left(&id, bundle.path());
        assert_refused(
            &rt,
            |b| {
                b.set("/process/cwd", json!("relative"));
            },
            "Cwd must be an absolute path",
            "process.cwd",
        );

        let fx = Fixture::on(rt, SLEEP);
        fx.rt.start_container(&fx.id, &fx.bundle);
        for (cwd, errno) in [("/bin/busybox", "not a directory"), ("/nonexistent", "no such file or directory")] {
            let out = fx.exec_with(&["--cwd", cwd], &["pwd"]);
            // runc's log escapes the quotes around the path.
            let wanted = ["chdir to cwd (", cwd, &format!("set in config.json failed: {errno}")];
            assert!(wanted.iter().all(|w| out.stderr.contains(w)), "lacks {wanted:?}: {}", out.describe());
        }
    }
}
