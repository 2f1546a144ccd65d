//! rustpod-checker: runs INSIDE a test container and prints one JSON object describing what
//! the process sees, so that tests can compare it with the config.json they asked for.
//!
//! Usage: `rustpod-checker [--sysctl KEY]... [--path PATH]... [--mkdir PATH[:MODE]]...
//! [--write PATH]... [--exec PATH]...`
//!
//! Always reported: namespaces, uid/gid maps, ids and groups, the five capability sets,
//! NoNewPrivs, seccomp mode, rlimits, umask, hostname, domainname, cwd, env, args, mounts (with
//! propagation), the cgroup membership and limit files, oom_score_adj, personality and clocks.
//! On request: sysctls (`--sysctl net.ipv4.ip_forward`), paths (`--path P`: kind, mode, owner,
//! device, the mount it is on, read-only, masked), and the errno of `mkdir` (`--mkdir P[:MODE]`),
//! of opening for writing and of exec'ing a path (0 = success). Linked statically so it runs in
//! a busybox rootfs.

use serde_json::{json, Map, Value};
use std::ffi::{CStr, CString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

const NAMESPACES: [&str; 10] = ["cgroup", "ipc", "mnt", "net", "pid", "pid_for_children", "time", "time_for_children", "user", "uts"];

/// Capability names by bit number (linux/capability.h, up to CAP_CHECKPOINT_RESTORE).
const CAPS: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// `/proc/self/status` capability lines and the JSON key each is reported under.
const CAP_SETS: [(&str, &str); 5] =
    [("CapInh", "inheritable"), ("CapPrm", "permitted"), ("CapEff", "effective"), ("CapBnd", "bounding"), ("CapAmb", "ambient")];

const RLIMITS: [(&str, libc::__rlimit_resource_t); 16] = [
    ("RLIMIT_AS", libc::RLIMIT_AS),
    ("RLIMIT_CORE", libc::RLIMIT_CORE),
    ("RLIMIT_CPU", libc::RLIMIT_CPU),
    ("RLIMIT_DATA", libc::RLIMIT_DATA),
    ("RLIMIT_FSIZE", libc::RLIMIT_FSIZE),
    ("RLIMIT_LOCKS", libc::RLIMIT_LOCKS),
    ("RLIMIT_MEMLOCK", libc::RLIMIT_MEMLOCK),
    ("RLIMIT_MSGQUEUE", libc::RLIMIT_MSGQUEUE),
    ("RLIMIT_NICE", libc::RLIMIT_NICE),
    ("RLIMIT_NOFILE", libc::RLIMIT_NOFILE),
    ("RLIMIT_NPROC", libc::RLIMIT_NPROC),
    ("RLIMIT_RSS", libc::RLIMIT_RSS),
    ("RLIMIT_RTPRIO", libc::RLIMIT_RTPRIO),
    ("RLIMIT_RTTIME", libc::RLIMIT_RTTIME),
    ("RLIMIT_SIGPENDING", libc::RLIMIT_SIGPENDING),
    ("RLIMIT_STACK", libc::RLIMIT_STACK),
];

/// statvfs(3) mount flags and their mount option names.
const VFS_FLAGS: [(libc::c_ulong, &str); 9] = [
    (libc::ST_RDONLY, "ro"),
    (libc::ST_NOSUID, "nosuid"),
    (libc::ST_NODEV, "nodev"),
    (libc::ST_NOEXEC, "noexec"),
    (libc::ST_SYNCHRONOUS, "sync"),
    (libc::ST_MANDLOCK, "mand"),
    (libc::ST_NOATIME, "noatime"),
    (libc::ST_NODIRATIME, "nodiratime"),
    (libc::ST_RELATIME, "relatime"),
];

/// Cgroup files that hold limits, v1 and v2; `hugetlb.*` limits are added by pattern.
const CGROUP_FILES: [&str; 33] = [
    "memory.limit_in_bytes",
    "memory.soft_limit_in_bytes",
    "memory.memsw.limit_in_bytes",
    "memory.kmem.limit_in_bytes",
    "memory.kmem.tcp.limit_in_bytes",
    "memory.swappiness",
    "memory.oom_control",
    "cpu.shares",
    "cpu.cfs_quota_us",
    "cpu.cfs_period_us",
    "cpu.rt_runtime_us",
    "cpu.rt_period_us",
    "cpuset.cpus",
    "cpuset.mems",
    "pids.max",
    "blkio.weight",
    "blkio.leaf_weight",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "devices.list",
    "freezer.state",
    "memory.max",
    "memory.high",
    "memory.low",
    "memory.min",
    "memory.swap.max",
    "cpu.max",
    "cpu.weight",
    "io.max",
    "io.weight",
    "cgroup.controllers",
];

#[derive(Default)]
struct Requests {
    sysctls: Vec<String>,
    paths: Vec<String>,
    mkdirs: Vec<String>,
    writes: Vec<String>,
    execs: Vec<String>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let requests = match parse_args(&args[1..]) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rustpod-checker: {e}");
            std::process::exit(2);
        }
    };
    let mounts = mountinfo();
    let mut report = Map::new();
    report.insert("args".into(), json!(args));
    report.insert("pid".into(), json!(std::process::id()));
    report.insert("namespaces".into(), namespaces());
    report.insert("uid_map".into(), id_map("uid_map"));
    report.insert("gid_map".into(), id_map("gid_map"));
    report.insert("setgroups".into(), read_trimmed("/proc/self/setgroups"));
    report.insert("ids".into(), ids());
    let status = proc_status();
    report.insert("capabilities".into(), capabilities(&status));
    report.insert("no_new_privs".into(), status_number(&status, "NoNewPrivs"));
    report.insert("seccomp".into(), status_number(&status, "Seccomp"));
    report.insert("seccomp_filters".into(), status_number(&status, "Seccomp_filters"));
    report.insert("umask".into(), json!(status_field(&status, "Umask").unwrap_or_default()));
    report.insert("rlimits".into(), rlimits());
    let (hostname, domainname) = uname();
    report.insert("hostname".into(), json!(hostname));
    report.insert("domainname".into(), json!(domainname));
    report.insert("cwd".into(), json!(std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default()));
    report.insert(
        "env".into(),
        json!(std::env::vars_os().map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy())).collect::<Vec<_>>()),
    );
    report.insert(
        "oom_score_adj".into(),
        read_trimmed("/proc/self/oom_score_adj").as_str().and_then(|s| s.parse::<i64>().ok()).map_or(Value::Null, |n| json!(n)),
    );
    // SAFETY: personality(0xffffffff) only queries the current persona.
    report.insert("personality".into(), json!(unsafe { libc::personality(0xffff_ffff) }));
    report.insert("timens_offsets".into(), read_trimmed("/proc/self/timens_offsets"));
    report.insert("clocks".into(), clocks());
    report.insert("cgroup".into(), cgroup(&mounts));
    report.insert("sysctls".into(), sysctls(&requests.sysctls));
    report.insert("paths".into(), paths(&requests.paths, &mounts));
    report.insert("mkdir".into(), errnos(&requests.mkdirs, try_mkdir));
    report.insert("write".into(), errnos(&requests.writes, try_write));
    report.insert("exec".into(), errnos(&requests.execs, try_exec));
    report.insert("mounts".into(), Value::Array(mounts.iter().map(Mount::to_json).collect()));
    println!("{}", Value::Object(report));
}

