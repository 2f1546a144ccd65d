//! A new container's cgroups on a v1 host (hybrid included): made, joined
//! and limited from the command's one read of mountinfo. libcgroups 0.7's
//! v1 manager looks each of its 12 controllers up again in mountinfo and
//! /proc/self/cgroup, each time through a newly checked procfs handle
//! (most of a `create`'s own syscalls), and its writers are private to it.
//! The resources written here are those kubelet, docker and podman set; a
//! spec with any other leaves the whole step to libcgroups ([`applies`]).

use std::io::{ErrorKind, Read, Write as _};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::unistd::Pid;
use oci_spec::runtime::{LinuxMemory, LinuxResources};

use crate::engine::cgroup::device_rules;
use crate::engine::cgroup::fs::{io_errno, Hierarchy, StepError};
use crate::error::{Error, Result};

/// The v1 controllers whose hierarchies a container's processes join:
/// libcgroups' list. Named hierarchies are `cgroup::named`'s; rdma is not
/// joined.
pub const CONTROLLERS: &[&str] =
    &["cpu", "cpuacct", "cpuset", "devices", "hugetlb", "memory", "pids", "perf_event", "blkio", "net_prio", "net_cls", "freezer"];

/// One write to a file of the container's cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub controller: &'static str,
    pub file: String,
    pub value: String,
    /// Skipped where the kernel has no such file (hugetlb's `rsvd` limits).
    pub if_present: bool,
}

fn write(controller: &'static str, file: impl Into<String>, value: impl ToString) -> Write {
    Write { controller, file: file.into(), value: value.to_string(), if_present: false }
}

/// Whether this module sets up the cgroups: a v1 host, and only resources
/// written here. Anything else (blockIO, network, rdma, unified, kernel
/// memory, useHierarchy, cpu burst or idle) goes through libcgroups.
pub fn applies(cgroups: &[Hierarchy], resources: Option<&LinuxResources>) -> bool {
    !crate::engine::cgroup::fs::is_unified(cgroups) && resources.is_none_or(covers)
}

fn covers(r: &LinuxResources) -> bool {
    let memory = r.memory().as_ref().is_none_or(|m| m.kernel().is_none() && m.kernel_tcp().is_none() && m.use_hierarchy().is_none());
    let cpu = r.cpu().as_ref().is_none_or(|c| c.burst().is_none() && c.idle().is_none());
    let empty_map = |m: Option<usize>| m.is_none_or(|n| n == 0);
    memory
        && cpu
        && r.block_io().is_none()
        && r.network().is_none()
        && empty_map(r.rdma().as_ref().map(|m| m.len()))
        && empty_map(r.unified().as_ref().map(|m| m.len()))
}

/// The writes `resources` make, in runc's order (cpuset, devices, memory,
/// cpu, pids, hugetlb). `memory_limit_now` reads the memory cgroup's
/// limit, asked only when both a limit and a swap limit are set: which of
/// the two goes first depends on it, as the kernel refuses a memory+swap
/// limit below the memory limit.
pub fn writes(resources: Option<&LinuxResources>, memory_limit_now: impl FnOnce() -> Result<i64>) -> Result<Vec<Write>> {
    let mut out = Vec::new();
    let cpu = resources.and_then(|r| r.cpu().as_ref());
    if let Some(cpus) = cpu.and_then(|c| c.cpus().as_deref()).filter(|s| !s.is_empty()) {
        out.push(write("cpuset", "cpuset.cpus", cpus));
    }
    if let Some(mems) = cpu.and_then(|c| c.mems().as_deref()).filter(|s| !s.is_empty()) {
        out.push(write("cpuset", "cpuset.mems", mems));
    }
    for rule in device_rules::container_rules(resources) {
        if let Some((file, line)) = device_rules::v1_line(&rule) {
            out.push(write("devices", file, line));
        }
    }
    if let Some(memory) = resources.and_then(|r| r.memory().as_ref()) {
        memory_writes(memory, memory_limit_now, &mut out)?;
    }
    if let Some(cpu) = cpu {
        let set = |v: Option<i64>| v.filter(|v| *v != 0);
        let set_u = |v: Option<u64>| v.filter(|v| *v != 0);
        if let Some(shares) = set_u(cpu.shares()) {
            out.push(write("cpu", "cpu.shares", shares));
        }
        if let Some(period) = set_u(cpu.period()) {
            out.push(write("cpu", "cpu.cfs_period_us", period));
        }
        if let Some(quota) = set(cpu.quota()) {
            out.push(write("cpu", "cpu.cfs_quota_us", quota));
        }
        // The period first: the kernel checks the runtime against it.
        if let Some(period) = set_u(cpu.realtime_period()) {
            out.push(write("cpu", "cpu.rt_period_us", period));
        }
        if let Some(runtime) = set(cpu.realtime_runtime()) {
            out.push(write("cpu", "cpu.rt_runtime_us", runtime));
        }
    }
    if let Some(pids) = resources.and_then(|r| r.pids().as_ref()) {
        // 0 is `pids_zero`'s, after the init exists.
        match pids.limit() {
            0 => {}
            n if n > 0 => out.push(write("pids", "pids.max", n)),
            _ => out.push(write("pids", "pids.max", "max")),
        }
    }
    for limit in resources.and_then(|r| r.hugepage_limits().as_deref()).unwrap_or_default() {
        let size = limit.page_size();
        out.push(write("hugetlb", format!("hugetlb.{size}.limit_in_bytes"), limit.limit()));
        out.push(Write { if_present: true, ..write("hugetlb", format!("hugetlb.{size}.rsvd.limit_in_bytes"), limit.limit()) });
    }
    Ok(out)
}

