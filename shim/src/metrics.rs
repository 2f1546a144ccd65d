//! Stats: a container's cgroup statistics (from libcgroups) as containerd's
//! cgroups v1 `Metrics` or, on a unified hierarchy, v2 `Metrics`, in an Any.

use std::path::Path;

use containerd_shim::protos::cgroups::metrics as v1;
use containerd_shim::protos::cgroups_v2::metrics as v2;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{Message, MessageField};
use libcgroups::common::{AnyCgroupManager, CgroupManager, CgroupSetup};
use libcgroups::stats::Stats;

/// Where a container's statistics come from: its cgroup manager, built once.
/// Building one reads `/proc/self/mountinfo` once per v1 controller, which on
/// a node with many mounts costs milliseconds, and kubelet asks for stats of
/// every container every few seconds.
pub struct Source {
    id: String,
    manager: AnyCgroupManager,
    unified: bool,
}

impl Source {
    pub fn open(root: &Path, id: &str) -> Result<Source, String> {
        let dir = rustpod::container_dir::ContainerDir::new(root, id).map_err(|e| e.to_string())?;
        let container = dir.load().map_err(|e| e.to_string())?;
        let manager = rustpod::cgroup::manager_for(&container).map_err(|e| e.to_string())?;
        let unified = matches!(libcgroups::common::get_cgroup_setup(), Ok(CgroupSetup::Unified));
        Ok(Source { id: id.to_string(), manager, unified })
    }

    /// Worth keeping for the container's lifetime: a systemd manager holds a
    /// D-Bus connection, so it is built again for each call instead.
    pub fn cacheable(&self) -> bool {
        !matches!(self.manager, AnyCgroupManager::Systemd(_))
    }

    pub fn collect(&self) -> Result<Any, String> {
        let stats = self.manager.stats().map_err(|e| format!("cgroup stats of {}: {e}", self.id))?;
        if self.unified { to_any(&metrics_v2(&stats), V2_TYPE) } else { to_any(&metrics_v1(&stats), V1_TYPE) }
    }
}

/// The metrics' protobuf full names (spelled out, as for events, so that no
/// reflection tables are built).
const V1_TYPE: &str = "io.containerd.cgroups.v1.Metrics";
const V2_TYPE: &str = "io.containerd.cgroups.v2.Metrics";

fn to_any<M: Message>(m: &M, type_url: &str) -> Result<Any, String> {
    let mut any = Any::new();
    any.type_url = type_url.to_string();
    any.value = m.write_to_bytes().map_err(|e| format!("encode metrics: {e}"))?;
    Ok(any)
}

