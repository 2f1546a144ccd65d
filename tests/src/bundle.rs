// A bundle: a busybox rootfs made here in Rust, plus a config.json from the runc default spec
// that tests mutate; `prepare(id)` writes it with a per-container cgroupsPath.

use crate::cgroup::cgroups_path;
use crate::scratch::ScratchDir;
use crate::spec;
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const BUSYBOX: &str = "/bin/busybox";
/// The host uid and gid of the root of `add_user_namespace`'s namespace.
pub const USERNS_HOST_ID: u32 = 100_000;
const ROOTFS_DIRS: [&str; 9] = ["bin", "proc", "sys", "dev", "tmp", "etc", "root", "run", "home"];
const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\ntty:x:5:\nnogroup:x:65534:\n";

pub struct Bundle {
    dir: ScratchDir,
    config: Value,
    cgroups_per_id: bool,
    raw_config: bool,
}

impl Bundle {
    /// A bundle whose container runs `args`.
    pub fn new(args: &[&str]) -> Self {
        let dir = ScratchDir::new("bundle");
        build_rootfs(&dir.join("rootfs"));
        let bundle = Bundle { dir, config: spec::for_test(args), cgroups_per_id: true, raw_config: false };
        bundle.save();
        bundle
    }

    /// Absolute path of the bundle directory.
    pub fn path(&self) -> &str {
        self.dir.str()
    }

    pub fn rootfs(&self) -> String {
        self.dir.join_str("rootfs")
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join("config.json")
    }

    pub fn config(&self) -> &Value {
        &self.config
    }

    /// Sets the value at a JSON pointer (`/process/args`), creating missing objects on the way.
    pub fn set(&mut self, pointer: &str, value: Value) -> &mut Self {
        let mut node = &mut self.config;
        for key in pointer.trim_start_matches('/').split('/') {
            if !node.is_object() {
                *node = json!({});
            }
            node = node.as_object_mut().unwrap().entry(key).or_insert(Value::Null);
        }
        *node = value;
        self.save();
        self
    }

    /// Removes the field at a JSON pointer, if present.
    pub fn remove(&mut self, pointer: &str) -> &mut Self {
        let (parent, key) = pointer.rsplit_once('/').expect("pointer starts with /");
        if let Some(Value::Object(map)) = self.config.pointer_mut(parent) {
            map.remove(key);
        }
        self.save();
        self
    }

    /// Changes the config with `edit`, as a spec helper does (`mount_ns::Held::join`).
    pub fn edit(&mut self, edit: impl FnOnce(&mut Value)) -> &mut Self {
        edit(&mut self.config);
        self.save();
        self
    }

    pub fn set_args(&mut self, args: &[&str]) -> &mut Self {
        self.set("/process/args", json!(args))
    }

    /// Adds `KEY=value` entries to process.env.
    pub fn add_env(&mut self, vars: &[&str]) -> &mut Self {
        let mut env = self.config["process"]["env"].as_array().cloned().unwrap_or_default();
        env.extend(vars.iter().map(|v| json!(v)));
        self.set("/process/env", Value::Array(env))
    }

    pub fn add_mount(&mut self, mount: Value) -> &mut Self {
        let mut mounts = self.config["mounts"].as_array().cloned().unwrap_or_default();
        mounts.push(mount);
        self.set("/mounts", Value::Array(mounts))
    }

    /// A user namespace of the container's own, its root at host uid and gid 100000 (65536 ids):
    /// what `hostUsers: false` gives a pod.
    pub fn add_user_namespace(&mut self) -> &mut Self {
        let mapping = json!([{"containerID": 0, "hostID": USERNS_HOST_ID, "size": 65_536}]);
        let mut namespaces = self.config["linux"]["namespaces"].as_array().cloned().unwrap_or_default();
        namespaces.push(json!({"type": "user"}));
        self.set("/linux/namespaces", Value::Array(namespaces));
        self.set("/linux/uidMappings", mapping.clone()).set("/linux/gidMappings", mapping)
    }

    /// The namespace of type `typ` (`mount`, `user`, …) at `path` (`/proc/<pid>/ns/mnt`)
    /// instead of a new one.
    pub fn join_namespace(&mut self, typ: &str, path: &str) -> &mut Self {
        crate::spec::join_namespace(&mut self.config, typ, path);
        self
    }

    pub fn set_annotations(&mut self, annotations: Value) -> &mut Self {
        self.set("/annotations", annotations)
    }

    /// Leaves linux.cgroupsPath out: the runtime picks the cgroup itself.
    pub fn clear_cgroups_path(&mut self) -> &mut Self {
        self.cgroups_per_id = false;
        self.remove("/linux/cgroupsPath")
    }

    /// Replaces config.json with arbitrary text (for invalid-config tests).
    pub fn write_raw_config(&mut self, text: &str) -> &mut Self {
        self.raw_config = true;
        fs::write(self.config_path(), text).expect("write config.json");
        self
    }

    /// Writes config.json for container `id` (its cgroupsPath is derived from the id).
    pub fn prepare(&self, id: &str) {
        if self.raw_config {
            return;
        }
        let mut config = self.config.clone();
        if self.cgroups_per_id {
            config["linux"]["cgroupsPath"] = json!(cgroups_path(id));
        }
        write_json(&self.config_path(), &config);
    }

    /// Writes the in-memory config unless a test replaced config.json with raw text.
    fn save(&self) {
        if !self.raw_config {
            write_json(&self.config_path(), &self.config);
        }
    }
}

pub fn write_json(path: &Path, value: &Value) {
    let text = serde_json::to_string_pretty(value).expect("serialize JSON");
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// bin/busybox (hard link, or copy across filesystems) with one symlink per applet, the usual
/// top-level dirs, and /etc/passwd and /etc/group with root and nobody.
fn build_rootfs(rootfs: &Path) {
    for dir in ROOTFS_DIRS {
        fs::create_dir_all(rootfs.join(dir)).unwrap_or_else(|e| panic!("mkdir rootfs/{dir}: {e}"));
    }
    fs::set_permissions(rootfs.join("tmp"), fs::Permissions::from_mode(0o1777)).expect("chmod rootfs/tmp");
    let bin = rootfs.join("bin");
    if fs::hard_link(BUSYBOX, bin.join("busybox")).is_err() {
        fs::copy(BUSYBOX, bin.join("busybox")).expect("copy /bin/busybox into rootfs");
    }
    for applet in applets().iter().filter(|a| a.as_str() != "busybox") {
        symlink("busybox", bin.join(applet)).unwrap_or_else(|e| panic!("symlink applet {applet}: {e}"));
    }
    fs::write(rootfs.join("etc/passwd"), PASSWD).expect("write etc/passwd");
    fs::write(rootfs.join("etc/group"), GROUP).expect("write etc/group");
}

/// `busybox --list`, computed once.
fn applets() -> &'static [String] {
    static APPLETS: OnceLock<Vec<String>> = OnceLock::new();
    APPLETS.get_or_init(|| {
        let out = Command::new(BUSYBOX).arg("--list").output().expect("run busybox --list");
        assert!(out.status.success(), "busybox --list failed");
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    })
}
