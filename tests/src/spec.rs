// The default OCI config, equal in content to what `runc spec` (1.1) writes; bundles start from it.

use serde_json::{json, Value};

const CAPS: [&str; 3] = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"];

/// `runc spec` output, as a JSON value.
pub fn runc_default() -> Value {
    json!({
        "ociVersion": "1.0.2-dev",
        "process": {
            "terminal": true,
            "user": {"uid": 0, "gid": 0},
            "args": ["sh"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"],
            "cwd": "/",
            "capabilities": {"bounding": CAPS, "effective": CAPS, "permitted": CAPS, "ambient": CAPS},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": true
        },
        "root": {"path": "rootfs", "readonly": true},
        "hostname": "runc",
        "mounts": mounts(),
        "linux": {
            "resources": {"devices": [{"allow": false, "access": "rwm"}]},
            "namespaces": (["pid", "network", "ipc", "uts", "mount"].map(|t| json!({"type": t}))),
            "maskedPaths": [
                "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"
            ],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
        }
    })
}

fn mounts() -> Value {
    json!([
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev", "ro"]},
        {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
         "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}
    ])
}

/// The suite's default: runc's, without a terminal, with hostname "rustpod" and the given args.
pub fn for_test(args: &[&str]) -> Value {
    let mut spec = runc_default();
    spec["process"]["terminal"] = json!(false);
    spec["process"]["args"] = json!(args);
    spec["hostname"] = json!("rustpod");
    spec
}

/// `spec`'s namespace of type `typ` (`mount`, `user`, …) joined at `path` (`/proc/<pid>/ns/mnt`)
/// instead of a new one.
pub fn join_namespace(spec: &mut Value, typ: &str, path: &str) {
    let mut namespaces = spec["linux"]["namespaces"].as_array().cloned().unwrap_or_default();
    namespaces.retain(|ns| ns["type"] != typ);
    namespaces.push(json!({"type": typ, "path": path}));
    spec["linux"]["namespaces"] = Value::Array(namespaces);
}

#[cfg(test)]
mod tests {
    use crate::{env, needs, process, scratch::ScratchDir, skip_if};

    #[test]
    fn runc_default_equals_runc_spec_output() {
        let runc = env::runc_bin();
        skip_if!(needs::program(&runc));
        let dir = ScratchDir::new("spec");
        process::run(&runc, &["spec", "--bundle", dir.str()], b"").ok();
        let text = std::fs::read_to_string(dir.join("config.json")).expect("runc spec wrote config.json");
        let written: serde_json::Value = serde_json::from_str(&text).expect("runc spec writes JSON");
        assert_eq!(written, super::runc_default());
    }
}