fn parse_args(args: &[String]) -> Result<Requests, String> {
    let mut requests = Requests::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let list = match flag.as_str() {
            "--sysctl" => &mut requests.sysctls,
            "--path" => &mut requests.paths,
            "--mkdir" => &mut requests.mkdirs,
            "--write" => &mut requests.writes,
            "--exec" => &mut requests.execs,
            other => return Err(format!("unknown argument {other:?}")),
        };
        list.push(it.next().ok_or(format!("{flag} needs a value"))?.clone());
    }
    Ok(requests)
}

fn read_trimmed(path: &str) -> Value {
    fs::read_to_string(path).map_or(Value::Null, |s| json!(s.trim()))
}

fn namespaces() -> Value {
    let map: Map<String, Value> = NAMESPACES
        .iter()
        .map(|ns| {
            let link = fs::read_link(format!("/proc/self/ns/{ns}")).map_or(Value::Null, |l| json!(l.to_string_lossy()));
            (ns.to_string(), link)
        })
        .collect();
    Value::Object(map)
}

/// `/proc/self/{uid,gid}_map` as `[[inside, outside, count], …]`.
fn id_map(name: &str) -> Value {
    let Ok(text) = fs::read_to_string(format!("/proc/self/{name}")) else {
        return Value::Null;
    };
    text.lines().map(|l| l.split_whitespace().filter_map(|n| n.parse::<u64>().ok()).collect::<Vec<_>>()).collect::<Vec<_>>().into()
}

