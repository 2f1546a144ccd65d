//! Why the engine's init failed to prepare the rootfs. libcontainer 0.7's
//! init sends its parent only "failed to prepare rootfs"; the mount it was
//! making and the failed call reach nothing but its log (a debug event
//! "mounting Mount { .. }" before each spec mount, then an error event
//! carrying the cause). While the init is spawned, a subscriber scoped to
//! the spawning thread (the init is a fork of it) passes every event on to
//! the one in place and, in the init, writes those two to a pipe, from
//! which `create` names the mount destination, the syscall and the errno,
//! as runc does.

use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

use nix::errno::Errno;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};

/// What the init's rootfs step said before it failed: the last mount it
/// began (the `Debug` of the spec mount) and the error (its `Debug`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Said {
    pub mount: String,
    pub error: String,
}

/// The pipe the init writes to; both ends close-on-exec, so the user's
/// program never holds it.
pub struct Capture {
    read: OwnedFd,
    write: OwnedFd,
}

impl Capture {
    pub fn new() -> nix::Result<Self> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        Ok(Capture { read, write })
    }

    /// Runs `f` (the spawn) with the capturing subscriber as this thread's.
    pub fn during<T>(&self, f: impl FnOnce() -> T) -> T {
        let inner = tracing::dispatcher::get_default(Dispatch::clone);
        let tee = Tee { inner, fd: self.write.as_raw_fd(), mount: Mutex::new(String::new()) };
        tracing::dispatcher::with_default(&Dispatch::new(tee), f)
    }

    /// What the init wrote, once it has failed (it wrote before telling us).
    pub fn said(self) -> Option<Said> {
        drop(self.write);
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = nix::unistd::read(self.read.as_raw_fd(), &mut buf) {
            text.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&text);
        let (mount, error) = text.split_once('\n')?;
        Some(Said { mount: mount.to_string(), error: error.trim_end().to_string() })
    }
}

/// The events of ours: the engine's "mounting …" and "failed to prepare rootfs".
fn ours(meta: &Metadata<'_>) -> bool {
    meta.is_event() && meta.target().starts_with("libcontainer::") && *meta.level() <= Level::DEBUG
}

struct Tee {
    inner: Dispatch,
    fd: i32,
    mount: Mutex<String>,
}

impl Tee {
    fn capture(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let Ok(mut mount) = self.mount.lock() else { return };
        if let Some(spec_mount) = fields.message.strip_prefix("mounting ") {
            *mount = spec_mount.replace('\n', " ");
        } else if fields.message == "failed to prepare rootfs" {
            // In the init, which exits right after: one write, lost if the pipe is full.
            let line = format!("{mount}\n{}\n", fields.err.replace('\n', " "));
            // SAFETY: our pipe's write end, open in this process; a plain write(2).
            unsafe { libc::write(self.fd, line.as_ptr().cast(), line.len()) };
        }
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    err: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "err" => self.err = format!("{value:?}"),
            _ => {}
        }
    }
}

impl Subscriber for Tee {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        let inner = self.inner.register_callsite(meta);
        if ours(meta) && !inner.is_always() {
            return Interest::sometimes();
        }
        inner
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        ours(meta) || self.inner.enabled(meta)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.inner.new_span(span)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        self.inner.record(span, values)
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.inner.record_follows_from(span, follows)
    }

    fn event(&self, event: &Event<'_>) {
        if ours(event.metadata()) {
            self.capture(event);
        }
        if self.inner.enabled(event.metadata()) {
            self.inner.event(event)
        }
    }

    fn enter(&self, span: &Id) {
        self.inner.enter(span)
    }

    fn exit(&self, span: &Id) {
        self.inner.exit(span)
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.inner.clone_span(id)
    }

    fn try_close(&self, id: Id) -> bool {
        self.inner.try_close(id)
    }
}

/// One line from what the init said: the mount (its source and
/// destination, as runc's "error mounting %q to rootfs at %q") and the
/// failed call: its path, syscall and errno where the error names them,
/// else the error as it is.
pub fn describe(said: &Said) -> String {
    let at = match (quoted_after(&said.mount, "destination: "), quoted_after(&said.mount, "source: Some(")) {
        (Some(dest), Some(source)) => format!("error mounting {source:?} to rootfs at {dest:?}: "),
        (Some(dest), None) => format!("error mounting to rootfs at {dest:?}: "),
        _ => String::new(),
    };
    let call = match (syscall_of(&said.error), errno_of(&said.error)) {
        (Some((syscall, at)), Some(errno)) => match path_of(&said.error[at..]) {
            Some(path) => format!("{syscall} {path}: {}", errno),
            None => format!("{syscall}: {}", errno),
        },
        (None, Some(errno)) => format!("{}: {}", said.error, errno),
        // A check of the engine's own, not a syscall: its words.
        _ => quoted_after(&said.error, "Other(").or_else(|| quoted_after(&said.error, "Custom(")).unwrap_or_else(|| said.error.clone()),
    };
    format!("{at}{call}")
}