fn metrics_v1(s: &Stats) -> v1::Metrics {
    let stat = |k: &str| s.memory.stats.get(k).copied().unwrap_or(0);
    let entry = |d: &libcgroups::stats::MemoryData| v1::MemoryEntry {
        limit: d.limit,
        usage: d.usage,
        max: d.max_usage,
        failcnt: d.fail_count,
        ..Default::default()
    };
    let memory = v1::MemoryStat {
        cache: s.memory.cache,
        rss: stat("rss"),
        rss_huge: stat("rss_huge"),
        mapped_file: stat("mapped_file"),
        dirty: stat("dirty"),
        writeback: stat("writeback"),
        pg_pg_in: stat("pgpgin"),
        pg_pg_out: stat("pgpgout"),
        pg_fault: stat("pgfault"),
        pg_maj_fault: stat("pgmajfault"),
        inactive_anon: stat("inactive_anon"),
        active_anon: stat("active_anon"),
        inactive_file: stat("inactive_file"),
        active_file: stat("active_file"),
        unevictable: stat("unevictable"),
        hierarchical_memory_limit: stat("hierarchical_memory_limit"),
        hierarchical_swap_limit: stat("hierarchical_memsw_limit"),
        total_cache: stat("total_cache"),
        total_rss: stat("total_rss"),
        total_rss_huge: stat("total_rss_huge"),
        total_mapped_file: stat("total_mapped_file"),
        total_dirty: stat("total_dirty"),
        total_writeback: stat("total_writeback"),
        total_pg_pg_in: stat("total_pgpgin"),
        total_pg_pg_out: stat("total_pgpgout"),
        total_pg_fault: stat("total_pgfault"),
        total_pg_maj_fault: stat("total_pgmajfault"),
        total_inactive_anon: stat("total_inactive_anon"),
        total_active_anon: stat("total_active_anon"),
        total_inactive_file: stat("total_inactive_file"),
        total_active_file: stat("total_active_file"),
        total_unevictable: stat("total_unevictable"),
        usage: MessageField::some(entry(&s.memory.memory)),
        swap: MessageField::some(entry(&s.memory.memswap)),
        kernel: MessageField::some(entry(&s.memory.kernel)),
        kernel_tcp: MessageField::some(entry(&s.memory.kernel_tcp)),
        ..Default::default()
    };
    let cpu = v1::CPUStat {
        usage: MessageField::some(v1::CPUUsage {
            total: s.cpu.usage.usage_total,
            kernel: s.cpu.usage.usage_kernel,
            user: s.cpu.usage.usage_user,
            per_cpu: s.cpu.usage.per_core_usage_total.clone(),
            ..Default::default()
        }),
        throttling: MessageField::some(v1::Throttle {
            periods: s.cpu.throttling.periods,
            throttled_periods: s.cpu.throttling.throttled_periods,
            throttled_time: s.cpu.throttling.throttled_time,
            ..Default::default()
        }),
        ..Default::default()
    };
    let blk = |v: &[libcgroups::stats::BlkioDeviceStat]| -> Vec<v1::BlkIOEntry> {
        v.iter()
            .map(|d| v1::BlkIOEntry {
                op: d.op_type.clone().unwrap_or_default(),
                major: d.major,
                minor: d.minor,
                value: d.value,
                ..Default::default()
            })
            .collect()
    };
    let blkio = v1::BlkIOStat {
        io_service_bytes_recursive: blk(&s.blkio.service_bytes),
        io_serviced_recursive: blk(&s.blkio.serviced),
        io_queued_recursive: blk(&s.blkio.queued),
        io_service_time_recursive: blk(&s.blkio.service_time),
        io_wait_time_recursive: blk(&s.blkio.wait_time),
        io_merged_recursive: blk(&s.blkio.merged),
        io_time_recursive: blk(&s.blkio.time),
        sectors_recursive: blk(&s.blkio.sectors),
        ..Default::default()
    };
    let mut hugetlb: Vec<v1::HugetlbStat> = s
        .hugetlb
        .iter()
        .map(|(size, h)| v1::HugetlbStat {
            usage: h.usage,
            max: h.max_usage,
            failcnt: h.fail_count,
            pagesize: size.clone(),
            ..Default::default()
        })
        .collect();
    hugetlb.sort_by(|a, b| a.pagesize.cmp(&b.pagesize));
    v1::Metrics {
        hugetlb,
        pids: MessageField::some(v1::PidsStat { current: s.pids.current, limit: s.pids.limit, ..Default::default() }),
        cpu: MessageField::some(cpu),
        memory: MessageField::some(memory),
        blkio: MessageField::some(blkio),
        ..Default::default()
    }
}

