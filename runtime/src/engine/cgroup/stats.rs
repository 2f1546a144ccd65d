//! A container's resource statistics, with CPU times in nanoseconds on both
//! cgroup versions, and runc's `events` JSON shape for them. On cgroup v2
//! they are read here, from the controllers the cgroup has: libcgroups 0.7
//! reads every controller and fails on one systemd never enables (hugetlb).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use libcgroups::common::CgroupManager;
use libcgroups::stats::{BlkioDeviceStat, HugeTlbStats, MemoryData, Stats};
use libcontainer::container::Container;
use serde_json::{json, Map, Value};

use crate::engine::cgroup::pressure::{self, CgroupPressure};
use crate::error::{Error, Result};

/// Where cgroup v2 is mounted on a unified host.
const V2_ROOT: &str = "/sys/fs/cgroup";

/// What `events --stats` reports: the cgroup's statistics and, as runc
/// adds them, its cpuset and (v2, runc 1.2+) its pressure stall information.
#[derive(Debug, Default)]
pub struct ContainerStats {
    pub cgroup: Stats,
    pub cpuset: Option<Cpuset>,
    pub pressure: CgroupPressure,
}

/// The cpuset a container may run on, and the v1 cpuset flags.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cpuset {
    pub cpus: Vec<u32>,
    pub mems: Vec<u32>,
    /// `cpuset.<name>` numbers (v1 only), by name.
    pub flags: Vec<(&'static str, i64)>,
}

/// v1's cpuset flag files, in runc's order.
const CPUSET_FLAGS: &[&str] = &[
    "cpu_exclusive",
    "mem_hardwall",
    "mem_exclusive",
    "memory_migrate",
    "memory_pressure",
    "memory_spread_page",
    "memory_spread_slab",
    "sched_load_balance",
    "sched_relax_domain_level",
];

/// The statistics of `container`'s cgroup; its init must be running.
pub fn read(container: &Container) -> Result<ContainerStats> {
    let unified = matches!(libcgroups::common::get_cgroup_setup(), Ok(libcgroups::common::CgroupSetup::Unified));
    match (unified, container.pid()) {
        (true, Some(pid)) => {
            let dir = v2_dir_of(pid.as_raw())?;
            let controllers = read_file(&dir, "cgroup.controllers")?;
            let controllers: Vec<&str> = controllers.split_whitespace().collect();
            let cpuset = controllers.contains(&"cpuset").then(v2_cpuset);
            let pressure = pressure::read_cgroup(&dir, &controllers)?;
            Ok(ContainerStats { cgroup: read_v2(&dir)?, cpuset, pressure })
        }
        (_, pid) => {
            let manager = crate::engine::cgroup::manager::manager_for(container)?;
            let cgroup = manager.stats().map_err(|e| Error::engine("read stats of", container.id(), &e))?;
            let cpuset = match pid
                .and_then(|p| crate::engine::cgroup::fs::v1_dir_of(&crate::engine::cgroup::fs::hierarchies(), p.as_raw(), "cpuset"))
            {
                Some(dir) => Some(read_cpuset(&dir, "", CPUSET_FLAGS)?),
                None => None,
            };
            Ok(ContainerStats { cgroup, cpuset, pressure: CgroupPressure::default() })
        }
    }
}

/// What runc 1.1 prints for a v2 cpuset: v1's flags as zeros (its struct
/// has no omitempty there) and no cpu or memory lists.
fn v2_cpuset() -> Cpuset {
    Cpuset { cpus: Vec::new(), mems: Vec::new(), flags: CPUSET_FLAGS.iter().map(|f| (*f, 0)).collect() }
}

