//! runc's `tmpcopyup` mount option: a fresh tmpfs starts with a copy of
//! what the image has at its destination. The engine would hand the option
//! to mount(2) as data and fail, so it is taken out of its spec and our
//! createContainer step (`rootfs_hook`) copies, before pivot_root, from a
//! clone of the rootfs mount alone (the tmpfs on top is not in it) into the
//! tmpfs: directories, files, symlinks and nodes, with modes and owners.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::{openat, readlinkat, OFlag};
use nix::sys::stat::{fchmodat, fstatat, mkdirat, mknodat, FchmodatFlags, Mode, SFlag};
use nix::unistd::{fchownat, symlinkat, Gid, Uid};

use crate::sys::in_root;

pub fn is_copyup(option: &str) -> bool {
    option == "tmpcopyup"
}

/// Copies the image's `dest` (in the rootfs mount, under the tmpfs) into
/// the tmpfs mounted at `dest`.
pub fn apply(root: &OwnedFd, dest: &Path) -> Result<(), String> {
    let at = |what: &str, e: &dyn std::fmt::Display| format!("{what} {}: {e}", dest.display());
    let image = clone_mount(root).map_err(|e| at("open_tree(OPEN_TREE_CLONE) of the rootfs for", &e))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY;
    let from = match in_root::open(Some(&image), dest, flags) {
        Ok(fd) => fd,
        // Nothing in the image there: an empty tmpfs, as runc.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(at("open the image's", &e)),
    };
    let to = in_root::open(Some(root), dest, flags).map_err(|e| at("open the tmpfs at", &e))?;
    copy_dir(&from, &to).map_err(|e| at("copy the image's files into", &e))
}

/// A detached copy of the mount `root` is on, without the mounts below it.
fn clone_mount(root: &OwnedFd) -> nix::Result<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    // SAFETY: a valid fd and an empty C string; the result is a new fd we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            root.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(nix::errno::Errno::last());
    }
    // SAFETY: open_tree returned a new fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Copies every entry of directory `from` into directory `to`, recursively,
/// never following a symlink.
fn copy_dir(from: &OwnedFd, to: &OwnedFd) -> std::result::Result<(), String> {
    let mut dir = nix::dir::Dir::openat(Some(from.as_raw_fd()), ".", OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty())
        .map_err(|e| format!("opendir: {e}"))?;
    let names: Vec<Vec<u8>> = dir
        .iter()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_bytes().to_vec())
        .filter(|name| name != b"." && name != b"..")
        .collect();
    for name in names {
        let name = Path::new(OsStr::from_bytes(&name));
        copy_entry(from, to, name).map_err(|e| format!("{}: {e}", name.display()))?;
    }
    Ok(())
}

fn copy_entry(from: &OwnedFd, to: &OwnedFd, name: &Path) -> std::result::Result<(), String> {
    let stat = fstatat(Some(from.as_raw_fd()), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|e| format!("fstatat: {e}"))?;
    let kind = SFlag::from_bits_truncate(stat.st_mode & libc::S_IFMT);
    let mode = Mode::from_bits_truncate(stat.st_mode & 0o7777);
    let (dir_from, dir_to) = (from.as_raw_fd(), to.as_raw_fd());
    match kind {
        SFlag::S_IFDIR => {
            mkdirat(Some(dir_to), name, mode).map_err(|e| format!("mkdirat: {e}"))?;
            let open = |fd| openat(Some(fd), name, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty());
            let sub_from = open(dir_from).map_err(|e| format!("open: {e}"))?;
            let sub_to = open(dir_to).map_err(|e| format!("open copy: {e}"))?;
            // SAFETY: openat returned new fds we own.
            let (sub_from, sub_to) = unsafe { (OwnedFd::from_raw_fd(sub_from), OwnedFd::from_raw_fd(sub_to)) };
            copy_dir(&sub_from, &sub_to)?;
        }
        SFlag::S_IFREG => {
            let src = openat(Some(dir_from), name, OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty()).map_err(|e| format!("open: {e}"))?;
            let dst = openat(Some(dir_to), name, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC, mode).map_err(|e| format!("create: {e}"))?;
            // SAFETY: openat returned new fds we own.
            let (mut src, mut dst) = unsafe { (File::from_raw_fd(src), File::from_raw_fd(dst)) };
            std::io::copy(&mut src, &mut dst).map_err(|e| format!("copy: {e}"))?;
        }
        SFlag::S_IFLNK => {
            let target = readlinkat(Some(dir_from), name).map_err(|e| format!("readlinkat: {e}"))?;
            symlinkat(target.as_os_str(), Some(dir_to), name).map_err(|e| format!("symlinkat: {e}"))?;
        }
        SFlag::S_IFCHR | SFlag::S_IFBLK | SFlag::S_IFIFO => {
            mknodat(Some(dir_to), name, kind, mode, stat.st_rdev).map_err(|e| format!("mknodat: {e}"))?;
        }
        // A socket is bound by a process, not copied.
        _ => return Ok(()),
    }
    let owner = (Some(Uid::from_raw(stat.st_uid)), Some(Gid::from_raw(stat.st_gid)));
    fchownat(Some(dir_to), name, owner.0, owner.1, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|e| format!("fchownat: {e}"))?;
    if kind != SFlag::S_IFLNK {
        // After chown, which clears setuid/setgid bits.
        fchmodat(Some(dir_to), name, mode, FchmodatFlags::FollowSymlink).map_err(|e| format!("fchmodat: {e}"))?;
    }
    Ok(())
}