fn memory_writes(memory: &LinuxMemory, limit_now: impl FnOnce() -> Result<i64>, out: &mut Vec<Write>) -> Result<()> {
    let limit = memory.limit().unwrap_or(0);
    let mut swap = memory.swap().unwrap_or(0);
    // An unlimited memory with no word on swap leaves swap unlimited too.
    if limit == -1 && swap == 0 {
        swap = -1;
    }
    let limit_write = write("memory", "memory.limit_in_bytes", limit);
    let swap_write = write("memory", "memory.memsw.limit_in_bytes", swap);
    match (limit != 0, swap != 0) {
        (true, true) => {
            if swap == -1 || limit_now()? < swap {
                out.extend([swap_write, limit_write]);
            } else {
                out.extend([limit_write, swap_write]);
            }
        }
        (true, false) => out.push(limit_write),
        (false, true) => out.push(swap_write),
        (false, false) => {}
    }
    if let Some(reservation) = memory.reservation().filter(|r| *r != 0) {
        out.push(write("memory", "memory.soft_limit_in_bytes", reservation));
    }
    if memory.disable_oom_killer() == Some(true) {
        out.push(write("memory", "memory.oom_control", 1));
    }
    // Above 100 is refused by `validate`.
    if let Some(swappiness) = memory.swappiness() {
        out.push(write("memory", "memory.swappiness", swappiness));
    }
    Ok(())
}

/// Makes the container's cgroup `path` in every v1 hierarchy it joins, puts
/// `pid` in each, and writes its resources. `cgroups` are the host's
/// hierarchies as the command read them.
pub fn join_and_limit(cgroups: &[Hierarchy], path: &Path, pid: Pid, resources: Option<&LinuxResources>) -> Result<()> {
    let fail = |step: StepError| Error::Cgroup { path: path.to_path_buf(), reason: step.to_string() };
    let relative = crate::engine::cgroup::fs::relative(path);
    let dirs: Vec<(&Hierarchy, PathBuf)> =
        cgroups.iter().filter(|h| !h.unified && CONTROLLERS.iter().any(|c| h.has(c))).map(|h| (h, h.mount_point.join(&relative))).collect();
    for (hierarchy, dir) in &dirs {
        make_dirs(&hierarchy.mount_point, &relative, hierarchy.has("cpuset")).map_err(fail)?;
        write_file(&dir.join("cgroup.procs"), &pid.to_string()).map_err(fail)?;
    }
    let dir_of = |controller: &'static str| {
        dirs.iter().find(|(h, _)| h.has(controller)).map(|(_, d)| d.as_path()).ok_or_else(|| fail(StepError::NoController(controller)))
    };
    let limit_now = || -> Result<i64> {
        let file = dir_of("memory")?.join("memory.limit_in_bytes");
        let text = read_file(&file).map_err(fail)?;
        text.trim().parse().map_err(|_| fail(StepError::NotANumber { path: file, text: text.trim().to_string() }))
    };
    for w in writes(resources, limit_now)? {
        let file = dir_of(w.controller)?.join(&w.file);
        match write_file(&file, &w.value) {
            Ok(()) => {}
            Err(_) if w.if_present && !file.exists() => continue,
            Err(StepError::Write { errno: Errno::EBUSY, .. }) if w.file == "memory.limit_in_bytes" => {
                return Err(fail(memory_busy(&file, &w.value)))
            }
            Err(step) => return Err(fail(step)),
        }
        if w.file == "cpu.shares" {
            check_shares(&file, &w.value).map_err(fail)?;
        }
    }
    Ok(())
}

