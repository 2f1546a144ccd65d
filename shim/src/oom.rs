//! OOM notifications for a container's memory cgroup: cgroup v1 through an
//! eventfd registered on `memory.oom_control`, v2 by watching the
//! `oom_kill` count in `memory.events` with inotify.

use std::fs;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Why a container's OOM events cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum OomError {
    #[error("read cgroups of {pid}: {source}")]
    ReadCgroups { pid: i32, source: std::io::Error },
    #[error("process {0} has no memory cgroup")]
    NoMemoryCgroup(i32),
    #[error("open {}: {source}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    /// eventfd(2) or inotify_init1(2), named by `syscall`.
    #[error("{syscall}: {source}")]
    Syscall { syscall: &'static str, source: std::io::Error },
    /// The write of the eventfd to `cgroup.event_control`.
    #[error("register OOM eventfd in {}: {source}", path.display())]
    Register { path: PathBuf, source: std::io::Error },
    /// inotify_add_watch(2).
    #[error("watch {}: {source}", path.display())]
    Watch { path: PathBuf, source: std::io::Error },
    #[error("start OOM watcher: {0}")]
    Spawn(#[source] std::io::Error),
}

impl OomError {
    /// The failure of `syscall`, whose errno is still in errno.
    fn last(syscall: &'static str) -> OomError {
        OomError::Syscall { syscall, source: std::io::Error::last_os_error() }
    }
}

/// Calls `on_oom` from a thread each time the cgroup of `pid` hits OOM,
/// until the cgroup is removed.
pub fn watch(pid: i32, on_oom: impl Fn() + Send + 'static) -> Result<(), OomError> {
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).map_err(|source| OomError::ReadCgroups { pid, source })?;
    if let Some(dir) = v1_memory_dir(&cgroups) {
        return watch_v1(dir, on_oom);
    }
    if let Some(rel) = rustpod::cgroup_fs::path_in(&cgroups, None) {
        let dir = rustpod::cgroup_fs::join(Path::new("/sys/fs/cgroup"), &rel);
        if dir.join("memory.events").exists() {
            return watch_v2(dir, on_oom);
        }
    }
    Err(OomError::NoMemoryCgroup(pid))
}

/// `<mountpoint>/<path>` of the v1 memory controller, from /proc/PID/cgroup.
fn v1_memory_dir(cgroups: &str) -> Option<PathBuf> {
    use rustpod::cgroup_fs;
    let path = cgroup_fs::path_in(cgroups, Some("memory"))?;
    let hierarchy = cgroup_fs::hierarchies().into_iter().find(|h| !h.unified && h.has("memory"))?;
    Some(cgroup_fs::join(&hierarchy.mount_point, &path))
}

fn watch_v1(dir: PathBuf, on_oom: impl Fn() + Send + 'static) -> Result<(), OomError> {
    let path = dir.join("memory.oom_control");
    let oom_control = fs::File::open(&path).map_err(|source| OomError::Open { path, source })?;
    // SAFETY: eventfd has no memory preconditions.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(OomError::last("eventfd"));
    }
    // SAFETY: eventfd returned a new descriptor we own.
    let efd = unsafe { OwnedFd::from_raw_fd(raw) };
    let event_control = dir.join("cgroup.event_control");
    fs::write(&event_control, format!("{} {}", efd.as_raw_fd(), oom_control.as_raw_fd()))
        .map_err(|source| OomError::Register { path: event_control.clone(), source })?;
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

fn watch_v2(dir: PathBuf, on_oom: impl Fn() + Send + 'static) -> Result<(), OomError> {
    let events = dir.join("memory.events");
    // SAFETY: inotify_init1 has no memory preconditions.
    let raw = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if raw < 0 {
        return Err(OomError::last("inotify"));
    }
    // SAFETY: a new descriptor we own.
    let ifd = unsafe { OwnedFd::from_raw_fd(raw) };
    let watch_failed = |source| OomError::Watch { path: events.clone(), source };
    let path = std::ffi::CString::new(events.as_os_str().as_encoded_bytes()).map_err(|e| watch_failed(e.into()))?;
    // SAFETY: valid fd and NUL-terminated path.
    if unsafe { libc::inotify_add_watch(ifd.as_raw_fd(), path.as_ptr(), libc::IN_MODIFY) } < 0 {
        return Err(watch_failed(std::io::Error::last_os_error()));
    }
    // The parent's oom_kill is hierarchical: it still counts our kill once systemd has removed
    // our emptied scope, which can happen before we read our own file (containerd#12714).
    let parent = dir.parent().map(|p| p.join("memory.events"));
    let parent_kills = move || parent.as_deref().and_then(oom_kills);
    spawn(move || {
        // The parent first: a kill between the two reads is then missed by neither.
        let mut last_parent = parent_kills();
        let mut last = oom_kills(&events).unwrap_or(0);
        let mut inotify = fs::File::from(ifd);
        let mut buf = [0u8; 4096];
        while inotify.read(&mut buf).is_ok_and(|n| n > 0) {
            let parent_now = parent_kills();
            let Some(now) = oom_kills(&events) else {
                // Our cgroup is gone: a kill since our last look, counted by the parent only.
                if parent_now.zip(last_parent).is_some_and(|(now, before)| now > before) {
                    on_oom();
                }
                return;
            };
            if now > last {
                on_oom();
            }
            (last, last_parent) = (now, parent_now);
        }
    })
}

fn oom_kills(events: &Path) -> Option<u64> {
    let text = fs::read_to_string(events).ok()?;
    text.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|v| v.trim().parse().ok())
}

fn spawn(body: impl FnOnce() + Send + 'static) -> Result<(), OomError> {
    std::thread::Builder::new()
        .name("oom".into())
        .stack_size(64 * 1024)
        .spawn(body)
        .map(|_| ())
        .map_err(OomError::Spawn)
}