/// `cpuset.cpus<suffix>`, `cpuset.mems<suffix>` and the `flags` files.
fn read_cpuset(dir: &Path, suffix: &str, flags: &[&'static str]) -> Result<Cpuset> {
    let list = |name: &str| -> Result<Vec<u32>> {
        let file = format!("cpuset.{name}{suffix}");
        parse_list(&read_file(dir, &file)?).ok_or_else(|| Error::Invalid(format!("{}: not a cpu list", dir.join(&file).display())))
    };
    let mut cpuset = Cpuset { cpus: list("cpus")?, mems: list("mems")?, flags: Vec::new() };
    for flag in flags {
        let text = read_file(dir, &format!("cpuset.{flag}"))?;
        cpuset.flags.push((flag, text.trim().parse().unwrap_or(0)));
    }
    Ok(cpuset)
}

/// A kernel list such as `0-2,5`.
fn parse_list(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// The cgroup v2 directory of process `pid` (its `0::` line), whichever
/// driver placed it.
pub fn v2_dir_of(pid: i32) -> Result<PathBuf> {
    let file = format!("/proc/{pid}/cgroup");
    let text = fs::read_to_string(&file).map_err(|e| Error::io("read", &file, e))?;
    let path = text.lines().find_map(|l| l.strip_prefix("0::")).ok_or_else(|| Error::Invalid(format!("{file}: no cgroup v2 entry")))?;
    Ok(Path::new(V2_ROOT).join(path.trim_start_matches('/')))
}

/// Reads a v2 cgroup directory: only the controllers in its
/// `cgroup.controllers` (cpu.stat is always there).
pub fn read_v2(dir: &Path) -> Result<Stats> {
    let enabled = read_file(dir, "cgroup.controllers")?;
    let enabled: Vec<&str> = enabled.split_whitespace().collect();
    let mut stats = Stats::default();
    read_cpu(dir, &mut stats)?;
    if enabled.contains(&"memory") {
        read_memory(dir, &mut stats)?;
    }
    if enabled.contains(&"pids") {
        stats.pids.current = read_u64(dir, "pids.current")?;
        stats.pids.limit = read_limit(dir, "pids.max")?;
    }
    if enabled.contains(&"io") {
        stats.blkio.service_bytes = io_entries(dir, &[("rbytes", "Read"), ("wbytes", "Write")])?;
        stats.blkio.serviced = io_entries(dir, &[("rios", "Read"), ("wios", "Write")])?;
    }
    if enabled.contains(&"hugetlb") {
        stats.hugetlb = read_hugetlb(dir)?;
    }
    Ok(stats)
}

/// cpu.stat is in microseconds; we report nanoseconds, as v1 does.
fn read_cpu(dir: &Path, stats: &mut Stats) -> Result<()> {
    let cpu = flat_keyed(&read_file(dir, "cpu.stat")?);
    let usec = |key: &str| cpu.get(key).copied().unwrap_or(0).saturating_mul(1000);
    stats.cpu.usage.usage_total = usec("usage_usec");
    stats.cpu.usage.usage_user = usec("user_usec");
    stats.cpu.usage.usage_kernel = usec("system_usec");
    stats.cpu.throttling.periods = cpu.get("nr_periods").copied().unwrap_or(0);
    stats.cpu.throttling.throttled_periods = cpu.get("nr_throttled").copied().unwrap_or(0);
    stats.cpu.throttling.throttled_time = usec("throttled_usec");
    Ok(())
}

fn read_memory(dir: &Path, stats: &mut Stats) -> Result<()> {
    let raw = flat_keyed(&read_file(dir, "memory.stat")?);
    let events = flat_keyed(&read_file(dir, "memory.events").unwrap_or_default());
    let usage = read_u64(dir, "memory.current")?;
    stats.memory.memory = MemoryData {
        usage,
        max_usage: read_u64(dir, "memory.peak").unwrap_or(0),
        fail_count: events.get("max").copied().unwrap_or(0),
        limit: read_limit(dir, "memory.max")?,
    };
    // As runc: v2's swap counts memory too, like v1's memsw.
    if let Ok(swap) = read_u64(dir, "memory.swap.current") {
        stats.memory.memswap =
            MemoryData { usage: usage + swap, limit: read_limit(dir, "memory.swap.max").unwrap_or(u64::MAX), ..Default::default() };
    }
    stats.memory.cache = raw.get("file").copied().unwrap_or(0);
    stats.memory.stats = raw;
    Ok(())
}

fn read_hugetlb(dir: &Path) -> Result<HashMap<String, HugeTlbStats>> {
    let mut sizes = HashMap::new();
    let entries = fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(size) = name.strip_prefix("hugetlb.").and_then(|s| s.strip_suffix(".current")) else {
            continue;
        };
        // `hugetlb.<size>.rsvd.current` is the reservation of the same size.
        if size.ends_with(".rsvd") {
            continue;
        }
        let events = flat_keyed(&read_file(dir, &format!("hugetlb.{size}.events")).unwrap_or_default());
        sizes.insert(
            size.to_string(),
            HugeTlbStats { usage: read_u64(dir, &name)?, max_usage: 0, fail_count: events.get("max").copied().unwrap_or(0) },
        );
    }
    Ok(sizes)
}

/// io.stat's `MAJ:MIN key=value…` lines as per-device entries for `keys`.
fn io_entries(dir: &Path, keys: &[(&str, &str)]) -> Result<Vec<BlkioDeviceStat>> {
    let text = read_file(dir, "io.stat")?;
    let mut entries = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some((major, minor)) = fields.next().and_then(|d| d.split_once(':')) else { continue };
        let (Ok(major), Ok(minor)) = (major.parse(), minor.parse()) else { continue };
        let values: HashMap<&str, u64> = fields.filter_map(|kv| kv.split_once('=').and_then(|(k, v)| Some((k, v.parse().ok()?)))).collect();
        for (key, op) in keys {
            if let Some(value) = values.get(key) {
                entries.push(BlkioDeviceStat { major, minor, op_type: Some(op.to_string()), value: *value });
            }
        }
    }
    Ok(entries)
}

