// Config and image shapes that reach host state through /proc or /dev, or fields we cannot honour
// (issue 23, items 6, 7c and 8). Each is refused at create with one line naming the mount or path,
// the check and why, and leaves nothing behind, through the CLI, containerd's runc shim with
// rustpod as its binary, and our shim; runc is run next to it where 1.1.5 refuses too (in the same
// words), and where 1.1.5 accepts, rustpod follows runc ≥ 1.2 as read from its source
// (tests/RUNC_DIFFERENCES.md). If a mount over a /proc file were accepted, the attack's write
// would land in a scratch file, which must stay untouched.
// - a bind over /proc/sys/kernel/core_pattern or /proc/sysrq-trigger, a tmpfs on `//proc/sys`,
//   a bind reaching /proc through a symlink in the image or in an earlier bind's source, a tmpfs
//   on /proc (runc's checkProcMount);
// - /dev/null in the image a symlink to /proc/sys/kernel/core_pattern (CVE-2025-31133's shape: masked
//   paths are bind-mounted from /dev/null), and /dev itself a symlink into /proc;
// - `linux.intelRdt` on a host without resctrl (it used to be silently ignored while `features`
//   claimed it: the claim must now hold or be absent).

use rustpod_tests::assertions::assert_one_line_error;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd, RUNTIME};
use rustpod_tests::{env, json, leftovers, needs, skip, skip_if, Bundle, Output, Runtime, Value};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

/// From inside: write the host's crash handler and say whether it worked.
const ATTACK: &str = "if echo '|/tmp/pwned' > /proc/sys/kernel/core_pattern 2>/dev/null; then echo wrote; else echo denied; fi";
/// What the scratch file bound over a /proc file holds until something writes it.
const UNTOUCHED: &str = "untouched\n";

struct Attack {
    name: &'static str,
    /// Edits the spec (runc's or ctr's) and the rootfs; `scratch` is a host file to bind.
    arm: fn(config: &mut Value, rootfs: &Path, scratch: &str),
    /// Our error says all of these.
    words: &'static [&'static str],
    /// runc 1.1.5 refuses it too, saying this; None where it accepts (runc ≥ 1.2 refuses).
    runc_115: Option<&'static str>,
}

fn add_mount(config: &mut Value, mount: Value) {
    config["mounts"].as_array_mut().expect("mounts list").push(mount);
}

fn bind_over(config: &mut Value, dest: &str, scratch: &str) {
    add_mount(config, json!({"destination": dest, "type": "bind", "source": scratch, "options": ["bind"]}));
}

/// No mount on /dev: the image's own /dev is used.
fn drop_dev_mount(config: &mut Value) {
    config["mounts"].as_array_mut().expect("mounts list").retain(|m| m["destination"] != "/dev");
}

const INSIDE_PROC: &str = "cannot be mounted because it is inside /proc";

