//! OOM notifications for a container's memory cgroup: cgroup v1 through an
//! eventfd registered on `memory.oom_control`, v2 by watching the
//! `oom_kill` count in `memory.events` with inotify.

use std::fs;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Calls `on_oom` from a thread each time the cgroup of `pid` hits OOM,
/// until the cgroup is removed.
pub fn watch(pid: i32, on_oom: impl Fn() + Send + 'static) -> Result<(), String> {
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).map_err(|e| format!("read cgroups of {pid}: {e}"))?;
    if let Some(dir) = v1_memory_dir(&cgroups) {
        return watch_v1(dir, on_oom);
    }
    if let Some(rel) = cgroups.lines().find_map(|l| l.strip_prefix("0::")) {
        let dir = Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
        if dir.join("memory.events").exists() {
            return watch_v2(dir, on_oom);
        }
    }
    Err(format!("process {pid} has no memory cgroup"))
}

/// `<mountpoint>/<path>` of the v1 memory controller, from /proc/PID/cgroup.
fn v1_memory_dir(cgroups: &str) -> Option<PathBuf> {
    let rel = cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "memory").then(|| path.to_string())
    })?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        let mut post = post.split(' ');
        let fstype = post.next()?;
        let super_opts = post.nth(1)?;
        (fstype == "cgroup" && super_opts.split(',').any(|o| o == "memory")).then(|| pre.split(' ').nth(4).map(str::to_string))?
    })?;
    Some(Path::new(&mount).join(rel.trim_start_matches('/')))
}

fn watch_v1(dir: PathBuf, on_oom: impl Fn() + Send + 'static) -> Result<(), String> {
    let control = dir.join("memory.oom_control");
    let oom_control = fs::File::open(&control).map_err(|e| format!("open {}: {e}", control.display()))?;
    // SAFETY: eventfd has no memory preconditions.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: eventfd returned a new descriptor we own.
    let efd = unsafe { OwnedFd::from_raw_fd(raw) };
    let event_control = dir.join("cgroup.event_control");
    fs::write(&event_control, format!("{} {}", efd.as_raw_fd(), oom_control.as_raw_fd()))
        .map_err(|e| format!("register OOM eventfd in {}: {e}", event_control.display()))?;
    spawn(move || {
        let _keep = oom_control;
        let mut efd = fs::File::from(efd);
        let mut buf = [0u8; 8];
        while efd.read_exact(&mut buf).is_ok() {
            // The eventfd also fires when the cgroup is removed.
            if !event_control.exists() {
                return;
            }
            on_oom();
        }
    })
}

fn watch_v2(dir: PathBuf, on_oom: impl Fn() + Send + 'static) -> Result<(), String> {
    let events = dir.join("memory.events");
    // SAFETY: inotify_init1 has no memory preconditions.
    let raw = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if raw < 0 {
        return Err(format!("inotify: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a new descriptor we own.
    let ifd = unsafe { OwnedFd::from_raw_fd(raw) };
    let path = std::ffi::CString::new(events.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: valid fd and NUL-terminated path.
    if unsafe { libc::inotify_add_watch(ifd.as_raw_fd(), path.as_ptr(), libc::IN_MODIFY) } < 0 {
        return Err(format!("watch {}: {}", events.display(), std::io::Error::last_os_error()));
    }
    spawn(move || {
        let mut last = oom_kills(&events).unwrap_or(0);
        let mut inotify = fs::File::from(ifd);
        let mut buf = [0u8; 4096];
        while inotify.read(&mut buf).is_ok_and(|n| n > 0) {
            let Some(now) = oom_kills(&events) else { return };
            if now > last {
                on_oom();
            }
            last = now;
        }
    })
}

fn oom_kills(events: &Path) -> Option<u64> {
    let text = fs::read_to_string(events).ok()?;
    text.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|v| v.trim().parse().ok())
}

fn spawn(body: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name("oom".into())
        .stack_size(64 * 1024)
        .spawn(body)
        .map(|_| ())
        .map_err(|e| format!("start OOM watcher: {e}"))
}

#[cfg(test)]
mod tests {
    use rustpod_tests::{needs, skip_if};

    #[test]
    fn finds_memory_controller_line() {
        skip_if!(needs::cgroup_v1("memory"));
        let cg = "12:pids:/a\n5:memory:/ns/c1\n0::/ns/c1\n";
        // The mount point depends on the machine; only check the path part.
        let dir = super::v1_memory_dir(cg).expect("the v1 memory mount point");
        assert!(dir.ends_with("ns/c1"), "{}", dir.display());
    }
}
