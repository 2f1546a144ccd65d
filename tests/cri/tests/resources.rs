// Scenario 6: CRI resources reach the container's cgroup, and UpdateContainerResources
// changes them on the live container.

use rustpod_cri_tests::cri::LinuxContainerResources;
use rustpod_cri_tests::{cri_or_skip, pod_config, resources, sleeper, Cri};
use rustpod_tests::shim::cgroup_v1_file;

const MIB: i64 = 1024 * 1024;

fn read(cri: &Cri, id: &str, controller: &str, file: &str) -> i64 {
    let pid = cri.container_pid(id);
    let path = cgroup_v1_file(pid, controller, file)
        .unwrap_or_else(|| panic!("no {controller}/{file} for container pid {pid}"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn limits_reach_the_cgroup_and_update_live() {
    rustpod_tests::skip_if!(rustpod_tests::needs::cgroup_v1("memory")
        .or_else(|| rustpod_tests::needs::cgroup_v1("cpu")));
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
    assert_eq!(read(&cri, &c, "memory", "memory.limit_in_bytes"), 64 * MIB);
    assert_eq!(read(&cri, &c, "cpu", "cpu.cfs_period_us"), 100_000);
    assert_eq!(read(&cri, &c, "cpu", "cpu.cfs_quota_us"), 50_000);
    assert_eq!(read(&cri, &c, "cpu", "cpu.shares"), 512);

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
    assert_eq!(read(&cri, &c, "memory", "memory.limit_in_bytes"), 128 * MIB);
    assert_eq!(read(&cri, &c, "cpu", "cpu.cfs_quota_us"), 20_000);
    assert_eq!(read(&cri, &c, "cpu", "cpu.shares"), 256);
    // CRI reports what it set.
    let reported = cri
        .status(&c)
        .resources
        .and_then(|r| r.linux)
        .expect("ContainerStatus resources");
    assert_eq!(reported.memory_limit_in_bytes, 128 * MIB);
    assert_eq!(cri.sh_ok(&c, "echo still running"), "still running");
}