const ATTACKS: &[Attack] = &[
    Attack {
        name: "bind over /proc/sys/kernel/core_pattern",
        arm: |c, _, scratch| bind_over(c, "/proc/sys/kernel/core_pattern", scratch),
        words: &["mounts[", "destination /proc/sys/kernel/core_pattern", INSIDE_PROC],
        runc_115: Some(INSIDE_PROC),
    },
    Attack {
        name: "bind over /proc/sysrq-trigger",
        arm: |c, _, scratch| bind_over(c, "/proc/sysrq-trigger", scratch),
        words: &["destination /proc/sysrq-trigger", INSIDE_PROC],
        runc_115: Some(INSIDE_PROC),
    },
    Attack {
        name: "tmpfs on //proc/sys",
        arm: |c, _, _| add_mount(c, json!({"destination": "//proc/sys", "type": "tmpfs", "source": "tmpfs"})),
        words: &["destination //proc/sys", INSIDE_PROC],
        runc_115: None,
    },
    Attack {
        name: "bind through a symlink in the image into /proc",
        arm: |c, rootfs, scratch| {
            symlink("/proc/sys/kernel", rootfs.join("data")).expect("plant /data");
            bind_over(c, "/data/core_pattern", scratch);
        },
        words: &["destination /data/core_pattern", "lead it to /proc/sys/kernel/core_pattern", INSIDE_PROC],
        runc_115: Some(INSIDE_PROC),
    },
    Attack {
        name: "bind through a symlink in an earlier bind's source into /proc",
        arm: |c, _, scratch| {
            let host = Path::new(scratch).with_file_name("bound-dir");
            fs::create_dir_all(&host).expect("make the host dir");
            symlink("/proc/sys/kernel", host.join("x")).expect("plant x in the host dir");
            add_mount(c, json!({"destination": "/mnt", "type": "bind", "source": host, "options": ["rbind"]}));
            bind_over(c, "/mnt/x/core_pattern", scratch);
        },
        words: &["destination /mnt/x/core_pattern", "lead it to /proc/sys/kernel/core_pattern", INSIDE_PROC],
        runc_115: Some(INSIDE_PROC),
    },
    Attack {
        name: "tmpfs on /proc",
        arm: |c, _, _| add_mount(c, json!({"destination": "/proc", "type": "tmpfs", "source": "tmpfs"})),
        words: &["destination /proc", "cannot be mounted because it is not of type proc"],
        runc_115: None,
    },
    Attack {
        name: "/dev/null in the image a symlink to core_pattern (CVE-2025-31133)",
        arm: |c, rootfs, _| {
            drop_dev_mount(c);
            let _ = fs::remove_file(rootfs.join("dev/null"));
            symlink("/proc/sys/kernel/core_pattern", rootfs.join("dev/null")).expect("plant /dev/null");
        },
        words: &["/dev/null", "symlink to /proc/sys/kernel/core_pattern", "CVE-2025-31133"],
        runc_115: None,
    },
    Attack {
        name: "/dev in the image a symlink into /proc",
        arm: |_, rootfs, _| {
            fs::remove_dir_all(rootfs.join("dev")).expect("remove the image's /dev");
            symlink("/proc/sys/kernel", rootfs.join("dev")).expect("plant /dev");
        },
        words: &["destination /dev", "lead it to /proc/sys/kernel", INSIDE_PROC],
        runc_115: Some(INSIDE_PROC),
    },
    Attack {
        name: "linux.intelRdt without resctrl",
        arm: |c, _, _| c["linux"]["intelRdt"] = json!({"closID": "rustpod-test"}),
        words: &["linux.intelRdt", "intelRdt is specified in config, but Intel RDT is not supported or enabled"],
        runc_115: None,
    },
];

fn blocker() -> Option<String> {
    needs::containers().or_else(|| {
        let resctrl = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().contains(" - resctrl ");
        resctrl.then(|| "resctrl is mounted here: the intelRdt case needs a host without it".to_string())
    })
}

/// A host file to bind over /proc files, holding UNTOUCHED.
fn scratch_file(dir: &ScratchDir) -> String {
    let file = dir.join_str("bound-over-proc");
    fs::write(&file, UNTOUCHED).expect("write scratch file");
    file
}

#[track_caller]
fn assert_untouched(scratch: &str, path: &str, attack: &Attack) {
    let now = fs::read_to_string(scratch).unwrap_or_default();
    assert_eq!(now, UNTOUCHED, "{path}: {}: the container wrote through the mount", attack.name);
}

#[track_caller]
fn assert_refused(path: &str, runc: bool, attack: &Attack, out: &Output) {
    assert!(!out.success(), "{path}: {}: the container ran: {}", attack.name, out.describe());
    let text = format!("{}{}", out.stderr, out.stdout);
    if runc {
        let words = attack.runc_115.expect("runc is run only where 1.1.5 refuses");
        assert!(text.contains(words), "{path}: {}: runc's error lacks {words:?}: {}", attack.name, out.describe());
        return;
    }
    for word in attack.words {
        assert!(text.contains(word), "{path}: {}: the error lacks {word:?}: {}", attack.name, out.describe());
    }
}