/// The string literal right after `key` in a `Debug` text.
fn quoted_after(text: &str, key: &str) -> Option<String> {
    let rest = &text[text.find(key)? + key.len()..];
    let rest = rest.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.push(chars.next()?),
            c => out.push(c),
        }
    }
    None
}

/// The syscall pathrs names by its innermost error variant (`Openat {
/// .. }`), and where in `error` that variant starts. A nix error
/// (`Nix(E…)`) names none.
fn syscall_of(error: &str) -> Option<(String, usize)> {
    const CALLS: &[&str] = &[
        "Openat2",
        "Openat",
        "Mkdirat",
        "Mknodat",
        "Readlinkat",
        "Fstatat",
        "Statx",
        "Fstatfs",
        "Symlinkat",
        "Linkat",
        "Unlinkat",
        "Renameat2",
        "Renameat",
        "FsOpen",
        "FsConfig",
        "FsMount",
        "OpenTree",
        "MoveMount",
        "Mount",
        "Fchmodat",
        "Fchownat",
    ];
    CALLS.iter().filter_map(|c| error.rfind(&format!("source: {c} {{")).map(|at| (c.to_lowercase(), at))).max_by_key(|(_, at)| *at)
}

/// The path of a pathrs call (from its variant on): the `dirfd`'s path
/// joined with `path`.
fn path_of(call: &str) -> Option<String> {
    let path = quoted_after(call, "path: ")?;
    let dir = call.find("dirfd: FrozenFd(").and_then(|at| quoted_after(&call[at..], ", Some("));
    match dir {
        Some(dir) if !path.starts_with('/') => Some(format!("{}/{path}", dir.trim_end_matches('/'))),
        _ => Some(path),
    }
}

/// The innermost errno: an OS error's `code: N`, or a nix `E…` name.
fn errno_of(error: &str) -> Option<Errno> {
    if let Some(at) = error.rfind("code: ") {
        let digits: String = error[at + 6..].chars().take_while(char::is_ascii_digit).collect();
        return digits.parse().ok().map(Errno::from_raw);
    }
    error
        .rsplit(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() > 2 && w.starts_with('E') && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()))
        .find_map(|w| ERRNOS.iter().find(|e| format!("{e:?}") == w).copied())
}

/// The errnos a rootfs step can end in.
const ERRNOS: &[Errno] = &[
    Errno::ENOENT,
    Errno::ENOTDIR,
    Errno::EISDIR,
    Errno::ELOOP,
    Errno::EXDEV,
    Errno::EACCES,
    Errno::EPERM,
    Errno::EINVAL,
    Errno::EBUSY,
    Errno::EEXIST,
    Errno::ENODEV,
    Errno::ENOSPC,
    Errno::EROFS,
    Errno::EAGAIN,
];

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNT: &str = r#"Mount { destination: "/race/target", typ: Some("tmpfs"), source: Some("tmpfs"), options: None, uid_mappings: None, gid_mappings: None }"#;

    #[test]
    fn a_lost_race_names_the_mount_the_call_and_the_errno() {
        let error = r#"Mount(Pathrs(Error(RawOsError { operation: "open newly created directory", source: Openat { dirfd: FrozenFd(12, Some("/b/rootfs/race")), path: "target", flags: OpenFlags(O_CLOEXEC | O_NOFOLLOW | O_DIRECTORY | O_NOCTTY), mode: 0, source: Os { code: 20, kind: NotADirectory, message: "Not a directory" } } })))"#;
        let said = Said { mount: MOUNT.into(), error: error.into() };
        assert_eq!(
            describe(&said),
            r#"error mounting "tmpfs" to rootfs at "/race/target": openat /b/rootfs/race/target: ENOTDIR: Not a directory"#
        );
    }

    #[test]
    fn a_nix_error_without_a_call_keeps_the_error_and_names_the_errno() {
        let said = Said { mount: MOUNT.into(), error: "Syscall(Nix(ELOOP))".into() };
        assert_eq!(
            describe(&said),
            r#"error mounting "tmpfs" to rootfs at "/race/target": Syscall(Nix(ELOOP)): ELOOP: Too many symbolic links encountered"#
        );
    }

    #[test]
    fn a_check_of_the_engine_gives_its_words() {
        let mount = r#"Mount { destination: "/proc", typ: Some("proc"), source: Some("proc"), options: None }"#;
        let said = Said { mount: mount.into(), error: r#"Mount(Other("filesystem proc must be mounted on ordinary directory"))"#.into() };
        assert_eq!(describe(&said), r#"error mounting "proc" to rootfs at "/proc": filesystem proc must be mounted on ordinary directory"#);
    }

    #[test]
    fn an_error_before_any_mount_is_given_as_it_is() {
        let said = Said { mount: String::new(), error: "Io(Kind(Other))".into() };
        assert_eq!(describe(&said), "Io(Kind(Other))");
    }

    #[test]
    fn the_pipe_carries_what_the_init_wrote() {
        let capture = Capture::new().unwrap();
        nix::unistd::write(&capture.write, b"M\nE\n").unwrap();
        assert_eq!(capture.said(), Some(Said { mount: "M".into(), error: "E".into() }));
        assert_eq!(Capture::new().unwrap().said(), None);
    }
}
