//! Where a mount lands: its destination opened inside the rootfs, with what
//! is missing made on the way. Each lookup is openat2(RESOLVE_IN_ROOT) from
//! the rootfs's descriptor, and each directory or file is made by name in a
//! parent opened that way, so no symlink or `..` in the image, nor one swapped
//! in while we work, leads a mount out to the host. One openat2 when the
//! destination exists, three and a mkdirat when only its last part is
//! missing; pathrs' checked procfs reopen (~45 syscalls per mount in the
//! engine) is not needed.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::sys::stat::{mkdirat, mknodat, Mode, SFlag};

use crate::sys::in_root;
use crate::sys::io_errno::errno_of;

/// What the mount needs at its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// A directory: every new filesystem, and a bind of a directory.
    Dir,
    /// A file: a bind of anything but a directory.
    File,
    /// A directory that is not itself a symlink, even one leading inside
    /// the rootfs: where proc and sysfs go, as runc wants them.
    PlainDir,
}

/// The step that failed: the call, the path inside the rootfs it was on,
/// and the errno.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} {}: {errno}", path.display())]
pub struct TargetError {
    pub call: &'static str,
    pub path: PathBuf,
    pub errno: Errno,
}

const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;

/// Opens `dest` (a container path) inside `root` as an `O_PATH` descriptor
/// for move_mount(2), making missing directories, and for [`Want::File`] an
/// empty file as its last part.
pub fn open(root: &OwnedFd, dest: &Path, want: Want) -> Result<OwnedFd, TargetError> {
    open_resolving(root, dest, want, 0)
}

/// [`open`] of a directory where no part may be a symlink, even one that
/// stays inside the rootfs: where device nodes and /dev's links are made.
pub fn open_dir_no_symlinks(root: &OwnedFd, dest: &Path) -> Result<OwnedFd, TargetError> {
    open_resolving(root, dest, Want::Dir, libc::RESOLVE_NO_SYMLINKS)
}

fn open_resolving(root: &OwnedFd, dest: &Path, want: Want, resolve: u64) -> Result<OwnedFd, TargetError> {
    let lookup = |path: &Path, flags: i32| open_in(root, path, flags, resolve);
    let final_flags = match want {
        Want::Dir => libc::O_PATH | libc::O_DIRECTORY,
        Want::PlainDir => libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        Want::File => libc::O_PATH,
    };
    match lookup(dest, final_flags) {
        Err(e) if e.errno == Errno::ENOENT => {}
        done => return done,
    }
    let parts = normal_parts(dest);
    let prefix = |n: usize| -> PathBuf { std::iter::once(std::ffi::OsStr::new("/")).chain(parts[..n].iter().copied()).collect() };
    // The deepest directory that exists, looked for from the destination's
    // parent up: usually only the last part is missing, and one lookup finds
    // its parent.
    let (mut parent, found) = {
        let mut n = parts.len().saturating_sub(1);
        loop {
            match lookup(&prefix(n), libc::O_PATH | libc::O_DIRECTORY) {
                Ok(fd) => break (fd, n),
                Err(e) if e.errno == Errno::ENOENT && n > 0 => n -= 1,
                Err(e) => return Err(e),
            }
        }
    };
    for (i, name) in parts.iter().enumerate().skip(found) {
        let path = prefix(i + 1);
        let last = i + 1 == parts.len();
        let flags = if last { final_flags } else { libc::O_PATH | libc::O_DIRECTORY };
        make(&parent, name, &path, last && want == Want::File)?;
        // Opened again inside the root: what was made may have been swapped
        // for a symlink since.
        parent = lookup(&path, flags)?;
    }
    Ok(parent)
}

