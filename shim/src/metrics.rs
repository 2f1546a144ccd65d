//! Stats: a container's cgroup statistics as containerd's cgroups v1
//! `Metrics` or, on a unified hierarchy, v2 `Metrics`, in an Any. CPU times
//! come in nanoseconds on both (libcgroups' v1 stats, rustpod's v2 reader).

use std::path::PathBuf;

use containerd_shim::protos::cgroups::metrics as v1;
use containerd_shim::protos::cgroups_v2::metrics as v2;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{Message, MessageField};
use libcgroups::common::{AnyCgroupManager, CgroupManager, CgroupSetup};
use libcgroups::stats::Stats;

/// Why a container's statistics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// Finding or reading its cgroup (rustpod's v2 reader, the v1 manager's setup).
    #[error("cgroup stats of {id}: {source}")]
    Runtime { id: String, source: rustpod::Error },
    /// libcgroups' v1 manager failed to read a controller.
    #[error("cgroup stats of {id}: {source}")]
    V1 { id: String, source: <AnyCgroupManager as CgroupManager>::Error },
    #[error("encode metrics: {0}")]
    Encode(#[from] containerd_shim::protos::protobuf::Error),
}

/// Where a container's statistics come from: its cgroup manager, built once.
/// Building one reads `/proc/self/mountinfo` once per v1 controller, which on
/// a node with many mounts costs milliseconds, and kubelet asks for stats of
/// every container every few seconds.
pub struct Source {
    id: String,
    cgroup: Cgroup,
}

enum Cgroup {
    /// v1: libcgroups' manager reads its controllers.
    V1(AnyCgroupManager),
    /// v2: the directory, read by rustpod's reader (libcgroups 0.7's fails
    /// on controllers that are not enabled there).
    V2(PathBuf),
}

impl Source {
    pub fn open(container: &rustpod::Container) -> Result<Source, StatsError> {
        let id = container.id().to_string();
        let unified = matches!(libcgroups::common::get_cgroup_setup(), Ok(CgroupSetup::Unified));
        let cgroup = match (unified, container.pid()) {
            (true, Some(pid)) => rustpod::stats::v2_dir_of(pid).map(Cgroup::V2),
            _ => container.cgroup_manager().map(Cgroup::V1),
        };
        match cgroup {
            Ok(cgroup) => Ok(Source { id, cgroup }),
            Err(source) => Err(StatsError::Runtime { id, source }),
        }
    }

    /// Worth keeping for the container's lifetime: a systemd manager holds a
    /// D-Bus connection, so it is built again for each call instead.
    pub fn cacheable(&self) -> bool {
        !matches!(self.cgroup, Cgroup::V1(AnyCgroupManager::Systemd(_)))
    }

    pub fn collect(&self) -> Result<Any, StatsError> {
        let id = || self.id.clone();
        match &self.cgroup {
            Cgroup::V1(manager) => {
                let stats = manager.stats().map_err(|source| StatsError::V1 { id: id(), source })?;
                to_any(&metrics_v1(&stats), V1_TYPE)
            }
            Cgroup::V2(dir) => {
                let stats = rustpod::stats::read_v2(dir).map_err(|source| StatsError::Runtime { id: id(), source })?;
                to_any(&metrics_v2(&stats), V2_TYPE)
            }
        }
    }
}

/// The metrics' protobuf full names (spelled out, as for events, so that no
/// reflection tables are built).
const V1_TYPE: &str = "io.containerd.cgroups.v1.Metrics";
const V2_TYPE: &str = "io.containerd.cgroups.v2.Metrics";

fn to_any<M: Message>(m: &M, type_url: &str) -> Result<Any, StatsError> {
    let mut any = Any::new();
    any.type_url = type_url.to_string();
    any.value = m.write_to_bytes()?;
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
    // containerd's v2 metrics are in microseconds, as cpu.stat is.
    let cpu = v2::CPUStat {
        usage_usec: s.cpu.usage.usage_total / 1000,
        user_usec: s.cpu.usage.usage_user / 1000,
        system_usec: s.cpu.usage.usage_kernel / 1000,
        nr_periods: s.cpu.throttling.periods,
        nr_throttled: s.cpu.throttling.throttled_periods,
        throttled_usec: s.cpu.throttling.throttled_time / 1000,
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

    #[test]
    fn v2_cpu_times_are_cpu_stats_microseconds() {
        let mut stats = Stats::default();
        stats.cpu.usage.usage_total = 243_891_000;
        stats.cpu.usage.usage_user = 200_000_000;
        stats.cpu.throttling.throttled_time = 7_000;
        let cpu = metrics_v2(&stats).cpu.unwrap();
        assert_eq!((cpu.usage_usec, cpu.user_usec, cpu.throttled_usec), (243_891, 200_000, 7));
    }

    #[test]
    fn type_urls_are_the_protobuf_full_names() {
        assert_eq!(V1_TYPE, v1::Metrics::descriptor().full_name());
        assert_eq!(V2_TYPE, v2::Metrics::descriptor().full_name());
    }
}
