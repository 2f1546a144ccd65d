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
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, readlinkat, OFlag};
use nix::sys::stat::{fchmodat, fstatat, mkdirat, mknodat, FchmodatFlags, Mode, SFlag};
use nix::unistd::{fchownat, symlinkat, Gid, Uid};

use crate::sys::in_root;
use crate::sys::io_errno::errno_of;

pub fn is_copyup(option: &str) -> bool {
    option == "tmpcopyup"
}

/// Why the copy failed: a step on the destination, or the syscall, the
/// entry (its path under the destination) and the errno.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CopyupError {
    #[error("{what} {}: {errno}", dest.display())]
    Dest { what: &'static str, dest: PathBuf, errno: Errno },
    #[error("copy the image's files into {}: {err}", dest.display())]
    Copy { dest: PathBuf, err: EntryError },
}

/// One entry that could not be copied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{call} {}: {errno}", entry.display())]
pub struct EntryError {
    call: &'static str,
    entry: PathBuf,
    errno: Errno,
}

/// Copies the image's `dest` (in the rootfs mount, under the tmpfs) into
/// the tmpfs mounted at `dest`.
pub fn apply(root: &OwnedFd, dest: &Path) -> Result<(), CopyupError> {
    let at = |what: &'static str| move |errno: Errno| CopyupError::Dest { what, dest: dest.to_path_buf(), errno };
    let image = clone_mount(root).map_err(at("open_tree(OPEN_TREE_CLONE) of the rootfs for"))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY;
    let from = match in_root::open(Some(&image), dest, flags) {
        Ok(fd) => fd,
        // Nothing in the image there: an empty tmpfs, as runc.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(at("openat2 (RESOLVE_IN_ROOT) the image's")(errno_of(&e))),
    };
    let to = in_root::open(Some(root), dest, flags).map_err(|e| at("openat2 (RESOLVE_IN_ROOT) the tmpfs at")(errno_of(&e)))?;
    copy_dir(&from, &to, Path::new("")).map_err(|err| CopyupError::Copy { dest: dest.to_path_buf(), err })
}


/// A detached copy of the mount `root` is on, without the mounts below it.
fn clone_mount(root: &OwnedFd) -> Result<OwnedFd, Errno> {
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
        return Err(Errno::last());
    }
    // SAFETY: open_tree returned a new fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Copies every entry of directory `from` into directory `to` (which is
/// `rel` under the destination), recursively, never following a symlink.
fn copy_dir(from: &OwnedFd, to: &OwnedFd, rel: &Path) -> Result<(), EntryError> {
    let failed = |call: &'static str, entry: &Path| {
        let entry = if entry.as_os_str().is_empty() { PathBuf::from(".") } else { entry.to_path_buf() };
        move |errno: Errno| EntryError { call, entry, errno }
    };
    let mut dir = nix::dir::Dir::openat(Some(from.as_raw_fd()), ".", OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty())
        .map_err(failed("opendir", rel))?;
    let names: Vec<Vec<u8>> = dir
        .iter()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_bytes().to_vec())
        .filter(|name| name != b"." && name != b"..")
        .collect();
    for name in names {
        let name = Path::new(OsStr::from_bytes(&name));
        let entry = rel.join(name);
        let step = copy_entry(from, to, name, &entry);
        match step {
            Ok(()) => {}
            Err(Step::Call(call, errno)) => return Err(failed(call, &entry)(errno)),
            Err(Step::Below(err)) => return Err(err),
        }
    }
    Ok(())
}

/// How copying one entry failed: its own syscall, or one below it.
enum Step {
    Call(&'static str, Errno),
    Below(EntryError),
}

fn copy_entry(from: &OwnedFd, to: &OwnedFd, name: &Path, entry: &Path) -> Result<(), Step> {
    let call = |call: &'static str| move |errno: Errno| Step::Call(call, errno);
    let stat = fstatat(Some(from.as_raw_fd()), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).map_err(call("fstatat"))?;
    let kind = SFlag::from_bits_truncate(stat.st_mode & libc::S_IFMT);
    let mode = Mode::from_bits_truncate(stat.st_mode & 0o7777);
    let (dir_from, dir_to) = (from.as_raw_fd(), to.as_raw_fd());
    match kind {
        SFlag::S_IFDIR => {
            mkdirat(Some(dir_to), name, mode).map_err(call("mkdirat"))?;
            let open = |fd| openat(Some(fd), name, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty());
            let sub_from = open(dir_from).map_err(call("openat"))?;
            let sub_to = open(dir_to).map_err(call("openat (the copy)"))?;
            // SAFETY: openat returned new fds we own.
            let (sub_from, sub_to) = unsafe { (OwnedFd::from_raw_fd(sub_from), OwnedFd::from_raw_fd(sub_to)) };
            copy_dir(&sub_from, &sub_to, entry).map_err(Step::Below)?;
        }
        SFlag::S_IFREG => {
            let src = openat(Some(dir_from), name, OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty()).map_err(call("openat"))?;
            let dst = openat(Some(dir_to), name, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC, mode)
                .map_err(call("openat(O_CREAT)"))?;
            // SAFETY: openat returned new fds we own.
            let (mut src, mut dst) = unsafe { (File::from_raw_fd(src), File::from_raw_fd(dst)) };
            std::io::copy(&mut src, &mut dst).map_err(|e| Step::Call("copy (read/write)", errno_of(&e)))?;
        }
        SFlag::S_IFLNK => {
            let target = readlinkat(Some(dir_from), name).map_err(call("readlinkat"))?;
            symlinkat(target.as_os_str(), Some(dir_to), name).map_err(call("symlinkat"))?;
        }
        SFlag::S_IFCHR | SFlag::S_IFBLK | SFlag::S_IFIFO => {
            mknodat(Some(dir_to), name, kind, mode, stat.st_rdev).map_err(call("mknodat"))?;
        }
        // A socket is bound by a process, not copied.
        _ => return Ok(()),
    }
    let owner = (Some(Uid::from_raw(stat.st_uid)), Some(Gid::from_raw(stat.st_gid)));
    fchownat(Some(dir_to), name, owner.0, owner.1, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).map_err(call("fchownat"))?;
    if kind != SFlag::S_IFLNK {
        // After chown, which clears setuid/setgid bits.
        fchmodat(Some(dir_to), name, mode, FchmodatFlags::FollowSymlink).map_err(call("fchmodat"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(path: &Path) -> OwnedFd {
        File::open(path).unwrap().into()
    }

    #[test]
    fn copies_a_tree_and_a_failure_names_the_entry_the_call_and_the_errno() {
        let base = std::env::temp_dir().join(format!("rustpod-copyup-{}", std::process::id()));
        let (from, to) = (base.join("from"), base.join("to"));
        std::fs::create_dir_all(from.join("sub")).unwrap();
        std::fs::write(from.join("sub/f"), "x").unwrap();
        std::os::unix::fs::symlink("sub/f", from.join("link")).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        copy_dir(&dir(&from), &dir(&to), Path::new("")).unwrap();
        assert_eq!(std::fs::read_to_string(to.join("sub/f")).unwrap(), "x");
        assert_eq!(std::fs::read_link(to.join("link")).unwrap(), Path::new("sub/f"));
        // Again onto the copy: the first entry made again exists.
        let err = copy_dir(&dir(&from), &dir(&to), Path::new("")).unwrap_err();
        assert_eq!(err.errno, Errno::EEXIST, "{err}");
        assert!(err.to_string().ends_with(": EEXIST: File exists"), "{err}");
        assert!(["mkdirat sub:", "symlinkat link:"].iter().any(|s| err.to_string().starts_with(s)), "{err}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
