//! `update`: change a live container's cgroup resources.

use libcgroups::common::{CgroupManager, ControllerOpt};
use libcontainer::container::Container;
use oci_spec::runtime::{LinuxCpu, LinuxCpuBuilder, LinuxMemory, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources};

use crate::engine::cgroup::manager as cgroup;
use crate::engine::cgroup::{memory_check, pids_zero};
use crate::engine::container_dir::ContainerDir;
use crate::error::{Error, Result};

/// The single-value flags of `runc update`; each overrides the same field
/// of the resources document, if one was given.
#[derive(Debug, Default, Clone)]
pub struct ResourceFlags {
    pub memory: Option<i64>,
    pub memory_reservation: Option<i64>,
    pub memory_swap: Option<i64>,
    pub cpu_shares: Option<u64>,
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<u64>,
    pub cpuset_cpus: Option<String>,
    pub cpuset_mems: Option<String>,
    pub pids_limit: Option<i64>,
    pub cpu_burst: Option<u64>,
    pub cpu_idle: Option<i64>,
    pub cpu_rt_period: Option<u64>,
    pub cpu_rt_runtime: Option<i64>,
    pub blkio_weight: Option<u16>,
    /// `--l3-cache-schema`/`--mem-bw-schema`: refused, rustpod makes no
    /// resctrl group (the flag's name, when given).
    pub intel_rdt: Option<&'static str>,
}

/// Changes the cgroup resources: `base` with `flags` over it, first
/// judging `memory.checkBeforeUpdate`. A pids limit of 0 is pids.max 1,
/// as runc ≥ 1.4 (libcgroups writes "max" on v1).
pub(crate) fn update(dir: &ContainerDir, container: &Container, base: Option<LinuxResources>, flags: &ResourceFlags) -> Result<()> {
    let base_pids = base.as_ref().and_then(|r| *r.pids()).map(|p| p.limit());
    if let Some(pid) = container.pid() {
        memory_check::check_before_update(base.as_ref(), flags.memory, flags.memory_swap, pid.as_raw())?;
    }
    write_resources(dir, container, base, flags)?;
    let cgroups = crate::engine::cgroup::fs::hierarchies();
    if let (false, Some(pid)) = (crate::engine::cgroup::fs::is_unified(&cgroups), container.pid()) {
        // libcgroups' v1 manager has just rewritten its own default device
        // list, which allows the host's console; the container's rules do not.
        let spec = crate::engine::engine_bundle::parse_config(&dir.config_path())?;
        let resources = spec.linux().as_ref().and_then(|l| l.resources().as_ref());
        crate::engine::cgroup::v1_setup::take_back_console(&cgroups, resources, pid)?;
    }
    match (flags.pids_limit.or(base_pids), container.pid()) {
        (Some(0), Some(pid)) => pids_zero::apply(&cgroups, pid.as_raw()),
        _ => Ok(()),
    }
}

/// `base` with `flags` over it, written through the container's cgroup
/// manager.
fn write_resources(dir: &ContainerDir, container: &Container, base: Option<LinuxResources>, flags: &ResourceFlags) -> Result<()> {
    let resources = merge(without_devices(&dir.id, base.unwrap_or_default()), flags)?;
    let manager = cgroup::manager_for(container)?;
    manager
        .apply(&ControllerOpt {
            resources: &resources,
            disable_oom_killer: resources.memory().as_ref().and_then(|m| m.disable_oom_killer()).unwrap_or(false),
            oom_score_adj: None,
            freezer_state: None,
        })
        .map_err(|e| Error::engine("update", &dir.id, &e))
}

/// The resources without their device rules: as runc (1.1 to 1.5), `update`
/// never changes them, or `{"devices":[{"allow":true,"access":"rwm"}]}` would
/// open every device of the host to a running container. containerd's CRI
/// resends the container's own list with every update, so it is dropped with
/// a warning rather than refused. (On v1 the engine still rewrites its default
/// allow rules, and `update` then denies the host's console again, as create
/// did; on v2 the device program is ours, attached once by create.)
fn without_devices(id: &str, mut res: LinuxResources) -> LinuxResources {
    if res.devices().as_ref().is_some_and(|d| !d.is_empty()) {
        tracing::warn!("update {id}: linux.resources.devices ignored: device rules are fixed at create, as runc does");
    }
    res.set_devices(None);
    res
}

/// Parses the JSON document `update --resources` takes (OCI LinuxResources).
pub fn parse_resources(data: &[u8]) -> Result<LinuxResources> {
    let de = &mut serde_json::Deserializer::from_slice(data);
    serde_path_to_error::deserialize(de).map_err(|err| Error::Invalid(format!("resources: invalid field {}: {}", err.path(), err.inner())))
}

