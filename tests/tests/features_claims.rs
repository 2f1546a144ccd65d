// What `features` claims (and the shim's `-info` hands containerd 2.x, whose CRI offers user
// namespaces and recursive read-only mounts from it) must be true. Tests elsewhere cover: every
// namespace type incl. user and time (config_namespaces.rs), a user namespace with uid/gid
// mappings (config_namespaces.rs `user_namespace_with_mappings`), `rro` making a submount
// read-only (mounts_options.rs `bind_ro_rro_nosuid_nodev_noexec`), SCMP_ACT_NOTIFY
// (config_process.rs), the hooks (config_hooks.rs), cgroup v1/v2/systemd (config_cgroups.rs,
// cgroup_v2.rs, systemd_cgroup.rs). Here: every other claimed seccomp action, operator,
// architecture and flag loads in one filter, and idmapped mounts are claimed (mounts_idmap.rs
// proves them).

use rustpod_tests::checker::{report_with, strings};
use rustpod_tests::{json, needs, skip_if, Runtime, Value};

fn features() -> Value {
    Runtime::under_test().cmd(&["features"]).ok().stdout_json()
}

/// Syscalls `true` under the checker never makes: a rule on each changes nothing it does.
const UNUSED: &[&str] = &["acct", "add_key", "keyctl", "request_key", "swapon", "swapoff", "syslog", "reboot", "kexec_load"];

#[test]
fn every_claimed_seccomp_action_operator_arch_and_flag_loads() {
    skip_if!(needs::containers());
    let claims = features();
    let seccomp = &claims["linux"]["seccomp"];
    assert_eq!(seccomp["enabled"], true, "{claims}");
    // ALLOW is the default action below; NOTIFY needs a listener (config_process.rs tests it).
    let actions: Vec<String> =
        strings(&seccomp["actions"]).into_iter().filter(|a| a != "SCMP_ACT_ALLOW" && a != "SCMP_ACT_NOTIFY").collect();
    let operators: Vec<String> = strings(&seccomp["operators"]).into_iter().collect();
    assert!(actions.len() <= UNUSED.len() && !operators.is_empty(), "{claims}");
    let rules: Vec<Value> = actions
        .iter()
        .zip(UNUSED)
        .enumerate()
        .map(|(i, (action, syscall))| {
            let op = &operators[i % operators.len()];
            json!({"names": [syscall], "action": action, "errnoRet": 1,
                   "args": [{"index": 5, "value": 12345, "valueTwo": 12345, "op": op}]})
        })
        .collect();
    let report = report_with(&[], |b| {
        b.set(
            "/linux/seccomp",
            json!({"defaultAction": "SCMP_ACT_ALLOW",
                   "architectures": seccomp["archs"],
                   "flags": seccomp["supportedFlags"],
                   "syscalls": rules}),
        );
    });
    assert_eq!(report.at("/seccomp"), 2, "the filter with every claim loaded: {actions:?} {operators:?}");
}

/// We make idmapped mounts ourselves (libcontainer 0.7 would bind them unmapped), so on a
/// kernel with mount_setattr (5.12) they are claimed, as runc 1.2 does; mounts_idmap.rs proves
/// them. runc 1.1.5 claims none.
#[test]
fn idmapped_mounts_are_claimed_on_this_kernel() {
    let claims = features();
    let options = strings(&claims["mountOptions"]);
    assert!(options.iter().any(|o| o == "idmap") && options.iter().any(|o| o == "ridmap"), "{options:?}");
    assert_eq!(claims["linux"]["mountExtensions"]["idmap"]["enabled"], true, "{claims}");
    // What CRI needs for recursive read-only mounts and user namespaces stays claimed.
    assert!(options.iter().any(|o| o == "rro"), "{options:?}");
    assert!(strings(&claims["linux"]["namespaces"]).iter().any(|n| n == "user"), "{claims}");
}
