//! Whether a file is on a filesystem that is read-only as a whole (its
//! superblock), not merely through a read-only mount. Only the first refuses
//! an open for writing before the open takes write access on the inode
//! (`sb_permission`); a read-only mount refuses it after, so for a moment the
//! inode counts a writer and an execve of it fails with ETXTBSY.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// True if `path` (followed) is on a read-only superblock. One statx and
/// one read of /proc/self/mountinfo.
pub fn on_read_only_superblock(path: &Path) -> bool {
    let Ok(id) = mount_id(path) else { return false };
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|info| super_read_only(&info, id) == Some(true))
}

/// statx(STATX_MNT_ID): the id of the mount `path` is on.
fn mount_id(path: &Path) -> io::Result<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: statx is plain data; all-zero is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statx buffer we own; the result is checked.
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c_path.as_ptr(), 0, libc::STATX_MNT_ID, &mut stx) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if stx.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    Ok(stx.stx_mnt_id)
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
}
