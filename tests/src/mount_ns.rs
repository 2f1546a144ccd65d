// Every mount of another process's mount namespace, seen from the host: listmount(2) and
// statmount(2) with the namespace's id (Linux 6.11). /proc/<pid>/mountinfo and a setns(2) into
// the namespace show only what lies under the process's root (setns follows the mounts stacked
// on the namespace's root), so they cannot tell a container that pivoted from one chrooted over
// the host's mounts; these calls list the namespace from its own root.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// One mount as statmount reports it; `point` is relative to the namespace's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsMount {
    pub id: u64,
    pub parent: u64,
    /// The id mountinfo shows.
    pub old_id: u32,
    pub fstype: String,
    pub root: String,
    pub point: String,
}

const NS_GET_MNTNS_ID: libc::c_ulong = 0x8008_b705; // _IOR(0xb7, 0x5, __u64)
const SYS_STATMOUNT: libc::c_long = 457;
const SYS_LISTMOUNT: libc::c_long = 458;
const LSMT_ROOT: u64 = u64::MAX;
const STATMOUNT_MNT_BASIC: u64 = 0x2;
const STATMOUNT_MNT_ROOT: u64 = 0x8;
const STATMOUNT_MNT_POINT: u64 = 0x10;
const STATMOUNT_FS_TYPE: u64 = 0x20;
/// `sizeof(struct statmount)`: its strings follow.
const STATMOUNT_HEAD: usize = 512;

#[repr(C)]
struct MntIdReq {
    size: u32,
    spare: u32,
    mnt_id: u64,
    param: u64,
    mnt_ns_id: u64,
}

/// The mounts of the mount namespace `pid` is in, in mount id order.
pub fn mounts_of(pid: i32) -> io::Result<Vec<NsMount>> {
    let ns = File::open(format!("/proc/{pid}/ns/mnt"))?;
    let mut ns_id = 0u64;
    // SAFETY: the ioctl writes one u64 through the pointer.
    if unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_MNTNS_ID, &mut ns_id as *mut u64) } != 0 {
        return Err(io::Error::last_os_error());
    }
    list(ns_id)?.into_iter().map(|id| stat(ns_id, id)).collect()
}

