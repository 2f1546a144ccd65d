//! `linux.resources.pids.limit: 0` as runc ≥ 1.4 applies it: pids.max 0 (no
//! new task in the container). libcgroups writes "max" for 0, so once the
//! engine has made the cgroup, and before `start`, we write 0 over it.

use std::path::PathBuf;

use libcgroups::common::CgroupSetup;

use crate::error::{Error, Result};

/// Writes pids.max 0 in the pids cgroup of `pid` (the container's init).
pub fn apply(pid: i32) -> Result<()> {
    let file = pids_dir_of(pid)?.join("pids.max");
    std::fs::write(&file, "0").map_err(|e| Error::io("write", &file, e))
}

/// The directory of `pid`'s cgroup that has the pids controller.
fn pids_dir_of(pid: i32) -> Result<PathBuf> {
    if matches!(libcgroups::common::get_cgroup_setup(), Ok(CgroupSetup::Unified)) {
        return crate::device_filter::cgroup_dir_of(pid);
    }
    crate::cgroup_fs::v1_dir_of(pid, "pids")
        .ok_or_else(|| Error::Invalid(format!("linux.resources.pids.limit 0: process {pid} is in no v1 pids cgroup")))
}
