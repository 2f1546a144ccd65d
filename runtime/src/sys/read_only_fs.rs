//! Whether a file is on a filesystem that is read-only as a whole (its
//! superblock), not merely through a read-only mount. Only the first refuses
//! an open for writing before the open takes write access on the inode
//! (`sb_permission`); a read-only mount refuses it after, so for a moment the
//! inode counts a writer and an execve of it fails with ETXTBSY.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// True if `path` (followed) is on a read-only superblock: statx for its
/// mount's id, then statmount(2) for the superblock's flags (Linux 6.8), or
/// on an older kernel one read of /proc/self/mountinfo. The CLI checks its
/// own binary at every start; on a host whose /usr is a read-only
/// filesystem, mountinfo was then read twice per command.
pub fn on_read_only_superblock(path: &Path) -> bool {
    // A seccomp filter may answer ENOSYS for a call it does not know yet.
    match mount_id(path, libc::STATX_MNT_ID_UNIQUE).and_then(superblock_flags) {
        Ok(flags) => flags & SB_RDONLY != 0,
        Err(_) => on_read_only_superblock_by_mountinfo(path),
    }
}

fn on_read_only_superblock_by_mountinfo(path: &Path) -> bool {
    let Ok(id) = mount_id(path, libc::STATX_MNT_ID) else { return false };
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|info| super_read_only(&info, id) == Some(true))
}

/// statx(2) of `path` asking for `which` mount id: STATX_MNT_ID (the one
/// mountinfo lists) or STATX_MNT_ID_UNIQUE (statmount's, Linux 6.8).
fn mount_id(path: &Path, which: libc::c_uint) -> io::Result<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: statx is plain data; all-zero is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statx buffer we own; the result is checked.
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c_path.as_ptr(), 0, which, &mut stx) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if stx.stx_mask & which == 0 {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    Ok(stx.stx_mnt_id)
}

/// statmount(2)'s number, the same on every architecture.
const SYS_STATMOUNT: libc::c_long = 457;
const STATMOUNT_SB_BASIC: u64 = 0x1;
const SB_RDONLY: u32 = 0x1;

/// `struct mnt_id_req`, its first version (24 bytes).
#[repr(C)]
struct MntIdReq {
    size: u32,
    spare: u32,
    mnt_id: u64,
    param: u64,
}

/// The head of `struct statmount` up to `sb_flags`, in its 512-byte frame.
#[repr(C)]
struct StatMount {
    size: u32,
    spare1: u32,
    mask: u64,
    sb_dev_major: u32,
    sb_dev_minor: u32,
    sb_magic: u64,
    sb_flags: u32,
    rest: [u8; 476],
}