fn ids() -> Value {
    let (mut uid, mut euid, mut suid) = (0, 0, 0);
    let (mut gid, mut egid, mut sgid) = (0, 0, 0);
    // SAFETY: plain out-pointers to locals.
    unsafe {
        libc::getresuid(&mut uid, &mut euid, &mut suid);
        libc::getresgid(&mut gid, &mut egid, &mut sgid);
    }
    let groups = nix::unistd::getgroups().map(|g| g.iter().map(|g| g.as_raw()).collect::<Vec<_>>()).unwrap_or_default();
    json!({"uid": uid, "euid": euid, "suid": suid, "gid": gid, "egid": egid, "sgid": sgid,
           "groups": groups})
}

fn proc_status() -> String {
    fs::read_to_string("/proc/self/status").unwrap_or_default()
}

fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then_some(v.trim())
    })
}

fn status_number(status: &str, key: &str) -> Value {
    status_field(status, key).and_then(|v| v.parse::<i64>().ok()).map_or(Value::Null, |n| json!(n))
}

/// Names of the bits set in a hex capability mask.
fn cap_names(mask: u64) -> Vec<String> {
    (0..64)
        .filter(|bit| mask & (1u64 << bit) != 0)
        .map(|bit| CAPS.get(bit as usize).map_or_else(|| format!("CAP_{bit}"), |n| n.to_string()))
        .collect()
}

fn capabilities(status: &str) -> Value {
    let map: Map<String, Value> = CAP_SETS
        .iter()
        .map(|(field, key)| {
            let names = status_field(status, field)
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .map_or(Value::Null, |mask| json!(cap_names(mask)));
            (key.to_string(), names)
        })
        .collect();
    Value::Object(map)
}

fn rlimits() -> Value {
    let map: Map<String, Value> = RLIMITS
        .iter()
        .map(|(name, resource)| {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: lim is a valid out-pointer.
            let value = if unsafe { libc::getrlimit(*resource, &mut lim) } == 0 {
                json!({"soft": lim.rlim_cur, "hard": lim.rlim_max})
            } else {
                Value::Null
            };
            (name.to_string(), value)
        })
        .collect();
    Value::Object(map)
}

fn uname() -> (String, String) {
    // SAFETY: utsname is plain data and uname fills it.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut uts) } != 0 {
        return (String::new(), String::new());
    }
    let text = |field: &[libc::c_char]| {
        // SAFETY: uname NUL-terminates every field.
        unsafe { CStr::from_ptr(field.as_ptr()) }.to_string_lossy().into_owned()
    };
    (text(&uts.nodename), text(&uts.domainname))
}

fn clocks() -> Value {
    let secs = |clock| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: ts is a valid out-pointer.
        (unsafe { libc::clock_gettime(clock, &mut ts) } == 0).then_some(ts.tv_sec)
    };
    json!({"monotonic": secs(libc::CLOCK_MONOTONIC), "boottime": secs(libc::CLOCK_BOOTTIME)})
}