fn metrics_v2(s: &Stats) -> v2::Metrics {
    let stat = |k: &str| s.memory.stats.get(k).copied().unwrap_or(0);
    let memory = v2::MemoryStat {
        anon: stat("anon"),
        file: stat("file"),
        kernel_stack: stat("kernel_stack"),
        slab: stat("slab"),
        sock: stat("sock"),
        shmem: stat("shmem"),
        file_mapped: stat("file_mapped"),
        file_dirty: stat("file_dirty"),
        file_writeback: stat("file_writeback"),
        inactive_anon: stat("inactive_anon"),
        active_anon: stat("active_anon"),
        inactive_file: stat("inactive_file"),
        active_file: stat("active_file"),
        unevictable: stat("unevictable"),
        pgfault: stat("pgfault"),
        pgmajfault: stat("pgmajfault"),
        usage: s.memory.memory.usage,
        usage_limit: s.memory.memory.limit,
        swap_usage: s.memory.memswap.usage,
        swap_limit: s.memory.memswap.limit,
        max_usage: s.memory.memory.max_usage,
        ..Default::default()
    };
    // libcgroups copies cpu.stat's microseconds as they are (v1's are nanoseconds).
    let cpu = v2::CPUStat {
        usage_usec: s.cpu.usage.usage_total,
        user_usec: s.cpu.usage.usage_user,
        system_usec: s.cpu.usage.usage_kernel,
        nr_periods: s.cpu.throttling.periods,
        nr_throttled: s.cpu.throttling.throttled_periods,
        throttled_usec: s.cpu.throttling.throttled_time,
        ..Default::default()
    };
    v2::Metrics {
        pids: MessageField::some(v2::PidsStat { current: s.pids.current, limit: s.pids.limit, ..Default::default() }),
        cpu: MessageField::some(cpu),
        memory: MessageField::some(memory),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_shim::protos::protobuf::MessageFull;

    use std::path::{Path, PathBuf};
    use std::process::{Child, Command};

    use libcgroups::common::{AnyCgroupManager, CgroupManager};
    use nix::unistd::Pid;
    use rustpod_tests::{needs, skip_if};

    /// A cgroup of our own with a process that used some CPU and one that sleeps in it;
    /// on Drop the sleeper is killed and the cgroup removed.
    struct Busy {
        manager: AnyCgroupManager,
        sleeper: Child,
    }

    impl Busy {
        fn new() -> Busy {
            let rel = PathBuf::from(format!("/rustpod-metrics-test-{}", std::process::id()));
            let manager = rustpod::cgroup::manager(rel, false, "metrics-test").expect("cgroup manager");
            let spin = "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done";
            let mut burner = Command::new("/bin/busybox")
                .args(["sh", "-c", &format!("read _; {spin}")])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .expect("spawn burner");
            manager.add_task(Pid::from_raw(burner.id() as i32)).expect("move burner into the cgroup");
            drop(burner.stdin.take()); // now it may start burning, inside the cgroup
            assert!(burner.wait().expect("wait burner").success());
            let sleeper = Command::new("/bin/busybox").args(["sleep", "1000"]).spawn().expect("spawn sleeper");
            manager.add_task(Pid::from_raw(sleeper.id() as i32)).expect("move sleeper into the cgroup");
            Busy { manager, sleeper }
        }
    }

    impl Drop for Busy {
        fn drop(&mut self) {
            let _ = self.sleeper.kill();
            let _ = self.sleeper.wait();
            let _ = self.manager.remove();
        }
    }

    /// The value of `key` in a file of `key value` lines.
    fn keyed(dir: &Path, file: &str, key: &str) -> u64 {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("read {file}: {e}"));
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {file}: {text}"))
    }

    fn single(dir: &Path, file: &str) -> u64 {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("read {file}: {e}"));
        text.trim().parse().unwrap_or_else(|e| panic!("{file} {text:?}: {e}"))
    }

    /// `value` read between `before` and `after` readings of the same file.
    #[track_caller]
    fn between(what: &str, value: u64, before: u64, after: u64) {
        let (lo, hi) = (before.min(after), before.max(after));
        assert!((lo..=hi).contains(&value), "{what}: metrics say {value}, the file said {before} then {after}");
    }

    #[test]
    fn v2_metrics_match_cpu_stat_and_memory_current() {
        skip_if!(needs::cgroup_v2(&["cpu", "memory", "pids"]));
        let busy = Busy::new();
        let dir = Path::new("/sys/fs/cgroup").join(format!("rustpod-metrics-test-{}", std::process::id()));
        let files = |(): ()| {
            let cpu = ["usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled", "throttled_usec"]
                .map(|k| keyed(&dir, "cpu.stat", k));
            (cpu, single(&dir, "memory.current"), single(&dir, "pids.current"))
        };
        let before = files(());
        let m = metrics_v2(&busy.manager.stats().expect("stats"));
        let after = files(());
        let cpu = m.cpu.as_ref().expect("cpu");
        let got = [cpu.usage_usec, cpu.user_usec, cpu.system_usec, cpu.nr_periods, cpu.nr_throttled, cpu.throttled_usec];
        for (i, name) in ["usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled", "throttled_usec"].iter().enumerate() {
            between(&format!("cpu.stat {name}"), got[i], before.0[i], after.0[i]);
        }
        assert!(cpu.usage_usec >= 1000, "the burner used no CPU? {}", cpu.usage_usec);
        between("memory.current", m.memory.usage, before.1, after.1);
        assert_eq!(m.pids.current, before.2, "pids.current");
    }

    #[test]
    fn v1_metrics_match_cpuacct_and_memory_usage() {
        for controller in ["cpu", "memory", "pids"] {
            skip_if!(needs::cgroup_v1(controller));
        }
        let busy = Busy::new();
        let rel = format!("rustpod-metrics-test-{}", std::process::id());
        let dir = |c: &str| Path::new("/sys/fs/cgroup").join(c).join(&rel);
        let files = |(): ()| {
            (single(&dir("cpuacct"), "cpuacct.usage"), single(&dir("memory"), "memory.usage_in_bytes"), single(&dir("pids"), "pids.current"))
        };
        let before = files(());
        let m = metrics_v1(&busy.manager.stats().expect("stats"));
        let after = files(());
        let usage = m.cpu.usage.as_ref().expect("cpu usage");
        between("cpuacct.usage (ns)", usage.total, before.0, after.0);
        assert!(usage.total >= 1_000_000, "the burner used no CPU? {}", usage.total);
        between("memory.usage_in_bytes", m.memory.usage.usage, before.1, after.1);
        assert_eq!(m.pids.current, before.2, "pids.current");
    }

    #[test]
    fn type_urls_are_the_protobuf_full_names() {
        assert_eq!(V1_TYPE, v1::Metrics::descriptor().full_name());
        assert_eq!(V2_TYPE, v2::Metrics::descriptor().full_name());
    }
}
