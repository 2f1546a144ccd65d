//! OOM notifications for a container's memory cgroup: cgroup v1 through an
//! eventfd registered on `memory.oom_control`, v2 by watching the
//! `oom_kill` count in `memory.events` with inotify. The exit path flushes
//! the watch before it publishes an exit, so an OOM kill is published first.

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// A container's OOM watch. Each kill is published once, by its thread or
/// by `flush`, whichever looks first.
pub struct OomWatch {
    counter: Mutex<Counter>,
    on_oom: Box<dyn Fn() + Send + Sync>,
}

/// Where the kernel counts the kills, and what we have seen of it.
enum Counter {
    /// A non-blocking eventfd registered on `memory.oom_control`. The kernel
    /// signals it before it kills, and also when the cgroup goes away.
    V1 { efd: fs::File, event_control: PathBuf, _oom_control: fs::File },
    /// The `oom_kill` counts of `memory.events` and of the parent's (which is
    /// hierarchical: it still counts our kill once systemd has removed our
    /// emptied scope, which can happen before we read our own file,
    /// containerd#12714).
    V2 { events: PathBuf, parent: Option<PathBuf>, last: u64, last_parent: Option<u64> },
    /// The cgroup is gone: nothing more to publish.
    Gone,
}

impl OomWatch {
    /// Publishes the kills counted since the last look; false once the
    /// cgroup is gone. The kernel counts a kill before it sends SIGKILL, so
    /// a flush made once the killed init is reaped publishes the OOM before
    /// its exit, as containerd's clients read them.
    pub fn flush(&self) -> bool {
        let mut counter = self.counter.lock().unwrap_or_else(|p| p.into_inner());
        let (oom, alive) = counter.look();
        if oom {
            (self.on_oom)();
        }
        if !alive {
            *counter = Counter::Gone;
        }
        alive
    }
}

impl Counter {
    /// (a kill since the last look, the cgroup still there).
    fn look(&mut self) -> (bool, bool) {
        match self {
            Counter::V1 { efd, event_control, .. } => {
                let mut buf = [0u8; 8];
                if efd.read_exact(&mut buf).is_err() {
                    return (false, true);
                }
                // The eventfd also fires when the cgroup is removed.
                let alive = event_control.exists();
                if !alive {
                    // Leave a wake-up for the thread, which may be waiting on it.
                    let _ = efd.write_all(&1u64.to_ne_bytes());
                }
                (alive, alive)
            }
            Counter::V2 { events, parent, last, last_parent } => {
                let parent_now = parent.as_deref().and_then(oom_kills);
                let Some(now) = oom_kills(events) else {
                    // Our cgroup is gone: a kill since our last look, counted by the parent only.
                    let oom = parent_now.zip(*last_parent).is_some_and(|(now, before)| now > before);
                    return (oom, false);
                };
                let oom = now > *last;
                (*last, *last_parent) = (now, parent_now);
                (oom, true)
            }
            Counter::Gone => (false, false),
        }
    }
}

/// Watches the memory cgroup of `pid` for OOM kills, calling `on_oom` for
/// each from a thread of its own (until the cgroup is removed) or from
/// `OomWatch::flush`.
pub fn watch(pid: i32, on_oom: impl Fn() + Send + Sync + 'static) -> Result<Arc<OomWatch>, OomError> {
    let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup")).map_err(|source| OomError::ReadCgroups { pid, source })?;
    let on_oom = Box::new(on_oom);
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

fn watch_v1(dir: PathBuf, on_oom: Box<dyn Fn() + Send + Sync>) -> Result<Arc<OomWatch>, OomError> {
    let path = dir.join("memory.oom_control");
    let oom_control = fs::File::open(&path).map_err(|source| OomError::Open { path, source })?;
    // SAFETY: eventfd has no memory preconditions.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if raw < 0 {
        return Err(OomError::last("eventfd"));
    }
    // SAFETY: eventfd returned a new descriptor we own.
    let efd = unsafe { OwnedFd::from_raw_fd(raw) };
    let event_control = dir.join("cgroup.event_control");
    fs::write(&event_control, format!("{} {}", efd.as_raw_fd(), oom_control.as_raw_fd()))
        .map_err(|source| OomError::Register { path: event_control.clone(), source })?;
    let wait_fd = efd.try_clone().map_err(|e| OomError::Syscall { syscall: "dup", source: e })?;
    let counter = Counter::V1 { efd: fs::File::from(efd), event_control, _oom_control: oom_control };
    let watch = Arc::new(OomWatch { counter: Mutex::new(counter), on_oom });
    let thread_watch = Arc::clone(&watch);
    spawn(move || while wait_readable(&wait_fd) && thread_watch.flush() {})?;
    Ok(watch)
}

fn watch_v2(dir: PathBuf, on_oom: Box<dyn Fn() + Send + Sync>) -> Result<Arc<OomWatch>, OomError> {
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
    let parent = dir.parent().map(|p| p.join("memory.events"));
    // The parent first: a kill between the two reads is then missed by neither.
    let last_parent = parent.as_deref().and_then(oom_kills);
    let last = oom_kills(&events).unwrap_or(0);
    let counter = Counter::V2 { events, parent, last, last_parent };
    let watch = Arc::new(OomWatch { counter: Mutex::new(counter), on_oom });
    let thread_watch = Arc::clone(&watch);
    spawn(move || {
        let mut inotify = fs::File::from(ifd);
        let mut buf = [0u8; 4096];
        while inotify.read(&mut buf).is_ok_and(|n| n > 0) && thread_watch.flush() {}
    })?;
    Ok(watch)
}

/// poll(2) until `fd` is readable; false if poll fails.
fn wait_readable(fd: &OwnedFd) -> bool {
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    loop {
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, -1) };
        if rc > 0 {
            return true;
        }
        if rc < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

fn oom_kills(events: &Path) -> Option<u64> {
    let text = fs::read_to_string(events).ok()?;
    text.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|v| v.trim().parse().ok())
}

fn spawn(body: impl FnOnce() + Send + 'static) -> Result<(), OomError> {
    std::thread::Builder::new().name("oom".into()).stack_size(64 * 1024).spawn(body).map(|_| ()).map_err(OomError::Spawn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A kill counted in memory.events is published once, and by the time
    /// `flush` returns, whether the thread or the flush saw it first: the
    /// exit path's ordering rests on this.
    #[test]
    fn a_counted_kill_is_published_once_and_before_flush_returns() {
        let dir = std::env::temp_dir().join(format!("rustpod-oom-unit-{}", std::process::id()));
        let cgroup = dir.join("ctr");
        fs::create_dir_all(&cgroup).unwrap();
        fs::write(dir.join("memory.events"), "oom 0\noom_kill 0\n").unwrap();
        fs::write(cgroup.join("memory.events"), "oom 0\noom_kill 0\n").unwrap();
        let published = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&published);
        let watch = watch_v2(
            cgroup.clone(),
            Box::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
        // One byte written in place, as the kernel's file never reads half-updated.
        let file = fs::OpenOptions::new().write(true).open(cgroup.join("memory.events")).unwrap();
        let digit = "oom 0\noom_kill ".len() as u64;
        for kills in 1..=9 {
            std::os::unix::fs::FileExt::write_at(&file, kills.to_string().as_bytes(), digit).unwrap();
            assert!(watch.flush());
            assert_eq!(published.load(Ordering::SeqCst), kills, "after kill {kills}");
        }
        // The thread's late wake-ups find nothing new.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(watch.flush());
        assert_eq!(published.load(Ordering::SeqCst), 9);
        fs::remove_dir_all(&dir).unwrap();
    }
}
