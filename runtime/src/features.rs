//! `features`: the OCI features document, listing what this build really
//! supports (the engine's abilities plus the pieces we own).

use serde_json::{json, Value};

const MOUNT_OPTIONS: &[&str] = &[
    "async", "atime", "bind", "defaults", "dev", "diratime", "dirsync", "exec", "mand", "noatime",
    "nodev", "nodiratime", "noexec", "nomand", "norelatime", "nostrictatime", "nosuid", "private",
    "rprivate", "rshared", "rslave", "runbindable", "rbind", "relatime", "remount", "ro", "rw",
    "shared", "slave", "strictatime", "suid", "sync", "unbindable", "rro", "rrw", "rnosuid",
    "rsuid", "rnodev", "rdev", "rnoexec", "rexec", "rnoatime", "ratime", "rnodiratime",
    "rdiratime", "rrelatime", "rnorelatime", "rstrictatime", "rnostrictatime", "idmap", "ridmap",
];

const HOOKS: &[&str] = &[
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

const NAMESPACES: &[&str] = &["cgroup", "ipc", "mount", "network", "pid", "time", "user", "uts"];

const SECCOMP_ACTIONS: &[&str] = &[
    "SCMP_ACT_ALLOW",
    "SCMP_ACT_ERRNO",
    "SCMP_ACT_KILL",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_KILL_THREAD",
    "SCMP_ACT_LOG",
    "SCMP_ACT_NOTIFY",
    "SCMP_ACT_TRACE",
    "SCMP_ACT_TRAP",
];

const SECCOMP_OPERATORS: &[&str] = &[
    "SCMP_CMP_EQ",
    "SCMP_CMP_GE",
    "SCMP_CMP_GT",
    "SCMP_CMP_LE",
    "SCMP_CMP_LT",
    "SCMP_CMP_MASKED_EQ",
    "SCMP_CMP_NE",
];

pub fn features() -> Value {
    let capabilities: Vec<String> = {
        let mut caps: Vec<String> = caps::all().iter().map(|c| c.to_string()).collect();
        caps.sort();
        caps
    };
    json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": oci_spec::runtime::VERSION,
        "hooks": HOOKS,
        "mountOptions": MOUNT_OPTIONS,
        "linux": {
            "namespaces": NAMESPACES,
            "capabilities": capabilities,
            "cgroup": { "v1": true, "v2": true, "systemd": true, "systemdUser": false, "rdma": false },
            "seccomp": {
                "enabled": true,
                "actions": SECCOMP_ACTIONS,
                "operators": SECCOMP_OPERATORS,
                "archs": ["SCMP_ARCH_X86", "SCMP_ARCH_X86_64", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
                "knownFlags": ["SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_TSYNC"],
                "supportedFlags": ["SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_TSYNC"]
            },
            "apparmor": { "enabled": true },
            "selinux": { "enabled": false },
            // The engine applies `linux.intelRdt` only in its own builder, which we do not
            // use: create refuses the field, so it is not claimed.
            "intelRdt": { "enabled": false },
            // We make idmapped mounts ourselves (`idmap_mount`): claimed where the kernel
            // has mount_setattr (5.12); a filesystem that cannot be idmapped fails create.
            "mountExtensions": { "idmap": { "enabled": crate::idmap_detached::kernel_supports() } }
        },
        "annotations": {
            "io.github.rustpod.version": env!("CARGO_PKG_VERSION"),
            "io.github.rustpod.engine": "libcontainer 0.7.0",
            "org.opencontainers.runc.checkpoint.enabled": "false"
        }
    })
}
