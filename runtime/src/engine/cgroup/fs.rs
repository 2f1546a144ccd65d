//! Where the host's cgroup filesystems are mounted (from one read of
//! mountinfo per command, passed down as a value), and where a process's
//! cgroup lies in them.

use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;

/// One mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub mount_point: PathBuf,
    /// The v1 controllers it carries (and `name=…` options); empty for v2.
    pub controllers: Vec<String>,
    pub unified: bool,
}

impl Hierarchy {
    pub fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }
}

/// The cgroup hierarchies mounted under /sys/fs/cgroup, as this process's
/// mount namespace sees them. Read once per command: the steps that need
/// them take the result (see docs/design.md, "mountinfo once").
pub fn hierarchies() -> Vec<Hierarchy> {
    std::fs::read_to_string("/proc/self/mountinfo").map(|info| parse_mountinfo(&info)).unwrap_or_default()
}

/// The cgroup and cgroup2 mounts of a mountinfo text under /sys/fs/cgroup.
pub fn parse_mountinfo(info: &str) -> Vec<Hierarchy> {
    info.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split_whitespace();
            let fs = right.next()?;
            let super_options = right.nth(1).unwrap_or_default();
            let mount_point = PathBuf::from(left.split_whitespace().nth(4)?);
            if !mount_point.starts_with("/sys/fs/cgroup") {
                return None;
            }
            match fs {
                "cgroup2" => Some(Hierarchy { mount_point, controllers: Vec::new(), unified: true }),
                "cgroup" => {
                    Some(Hierarchy { mount_point, controllers: super_options.split(',').map(str::to_string).collect(), unified: false })
                }
                _ => None,
            }
        })
        .collect()
}

/// The calling thread's /proc/thread-self/cgroup, read the first time a
/// step of the command asks and then kept: on v1 a thread's cgroups are its
/// own (a shim's threads may differ), and the processes it forks start in
/// them.
#[derive(Debug, Default)]
pub struct ThreadCgroups(std::cell::OnceCell<String>);

impl ThreadCgroups {
    pub const PATH: &'static str = "/proc/thread-self/cgroup";

    pub fn text(&self) -> std::io::Result<&str> {
        if let Some(text) = self.0.get() {
            return Ok(text);
        }
        let text = std::fs::read_to_string(Self::PATH)?;
        Ok(self.0.get_or_init(|| text))
    }
}

/// Whether the host is cgroup v2 only: /sys/fs/cgroup itself is cgroup2
/// (libcgroups' "unified" setup; a hybrid host has it at `unified/`).
pub fn is_unified(cgroups: &[Hierarchy]) -> bool {
    cgroups.iter().any(|h| h.unified && h.mount_point == Path::new("/sys/fs/cgroup"))
}

/// The path of `controller`'s line in a /proc/PID/cgroup text (v1), or
/// of the `0::` line when `controller` is None (v2).
pub fn path_in(proc_cgroup: &str, controller: Option<&str>) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = match controller {
            Some(c) => controllers.split(',').any(|x| x == c),
            None => controllers.is_empty(),
        };
        matches.then(|| path.to_string())
    })
}

/// Process `pid`'s cgroup directory in the v1 hierarchy of `controller`,
/// among the command's `cgroups`.
pub fn v1_dir_of(cgroups: &[Hierarchy], pid: i32, controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = path_in(&text, Some(controller))?;
    let hierarchy = cgroups.iter().find(|h| !h.unified && h.has(controller))?;
    Some(join(&hierarchy.mount_point, &path))
}

/// `mount_point` joined with a cgroup path (which starts with `/`).
pub fn join(mount_point: &Path, cgroup_path: &str) -> PathBuf {
    mount_point.join(cgroup_path.trim_start_matches('/'))
}

/// A cgroupsPath relative to each hierarchy's root: an absolute path and a
/// relative one both start there (libcgroups' reading), and `..` is
/// cleaned lexically and never climbs above it (runc's).
pub fn relative(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// Why one step on a cgroup file failed; the caller ties it to the
/// container's cgroup path (`Error::Cgroup`). Shared by `v1_setup` and
/// `v2_setup`.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{op} {}: {errno}", path.display())]
    File { op: &'static str, path: PathBuf, errno: Errno },
    #[error("write {value:?} to {}: {errno}", path.display())]
    Write { path: PathBuf, value: String, errno: Errno },
    #[error("{}: not a number: {text:?}", path.display())]
    NotANumber { path: PathBuf, text: String },
    #[error("{}: empty, so no task can join below it", .0.display())]
    EmptyCpuset(PathBuf),
    /// runc's words, which clients match.
    #[error("the {bound} allowed cpu-shares is {got}")]
    SharesClamped { bound: &'static str, got: u64 },
    #[error("unable to set memory limit to {value} (current usage: {usage}, peak usage: {peak})")]
    MemoryBusy { value: String, usage: String, peak: String },
    #[error("no cgroup v1 hierarchy has the {0} controller, which the resources need")]
    NoController(&'static str),
}

impl StepError {
    pub fn file(op: &'static str, path: &Path, err: &std::io::Error) -> Self {
        StepError::File { op, path: path.to_path_buf(), errno: io_errno(err) }
    }
}

/// The errno an io::Error carries.
pub fn io_errno(err: &std::io::Error) -> Errno {
    err.raw_os_error().map_or(Errno::UnknownErrno, Errno::from_raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
35 25 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
40 35 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:15 - cgroup cgroup rw,cpu,cpuacct
41 35 0:36 / /sys/fs/cgroup/memory rw,nosuid shared:16 - cgroup cgroup rw,memory
50 24 0:40 / /mnt/other rw - cgroup cgroup rw,pids
";

    #[test]
    fn finds_v1_and_v2_hierarchies_under_sys_fs_cgroup_only() {
        let h = parse_mountinfo(HYBRID);
        assert_eq!(h.len(), 3);
        assert!(h[0].unified && h[0].mount_point == Path::new("/sys/fs/cgroup/unified"));
        assert!(h[1].has("cpuacct") && !h[1].unified);
        assert!(h[2].has("memory"));
    }

    #[test]
    fn finds_a_controllers_line_or_the_unified_one() {
        let cg = "12:pids:/a\n5:cpu,memory:/ns/c1\n0::/ns/u\n";
        assert_eq!(path_in(cg, Some("memory")).as_deref(), Some("/ns/c1"));
        assert_eq!(path_in(cg, None).as_deref(), Some("/ns/u"));
        assert_eq!(path_in("0::/x\n", Some("memory")), None);
        assert_eq!(join(Path::new("/sys/fs/cgroup/memory"), "/ns/c1"), Path::new("/sys/fs/cgroup/memory/ns/c1"));
    }

    #[test]
    fn cgroups_paths_start_at_each_hierarchys_root() {
        assert_eq!(relative(Path::new("/pods/c1")), Path::new("pods/c1"));
        assert_eq!(relative(Path::new("pods/./c1")), Path::new("pods/c1"));
        assert_eq!(relative(Path::new("/pods/../../etc/c1")), Path::new("etc/c1"));
    }
}
