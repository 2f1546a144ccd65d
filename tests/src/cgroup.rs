// The cgroups of a test container: `/rustpod-test-<id>/<id>` (or `/rustpod/<id>`) in every
// hierarchy under /sys/fs/cgroup; reading v1 files, and removing what a runtime left. Each
// container gets its own parent, so that removing it can never race with another test.

use crate::{leftovers, wait};
use std::fs;
use std::path::{Path, PathBuf};

const CGROUP_FS: &str = "/sys/fs/cgroup";

/// The cgroupsPath a container of this suite gets, unless its test clears it.
pub fn cgroups_path(id: &str) -> String {
    format!("{}/{id}", parent(id))
}

fn parent(id: &str) -> String {
    format!("/rustpod-test-{id}")
}

/// Whether /sys/fs/cgroup is one pure cgroup v2 hierarchy (the sid guest), not v1 controllers.
pub fn unified() -> bool {
    nix::sys::statfs::statfs(CGROUP_FS).is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
}

/// `/rustpod`, where rustpod puts a container without `cgroupsPath`, in every hierarchy: below
/// /sys/fs/cgroup on a pure v2 host (its entries are other cgroups), else below each v1 one.
pub fn default_parents() -> Vec<PathBuf> {
    let roots = if unified() { vec![PathBuf::from(CGROUP_FS)] } else { hierarchies().into_iter().skip(1).collect() };
    roots.into_iter().map(|h| h.join("rustpod")).collect()
}

/// Removes the (empty) per-container parent the runtime made for `id`'s cgroup.
pub fn remove_parent(id: &str) {
    for h in hierarchies() {
        let _ = fs::remove_dir(h.join(parent(id).trim_start_matches('/')));
    }
}

/// Every hierarchy's root: the v1 ones under /sys/fs/cgroup, and /sys/fs/cgroup itself, which
/// is the one hierarchy of a pure cgroup v2 host.
fn hierarchies() -> Vec<PathBuf> {
    let v1 = fs::read_dir(CGROUP_FS).into_iter().flatten().flatten().map(|h| h.path());
    std::iter::once(PathBuf::from(CGROUP_FS)).chain(v1).collect()
}

/// The content (trimmed) of `/sys/fs/cgroup/<controller>/rustpod-test-<id>/<id>/<file>`.
pub fn v1_file(controller: &str, id: &str, file: &str) -> String {
    read_in(&Path::new(CGROUP_FS).join(controller), id, file)
}

/// The content (trimmed) of `/sys/fs/cgroup/rustpod-test-<id>/<id>/<file>` on a cgroup v2 host.
pub fn v2_file(id: &str, file: &str) -> String {
    read_in(Path::new(CGROUP_FS), id, file)
}

fn read_in(hierarchy: &Path, id: &str, file: &str) -> String {
    let path = hierarchy.join(cgroups_path(id).trim_start_matches('/')).join(file);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())).trim().to_string()
}

/// Existing cgroup dirs for `/rustpod-test-<id>/<id>` or `/rustpod/<id>` under any hierarchy.
pub fn dirs(id: &str) -> Vec<PathBuf> {
    let relative = [cgroups_path(id), format!("/rustpod/{id}")];
    hierarchies()
        .into_iter()
        .flat_map(|h| relative.iter().map(move |rel| h.join(rel.trim_start_matches('/'))))
        .filter(|dir| dir.is_dir())
        .collect()
}

/// SIGKILLs, by pid, every process in container `id`'s cgroups.
pub fn kill_processes(id: &str) {
    for dir in dirs(id) {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        leftovers::kill_pids(procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()));
    }
}

/// Removes container `id`'s (empty) cgroup dirs; returns those that could not be removed.
pub fn remove_dirs(id: &str) -> Vec<PathBuf> {
    wait::eventually(|| {
        dirs(id).iter().for_each(|dir| drop(fs::remove_dir(dir)));
        dirs(id).is_empty()
    });
    dirs(id)
}

/// crun 1.28 leaves a container's cgroup behind after a create that fails (also after `delete
/// --force`; tests/RUNC_DIFFERENCES.md): printed and removed for `bin` crun, so that the rest of
/// what it leaves is still checked.
pub fn remove_crun_leftover(bin: &Path, id: &str) {
    if !crate::env::is_crun(bin) || dirs(id).is_empty() {
        return;
    }
    eprintln!("{} left behind (for the record): {:?}", bin.display(), dirs(id));
    remove_dirs(id);
}

/// The usage counters of a process's cgroup, read from the files that statistics must match:
/// v2's cpu.stat and memory.current, or v1's cpuacct.usage and memory.usage_in_bytes.
pub struct Counters {
    cpu: PathBuf,
    memory: PathBuf,
}

/// Memory the kernel charges to and reclaims from an idle cgroup on its own (slab, page tables
/// of the probes' execs) between two reads; far below what a wrong unit would be off by.
pub const MEMORY_SLACK: u64 = 1024 * 1024;

impl Counters {
    /// Process `pid`'s cgroup's counters.
    #[track_caller]
    pub fn of(pid: i32) -> Self {
        Counters { cpu: crate::shim::cgroup_dir(pid, "cpuacct"), memory: crate::shim::cgroup_dir(pid, "memory") }
    }

    pub fn v2(&self) -> bool {
        self.cpu.join("cpu.stat").exists() && !self.cpu.join("cpuacct.usage").exists()
    }

    fn read(dir: &Path, file: &str) -> String {
        let path = dir.join(file);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    /// CPU time in its file's unit: v2 cpu.stat usage_usec (µs), v1 cpuacct.usage (ns).
    pub fn cpu_native(&self) -> u64 {
        if !self.v2() {
            return number(&Self::read(&self.cpu, "cpuacct.usage"));
        }
        let stat = Self::read(&self.cpu, "cpu.stat");
        let usage = stat.lines().find_map(|l| l.strip_prefix("usage_usec "));
        usage.and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no usage_usec in cpu.stat: {stat}"))
    }

    pub fn cpu_ns(&self) -> u64 {
        self.cpu_native() * if self.v2() { 1000 } else { 1 }
    }

    /// Memory in use, in bytes.
    pub fn memory(&self) -> u64 {
        let file = if self.v2() { "memory.current" } else { "memory.usage_in_bytes" };
        number(&Self::read(&self.memory, file))
    }
}

fn number(text: &str) -> u64 {
    text.trim().parse().unwrap_or_else(|e| panic!("not a number ({e}): {text:?}"))
}

/// `value` of a counter that only grows was read between `before` and `after`.
#[track_caller]
pub fn assert_between(what: &str, before: u64, value: u64, after: u64) {
    assert!(before > 0, "{what}: the cgroup file says 0 before the read; nothing to compare");
    assert!(before <= value && value <= after, "{what} = {value}, but the cgroup file said {before} just before and {after} just after");
}

/// `value` is the memory in use read between `before` and `after` (which may move a little).
#[track_caller]
pub fn assert_memory(what: &str, before: u64, value: u64, after: u64) {
    let (low, high) = (before.min(after), before.max(after));
    assert!(
        low.saturating_sub(MEMORY_SLACK) <= value && value <= high + MEMORY_SLACK,
        "{what} = {value}, but the cgroup file said {before} just before and {after} just after"
    );
}

/// Why the systemd cgroup driver cannot be tried here, if it cannot.
pub fn systemd_blocker() -> Option<String> {
    (!Path::new("/run/systemd/system").is_dir()).then(|| {
        "systemd cgroup driver: systemd is not PID 1 here (/run/systemd/system is missing); \
         hack/guest-sid.sh runs this in a guest where it is"
            .to_string()
    })
}
