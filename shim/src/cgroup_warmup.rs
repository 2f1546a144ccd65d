//! Starts the kernel's wait for a cgroup migration early, beside a create or
//! exec, so that the new process does not wait for it alone.
//!
//! Every write to a `cgroup.procs` file takes the kernel's global
//! `cgroup_threadgroup_rwsem` for writing. When no migration happened in the
//! last few milliseconds, taking it first waits for an RCU grace period
//! (~7 ms idle on this machine's kernel), and a create or exec pays it when
//! libcontainer's intermediate process joins the container's cgroup. Once one
//! writer has paid it, writers right after it do not. So the shim re-writes
//! its own pid into the cgroup it already is in, on a short-lived thread,
//! when its server starts (containerd's Create follows within milliseconds)
//! and when a helper is started: the grace period then elapses while the
//! helper execs and prepares the container. Writing a pid into its own cgroup
//! moves nothing; the file is checked to list our pid before it is written.
//! Hosts that mount cgroups with `favordynmods` never wait, and nothing here
//! matters there.

use std::path::PathBuf;

/// Starts the warm-up and returns at once; failures only cost the speed-up.
pub fn start() {
    let spawned = std::thread::Builder::new().name("cgroup-warmup".into()).stack_size(64 * 1024).spawn(|| {
        if let Some(procs) = own_procs_file() {
            if let Err(e) = std::fs::write(&procs, std::process::id().to_string()) {
                log::debug!("cgroup warm-up: write {}: {e}", procs.display());
            }
        }
    });
    if let Err(e) = spawned {
        log::debug!("cgroup warm-up: spawn thread: {e}");
    }
}

/// A `cgroup.procs` file of the cgroup this process is in, in any hierarchy
/// mounted at the usual place; None if no candidate lists our pid.
fn own_procs_file() -> Option<PathBuf> {
    let ours = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let pid = std::process::id().to_string();
    candidates(&ours).into_iter().find(|procs| std::fs::read_to_string(procs).is_ok_and(|listed| listed.lines().any(|l| l == pid)))
}

/// Where `/proc/self/cgroup`'s lines would put our `cgroup.procs`: the
/// unified hierarchy at /sys/fs/cgroup (or /sys/fs/cgroup/unified on a
/// hybrid host), and each v1 hierarchy at /sys/fs/cgroup/<controllers>.
fn candidates(proc_self_cgroup: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            out.push(PathBuf::from("/sys/fs/cgroup").join(path).join("cgroup.procs"));
            out.push(PathBuf::from("/sys/fs/cgroup/unified").join(path).join("cgroup.procs"));
        } else if !controllers.starts_with("name=") {
            out.push(PathBuf::from("/sys/fs/cgroup").join(controllers).join(path).join("cgroup.procs"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_cover_v1_v2_and_hybrid_lines() {
        let lines = "12:pids:/pod/a\n4:cpu,cpuacct:/pod/a\n1:name=systemd:/pod/a\n0::/pod/a\n";
        let got: Vec<String> = candidates(lines).iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            got,
            [
                "/sys/fs/cgroup/pids/pod/a/cgroup.procs",
                "/sys/fs/cgroup/cpu,cpuacct/pod/a/cgroup.procs",
                "/sys/fs/cgroup/pod/a/cgroup.procs",
                "/sys/fs/cgroup/unified/pod/a/cgroup.procs",
            ]
        );
    }

    #[test]
    fn this_process_finds_its_own_cgroup() {
        // Only a check that the lookup works on this host: it reads, never writes.
        let procs = own_procs_file().expect("no cgroup.procs under /sys/fs/cgroup lists this test's pid");
        let listed = std::fs::read_to_string(&procs).unwrap();
        assert!(listed.lines().any(|l| l == std::process::id().to_string()));
    }
}
