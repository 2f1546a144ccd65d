//! Starts the kernel's wait for a cgroup migration early, beside a create or
//! exec, so that the new process does not wait for it alone.
//!
//! Every write of a pid to a cgroup's process or thread file takes the kernel's global
//! `cgroup_threadgroup_rwsem` for writing. When no migration happened in the
//! last few milliseconds, taking it first waits for an RCU grace period
//! (~7 ms idle on this machine's kernel), and a create or exec pays it when
//! libcontainer's intermediate process joins the container's cgroup. Once one
//! writer has paid it, writers right after it do not. So the shim re-writes
//! its own pid into the cgroup it already is in, on a short-lived thread,
//! when its server starts (containerd's Create follows within milliseconds)
//! and when a helper is started: the grace period then elapses while the
//! helper execs and prepares the container. The thread writes its own tid to
//! its cgroup's thread file (v1 `tasks`, v2 `cgroup.threads`), which takes the
//! same lock: writing the process's pid to `cgroup.procs` would move the whole
//! server back if `start` placed it in its `ShimCgroup` between the lookup and
//! the write, while a stale tid write moves only this thread, which then exits.
//! Hosts that mount cgroups with `favordynmods` never wait, and nothing here
//! matters there.

use std::path::{Path, PathBuf};

/// Starts the warm-up and returns at once; failures only cost the speed-up.
pub fn start() {
    let spawned = std::thread::Builder::new().name("cgroup-warmup".into()).stack_size(64 * 1024).spawn(|| {
        if let Some(threads) = own_threads_file() {
            warm(&threads);
        }
    });
    if let Err(e) = spawned {
        log::debug!("cgroup warm-up: spawn thread: {e}");
    }
}

/// Writes the calling thread's tid (never 0: a zero skips the lock) to `threads`.
fn warm(threads: &Path) {
    if let Err(e) = std::fs::write(threads, nix::unistd::gettid().to_string()) {
        log::debug!("cgroup warm-up: write {}: {e}", threads.display());
    }
}

/// The thread file of the cgroup this process is in, in any hierarchy mounted
/// at the usual place; None if no candidate's `cgroup.procs` lists our pid.
fn own_threads_file() -> Option<PathBuf> {
    let ours = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let pid = std::process::id().to_string();
    candidates(&ours).into_iter().find_map(|(dir, threads)| {
        let listed = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
        listed.lines().any(|l| l == pid).then(|| dir.join(threads))
    })
}

/// Where `/proc/self/cgroup`'s lines would put our cgroup, with the name of
/// its thread file: the unified hierarchy at /sys/fs/cgroup (or
/// /sys/fs/cgroup/unified on a hybrid host), and each v1 hierarchy at
/// /sys/fs/cgroup/<controllers>.
fn candidates(proc_self_cgroup: &str) -> Vec<(PathBuf, &'static str)> {
    let mut out = Vec::new();
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            out.push((PathBuf::from("/sys/fs/cgroup").join(path), "cgroup.threads"));
            out.push((PathBuf::from("/sys/fs/cgroup/unified").join(path), "cgroup.threads"));
        } else if !controllers.starts_with("name=") {
            out.push((PathBuf::from("/sys/fs/cgroup").join(controllers).join(path), "tasks"));
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
        let got: Vec<String> = candidates(lines).iter().map(|(dir, file)| dir.join(file).display().to_string()).collect();
        assert_eq!(
            got,
            [
                "/sys/fs/cgroup/pids/pod/a/tasks",
                "/sys/fs/cgroup/cpu,cpuacct/pod/a/tasks",
                "/sys/fs/cgroup/pod/a/cgroup.threads",
                "/sys/fs/cgroup/unified/pod/a/cgroup.threads",
            ]
        );
    }

    #[test]
    fn this_process_finds_its_own_cgroup() {
        // Only a check that the lookup works on this host: it reads, never writes.
        let threads = own_threads_file().expect("no cgroup.procs under /sys/fs/cgroup lists this test's pid");
        let listed = std::fs::read_to_string(threads.with_file_name("cgroup.procs")).unwrap();
        assert!(listed.lines().any(|l| l == std::process::id().to_string()));
    }

    /// Two cgroups of this test's own under its cgroup in one hierarchy; the process is put
    /// back where it was and both are removed, even when the test fails.
    struct Moved {
        home: PathBuf,
        made: Vec<PathBuf>,
    }

    impl Moved {
        fn join(dir: &Path) {
            std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
                .unwrap_or_else(|e| panic!("write {}/cgroup.procs: {e}", dir.display()));
        }
    }

    impl Drop for Moved {
        fn drop(&mut self) {
            Moved::join(&self.home);
            for dir in &self.made {
                // The warm-up thread may still be exiting in it.
                for _ in 0..100 {
                    if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }
    }

    /// The race the server's warm-up runs: it finds its cgroup, `start` moves the server to its
    /// ShimCgroup, then the warm-up writes. Writing the pid to the stale `cgroup.procs` moved
    /// the whole server back (shim_start_cgroup caught it); the tid write must not.
    #[test]
    fn a_stale_warm_up_leaves_the_process_where_it_was_moved() {
        if !nix::unistd::geteuid().is_root() {
            return eprintln!("SKIP: moving this test between cgroups needs root");
        }
        let ours = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let pid = std::process::id().to_string();
        // pids or the unified hierarchy: both take a process without setup (cpuset does not).
        let Some((home, threads)) = candidates(&ours).into_iter().find(|(dir, _)| {
            let usable =
                dir.starts_with("/sys/fs/cgroup/pids") || !dir.starts_with("/sys/fs/cgroup/unified") && dir.join("cgroup.threads").exists();
            usable && std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|l| l.lines().any(|l| l == pid))
        }) else {
            return eprintln!("SKIP: this process is in no pids or pure v2 cgroup under /sys/fs/cgroup:\n{ours}");
        };
        let [stale, moved] = ["a", "b"].map(|n| home.join(format!("rustpod-warmup-test-{pid}-{n}")));
        let mut guard = Moved { home, made: Vec::new() };
        for dir in [&stale, &moved] {
            std::fs::create_dir(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
            guard.made.push(dir.clone());
        }
        Moved::join(&stale);
        Moved::join(&moved);
        let file = stale.join(threads);
        std::thread::spawn(move || warm(&file)).join().unwrap();
        let listed = std::fs::read_to_string(moved.join("cgroup.procs")).unwrap();
        assert!(listed.lines().any(|l| l == pid), "a warm-up of {} moved the process out of {}", stale.display(), moved.display());
        drop(guard);
    }
}
