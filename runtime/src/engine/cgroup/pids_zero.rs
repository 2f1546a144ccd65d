//! `linux.resources.pids.limit: 0` as runc ≥ 1.4 applies it, and 1: pids.max
//! 1 (the init alone, so no new task; systemd cannot set 0, and runc writes
//! 1 with either driver). The engine gets no limit for them (nothing forked
//! before `start`, our createContainer steps included, could run in a
//! cgroup of 1), so once the init exists, and before `start`, we write it.

use std::path::PathBuf;

use libcgroups::common::CgroupSetup;

use crate::engine::cgroup::fs::Hierarchy;
use crate::error::{Error, Result};

/// What runc ≥ 1.4 writes to pids.max for a limit of 0.
pub const PIDS_MAX_FOR_ZERO: &str = "1";

/// Writes it in the pids cgroup of `pid` (the container's init), found
/// among the command's `cgroups`.
pub fn apply(cgroups: &[Hierarchy], pid: i32) -> Result<()> {
    let file = pids_dir_of(cgroups, pid)?.join("pids.max");
    std::fs::write(&file, PIDS_MAX_FOR_ZERO).map_err(|e| Error::io("write", &file, e))
}

/// The directory of `pid`'s cgroup that has the pids controller.
fn pids_dir_of(cgroups: &[Hierarchy], pid: i32) -> Result<PathBuf> {
    if matches!(libcgroups::common::get_cgroup_setup(), Ok(CgroupSetup::Unified)) {
        return crate::engine::cgroup::device_filter::cgroup_dir_of(pid);
    }
    crate::engine::cgroup::fs::v1_dir_of(cgroups, pid, "pids")
        .ok_or_else(|| Error::Invalid(format!("linux.resources.pids.limit: process {pid} is in no v1 pids cgroup")))
}