/// Where libcgroups set the cgroup up instead (its own device list, which
/// allows the host's console), denies that console again in the devices
/// cgroup of `pid`, the container's init, before `start`. Nothing on v2,
/// where our device program replaces libcgroups' list.
pub fn take_back_console(cgroups: &[Hierarchy], resources: Option<&LinuxResources>, pid: Pid) -> Result<()> {
    if crate::engine::cgroup::fs::is_unified(cgroups) {
        return Ok(());
    }
    let Some(line) = device_rules::v1_console_denial(resources) else { return Ok(()) };
    let Some(dir) = crate::engine::cgroup::fs::v1_dir_of(cgroups, pid.as_raw(), "devices") else { return Ok(()) };
    write_file(&dir.join("devices.deny"), line).map_err(|step| Error::Cgroup { path: dir, reason: step.to_string() })
}

/// mkdir of each level below `root`; a new cpuset level gets its parent's
/// CPUs and memory nodes, as no task may join an empty cpuset.
fn make_dirs(root: &Path, relative: &Path, cpuset: bool) -> std::result::Result<(), StepError> {
    let mut dir = root.to_path_buf();
    for part in relative.components() {
        let parent = dir.clone();
        dir.push(part);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StepError::file("mkdir", &dir, &e)),
        }
        if cpuset {
            for file in ["cpuset.cpus", "cpuset.mems"] {
                inherit(&parent, &dir, file)?;
            }
        }
    }
    Ok(())
}

fn inherit(parent: &Path, dir: &Path, file: &str) -> std::result::Result<(), StepError> {
    if !read_file(&dir.join(file))?.trim().is_empty() {
        return Ok(());
    }
    let value = read_file(&parent.join(file))?;
    if value.trim().is_empty() {
        return Err(StepError::EmptyCpuset(parent.join(file)));
    }
    write_file(&dir.join(file), value.trim())
}

/// As runc: the kernel clamps cpu.shares silently, so read it back.
fn check_shares(file: &Path, wanted: &str) -> std::result::Result<(), StepError> {
    let got = read_file(file)?;
    let (got, wanted) = (got.trim().parse::<u64>().unwrap_or(0), wanted.parse::<u64>().unwrap_or(0));
    match got.cmp(&wanted) {
        std::cmp::Ordering::Less => Err(StepError::SharesClamped { bound: "maximum", got }),
        std::cmp::Ordering::Greater => Err(StepError::SharesClamped { bound: "minimum", got }),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// runc's words for a limit below what the cgroup already uses.
fn memory_busy(file: &Path, value: &str) -> StepError {
    let dir = file.parent().unwrap_or(Path::new("/"));
    let read = |f: &str| read_file(&dir.join(f)).map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into());
    StepError::MemoryBusy { value: value.to_string(), usage: read("memory.usage_in_bytes"), peak: read("memory.max_usage_in_bytes") }
}

fn write_file(path: &Path, value: &str) -> std::result::Result<(), StepError> {
    let mut file = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| StepError::file("openat", path, &e))?;
    file.write_all(value.as_bytes()).map_err(|e| StepError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        errno: io_errno(&e),
    })
}

