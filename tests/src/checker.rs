// The conformance checker (tests/checker, built statically by hack/build-checker.sh): installing
// it into a bundle's rootfs, running it as a container's init or through exec, and reading its
// JSON report; plus the host facts tests compare it with.

use crate::bundle::Bundle;
use crate::runtime::Runtime;
use crate::{env, Output};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where the checker lives inside the container.
pub const IN_CONTAINER: &str = "/bin/rustpod-checker";

/// `$RUSTPOD_CHECKER_BIN`, else `$CARGO_TARGET_DIR/static/rustpod-checker`, else the shared
/// target dir's; panics with how to build it when missing.
pub fn bin() -> PathBuf {
    let bin = std::env::var_os("RUSTPOD_CHECKER_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|dir| Path::new(&dir).join("static/rustpod-checker")).filter(|bin| bin.exists())
        })
        .unwrap_or_else(|| PathBuf::from("/var/tmp/rustpod-target/static/rustpod-checker"));
    assert!(
        bin.exists(),
        "the static checker {} is missing: run hack/build-checker.sh or set RUSTPOD_CHECKER_BIN",
        env::repo_root().join(&bin).display()
    );
    bin
}

/// Copies the checker into `rootfs` at `IN_CONTAINER`.
pub fn install_into(rootfs: &Path) {
    let dest = rootfs.join(IN_CONTAINER.trim_start_matches('/'));
    fs::copy(bin(), &dest).unwrap_or_else(|e| panic!("copy checker to {}: {e}", dest.display()));
    fs::set_permissions(&dest, fs::Permissions::from_mode(0o755)).expect("chmod checker");
}

/// A bundle whose rootfs holds the checker and whose process runs it with `args`.
pub fn bundle(args: &[&str]) -> Bundle {
    let bundle = Bundle::new(&argv(args));
    install_into(Path::new(&bundle.rootfs()));
    bundle
}

/// A bundle whose rootfs holds the checker and whose process is `init` (e.g. `SLEEP`).
pub fn bundle_running(init: &[&str]) -> Bundle {
    let bundle = Bundle::new(init);
    install_into(Path::new(&bundle.rootfs()));
    bundle
}

/// `[IN_CONTAINER, args…]`.
pub fn argv<'a>(args: &[&'a str]) -> Vec<&'a str> {
    [&[IN_CONTAINER][..], args].concat()
}

/// What the checker printed, with accessors for the parts tests compare.
#[derive(Debug, Clone)]
pub struct Report(pub Value);

impl Report {
    #[track_caller]
    pub fn from_output(out: Output) -> Report {
        Report(out.ok().stdout_json())
    }

    /// `run` of `bundle` (whose process must be the checker) as a fresh container on `rt`.
    #[track_caller]
    pub fn run(rt: &Runtime, bundle: &Bundle) -> Report {
        Report::from_output(try_run(rt, bundle))
    }

    /// The checker with `args`, exec'd in running container `id`.
    #[track_caller]
    pub fn exec(rt: &Runtime, id: &str, args: &[&str]) -> Report {
        Report::from_output(rt.exec(id, &argv(args)))
    }

    /// The field at a JSON pointer (`/capabilities/effective`).
    pub fn at(&self, pointer: &str) -> &Value {
        self.0.pointer(pointer).unwrap_or(&Value::Null)
    }

    pub fn str(&self, pointer: &str) -> &str {
        self.at(pointer).as_str().unwrap_or_default()
    }

    /// The topmost mount at `mount_point` (the last one listed in mountinfo).
    pub fn mount(&self, mount_point: &str) -> Option<&Value> {
        self.0["mounts"].as_array()?.iter().rev().find(|m| m["mount_point"] == mount_point)
    }

    #[track_caller]
    pub fn expect_mount(&self, mount_point: &str) -> &Value {
        self.mount(mount_point).unwrap_or_else(|| panic!("no mount at {mount_point} inside: {}", self.mount_table()))
    }

