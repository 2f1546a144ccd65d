// Pods under kubelet's systemd cgroup driver (issue 14, item 2): with `SystemdCgroup = true` in
// the handler's options and each pod's cgroup_parent a slice, the sandbox and its containers
// must land in the pod's slice (never in a directory named `slice:prefix:name` at the cgroup
// root), and a limit kubelet sets on the pod's slice must bind its containers. Needs systemd as
// PID 1: hack/guest-sid.sh runs it in a guest.

use rustpod_cri_tests::cri::ContainerState;
use rustpod_cri_tests::{container, cri_or_skip, pod_slice, sleeper, systemd_driver, Cri};
use rustpod_tests::shim::cgroup_dir;

fn blocker() -> Option<String> {
    rustpod_tests::cgroup::systemd_blocker().or_else(|| (!systemd_driver()).then(|| "RUSTPOD_CRI_CGROUP_DRIVER=cgroupfs".to_string()))
}

/// The pod's slice as a cgroup path: systemd nests `a-b-c.slice` in `a.slice/a-b.slice`.
fn slice_path(uid: &str) -> String {
    format!("/kubepods.slice/kubepods-besteffort.slice/{}/", pod_slice(uid))
}

/// Process `pid`'s memory cgroup, relative to the hierarchy's root.
fn cgroup_of(pid: i32) -> String {
    let dir = cgroup_dir(pid, "memory");
    let root = if dir.starts_with("/sys/fs/cgroup/memory") { "/sys/fs/cgroup/memory" } else { "/sys/fs/cgroup" };
    format!("/{}", dir.strip_prefix(root).expect("under /sys/fs/cgroup").display())
}

/// Entries with a colon at the top of every cgroup hierarchy (what cgroupfs would make of
/// `slice:prefix:name`).
fn colon_dirs() -> Vec<String> {
    let tops = ["/sys/fs/cgroup".to_string()]
        .into_iter()
        .chain(std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten().map(|e| e.path().display().to_string()));
    tops.flat_map(|top| std::fs::read_dir(top).into_iter().flatten().flatten())
        .map(|e| e.path().display().to_string())
        .filter(|p| p.rsplit('/').next().is_some_and(|name| name.contains(':')))
        .collect()
}

fn uid_of(pod: &rustpod_cri_tests::cri::PodSandboxConfig) -> String {
    pod.metadata.as_ref().expect("metadata").uid.clone()
}

#[test]
fn pods_and_their_containers_stay_in_the_pods_slice() {
    rustpod_tests::skip_if!(blocker());
    let cri = cri_or_skip!();
    let pod_cfg = rustpod_cri_tests::pod_config("slice");
    let slice = slice_path(&uid_of(&pod_cfg));
    let pod = cri.run_pod_ok(&pod_cfg);
    let c = cri.run_container(&pod, &sleeper("in-slice"), &pod_cfg);
    for (what, pid) in [("sandbox", cri.pod_pid(&pod)), ("container", cri.container_pid(&c))] {
        let cgroup = cgroup_of(pid);
        assert!(
            cgroup.starts_with(&slice) && cgroup.ends_with(".scope"),
            "handler {}: the {what}'s cgroup {cgroup} is not a scope in the pod's slice {slice}",
            cri.handler
        );
    }
    assert_eq!(colon_dirs(), Vec::<String>::new(), "cgroupfs directories named slice:prefix:name");
    // A process started by ExecSync runs in the container's scope too: find it on the host by
    // its unique argument.
    let marker = format!("{}", 10_000 + std::process::id() % 50_000);
    cri.sh_ok(&c, &format!("sleep {marker} >/dev/null 2>&1 </dev/null & echo started"));
    let exec_pid = rustpod_tests::wait::wait_for("the exec'd sleep on the host", || {
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (cmdline == format!("sleep\0{marker}\0").as_bytes()).then_some(pid)
        })
    });
    assert_eq!(cgroup_of(exec_pid), cgroup_of(cri.container_pid(&c)), "the ExecSync'd process's cgroup");
}

/// A dd that needs a 64 MiB buffer, in `pod`: its exit code.
fn run_hog(cri: &Cri, pod: &str, pod_cfg: &rustpod_cri_tests::cri::PodSandboxConfig, name: &str) -> i32 {
    let c = cri.run_container(pod, &container(name, "exec dd if=/dev/zero of=/dev/null bs=64M count=1"), pod_cfg);
    cri.wait_state(&c, ContainerState::ContainerExited);
    cri.status(&c).exit_code
}

#[test]
fn a_limit_on_the_pods_slice_binds_its_containers() {
    rustpod_tests::skip_if!(blocker());
    let cri = cri_or_skip!();
    let pod_cfg = rustpod_cri_tests::pod_config("podlimit");
    let pod = cri.run_pod_ok(&pod_cfg);
    assert_eq!(run_hog(&cri, &pod, &pod_cfg, "free"), 0, "64 MiB without a pod limit (handler {})", cri.handler);
    // What kubelet does for a pod with limits: MemoryMax on the pod's slice.
    let slice = pod_slice(&uid_of(&pod_cfg));
    rustpod_tests::process::run(
        std::path::Path::new("/bin/systemctl"),
        &["set-property", "--runtime", &slice, "MemoryMax=16M", "MemorySwapMax=0"],
        b"",
    )
    .ok();
    assert_eq!(run_hog(&cri, &pod, &pod_cfg, "bound"), 137, "64 MiB in a pod limited to 16 MiB (handler {})", cri.handler);
}