fn sysctls(keys: &[String]) -> Value {
    let map: Map<String, Value> = keys
        .iter()
        .map(|key| {
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            (key.clone(), read_trimmed(&path))
        })
        .collect();
    Value::Object(map)
}

/// One line of /proc/self/mountinfo.
struct Mount {
    id: u64,
    parent: u64,
    root: String,
    mount_point: String,
    options: Vec<String>,
    optional: Vec<String>,
    fstype: String,
    source: String,
    super_options: Vec<String>,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (left, right) = line.split_once(" - ")?;
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        let list = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
        Some(Mount {
            id: l.first()?.parse().ok()?,
            parent: l.get(1)?.parse().ok()?,
            root: unescape(l.get(3)?),
            mount_point: unescape(l.get(4)?),
            options: list(l.get(5)?),
            optional: l[6..].iter().map(|s| s.to_string()).collect(),
            fstype: r.first()?.to_string(),
            source: unescape(r.get(1)?),
            super_options: list(r.get(2).unwrap_or(&"")),
        })
    }

    /// `shared`, `slave`, `shared+slave`, `unbindable` or `private`, from the optional fields.
    fn propagation(&self) -> &'static str {
        let has = |prefix: &str| self.optional.iter().any(|o| o.starts_with(prefix));
        match (has("shared:"), has("master:"), has("unbindable")) {
            (true, true, _) => "shared+slave",
            (true, false, _) => "shared",
            (false, true, _) => "slave",
            (false, false, true) => "unbindable",
            (false, false, false) => "private",
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "id": self.id, "parent": self.parent, "root": self.root,
            "mount_point": self.mount_point, "options": self.options,
            "optional": self.optional, "propagation": self.propagation(),
            "fstype": self.fstype, "source": self.source, "super_options": self.super_options,
        })
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mountinfo() -> Vec<Mount> {
    fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().lines().filter_map(Mount::parse).collect()
}

/// The cgroup membership from /proc/self/cgroup and, for each hierarchy mounted in this mount
/// namespace, the limit files of our own cgroup, keyed by file name.
fn cgroup(mounts: &[Mount]) -> Value {
    let text = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut membership = vec![];
    let mut files = Map::new();
    let mut unreachable = vec![];
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(hierarchy), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        membership.push(json!({"hierarchy": hierarchy, "controllers": controllers, "path": path}));
        match cgroup_dir(mounts, controllers, path) {
            Some(dir) => read_cgroup_files(&dir, &mut files),
            None => unreachable.push(json!(line)),
        }
    }
    json!({"membership": membership, "files": files, "unreachable": unreachable})
}

/// The directory of cgroup `path` of the hierarchy with `controllers` ("" for cgroup2): a mount
/// of that hierarchy whose root is `path` or one of its ancestors.
fn cgroup_dir(mounts: &[Mount], controllers: &str, path: &str) -> Option<String> {
    let wanted: Vec<&str> = controllers.split(',').map(|c| c.trim_start_matches("name=")).filter(|c| !c.is_empty()).collect();
    mounts.iter().find_map(|m| {
        let matches = if wanted.is_empty() {
            m.fstype == "cgroup2"
        } else {
            m.fstype == "cgroup" && wanted.iter().all(|c| m.super_options.iter().any(|o| o == c || o == &format!("name={c}")))
        };
        let root = m.root.trim_end_matches('/');
        let rest = path.strip_prefix(root)?;
        (matches && (rest.is_empty() || rest.starts_with('/'))).then(|| format!("{}{rest}", m.mount_point))
    })
}

fn read_cgroup_files(dir: &str, files: &mut Map<String, Value>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let hugetlb_limit = name.starts_with("hugetlb.") && (name.ends_with(".limit_in_bytes") || name.ends_with(".max"));
        if !(CGROUP_FILES.contains(&name.as_str()) || hugetlb_limit) || files.contains_key(&name) {
            continue;
        }
        if let Ok(value) = fs::read_to_string(entry.path()) {
            files.insert(name, json!(value.trim()));
        }
    }
}

