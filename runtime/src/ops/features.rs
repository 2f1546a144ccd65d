//! `features`: the OCI features document, listing what this build really
//! supports (the engine's abilities plus the pieces we own).

use serde_json::{json, Value};

use crate::engine::seccomp::SECCOMP_ARCHS;

const MOUNT_OPTIONS: &[&str] = &[
    "async",
    "atime",
    "bind",
    "defaults",
    "dev",
    "diratime",
    "dirsync",
    "exec",
    "mand",
    "noatime",
    "nodev",
    "nodiratime",
    "noexec",
    "nomand",
    "norelatime",
    "nostrictatime",
    "nosuid",
    "private",
    "rprivate",
    "rshared",
    "rslave",
    "runbindable",
    "rbind",
    "relatime",
    "remount",
    "ro",
    "rw",
    "shared",
    "slave",
    "strictatime",
    "suid",
    "sync",
    "unbindable",
    "rro",
    "rrw",
    "rnosuid",
    "rsuid",
    "rnodev",
    "rdev",
    "rnoexec",
    "rexec",
    "rnoatime",
    "ratime",
    "rnodiratime",
    "rdiratime",
    "rrelatime",
    "rnorelatime",
    "rstrictatime",
    "rnostrictatime",
    "idmap",
    "ridmap",
    // runc 1.5's symlink options: the engine applies the recursive pair,
    // `mount_symfollow` the others; `mount_sb_flags` the superblock flags
    // (refused on a bind), `mount_copyup` runc's tmpcopyup extension.
    "nosymfollow",
    "symfollow",
    "rnosymfollow",
    "rsymfollow",
    "lazytime",
    "nolazytime",
    "iversion",
    "noiversion",
    "silent",
    "loud",
    "tmpcopyup",
];

/// Annotations runc ≥ 1.2 may act on in ways a caller should not let a
/// pod set (`org.systemd.property.` is a prefix); containerd filters them.
const POTENTIALLY_UNSAFE_ANNOTATIONS: &[&str] = &["bundle", "org.systemd.property.", "org.criu.config"];

const HOOKS: &[&str] = &["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"];

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

const SECCOMP_OPERATORS: &[&str] =
    &["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"];

pub fn features() -> Value {
    let capabilities: Vec<String> = {
        let mut caps: Vec<String> = caps::all().iter().map(|c| c.to_string()).collect();
        caps.sort();
        caps
    };
    json!({
        "ociVersionMin": "1.0.0",
        // Every runtime-spec 1.2/1.3 field is applied or refused at create
        // naming it (`spec_support`, `validate`; tests/tests/config_spec_1_3.rs),
        // though oci-spec 0.10 calls itself 1.1.0.
        "ociVersionMax": crate::engine::spec_support::OCI_VERSION_MAX,
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
                "archs": SECCOMP_ARCHS,
                // WAIT_KILLABLE_RECV is known but refused at create (see
                // `validate`): libseccomp 2.5 cannot set it.
                "knownFlags": ["SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"],
                "supportedFlags": ["SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_TSYNC"]
            },
            "apparmor": { "enabled": true },
            "selinux": { "enabled": false },
            // The engine applies `linux.intelRdt` only in its own builder, which we do not
            // use: create refuses the field, so it is not claimed.
            "intelRdt": { "enabled": false },
            // We make idmapped mounts ourselves (`idmap_mount`): claimed where the kernel
            // has mount_setattr (5.12); a filesystem that cannot be idmapped fails create.
            "mountExtensions": { "idmap": { "enabled": crate::engine::idmap::detached::kernel_supports() } },
            // The engine moves them into the netns and sets the init's
            // policy (config_spec_1_3.rs checks the kernel's view).
            "netDevices": { "enabled": true },
            "memoryPolicy": {
                "modes": ["MPOL_DEFAULT", "MPOL_BIND", "MPOL_INTERLEAVE", "MPOL_WEIGHTED_INTERLEAVE", "MPOL_PREFERRED", "MPOL_PREFERRED_MANY", "MPOL_LOCAL"],
                "flags": ["MPOL_F_NUMA_BALANCING", "MPOL_F_RELATIVE_NODES", "MPOL_F_STATIC_NODES"]
            }
        },
        "potentiallyUnsafeConfigAnnotations": POTENTIALLY_UNSAFE_ANNOTATIONS,
        "annotations": {
            "io.github.rustpod.version": env!("CARGO_PKG_VERSION"),
            "io.github.rustpod.engine": "libcontainer 0.7.0",
            // Asked of criu each time: a kernel or criu change alters it.
            "org.opencontainers.runc.checkpoint.enabled": crate::engine::criu::check("criu").is_ok().to_string()
        }
    })
}