#[test]
fn proc_and_dev_attacks_are_refused_through_the_cli() {
    skip_if!(blocker());
    for attack in ATTACKS {
        for rt in Runtime::runc_and_under_test() {
            let runc = env::is_runc(rt.bin());
            if runc && attack.runc_115.is_none() {
                eprintln!("{}: not run on runc: 1.1.5 accepts it, runc ≥ 1.2 refuses (tests/RUNC_DIFFERENCES.md)", attack.name);
                continue;
            }
            let dir = ScratchDir::new("procatk");
            let scratch = scratch_file(&dir);
            let mut bundle = Bundle::new(&["sh", "-c", ATTACK]);
            let mut config = bundle.config().clone();
            (attack.arm)(&mut config, Path::new(&bundle.rootfs()), &scratch);
            for section in ["mounts", "linux"] {
                bundle.set(&format!("/{section}"), config[section].clone());
            }
            let id = rt.new_id("procatk");
            let out = rt.run(&id, &bundle, &[], b"");
            let path = format!("CLI {}", rt.bin().display());
            assert_refused(&path, runc, attack, &out);
            if !runc {
                assert_one_line_error(&out, attack.words);
            }
            assert_untouched(&scratch, &path, attack);
            rt.assert_nothing_left(&id, bundle.path());
        }
    }
}

/// No cgroup, task or mount is left of the refused container `name` (cgroupsPath `/<ns>/<name>`).
#[track_caller]
fn assert_nothing_left_by_ctr(ctd: &ShimContainerd, name: &str, bundle: &Bundle) {
    assert!(ctd.task(name).is_none(), "{name}: a task is left");
    let cgroups: Vec<_> = fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|h| h.path().join(&ctd.namespace).join(name))
        .chain(std::iter::once(Path::new("/sys/fs/cgroup").join(&ctd.namespace).join(name)))
        .filter(|dir| dir.is_dir())
        .collect();
    assert!(cgroups.is_empty(), "{name}: cgroups left: {cgroups:?}");
    let mounts = leftovers::mounts_under(bundle.path());
    assert!(mounts.is_empty(), "{name}: mounts left: {mounts:?}");
}

/// The same attacks as ctr specs: containerd's runc shim driving runc (where 1.1.5 refuses) and
/// rustpod, and our shim.
#[test]
fn proc_and_dev_attacks_are_refused_through_the_shims() {
    skip_if!(blocker().or_else(shim::blocker));
    let ctd = ShimContainerd::start();
    let runc = env::runc_bin().to_string_lossy().into_owned();
    let rustpod = env::rustpod_bin().to_string_lossy().into_owned();
    for (index, attack) in ATTACKS.iter().enumerate() {
        let mut paths: Vec<(&str, Vec<&str>, bool)> = Vec::new();
        if attack.runc_115.is_some() && needs::program(Path::new(&runc)).is_none() {
            paths.push(("runc-shim-runc", vec!["--runc-binary", runc.as_str()], true));
        }
        if !env::is_runc(Path::new(&rustpod)) || attack.runc_115.is_some() {
            paths.push(("runc-shim-rustpod", vec!["--runc-binary", rustpod.as_str()], env::is_runc(Path::new(&rustpod))));
        }
        paths.push(("rustpod-shim", vec!["--runtime", RUNTIME], false));
        for (tag, flags, runc_words) in paths {
            let name = format!("atk{index}-{tag}");
            let dir = ScratchDir::new("procatk");
            let scratch = scratch_file(&dir);
            let bundle = Bundle::new(&["true"]);
            let mut config = ctd.oci_spec(&name, &bundle.rootfs());
            config["process"]["args"] = json!(["sh", "-c", ATTACK]);
            (attack.arm)(&mut config, Path::new(&bundle.rootfs()), &scratch);
            let file = dir.join_str("config.json");
            fs::write(&file, config.to_string()).expect("write spec");
            let mut args = vec!["run", "--rm", "--config", file.as_str()];
            args.extend_from_slice(&flags);
            args.push(&name);
            let out = ctd.ctr(&args);
            assert_refused(tag, runc_words, attack, &out);
            assert_untouched(&scratch, tag, attack);
            assert_nothing_left_by_ctr(&ctd, &name, &bundle);
        }
    }
}