    /// `shared`, `slave`, `shared+slave`, `unbindable` or `private` of the mount at `mount_point`.
    #[track_caller]
    pub fn propagation(&self, mount_point: &str) -> &str {
        self.expect_mount(mount_point)["propagation"].as_str().unwrap_or_default()
    }

    /// A mount's per-mount options (`ro`, `nosuid`, `relatime`…).
    #[track_caller]
    pub fn mount_options(&self, mount_point: &str) -> BTreeSet<String> {
        strings(&self.expect_mount(mount_point)["options"])
    }

    /// Every mount point inside, one per line, for failure messages.
    pub fn mount_table(&self) -> String {
        let rows = self.0["mounts"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .map(|m| {
                format!(
                    "\n  {} {} {} {}",
                    m["mount_point"].as_str().unwrap_or_default(),
                    m["fstype"].as_str().unwrap_or_default(),
                    m["propagation"].as_str().unwrap_or_default(),
                    m["options"]
                )
            })
            .collect()
    }

    /// A capability set (`effective`, `bounding`…) as names.
    pub fn caps(&self, set: &str) -> BTreeSet<String> {
        strings(&self.0["capabilities"][set])
    }

    /// `--path P` probe.
    pub fn path(&self, path: &str) -> &Value {
        &self.0["paths"][path]
    }

    /// A cgroup limit file (`memory.limit_in_bytes`) as the container reads it.
    pub fn cgroup_file(&self, name: &str) -> Option<&str> {
        self.0["cgroup"]["files"][name].as_str()
    }
}

/// A JSON array of strings as a set.
pub fn strings(value: &Value) -> BTreeSet<String> {
    value.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// The report of the checker run (with `args`) by the runtime under test in a fresh container
/// whose bundle `configure` changed.
#[track_caller]
pub fn report_with(args: &[&str], configure: impl FnOnce(&mut Bundle)) -> Report {
    let mut bundle = self::bundle(args);
    configure(&mut bundle);
    Report::run(&Runtime::under_test(), &bundle)
}

/// `run` of `bundle` as a fresh container on `rt`, whatever the outcome.
pub fn try_run(rt: &Runtime, bundle: &Bundle) -> Output {
    rt.run(&rt.new_id("chk"), bundle, &[], b"")
}

/// The checker's report on the host itself (run by the test process, outside any container).
#[track_caller]
pub fn host_report(args: &[&str]) -> Report {
    Report::from_output(crate::process::run(&bin(), args, b""))
}

/// The capabilities in this (the test's) process's bounding set: a "privileged" container can
/// be given no more (this machine lacks CAP_SYS_RESOURCE, for one).
pub fn host_bounding_caps() -> Vec<String> {
    host_report(&[]).caps("bounding").into_iter().collect()
}

/// Sets all five capability sets of `bundle`'s process to `caps`.
pub fn set_all_caps(bundle: &mut Bundle, caps: &[String]) {
    let sets = ["bounding", "effective", "permitted", "inheritable", "ambient"];
    let value: serde_json::Map<String, Value> = sets.iter().map(|s| (s.to_string(), json!(caps))).collect();
    bundle.set("/process/capabilities", Value::Object(value));
}

/// The namespace link (`mnt:[4026…]`) of a host process.
pub fn ns_of(pid: i32, ns: &str) -> String {
    let link = format!("/proc/{pid}/ns/{ns}");
    fs::read_link(&link).unwrap_or_else(|e| panic!("readlink {link}: {e}")).to_string_lossy().into_owned()
}

/// `conform!(cond, "what the spec wants")`: asserts `cond`, except when the suite is being
/// validated against runc itself and runc is known to differ there (tests/RUNC_DIFFERENCES.md):
/// then a failing `cond` is recorded as a skip naming the difference instead.
#[macro_export]
macro_rules! conform {
    ($cond:expr, $($what:tt)+) => {{
        let what = format!($($what)+);
        if !$cond {
            if $crate::env::testing_runc_itself() {
                let what = what.replace('\n', " | ");
                $crate::skip!("runc differs from the spec (see tests/RUNC_DIFFERENCES.md): {what}");
            }
            panic!("{what}");
        }
    }};
}