fn merge(mut res: LinuxResources, flags: &ResourceFlags) -> Result<LinuxResources> {
    let invalid = |e: oci_spec::OciSpecError| Error::Invalid(e.to_string());
    if let Some(flag) = flags.intel_rdt {
        return Err(Error::Invalid(format!("{flag}: Intel RDT is not supported by rustpod (it makes no resctrl group)")));
    }
    if let Some(weight) = flags.blkio_weight {
        let mut blkio = res.block_io().clone().unwrap_or_default();
        blkio.set_weight(Some(weight));
        res.set_block_io(Some(blkio));
    }
    if flags.memory.is_some() || flags.memory_reservation.is_some() || flags.memory_swap.is_some() {
        let old = (*res.memory()).unwrap_or_default();
        res.set_memory(Some(memory(old, flags).map_err(invalid)?));
    }
    let cpu_flag = flags.cpu_shares.is_some()
        || flags.cpu_quota.is_some()
        || flags.cpu_period.is_some()
        || flags.cpuset_cpus.is_some()
        || flags.cpuset_mems.is_some()
        || flags.cpu_burst.is_some()
        || flags.cpu_idle.is_some()
        || flags.cpu_rt_period.is_some()
        || flags.cpu_rt_runtime.is_some();
    if cpu_flag {
        let old = res.cpu().clone().unwrap_or_default();
        res.set_cpu(Some(cpu(old, flags).map_err(invalid)?));
    }
    if let Some(limit) = flags.pids_limit {
        res.set_pids(Some(LinuxPidsBuilder::default().limit(limit).build().map_err(invalid)?));
    }
    Ok(res)
}

fn memory(old: LinuxMemory, f: &ResourceFlags) -> std::result::Result<LinuxMemory, oci_spec::OciSpecError> {
    let mut b = LinuxMemoryBuilder::default();
    if let Some(v) = f.memory.or(old.limit()) {
        b = b.limit(v);
    }
    if let Some(v) = f.memory_reservation.or(old.reservation()) {
        b = b.reservation(v);
    }
    if let Some(v) = f.memory_swap.or(old.swap()) {
        b = b.swap(v);
    }
    b.build()
}

fn cpu(old: LinuxCpu, f: &ResourceFlags) -> std::result::Result<LinuxCpu, oci_spec::OciSpecError> {
    let mut b = LinuxCpuBuilder::default();
    if let Some(v) = f.cpu_shares.or(old.shares()) {
        b = b.shares(v);
    }
    if let Some(v) = f.cpu_quota.or(old.quota()) {
        b = b.quota(v);
    }
    if let Some(v) = f.cpu_period.or(old.period()) {
        b = b.period(v);
    }
    if let Some(v) = f.cpuset_cpus.clone().or(old.cpus().clone()) {
        b = b.cpus(v);
    }
    if let Some(v) = f.cpuset_mems.clone().or(old.mems().clone()) {
        b = b.mems(v);
    }
    if let Some(v) = f.cpu_burst.or(old.burst()) {
        b = b.burst(v);
    }
    if let Some(v) = f.cpu_idle.or(old.idle()) {
        b = b.idle(v);
    }
    if let Some(v) = f.cpu_rt_period.or(old.realtime_period()) {
        b = b.realtime_period(v);
    }
    if let Some(v) = f.cpu_rt_runtime.or(old.realtime_runtime()) {
        b = b.realtime_runtime(v);
    }
    b.build()
}

/// Sizes as runc takes them: `1024`, `64k`, `64M`, `1g`, `1GiB`, `-1`.
pub fn parse_size(raw: &str) -> Result<i64> {
    let invalid = || Error::Invalid(format!("invalid size {raw:?}"));
    let s = raw.trim();
    if s == "-1" {
        return Ok(-1);
    }
    let lower = s.to_ascii_lowercase();
    let digits_end = lower.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(lower.len());
    let (num, unit) = lower.split_at(digits_end);
    let value: f64 = num.parse().map_err(|_| invalid())?;
    let mult: f64 = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0 * 1024.0 * 1024.0,
        "t" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(invalid()),
    };
    Ok((value * mult) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_like_runc() {
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("2KiB").unwrap(), 2048);
        assert_eq!(parse_size("-1").unwrap(), -1);
        assert!(parse_size("12Q").is_err());
    }

    #[test]
    fn runc_1_5_flags_merge_over_the_document() {
        let base = parse_resources(br#"{"cpu": {"shares": 512, "quota": 50000}}"#).unwrap();
        let flags = ResourceFlags { cpu_burst: Some(1000), cpu_idle: Some(1), blkio_weight: Some(300), ..Default::default() };
        let merged = merge(base, &flags).unwrap();
        let cpu = merged.cpu().clone().unwrap();
        assert_eq!((cpu.shares(), cpu.quota(), cpu.burst(), cpu.idle()), (Some(512), Some(50000), Some(1000), Some(1)));
        assert_eq!(merged.block_io().as_ref().unwrap().weight(), Some(300));
        let rdt = ResourceFlags { intel_rdt: Some("--l3-cache-schema"), ..Default::default() };
        assert!(merge(LinuxResources::default(), &rdt).unwrap_err().to_string().contains("--l3-cache-schema"));
    }
}