/// What runc ≥ 1.2 still allows keeps working, on runc and on rustpod: a bind over a file lxcfs
/// emulates (/proc/cpuinfo), and masked and read-only paths that are symlinks in the image into
/// /proc/sys (they are applied inside the container, after pivot_root, so they reach only the
/// container's own procfs, where the masked one is /dev/null: the host's core_pattern is unchanged
/// whatever the container writes).
#[test]
fn what_runc_allows_under_proc_still_runs() {
    skip_if!(needs::containers());
    let before = fs::read_to_string("/proc/sys/kernel/core_pattern").expect("read core_pattern");
    for rt in Runtime::runc_and_under_test() {
        let dir = ScratchDir::new("procok");
        let scratch = scratch_file(&dir);
        let mut bundle =
            Bundle::new(&["sh", "-c", "cat /proc/cpuinfo; for f in /masked /readonly; do echo '|/tmp/pwned' > $f 2>/dev/null; done; true"]);
        let rootfs = bundle.rootfs();
        symlink("/proc/sys/kernel/core_pattern", Path::new(&rootfs).join("masked")).expect("plant /masked");
        symlink("/proc/sys/kernel/core_pattern", Path::new(&rootfs).join("readonly")).expect("plant /readonly");
        bundle.add_mount(json!({"destination": "/proc/cpuinfo", "type": "bind", "source": scratch, "options": ["bind", "ro"]}));
        let mut linux = bundle.config()["linux"].clone();
        linux["maskedPaths"].as_array_mut().expect("maskedPaths").push(json!("/masked"));
        linux["readonlyPaths"].as_array_mut().expect("readonlyPaths").push(json!("/readonly"));
        bundle.set("/linux", linux);
        let id = rt.new_id("procok");
        let out = rt.run(&id, &bundle, &[], b"");
        let who = rt.bin().display().to_string();
        assert!(out.success(), "{who}: {}", out.describe());
        assert!(out.stdout.starts_with(UNTOUCHED), "{who}: /proc/cpuinfo is not the bound file: {}", out.describe());
        rt.assert_nothing_left(&id, bundle.path());
    }
    let after = fs::read_to_string("/proc/sys/kernel/core_pattern").expect("read core_pattern");
    assert_eq!(after, before, "the host's core_pattern changed");
}

/// `features` claims intelRdt only if a config with it runs and gets its resctrl group: on a host
/// without resctrl (or with rustpod, which never applies it) the claim must be absent.
#[test]
fn intel_rdt_is_claimed_only_where_it_works() {
    skip_if!(needs::containers());
    let rt = Runtime::under_test();
    if env::testing_runc_itself() {
        skip!("runc differs (see tests/RUNC_DIFFERENCES.md): 1.1.5 ignores a closID-only intelRdt without resctrl");
    }
    let claims = rt.cmd(&["features"]).ok().stdout_json();
    if claims["linux"]["intelRdt"]["enabled"] != json!(true) {
        // Not claimed: create refuses it (the intelRdt attack above).
        return;
    }
    let mut bundle = Bundle::new(&["true"]);
    bundle.set("/linux/intelRdt", json!({"closID": "rustpod-test-claim"}));
    let id = rt.new_id("rdt");
    rt.create(&id, &bundle);
    let group = Path::new("/sys/fs/resctrl/rustpod-test-claim");
    let applied = group.join("tasks").exists();
    rt.delete(&id);
    assert!(applied, "features claims intelRdt, but create accepted it and made no resctrl group {}", group.display());
}
