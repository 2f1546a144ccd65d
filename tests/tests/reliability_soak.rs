// Soak: N create/start/delete cycles, then nothing has grown: mounts of the bundle or state root,
// this test's cgroup dirs, state dirs, zombie children of this process, this process's open fds.
// N is $RUSTPOD_SOAK_CYCLES, 100 by default so the suite stays fast; issue 7's figure is 1000:
//   RUSTPOD_SOAK_CYCLES=1000 cargo test -p rustpod-tests --test reliability_soak -- --nocapture

use rustpod_tests::leftovers::mount_points_under;
use rustpod_tests::scratch::unique_name;
use rustpod_tests::{needs, skip_if, wait, Bundle, Runtime, SLEEP};
use std::fmt;
use std::fs;
use std::path::Path;

const DEFAULT_CYCLES: usize = 100;

fn cycles() -> usize {
    std::env::var("RUSTPOD_SOAK_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CYCLES)
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Counts {
    mounts: usize,
    cgroups: usize,
    state_dirs: usize,
    zombies: usize,
    fds: usize,
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "mounts={} cgroups={} state_dirs={} zombies={} fds={}",
            self.mounts, self.cgroups, self.state_dirs, self.zombies, self.fds
        )
    }
}

fn count_entries(dir: &Path, keep: impl Fn(&str) -> bool) -> usize {
    fs::read_dir(dir).map(|entries| entries.flatten().filter(|e| keep(&e.file_name().to_string_lossy())).count()).unwrap_or(0)
}

/// Zombie processes whose parent is this process.
fn zombie_children() -> usize {
    let me = std::process::id().to_string();
    count_entries(Path::new("/proc"), |name| {
        let stat = fs::read_to_string(format!("/proc/{name}/stat")).unwrap_or_default();
        let mut fields = stat.rsplit_once(") ").map(|(_, r)| r.split(' ')).into_iter().flatten();
        fields.next() == Some("Z") && fields.next() == Some(me.as_str())
    })
}

fn count(rt: &Runtime, bundle: &Bundle, prefix: &str) -> Counts {
    let cgroups = fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|hierarchy| fs::read_dir(hierarchy.path()).into_iter().flatten().flatten())
        // Each container's cgroup is /rustpod-test-<id>/<id> (see rustpod_tests::cgroup).
        .filter(|parent| parent.file_name().to_string_lossy().starts_with(&format!("rustpod-test-{prefix}")))
        .map(|parent| {
            let children = fs::read_dir(parent.path()).into_iter().flatten().flatten();
            children.filter(|child| child.path().is_dir()).count()
        })
        .sum();
    let root = Path::new(rt.root());
    Counts {
        mounts: mount_points_under(bundle.path()).len() + mount_points_under(rt.root()).len(),
        cgroups,
        // `@engine` itself stays once made; what is in it must not.
        state_dirs: count_entries(root, |name| name != "@engine") + count_entries(&root.join("@engine"), |_| true),
        zombies: zombie_children(),
        fds: count_entries(Path::new("/proc/self/fd"), |_| true),
    }
}

#[test]
fn create_start_delete_cycles_leak_nothing() {
    skip_if!(needs::containers());
    let n = cycles();
    let rt = Runtime::under_test();
    let bundle = Bundle::new(SLEEP);
    let prefix = unique_name("soak");
    let before = count(&rt, &bundle, &prefix);
    eprintln!("soak: {n} cycles; before: {before}");
    for cycle in 0..n {
        let id = rt.new_id(&format!("{prefix}-{cycle}"));
        rt.start_container(&id, &bundle);
        let delete = rt.cmd(&["delete", "--force", &id]);
        assert!(delete.success(), "cycle {cycle}: {}", delete.describe());
    }
    // The host's init reaps orphans slowly: poll (bounded) for the counts to settle.
    let settled = wait::eventually(|| count(&rt, &bundle, &prefix) == before);
    let after = count(&rt, &bundle, &prefix);
    eprintln!("soak: {n} cycles; after:  {after}");
    assert!(settled, "after {n} cycles something grew: before {before}, after {after}");
}
