// Kernel-facing fields (issue 3): linux.sysctl, hostname, domainname, linux.personality and
// linux.timeOffsets in a time namespace, compared with what the checker reads inside.

use rustpod_tests::checker::{self, Report};
use rustpod_tests::{conform, env, json, needs, skip, skip_if, Runtime};
use std::path::Path;

#[test]
fn sysctls_in_the_containers_namespaces() {
    skip_if!(needs::containers());
    let sysctls = [("net.ipv4.ip_forward", "1"), ("net.core.somaxconn", "1234"), ("kernel.msgmax", "16384")];
    let mut args = vec![];
    for (key, _) in sysctls {
        args.extend(["--sysctl", key]);
    }
    let mut bundle = checker::bundle(&args);
    bundle.set("/linux/sysctl", json!(sysctls.iter().cloned().collect::<std::collections::BTreeMap<_, _>>()));
    let report = Report::run(&Runtime::under_test(), &bundle);
    for (key, value) in sysctls {
        assert_eq!(report.at(&format!("/sysctls/{key}")), value, "{key}");
    }
    let host = checker::host_report(&["--sysctl", "net.core.somaxconn"]);
    assert_ne!(host.at("/sysctls/net.core.somaxconn"), "1234", "the host's value must not change");
}

#[test]
fn hostname_and_domainname() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle(&[]);
    bundle.set("/hostname", json!("pod-host"));
    bundle.set("/domainname", json!("example.test"));
    let report = Report::run(&Runtime::under_test(), &bundle);
    assert_eq!(report.str("/hostname"), "pod-host");
    conform!(report.str("/domainname") == "example.test", "domainname: got {:?}", report.str("/domainname"));
}

#[test]
fn personality_linux32() {
    skip_if!(needs::containers());
    const PER_LINUX32: i64 = 0x0008;
    let mut bundle = checker::bundle(&[]);
    bundle.set("/linux/personality", json!({"domain": "LINUX32"}));
    let out = checker::try_run(&Runtime::under_test(), &bundle);
    conform!(out.success(), "personality LINUX32: {}", out.describe());
    let report = Report::from_output(out);
    conform!(report.at("/personality").as_i64() == Some(PER_LINUX32), "personality: got {}", report.at("/personality"));
}

/// A new time namespace with linux.timeOffsets: the offsets as the kernel shows them inside, and
/// the clocks ahead of the host's by them. Next to runc ≥ 1.2 (1.1.5 has no time namespaces);
/// rustpod's init makes it without an intermediate process (`time_ns`).
#[test]
fn time_offsets_in_a_time_namespace() {
    skip_if!(needs::containers());
    if !Path::new("/proc/self/ns/time").exists() {
        skip!("the kernel has no time namespaces (/proc/self/ns/time is missing)");
    }
    const TEN_YEARS: i64 = 10 * 365 * 86_400;
    for rt in Runtime::runc_and_under_test() {
        let name = rt.bin().display().to_string();
        if env::runc_before(rt.bin(), (1, 2, 0)) {
            eprintln!("{name} predates time namespaces: not run");
            continue;
        }
        let mut bundle = checker::bundle(&[]);
        let mut namespaces = bundle.config()["linux"]["namespaces"].clone();
        namespaces.as_array_mut().expect("namespaces").push(json!({"type": "time"}));
        bundle.set("/linux/namespaces", namespaces);
        bundle.set(
            "/linux/timeOffsets",
            json!({"monotonic": {"secs": TEN_YEARS, "nanosecs": 0},
                   "boottime": {"secs": 2 * TEN_YEARS, "nanosecs": 0}}),
        );
        let out = checker::try_run(&rt, &bundle);
        conform!(out.success(), "{name}: timeOffsets: {}", out.describe());
        let report = Report::from_output(out);
        let offsets = report.str("/timens_offsets");
        let rows: Vec<Vec<&str>> = offsets.lines().map(|l| l.split_whitespace().collect()).collect();
        let ten = TEN_YEARS.to_string();
        let twenty = (2 * TEN_YEARS).to_string();
        assert!(
            rows.contains(&vec!["monotonic", ten.as_str(), "0"]) && rows.contains(&vec!["boottime", twenty.as_str(), "0"]),
            "{name}: timens_offsets: {offsets}"
        );
        // The clocks inside run ahead of the host's by the offsets, so they exceed them.
        let clock = |name: &str| report.at(&format!("/clocks/{name}")).as_i64().unwrap_or(0);
        assert!(clock("monotonic") >= TEN_YEARS, "{name}: {}", report.at("/clocks"));
        assert!(clock("boottime") >= 2 * TEN_YEARS, "{name}: {}", report.at("/clocks"));
    }
}
