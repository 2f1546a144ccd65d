// Scenario 6: CRI resources reach the container's cgroup, and UpdateContainerResources
// changes them on the live container; cgroup v1's files or v2's (memory.max, cpu.max,
// cpu.weight from the shares as runc and crun convert them).

use rustpod_cri_tests::cri::LinuxContainerResources;
use rustpod_cri_tests::{cri_or_skip, pod_config, resources, sleeper, Cri};
use rustpod_tests::shim::{cgroup_dir, cgroup_v1_file};

const MIB: i64 = 1024 * 1024;

/// (memory limit, CFS quota, CFS period, CPU shares) as the container's cgroup holds them; on
/// v2 the shares are cpu.weight, converted back to compare.
fn limits(cri: &Cri, id: &str) -> (i64, i64, i64, i64) {
    let pid = cri.container_pid(id);
    let read = |path: std::path::PathBuf| std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let int = |text: &str| -> i64 { text.trim().parse().unwrap_or_else(|e| panic!("{text:?}: {e}")) };
    if let Some(memory) = cgroup_v1_file(pid, "memory", "memory.limit_in_bytes") {
        let cpu = |file| int(&read(cgroup_v1_file(pid, "cpu", file).unwrap_or_else(|| panic!("no cpu/{file}"))));
        return (int(&read(memory)), cpu("cpu.cfs_quota_us"), cpu("cpu.cfs_period_us"), cpu("cpu.shares"));
    }
    let dir = cgroup_dir(pid, "memory");
    let cpu_max = read(dir.join("cpu.max"));
    let (quota, period) = cpu_max.trim().split_once(' ').expect("cpu.max is QUOTA PERIOD");
    (int(&read(dir.join("memory.max"))), int(quota), int(period), int(&read(dir.join("cpu.weight"))))
}

/// What the cgroup holds for `shares`: themselves on v1; on v2 the cpu.weight the handler's
/// runtime converts them to: runc before 1.3.2's linear map (512 -> 20; Debian 12's 1.1.5), or
/// the fit of runc 1.3.2+ (sid's 1.3.6), crun and libcgroups that rustpod uses (512 -> 59;
/// tests/RUNC_DIFFERENCES.md).
fn shares_as_held(cri: &Cri, id: &str, shares: i64) -> i64 {
    let v1 = cgroup_v1_file(cri.container_pid(id), "cpu", "cpu.shares").is_some();
    if v1 {
        return shares;
    }
    if cri.handler == "runc" && rustpod_tests::env::version_of(&rustpod_tests::env::runc_bin()) < (1, 3, 2) {
        return 1 + ((shares - 2) * 9999) / 262142;
    }
    let l = (shares as f64).log2();
    10f64.powf((l * l + 125.0 * l) / 612.0 - 7.0 / 34.0).ceil() as i64
}

#[test]
fn limits_reach_the_cgroup_and_update_live() {
    let cri = cri_or_skip!();
    let pod_cfg = pod_config("resources");
    let pod = cri.run_pod_ok(&pod_cfg);
    let mut c = sleeper("limited");
    *resources(&mut c) = LinuxContainerResources {
        memory_limit_in_bytes: 64 * MIB,
        cpu_period: 100_000,
        cpu_quota: 50_000,
        cpu_shares: 512,
        ..Default::default()
    };
    let c = cri.run_container(&pod, &c, &pod_cfg);
    let want = (64 * MIB, 50_000, 100_000, shares_as_held(&cri, &c, 512));
    assert_eq!(limits(&cri, &c), want, "(memory, quota, period, shares) handler {}", cri.handler);

    cri.update_resources(
        &c,
        LinuxContainerResources {
            memory_limit_in_bytes: 128 * MIB,
            cpu_period: 100_000,
            cpu_quota: 20_000,
            cpu_shares: 256,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("UpdateContainerResources (handler {}): {e}", cri.handler));
    let want = (128 * MIB, 20_000, 100_000, shares_as_held(&cri, &c, 256));
    assert_eq!(limits(&cri, &c), want, "after the update, handler {}", cri.handler);
    // CRI reports what it set.
    let reported = cri.status(&c).resources.and_then(|r| r.linux).expect("ContainerStatus resources");
    assert_eq!(reported.memory_limit_in_bytes, 128 * MIB);
    assert_eq!(cri.sh_ok(&c, "echo still running"), "still running");
}