/// The destination's names, `.` and `..` left out (`validate` refuses `..`;
/// openat2 would keep one inside the root anyway).
fn normal_parts(dest: &Path) -> Vec<&std::ffi::OsStr> {
    dest.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

fn open_in(root: &OwnedFd, path: &Path, flags: i32, resolve: u64) -> Result<OwnedFd, TargetError> {
    in_root::open_resolving(Some(root), path, flags, resolve).map_err(|e| TargetError {
        call: "openat2",
        path: path.to_path_buf(),
        errno: errno_of(&e),
    })
}

/// mkdirat or mknodat of one name in `parent`; neither follows a symlink
/// that is the name itself. Made by someone else meanwhile is fine.
fn make(parent: &OwnedFd, name: &std::ffi::OsStr, path: &Path, file: bool) -> Result<(), TargetError> {
    let (call, result) = if file {
        ("mknodat", mknodat(Some(parent.as_raw_fd()), name, SFlag::S_IFREG, Mode::from_bits_truncate(FILE_MODE), 0))
    } else {
        ("mkdirat", mkdirat(Some(parent.as_raw_fd()), name, Mode::from_bits_truncate(DIR_MODE)))
    };
    match result {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(errno) => Err(TargetError { call, path: path.to_path_buf(), errno }),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    /// A scratch rootfs, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("rustpod-target-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(dir.join("rootfs")).unwrap();
            fs::create_dir_all(dir.join("host")).unwrap();
            Scratch(dir)
        }

        fn rootfs(&self) -> PathBuf {
            self.0.join("rootfs")
        }

        fn root_fd(&self) -> OwnedFd {
            fs::File::open(self.rootfs()).unwrap().into()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn real_path(fd: &OwnedFd) -> PathBuf {
        fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap()
    }

    #[test]
    fn makes_missing_directories_and_a_file_for_a_file_bind() {
        let s = Scratch::new("make");
        let fd = open(&s.root_fd(), Path::new("/a/b/c"), Want::Dir).unwrap();
        assert_eq!(real_path(&fd), s.rootfs().join("a/b/c"));
        let fd = open(&s.root_fd(), Path::new("/a/f"), Want::File).unwrap();
        assert_eq!(real_path(&fd), s.rootfs().join("a/f"));
        assert!(s.rootfs().join("a/f").metadata().unwrap().is_file());
        // Existing: opened as it is.
        open(&s.root_fd(), Path::new("/a/b/c"), Want::Dir).unwrap();
    }

    #[test]
    fn symlinks_in_the_image_stay_inside_the_rootfs() {
        let s = Scratch::new("links");
        let host = s.0.join("host");
        symlink("..", s.rootfs().join("up")).unwrap();
        symlink("/", s.rootfs().join("slash")).unwrap();
        symlink(&host, s.rootfs().join("abs")).unwrap();
        // The absolute link resolves inside the root, where that path exists too.
        fs::create_dir_all(s.rootfs().join(host.strip_prefix("/").unwrap())).unwrap();
        for (dest, lands) in [("/up/x", "x"), ("/slash/y", "y"), ("/abs/z", host.strip_prefix("/").unwrap().join("z").to_str().unwrap())] {
            let fd = open(&s.root_fd(), Path::new(dest), Want::Dir).unwrap();
            assert_eq!(real_path(&fd), s.rootfs().join(lands), "{dest}");
        }
        assert_eq!(fs::read_dir(&host).unwrap().count(), 0, "nothing was made on the host");
    }

    /// A symlink to a missing path is not made to lead anywhere: it fails,
    /// named, and nothing is made (what runc makes of one is step 4's check).
    #[test]
    fn a_dangling_symlink_as_the_last_part_fails_and_makes_nothing() {
        let s = Scratch::new("dangling");
        let outside = s.0.join("host/made");
        symlink(&outside, s.rootfs().join("d")).unwrap();
        let err = open(&s.root_fd(), Path::new("/d"), Want::File).unwrap_err();
        assert_eq!((err.call, err.errno), ("openat2", Errno::ENOENT), "{err}");
        assert!(!outside.exists());
        assert_eq!(fs::read_dir(s.rootfs()).unwrap().count(), 1, "only the symlink is there");
    }

    /// The same link on the way to the destination: the search for what
    /// exists goes up past it, and making it again does not follow it.
    #[test]
    fn a_dangling_symlink_on_the_way_fails_and_makes_nothing() {
        let s = Scratch::new("dangling-mid");
        let outside = s.0.join("host/made");
        symlink(&outside, s.rootfs().join("d")).unwrap();
        let err = open(&s.root_fd(), Path::new("/d/x/y"), Want::Dir).unwrap_err();
        assert_eq!((err.call, err.errno, err.path.as_path()), ("openat2", Errno::ENOENT, Path::new("/d")), "{err}");
        assert!(!outside.exists());
        assert_eq!(fs::read_dir(s.rootfs()).unwrap().count(), 1, "only the symlink is there");
    }

    #[test]
    fn no_symlink_is_followed_where_nodes_are_made() {
        let s = Scratch::new("strict");
        fs::create_dir_all(s.rootfs().join("real")).unwrap();
        symlink("real", s.rootfs().join("dev")).unwrap();
        let err = open_dir_no_symlinks(&s.root_fd(), Path::new("/dev/net")).unwrap_err();
        assert_eq!((err.call, err.errno), ("openat2", Errno::ELOOP), "{err}");
        assert_eq!(fs::read_dir(s.rootfs().join("real")).unwrap().count(), 0);
        let fd = open_dir_no_symlinks(&s.root_fd(), Path::new("/real/net")).unwrap();
        assert_eq!(real_path(&fd), s.rootfs().join("real/net"));
    }

    #[test]
    fn a_plain_directory_is_no_symlink() {
        let s = Scratch::new("plain");
        fs::create_dir_all(s.rootfs().join("real")).unwrap();
        symlink("real", s.rootfs().join("proc")).unwrap();
        let err = open(&s.root_fd(), Path::new("/proc"), Want::PlainDir).unwrap_err();
        assert_eq!((err.call, err.errno), ("openat2", Errno::ENOTDIR), "{err}");
        open(&s.root_fd(), Path::new("/real"), Want::PlainDir).unwrap();
        open(&s.root_fd(), Path::new("/sys"), Want::PlainDir).unwrap();
    }

    #[test]
    fn a_failure_names_the_call_the_path_and_the_errno() {
        let s = Scratch::new("fail");
        fs::create_dir_all(s.rootfs().join("etc")).unwrap();
        fs::write(s.rootfs().join("etc/passwd"), "").unwrap();
        let err = open(&s.root_fd(), Path::new("/etc/passwd/x"), Want::Dir).unwrap_err();
        assert_eq!(err, TargetError { call: "openat2", path: "/etc/passwd/x".into(), errno: Errno::ENOTDIR });
        assert_eq!(err.to_string(), "openat2 /etc/passwd/x: ENOTDIR: Not a directory");
        // A file where a directory is wanted.
        let err = open(&s.root_fd(), Path::new("/etc/passwd"), Want::Dir).unwrap_err();
        assert_eq!(err.errno, Errno::ENOTDIR);
    }
}