fn list(ns_id: u64) -> io::Result<Vec<u64>> {
    let mut ids = Vec::new();
    let mut last = 0u64;
    loop {
        let req = MntIdReq { size: std::mem::size_of::<MntIdReq>() as u32, spare: 0, mnt_id: LSMT_ROOT, param: last, mnt_ns_id: ns_id };
        let mut buf = [0u64; 256];
        // SAFETY: a valid request and a buffer of the length given.
        let n = unsafe { libc::syscall(SYS_LISTMOUNT, &req as *const MntIdReq, buf.as_mut_ptr(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        ids.extend_from_slice(&buf[..n as usize]);
        match buf[..n as usize].last() {
            Some(id) if n as usize == buf.len() => last = *id,
            _ => return Ok(ids),
        }
    }
}

fn stat(ns_id: u64, id: u64) -> io::Result<NsMount> {
    let mask = STATMOUNT_MNT_BASIC | STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT | STATMOUNT_FS_TYPE;
    let req = MntIdReq { size: std::mem::size_of::<MntIdReq>() as u32, spare: 0, mnt_id: id, param: mask, mnt_ns_id: ns_id };
    let mut buf = vec![0u8; 1 << 16];
    // SAFETY: a valid request and a buffer of the length given.
    let rc = unsafe { libc::syscall(SYS_STATMOUNT, &req as *const MntIdReq, buf.as_mut_ptr(), buf.len(), 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let u32_at = |at: usize| u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
    let u64_at = |at: usize| u64::from_ne_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    let string = |offset: usize| {
        let bytes = &buf[STATMOUNT_HEAD + offset..];
        String::from_utf8_lossy(&bytes[..bytes.iter().position(|b| *b == 0).unwrap_or(0)]).into_owned()
    };
    // struct statmount: fs_type at 36, mnt_id at 40, mnt_parent_id at 48, mnt_id_old at 56,
    // mnt_root at 104, mnt_point at 108 (the string offsets).
    Ok(NsMount {
        id: u64_at(40),
        parent: u64_at(48),
        old_id: u32_at(56) as u32,
        fstype: string(u32_at(36)),
        root: string(u32_at(104)),
        point: string(u32_at(108)),
    })
}

/// A --no-pivot container's mount namespace as the host sees it.
#[derive(Debug)]
pub struct MovedRoot {
    /// The rootfs's mount sits on one of the namespace's (the host's root): it was moved onto
    /// `/`, not pivoted into (then the namespace's root, never listed, is its parent).
    pub moved: bool,
    /// Every full procfs and sysfs (its filesystem's root mounted) outside the rootfs's mount
    /// and what is mounted below it, as `point fstype`.
    pub outside_pseudo_fs: Vec<String>,
    /// Those of them no tmpfs is mounted over (a user namespace's copies of the host's mounts
    /// are locked: they cannot be detached, only covered, as runc covers them).
    pub uncovered_pseudo_fs: Vec<String>,
    /// Every mount, as `point fstype root`, for messages.
    pub table: Vec<String>,
}

/// The namespace of `pid`, a container's init whose root is its rootfs's mount (the `/` of its
/// own mountinfo).
pub fn moved_root(pid: i32) -> io::Result<MovedRoot> {
    let info = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
    let root_id: u32 = info
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/"))
        .and_then(|l| l.split(' ').next()?.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no / in /proc/{pid}/mountinfo")))?;
    let mounts = mounts_of(pid)?;
    let table = mounts.iter().map(|m| format!("{} {} {}", m.point, m.fstype, m.root)).collect();
    let rootfs = mounts.iter().find(|m| m.old_id == root_id).ok_or_else(|| io::Error::other(format!("mount {root_id} is not listed")))?;
    let mut inside = std::collections::BTreeSet::from([rootfs.id]);
    while let Some(child) = mounts.iter().find(|m| !inside.contains(&m.id) && inside.contains(&m.parent)) {
        inside.insert(child.id);
    }
    let outside: Vec<&NsMount> =
        mounts.iter().filter(|m| !inside.contains(&m.id) && (m.fstype == "proc" || m.fstype == "sysfs") && m.root == "/").collect();
    let covered = |m: &NsMount| mounts.iter().any(|c| c.parent == m.id && c.point == m.point && c.fstype == "tmpfs");
    let named = |m: &&NsMount| format!("{} {}", m.point, m.fstype);
    let outside_pseudo_fs = outside.iter().map(named).collect();
    let uncovered_pseudo_fs = outside.iter().filter(|m| !covered(m)).map(named).collect();
    Ok(MovedRoot { moved: mounts.iter().any(|m| m.id == rootfs.parent), outside_pseudo_fs, uncovered_pseudo_fs, table })
}

/// A private mount namespace of the host's mounts, held by a sleeping process on the host and
/// killed (by its pid) on drop: for a container to join by path. A container pivots the
/// namespace it joins, so each wants a fresh one. With `user`, a user namespace holds it too
/// (it owns the mount namespace), its root at `bundle::USERNS_HOST_ID` as
/// `Bundle::add_user_namespace`'s is.
pub struct Held {
    child: std::process::Child,
    user: bool,
}

impl Held {
    pub fn unshare() -> Self {
        Self::hold(std::process::Command::new("sleep"), false)
    }

    /// A new user namespace with a private mount namespace of its own, both held.
    pub fn unshare_with_user() -> Self {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new("sleep");
        // SAFETY: one unshare(2) call, async-signal-safe. It runs before `private`'s, so the
        // user namespace owns the mount namespace made there.
        unsafe { cmd.pre_exec(|| Ok(nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)?)) };
        let held = Self::hold(cmd, true);
        let map = format!("0 {} 65536", crate::bundle::USERNS_HOST_ID);
        for file in ["uid_map", "gid_map"] {
            let path = format!("/proc/{}/{file}", held.child.id());
            std::fs::write(&path, &map).unwrap_or_else(|e| panic!("write {path}: {e}"));
        }
        held
    }

    /// `sleep 1000` started by `cmd` in a private mount namespace, once it is there.
    fn hold(mut cmd: std::process::Command, user: bool) -> Self {
        cmd.arg("1000").stdin(std::process::Stdio::null());
        let held = Held { child: private(&mut cmd).spawn().expect("run sleep in a private mount namespace"), user };
        let ours = std::fs::read_link("/proc/self/ns/mnt").expect("readlink /proc/self/ns/mnt");
        let ns = format!("/proc/{}/ns/mnt", held.child.id());
        let unshared = crate::wait::eventually(|| std::fs::read_link(&ns).is_ok_and(|n| n != ours));
        assert!(unshared, "no new mount namespace within {:?}", crate::wait::DEADLINE);
        held
    }

    /// `/proc/<pid>/ns/mnt` of the holder, for a spec's `linux.namespaces`.
    pub fn path(&self) -> String {
        format!("/proc/{}/ns/mnt", self.child.id())
    }

    /// Makes `spec` join the held namespaces: the mount namespace, and the user namespace
    /// with its mappings where one is held.
    pub fn join(&self, spec: &mut serde_json::Value) {
        crate::spec::join_namespace(spec, "mount", &self.path());
        if self.user {
            crate::spec::join_namespace(spec, "user", &format!("/proc/{}/ns/user", self.child.id()));
            let mapping = serde_json::json!([{"containerID": 0, "hostID": crate::bundle::USERNS_HOST_ID, "size": 65_536}]);
            spec["linux"]["uidMappings"] = mapping.clone();
            spec["linux"]["gidMappings"] = mapping;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Makes `cmd` start in a private mount namespace of the host's mounts (what `cmd` starts
/// inherits it): what it mounts stays there, and goes when its last process does.
pub fn private(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use nix::mount::{mount, MsFlags};
    use std::os::unix::process::CommandExt;
    let none = None::<&str>;
    // SAFETY: unshare and one mount of a fixed path, which nix passes through a stack buffer:
    // no allocation after the fork.
    unsafe {
        cmd.pre_exec(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
            mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)?;
            Ok(())
        })
    }
}

/// Makes `cmd` start in a private mount namespace whose /run is a tmpfs of its own holding
/// /run/systemd/system, what runtimes read to tell that systemd runs (what `cmd` starts
/// inherits it): for a v1 host's checks of systemd's driver, where systemd is not PID 1.
/// Nothing of it reaches the host.
pub fn as_if_systemd_ran(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use nix::mount::{mount, MsFlags};
    use nix::sys::stat::Mode;
    use std::os::unix::process::CommandExt;
    let none = None::<&str>;
    // SAFETY: the closure makes only mount and mkdir calls on fixed paths, which nix passes
    // through a stack buffer: no allocation after the fork. It runs after `private`'s.
    unsafe {
        private(cmd).pre_exec(move || {
            mount(Some("tmpfs"), "/run", Some("tmpfs"), MsFlags::empty(), none)?;
            nix::unistd::mkdir("/run/systemd", Mode::from_bits_truncate(0o755))?;
            nix::unistd::mkdir("/run/systemd/system", Mode::from_bits_truncate(0o755))?;
            Ok(())
        })
    }
}