fn paths(paths: &[String], mounts: &[Mount]) -> Value {
    let map: Map<String, Value> = paths.iter().map(|p| (p.clone(), probe_path(p, mounts))).collect();
    Value::Object(map)
}

/// What `path` is and how it is mounted; `masked` is true for a /dev/null bind (files) or an
/// empty read-only tmpfs mounted right on it (directories), as runtimes mask paths.
fn probe_path(path: &str, mounts: &[Mount]) -> Value {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return json!({"exists": false, "errno": e.raw_os_error(), "error": e.to_string()}),
    };
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        "dir"
    } else if ft.is_file() {
        "file"
    } else if ft.is_char_device() {
        "char"
    } else if ft.is_block_device() {
        "block"
    } else if ft.is_fifo() {
        "fifo"
    } else if ft.is_socket() {
        "socket"
    } else {
        "other"
    };
    let rdev = [libc::major(meta.rdev()), libc::minor(meta.rdev())];
    let mount = mnt_id(path).and_then(|id| mounts.iter().find(|m| m.id == id));
    let vfs = vfs_flags(path);
    let readonly = vfs.iter().any(|f| f == "ro");
    let entries = ft.is_dir().then(|| fs::read_dir(path).map(|d| d.count()).ok()).flatten();
    let masked = (kind == "char" && rdev == [1, 3])
        || (kind == "dir" && entries == Some(0) && readonly && mount.is_some_and(|m| m.mount_point == path && m.fstype == "tmpfs"));
    let content = ft.is_file().then(|| match fs::read(path) {
        Ok(data) => json!(String::from_utf8_lossy(&data[..data.len().min(4096)])),
        Err(e) => json!({"errno": e.raw_os_error(), "error": e.to_string()}),
    });
    json!({
        "exists": true, "kind": kind, "mode": format!("{:04o}", meta.mode() & 0o7777),
        "uid": meta.uid(), "gid": meta.gid(), "rdev": rdev, "size": meta.size(),
        "readonly": readonly, "vfs_flags": vfs, "masked": masked, "entries": entries,
        "content": content, "mount": mount.map(Mount::to_json),
    })
}

fn cpath(path: &str) -> CString {
    CString::new(Path::new(path).as_os_str().as_bytes()).unwrap_or_default()
}

/// The mount id of `path` (statx STATX_MNT_ID).
fn mnt_id(path: &str) -> Option<u64> {
    let c = cpath(path);
    // SAFETY: statx is plain data; the kernel fills it.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_MNT_ID, &mut stx) };
    (rc == 0 && stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id)
}

fn vfs_flags(path: &str) -> Vec<String> {
    let c = cpath(path);
    // SAFETY: statvfs is plain data; the kernel fills it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return vec![];
    }
    VFS_FLAGS.iter().filter(|(flag, _)| st.f_flag & flag != 0).map(|(_, name)| name.to_string()).collect()
}

/// `{path: errno}` for each path (0 = the operation succeeded).
fn errnos(paths: &[String], op: fn(&str) -> std::io::Result<()>) -> Value {
    let map: Map<String, Value> = paths
        .iter()
        .map(|p| {
            let errno = op(p).err().map_or(0, |e| e.raw_os_error().unwrap_or(-1));
            (p.clone(), json!(errno))
        })
        .collect();
    Value::Object(map)
}

/// `PATH` or `PATH:MODE` (octal; default 0777, as mkdir(1) passes it).
fn try_mkdir(arg: &str) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let (path, mode) = match arg.rsplit_once(':') {
        Some((path, mode)) => (path, u32::from_str_radix(mode, 8).unwrap_or(0o777)),
        None => (arg, 0o777),
    };
    fs::DirBuilder::new().mode(mode).create(path)
}

fn try_write(path: &str) -> std::io::Result<()> {
    use std::io::Write;
    fs::OpenOptions::new().write(true).create(true).truncate(false).open(path)?.write_all(b"")
}

/// Runs `path` (with no arguments) and waits; the error is exec's.
fn try_exec(path: &str) -> std::io::Result<()> {
    std::process::Command::new(path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(drop)
}
