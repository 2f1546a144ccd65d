//! `linux.resources.memory.checkBeforeUpdate` (runtime-spec 1.2), as runc's
//! cgroup v2 code: an update to a memory limit below what the container
//! already uses is refused instead of written (the kernel would reclaim,
//! then OOM-kill inside the container). cgroup v1's kernel refuses such a
//! limit itself (EBUSY), so runc and we check on v2 only.

use libcgroups::common::CgroupSetup;
use oci_spec::runtime::LinuxResources;

use crate::error::{Error, Result};

/// Refuses the update if it asks for the check and sets a memory (or
/// memory+swap) limit at or below what `pid`'s (the init's) cgroup uses, in
/// runc's words; `memory` and `memory_swap` are the flags given over `base`
/// (`runc update --memory`, `--memory-swap`). As runc, usage that cannot be
/// read does not fail it.
pub fn check_before_update(base: Option<&LinuxResources>, memory_flag: Option<i64>, swap_flag: Option<i64>, pid: i32) -> Result<()> {
    let memory = base.and_then(|r| *r.memory());
    if !memory.and_then(|m| m.check_before_update()).unwrap_or(false) {
        return Ok(());
    }
    if !matches!(libcgroups::common::get_cgroup_setup(), Ok(CgroupSetup::Unified)) {
        return Ok(());
    }
    let dir = crate::engine::cgroup::device_filter::cgroup_dir_of(pid)?;
    let Some(usage) = read_number(&dir.join("memory.current")) else { return Ok(()) };
    let swap = swap_flag.or(memory.and_then(|m| m.swap())).filter(|s| *s > 0);
    if let (Some(swap), Some(swap_usage)) = (swap, read_number(&dir.join("memory.swap.current"))) {
        if swap <= usage + swap_usage {
            let total = usage + swap_usage;
            return Err(Error::Invalid(format!(
                "linux.resources.memory.swap {swap}: rejecting memory+swap limit {swap} <= usage {total} (checkBeforeUpdate)"
            )));
        }
    }
    let limit = memory_flag.or(memory.and_then(|m| m.limit())).filter(|l| *l > 0);
    match limit {
        Some(limit) if limit <= usage => Err(Error::Invalid(format!(
            "linux.resources.memory.limit {limit}: rejecting memory limit {limit} <= usage {usage} (checkBeforeUpdate)"
        ))),
        _ => Ok(()),
    }
}

fn read_number(file: &std::path::Path) -> Option<i64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}
