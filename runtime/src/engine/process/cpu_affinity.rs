//! The CPU affinity a container's processes start with. Without a reset they
//! inherit the caller's (`taskset -c 0 rustpod run`, a containerd pinned to
//! one CPU and so its shims): as runc ≥ 1.2.7, the processes the engine forks
//! may use every CPU, so that only their cpuset cgroup limits them.
//! `process.execCPUAffinity` is then applied by the engine on top of this.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::error::{Error, Result};

/// Restores the calling thread's own affinity when dropped: only the
/// processes forked while it lives get every CPU.
pub struct AllCpus {
    saved: CpuSet,
}

/// Lets the calling thread (and so what it forks) use every CPU until the
/// guard is dropped; the kernel keeps each child within its cpuset.
pub fn all_cpus_for_children() -> Result<AllCpus> {
    let this_thread = Pid::from_raw(0);
    let saved = sched_getaffinity(this_thread).map_err(|err| Error::Sys { op: "sched_getaffinity", err })?;
    sched_setaffinity(this_thread, &every_cpu()?).map_err(|err| Error::Sys { op: "sched_setaffinity", err })?;
    Ok(AllCpus { saved })
}

impl Drop for AllCpus {
    fn drop(&mut self) {
        if let Err(err) = sched_setaffinity(Pid::from_raw(0), &self.saved) {
            tracing::warn!("sched_setaffinity back to the caller's CPUs: {err}");
        }
    }
}

/// Every CPU a mask can name (as runc: the kernel ignores the ones that are
/// not there and those the cpuset does not allow).
fn every_cpu() -> Result<CpuSet> {
    let mut set = CpuSet::new();
    for cpu in 0..CpuSet::count() {
        set.set(cpu).map_err(|err| Error::Sys { op: "CPU_SET", err })?;
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_widens_the_thread_and_puts_it_back() {
        // A thread of its own: the affinity is per thread.
        std::thread::spawn(|| {
            let me = Pid::from_raw(0);
            let count = |set: &CpuSet| (0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).count();
            let before = sched_getaffinity(me).unwrap();
            let mut one = CpuSet::new();
            one.set(0).unwrap();
            sched_setaffinity(me, &one).unwrap();
            {
                let _guard = all_cpus_for_children().unwrap();
                let wide = sched_getaffinity(me).unwrap();
                assert!(count(&wide) >= count(&before), "{} CPUs after the reset, {} before", count(&wide), count(&before));
            }
            let back = sched_getaffinity(me).unwrap();
            assert!(back.is_set(0).unwrap());
            assert!((1..CpuSet::count()).all(|c| !back.is_set(c).unwrap()), "not put back to CPU 0");
        })
        .join()
        .unwrap();
    }
}