fn read_file(path: &Path) -> std::result::Result<String, StepError> {
    let mut text = String::new();
    std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text)).map_err(|e| StepError::file("read", path, &e))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resources(value: serde_json::Value) -> LinuxResources {
        serde_json::from_value(value).unwrap()
    }

    fn files(writes: &[Write]) -> Vec<(String, String)> {
        writes.iter().filter(|w| w.controller != "devices").map(|w| (w.file.clone(), w.value.clone())).collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(f, v)| (f.to_string(), v.to_string())).collect()
    }

    const NEW_CGROUP_LIMIT: i64 = 9223372036854771712;

    #[test]
    fn kubelets_resources_are_written_in_runcs_order() {
        let r = resources(json!({
            "memory": {"limit": 67108864, "swap": 67108864, "reservation": 33554432, "swappiness": 0},
            "cpu": {"shares": 512, "quota": 20000, "period": 100000, "cpus": "0", "mems": "0"},
            "pids": {"limit": 64},
            "hugepageLimits": [{"pageSize": "2MB", "limit": 0}]
        }));
        let w = writes(Some(&r), || Ok(NEW_CGROUP_LIMIT)).unwrap();
        assert_eq!(
            files(&w),
            pairs(&[
                ("cpuset.cpus", "0"),
                ("cpuset.mems", "0"),
                ("memory.limit_in_bytes", "67108864"),
                ("memory.memsw.limit_in_bytes", "67108864"),
                ("memory.soft_limit_in_bytes", "33554432"),
                ("memory.swappiness", "0"),
                ("cpu.shares", "512"),
                ("cpu.cfs_period_us", "100000"),
                ("cpu.cfs_quota_us", "20000"),
                ("pids.max", "64"),
                ("hugetlb.2MB.limit_in_bytes", "0"),
                ("hugetlb.2MB.rsvd.limit_in_bytes", "0"),
            ])
        );
        assert!(w.iter().filter(|w| w.file.contains("rsvd")).all(|w| w.if_present));
    }

    #[test]
    fn swap_goes_first_when_it_is_above_the_current_limit() {
        let r = resources(json!({"memory": {"limit": 1000, "swap": 4000}}));
        let w = writes(Some(&r), || Ok(2000)).unwrap();
        assert_eq!(files(&w), pairs(&[("memory.memsw.limit_in_bytes", "4000"), ("memory.limit_in_bytes", "1000")]));
        let unlimited = resources(json!({"memory": {"limit": -1}}));
        let w = writes(Some(&unlimited), || panic!("not read: swap -1 goes first")).unwrap();
        assert_eq!(files(&w), pairs(&[("memory.memsw.limit_in_bytes", "-1"), ("memory.limit_in_bytes", "-1")]));
    }

    #[test]
    fn the_current_limit_is_read_only_when_the_order_depends_on_it() {
        let r = resources(json!({"memory": {"limit": 1000}, "pids": {"limit": -1}}));
        let w = writes(Some(&r), || panic!("not needed")).unwrap();
        assert_eq!(files(&w), pairs(&[("memory.limit_in_bytes", "1000"), ("pids.max", "max")]));
    }

    #[test]
    fn disable_oom_killer_is_written_as_runc_writes_it() {
        let on = resources(json!({"memory": {"disableOOMKiller": true}}));
        assert_eq!(files(&writes(Some(&on), || Ok(0)).unwrap()), pairs(&[("memory.oom_control", "1")]));
        let off = resources(json!({"memory": {"disableOOMKiller": false}}));
        assert!(files(&writes(Some(&off), || Ok(0)).unwrap()).is_empty());
    }

    #[test]
    fn realtime_period_goes_before_runtime() {
        let r = resources(json!({"cpu": {"realtimeRuntime": 950000, "realtimePeriod": 1000000}}));
        let w = writes(Some(&r), || Ok(0)).unwrap();
        assert_eq!(files(&w), pairs(&[("cpu.rt_period_us", "1000000"), ("cpu.rt_runtime_us", "950000")]));
    }

    #[test]
    fn devices_start_from_the_configs_rules_then_the_defaults() {
        let r = resources(json!({"devices": [{"allow": false, "access": "rwm"}]}));
        let w = writes(Some(&r), || Ok(0)).unwrap();
        let devices: Vec<_> = w.iter().filter(|w| w.controller == "devices").collect();
        assert_eq!((devices[0].file.as_str(), devices[0].value.as_str()), ("devices.deny", "a *:* rwm"));
        assert_eq!(devices.len(), 12);
        assert_eq!(writes(None, || Ok(0)).unwrap().len(), 11);
    }

    #[test]
    fn other_resources_stay_with_libcgroups() {
        let v1 = crate::engine::cgroup::fs::parse_mountinfo(
            "40 35 0:35 / /sys/fs/cgroup/memory rw,nosuid shared:15 - cgroup cgroup rw,memory\n",
        );
        let v2 = crate::engine::cgroup::fs::parse_mountinfo("36 25 0:31 / /sys/fs/cgroup rw shared:10 - cgroup2 cgroup2 rw\n");
        assert!(applies(&v1, None));
        assert!(applies(&v1, Some(&resources(json!({"memory": {"limit": 1}, "pids": {"limit": 5}})))));
        assert!(!applies(&v2, None));
        for other in [
            json!({"blockIO": {"weight": 10}}),
            json!({"memory": {"kernel": 1}}),
            json!({"cpu": {"idle": 1}}),
            json!({"unified": {"memory.high": "1"}}),
            json!({"network": {"classID": 1}}),
        ] {
            assert!(!applies(&v1, Some(&resources(other.clone()))), "{other}");
        }
    }
}
