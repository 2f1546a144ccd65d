//! A directory's entries copied into another, recursively, never following
//! a symlink: directories, files, symlinks and nodes, with their modes and
//! owners (sockets are bound by a process, not copied). runc's `tmpcopyup`
//! fills a new tmpfs with what the image has at its destination this way.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, readlinkat, OFlag};
use nix::sys::stat::{fchmodat, fstatat, mkdirat, mknodat, FchmodatFlags, Mode, SFlag};
use nix::unistd::{fchownat, symlinkat, Gid, Uid};

use crate::sys::io_errno::errno_of;

/// One entry that could not be copied.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{call} {}: {errno}", entry.display())]
pub struct EntryError {
    pub call: &'static str,
    pub entry: PathBuf,
    pub errno: Errno,
}

/// Copies every entry of directory `from` into directory `to`.
pub fn copy_dir(from: &OwnedFd, to: &OwnedFd) -> Result<(), EntryError> {
    copy_dir_at(from, to, Path::new(""))
}

/// [`copy_dir`] for `to`, which is `rel` under the destination.
fn copy_dir_at(from: &OwnedFd, to: &OwnedFd, rel: &Path) -> Result<(), EntryError> {
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
            let open =
                |fd| openat(Some(fd), name, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty());
            let sub_from = open(dir_from).map_err(call("openat"))?;
            let sub_to = open(dir_to).map_err(call("openat (the copy)"))?;
            // SAFETY: openat returned new fds we own.
            let (sub_from, sub_to) = unsafe { (OwnedFd::from_raw_fd(sub_from), OwnedFd::from_raw_fd(sub_to)) };
            copy_dir_at(&sub_from, &sub_to, entry).map_err(Step::Below)?;
        }
        SFlag::S_IFREG => {
            let src = openat(Some(dir_from), name, OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
                .map_err(call("openat"))?;
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
        let base = std::env::temp_dir().join(format!("rustpod-copy-tree-{}", std::process::id()));
        let (from, to) = (base.join("from"), base.join("to"));
        std::fs::create_dir_all(from.join("sub")).unwrap();
        std::fs::write(from.join("sub/f"), "x").unwrap();
        std::os::unix::fs::symlink("sub/f", from.join("link")).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        copy_dir(&dir(&from), &dir(&to)).unwrap();
        assert_eq!(std::fs::read_to_string(to.join("sub/f")).unwrap(), "x");
        assert_eq!(std::fs::read_link(to.join("link")).unwrap(), Path::new("sub/f"));
        // Again onto the copy: the first entry made again exists.
        let err = copy_dir(&dir(&from), &dir(&to)).unwrap_err();
        assert_eq!(err.errno, Errno::EEXIST, "{err}");
        assert!(err.to_string().ends_with(": EEXIST: File exists"), "{err}");
        assert!(["mkdirat sub:", "symlinkat link:"].iter().any(|s| err.to_string().starts_with(s)), "{err}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
