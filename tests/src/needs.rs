// Prerequisites of the tests: each returns `Some(reason)` when this machine cannot run them,
// for use with `skip_if!`.

use std::path::Path;

/// Real containers need root.
pub fn containers() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("containers need root".into());
    }
    None
}

/// A cgroup v1 controller mounted at /sys/fs/cgroup/<name>.
pub fn cgroup_v1(controller: &str) -> Option<String> {
    containers().or_else(|| {
        let path = Path::new("/sys/fs/cgroup").join(controller);
        let mounted = std::fs::read_to_string("/proc/self/mountinfo")
            .map(|m| {
                m.lines()
                    .any(|l| l.contains(&format!(" {} ", path.display())))
            })
            .unwrap_or(false);
        (!mounted).then(|| format!("no cgroup v1 {controller} controller at {}", path.display()))
    })
}

/// A program that must exist on this machine.
pub fn program(path: &Path) -> Option<String> {
    (!path.exists()).then(|| format!("{} is not installed", path.display()))
}
