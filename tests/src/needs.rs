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
            .map(|m| m.lines().any(|l| l.contains(&format!(" {} ", path.display()))))
            .unwrap_or(false);
        (!mounted).then(|| format!("no cgroup v1 {controller} controller at {}", path.display()))
    })
}

/// A pure cgroup v2 hierarchy at /sys/fs/cgroup offering each of `controllers` to children.
pub fn cgroup_v2(controllers: &[&str]) -> Option<String> {
    containers().or_else(|| {
        if !crate::cgroup::unified() {
            return Some(
                "/sys/fs/cgroup is not a cgroup v2 hierarchy (a v1 or hybrid host; \
                 hack/guest-v2.sh runs this test in a v2 guest)"
                    .into(),
            );
        }
        let offered = std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control").unwrap_or_default();
        let missing: Vec<&str> = controllers.iter().copied().filter(|c| !offered.split_whitespace().any(|o| o == *c)).collect();
        (!missing.is_empty()).then(|| format!("cgroup v2 controllers not enabled for children: {}", missing.join(" ")))
    })
}

/// `controller` in its own cgroup v1 hierarchy, or offered to children on a pure v2 hierarchy.
pub fn cgroup_controller(controller: &str) -> Option<String> {
    let v1 = cgroup_v1(controller)?;
    let v2 = cgroup_v2(&[controller])?;
    Some(format!("{v1}; {v2}"))
}

/// A program that must exist on this machine.
pub fn program(path: &Path) -> Option<String> {
    (!path.exists()).then(|| format!("{} is not installed", path.display()))
}

/// Why criu cannot checkpoint here, or None where `criu check` passes (the sid guest's 4.2.1;
/// Debian 12's 3.17.1 fails it on this host's kernel).
pub fn criu() -> Option<String> {
    use std::process::{Command, Stdio};
    match Command::new("criu").arg("check").stdin(Stdio::null()).output() {
        Err(e) => Some(format!("criu cannot run here ({e}): checkpoint/restore needs criu (the sid guest has 4.2.1)")),
        Ok(out) if !out.status.success() => Some(format!(
            "`criu check` fails here ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).lines().rfind(|l| l.contains("Error")).unwrap_or("")
        )),
        Ok(_) => None,
    }
}