fn read_file(dir: &Path, name: &str) -> Result<String> {
    let path = dir.join(name);
    fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))
}

fn read_u64(dir: &Path, name: &str) -> Result<u64> {
    let text = read_file(dir, name)?;
    text.trim().parse().map_err(|_| Error::Invalid(format!("{}: not a number: {:?}", dir.join(name).display(), text.trim())))
}

/// A limit file: `max` means no limit.
fn read_limit(dir: &Path, name: &str) -> Result<u64> {
    match read_file(dir, name)?.trim() {
        "max" => Ok(u64::MAX),
        _ => read_u64(dir, name),
    }
}

/// `key value` lines.
fn flat_keyed(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// `stats` in the shape runc's `events` prints (its types/events.go), with
/// runc's field names and its habit of leaving zero values out.
pub fn runc_shape(all: &ContainerStats) -> Value {
    let stats = &all.cgroup;
    let usage = &stats.cpu.usage;
    let throttling = &stats.cpu.throttling;
    let mem = &stats.memory;
    let blkio = &stats.blkio;
    let hugetlb: Map<String, Value> = stats
        .hugetlb
        .iter()
        .map(|(size, h)| (size.clone(), nonzero(json!({"usage": h.usage, "max": h.max_usage, "failcnt": h.fail_count}), &["failcnt"])))
        .collect();
    let mut shape = json!({
        "cpu": {
            "usage": nonzero(json!({
                "total": usage.usage_total,
                "percpu": usage.per_core_usage_total,
                "percpu_kernel": usage.per_core_usage_kernel,
                "percpu_user": usage.per_core_usage_user,
                "kernel": usage.usage_kernel,
                "user": usage.usage_user,
            }), &["kernel", "user"]),
            "throttling": nonzero(json!({
                "periods": throttling.periods,
                "throttledPeriods": throttling.throttled_periods,
                "throttledTime": throttling.throttled_time,
            }), &[]),
        },
        "memory": nonzero(json!({
            "cache": mem.cache,
            "usage": memory_entry(&mem.memory),
            "swap": memory_entry(&mem.memswap),
            "kernel": memory_entry(&mem.kernel),
            "kernelTCP": memory_entry(&mem.kernel_tcp),
            "raw": mem.stats,
        }), &["usage", "swap", "kernel", "kernelTCP"]),
        "pids": nonzero(json!({"current": stats.pids.current, "limit": stats.pids.limit}), &[]),
        "blkio": nonzero(json!({
            "ioServiceBytesRecursive": blkio_entries(&blkio.service_bytes),
            "ioServicedRecursive": blkio_entries(&blkio.serviced),
            "ioQueueRecursive": blkio_entries(&blkio.queued),
            "ioServiceTimeRecursive": blkio_entries(&blkio.service_time),
            "ioWaitTimeRecursive": blkio_entries(&blkio.wait_time),
            "ioMergedRecursive": blkio_entries(&blkio.merged),
            "ioTimeRecursive": blkio_entries(&blkio.time),
            "sectorsRecursive": blkio_entries(&blkio.sectors),
        }), &[]),
        "hugetlb": hugetlb,
        "cpuset": all.cpuset.as_ref().map(cpuset_shape),
        "network_interfaces": null,
    });
    add_pressure(&mut shape, &all.pressure);
    shape
}

/// runc 1.2+'s `psi` under cpu, memory and blkio, where the kernel has it.
fn add_pressure(shape: &mut Value, all: &CgroupPressure) {
    for (section, pressure) in [("cpu", &all.cpu), ("memory", &all.memory), ("blkio", &all.io)] {
        if let Some(pressure) = pressure {
            shape[section]["psi"] = pressure::runc_shape(pressure);
        }
    }
}

fn cpuset_shape(cpuset: &Cpuset) -> Value {
    let mut shape = nonzero(json!({"cpus": cpuset.cpus, "mems": cpuset.mems}), &[]);
    for (name, value) in &cpuset.flags {
        shape[*name] = json!(value);
    }
    shape
}

fn memory_entry(data: &MemoryData) -> Value {
    nonzero(json!({"limit": data.limit, "usage": data.usage, "max": data.max_usage, "failcnt": data.fail_count}), &["limit", "failcnt"])
}

fn blkio_entries(entries: &[BlkioDeviceStat]) -> Value {
    Value::Array(
        entries.iter().map(|e| nonzero(json!({"major": e.major, "minor": e.minor, "op": e.op_type, "value": e.value}), &[])).collect(),
    )
}

/// Drops zero, null and empty fields (Go's `omitempty`), except `keep`.
fn nonzero(value: Value, keep: &[&str]) -> Value {
    let Value::Object(map) = value else { return value };
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Number(n) => n.as_u64() == Some(0),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
    };
    Value::Object(map.into_iter().filter(|(k, v)| keep.contains(&k.as_str()) || !empty(v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake v2 cgroup directory with `files`.
    fn cgroup(files: &[(&str, &str)]) -> tempdir::Dir {
        let dir = tempdir::Dir::new();
        for (name, text) in files {
            fs::write(dir.0.join(name), text).unwrap();
        }
        dir
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let path = std::env::temp_dir().join(format!("rustpod-stats-{}-{:?}", std::process::id(), std::thread::current().id()));
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    const CPU_STAT: &str = "usage_usec 243891\nuser_usec 200000\nsystem_usec 43891\nnr_periods 4\nnr_throttled 1\nthrottled_usec 7\n";

    #[test]
    fn v2_cpu_times_become_nanoseconds() {
        let dir = cgroup(&[("cgroup.controllers", "cpu\n"), ("cpu.stat", CPU_STAT)]);
        let stats = read_v2(&dir.0).unwrap();
        assert_eq!(stats.cpu.usage.usage_total, 243_891_000);
        assert_eq!(stats.cpu.usage.usage_kernel, 43_891_000);
        assert_eq!(stats.cpu.throttling.throttled_time, 7_000);
        let all = ContainerStats { cgroup: stats, ..Default::default() };
        assert_eq!(runc_shape(&all)["cpu"]["usage"]["total"], 243_891_000u64);
    }

    #[test]
    fn v2_reads_only_enabled_controllers() {
        // No hugetlb, memory or pids files: systemd never enabled them.
        let dir =
            cgroup(&[("cgroup.controllers", "cpu io\n"), ("cpu.stat", CPU_STAT), ("io.stat", "8:0 rbytes=4096 wbytes=0 rios=1 wios=0\n")]);
        let stats = read_v2(&dir.0).unwrap();
        assert!(stats.hugetlb.is_empty());
        let shape = runc_shape(&ContainerStats { cgroup: stats, ..Default::default() });
        assert_eq!(shape["blkio"]["ioServiceBytesRecursive"][0], json!({"major": 8, "op": "Read", "value": 4096}));
        assert!(shape["memory"].get("raw").is_none() && shape["memory"]["usage"]["usage"].is_null());
    }

    #[test]
    fn v2_memory_and_pids_in_runcs_words() {
        let dir = cgroup(&[
            ("cgroup.controllers", "cpu memory pids\n"),
            ("cpu.stat", CPU_STAT),
            ("memory.current", "1114112\n"),
            ("memory.max", "max\n"),
            ("memory.stat", "anon 8192\nfile 4096\n"),
            ("memory.events", "low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n"),
            ("pids.current", "1\n"),
            ("pids.max", "100\n"),
        ]);
        let shape = runc_shape(&ContainerStats { cgroup: read_v2(&dir.0).unwrap(), ..Default::default() });
        assert_eq!(shape["memory"]["usage"], json!({"usage": 1114112, "limit": u64::MAX, "failcnt": 3}));
        assert_eq!(shape["memory"]["cache"], 4096);
        assert_eq!(shape["memory"]["raw"]["anon"], 8192);
        assert_eq!(shape["pids"], json!({"current": 1, "limit": 100}));
    }

    #[test]
    fn pressure_goes_under_cpu_memory_and_blkio_as_runc_puts_it() {
        let dir = cgroup(&[
            ("cgroup.controllers", "cpu memory\n"),
            ("cpu.stat", CPU_STAT),
            ("cpu.pressure", "some avg10=0.50 avg60=0.00 avg300=0.00 total=42\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"),
            ("memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
            ("io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=9\n"),
        ]);
        let pressure = pressure::read_cgroup(&dir.0, &["cpu", "memory"]).unwrap();
        let shape = runc_shape(&ContainerStats { pressure, ..Default::default() });
        assert_eq!(shape["cpu"]["psi"]["some"], json!({"avg10": 0.5, "avg60": 0.0, "avg300": 0.0, "total": 42}));
        assert_eq!(shape["cpu"]["psi"]["full"]["total"], 7);
        assert_eq!(shape["memory"]["psi"]["some"]["total"], 0, "zeros are printed, as runc does");
        assert!(shape["blkio"].get("psi").is_none(), "io is not enabled: {shape}");
    }

    #[test]
    fn cpu_lists_expand_ranges() {
        assert_eq!(parse_list("0-2,5\n"), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_list(""), Some(vec![]));
        assert_eq!(parse_list("x"), None);
    }

    #[test]
    fn a_missing_enabled_controller_file_is_an_error_naming_it() {
        let dir = cgroup(&[("cgroup.controllers", "cpu pids\n"), ("cpu.stat", CPU_STAT)]);
        let err = read_v2(&dir.0).unwrap_err().to_string();
        assert!(err.contains("pids.current"), "{err}");
    }
}