/// statmount(2) of the mount with unique id `mnt_id`: its superblock's
/// SB_* flags.
fn superblock_flags(mnt_id: u64) -> io::Result<u32> {
    let req = MntIdReq { size: std::mem::size_of::<MntIdReq>() as u32, spare: 0, mnt_id, param: STATMOUNT_SB_BASIC };
    // SAFETY: all-zero is a valid value of this plain-data struct.
    let mut sm: StatMount = unsafe { std::mem::zeroed() };
    // SAFETY: a request and a buffer we own, the buffer's size given; the result is checked.
    let rc =
        unsafe { libc::syscall(SYS_STATMOUNT, &req as *const MntIdReq, &mut sm as *mut StatMount, std::mem::size_of::<StatMount>(), 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if sm.mask & STATMOUNT_SB_BASIC == 0 {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    Ok(sm.sb_flags)
}

/// Whether mount `id`'s superblock options in `mountinfo` say `ro`; None if
/// the mount is not listed.
fn super_read_only(mountinfo: &str, id: u64) -> Option<bool> {
    let line = mountinfo.lines().find(|l| l.split(' ').next().and_then(|f| f.parse::<u64>().ok()) == Some(id))?;
    // "<id> <parent> … - <fstype> <source> <super options>"
    let (_, after) = line.split_once(" - ")?;
    let super_options = after.split(' ').nth(2)?;
    Some(super_options.split(',').any(|o| o == "ro"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
40 22 0:35 / /var/tmp/target ro,relatime shared:20 - 9p target ro,dirsync,loose,access=client,trans=virtio
41 22 254:0 /usr/bin /opt/bin ro,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
";

    #[test]
    fn the_superblock_options_decide() {
        assert_eq!(super_read_only(MOUNTINFO, 40), Some(true));
        // A read-only bind mount of a writable filesystem.
        assert_eq!(super_read_only(MOUNTINFO, 41), Some(false));
        // "errors=remount-ro" is not "ro".
        assert_eq!(super_read_only(MOUNTINFO, 22), Some(false));
        assert_eq!(super_read_only(MOUNTINFO, 99), None);
    }

    #[test]
    fn the_frames_are_the_kernels_sizes() {
        assert_eq!(std::mem::size_of::<MntIdReq>(), 24, "MNT_ID_REQ_SIZE_VER0");
        assert_eq!(std::mem::size_of::<StatMount>(), 512);
        assert_eq!(std::mem::offset_of!(StatMount, sb_flags), 32);
    }

    /// statmount's answer is mountinfo's, for every mount this process sees
    /// that a path still reaches (the guest's read-only 9p share among them).
    #[test]
    fn on_the_kernel_statmount_agrees_with_mountinfo() {
        if mount_id(Path::new("/"), libc::STATX_MNT_ID_UNIQUE).is_err() {
            eprintln!("SKIP: this kernel has no unique mount ids (statmount needs Linux 6.8)");
            return;
        }
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mut compared = 0;
        for line in info.lines() {
            let mut fields = line.split(' ');
            let (Some(id), Some(point)) = (fields.next(), fields.nth(3)) else { continue };
            let point = Path::new(point);
            // Not one a later mount covers, nor one whose path holds an escaped character.
            if mount_id(point, libc::STATX_MNT_ID).ok() != id.parse().ok() {
                continue;
            }
            let Ok(unique) = mount_id(point, libc::STATX_MNT_ID_UNIQUE) else { continue };
            let by_statmount = superblock_flags(unique).unwrap() & SB_RDONLY != 0;
            assert_eq!(Some(by_statmount), super_read_only(&info, id.parse().unwrap()), "{line}");
            compared += 1;
        }
        assert!(compared > 0, "no mount compared");
    }

    /// A tmpfs made read-only is one; a read-only bind of it made writable
    /// again is not (only its mount is read-only). In a thread with a mount
    /// namespace of its own, which statmount looks in.
    #[test]
    fn on_the_kernel_statmount_tells_a_read_only_superblock_from_a_read_only_mount() {
        use nix::mount::{mount, MsFlags};
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("SKIP: mounting needs root");
            return;
        }
        if mount_id(Path::new("/"), libc::STATX_MNT_ID_UNIQUE).is_err() {
            eprintln!("SKIP: this kernel has no unique mount ids (statmount needs Linux 6.8)");
            return;
        }
        let dir = std::env::temp_dir().join(format!("rustpod-ro-sb-{}", std::process::id()));
        let (sb, bind) = (dir.join("sb"), dir.join("bind"));
        std::fs::create_dir_all(&sb).unwrap();
        std::fs::create_dir_all(&bind).unwrap();
        let checked = std::thread::spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
            mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>).unwrap();
            let read_only = |path: &Path| superblock_flags(mount_id(path, libc::STATX_MNT_ID_UNIQUE).unwrap()).unwrap() & SB_RDONLY != 0;
            mount(Some("tmpfs"), &sb, Some("tmpfs"), MsFlags::MS_RDONLY, None::<&str>).unwrap();
            mount(Some(&sb), &bind, None::<&str>, MsFlags::MS_BIND, None::<&str>).unwrap();
            let answers = (read_only(&sb), read_only(&bind));
            mount(None::<&str>, &sb, None::<&str>, MsFlags::MS_REMOUNT, None::<&str>).unwrap();
            mount(None::<&str>, &bind, None::<&str>, MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY, None::<&str>).unwrap();
            let after = (read_only(&sb), read_only(&bind));
            (answers, after)
        })
        .join();
        // The mounts went with the thread's namespace.
        std::fs::remove_dir_all(&dir).unwrap();
        let (answers, after) = checked.unwrap();
        assert_eq!(answers, (true, true), "a read-only tmpfs, through both mounts");
        assert_eq!(after, (false, false), "a writable tmpfs, one mount of it read-only");
    }
}
