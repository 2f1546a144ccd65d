//! The syscalls of the rootfs and mount steps behind one trait, as youki's
//! `libcontainer::syscall::Syscall`: the steps take a `&dyn Syscall`, the
//! runtime passes [`LinuxSyscall`], and unit tests pass a [`Recording`]
//! double, so which flags a step sets, in what order, on which path, and
//! what it refuses is tested without root or a mount namespace.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::fcntl::AtFlags;
use nix::mount::{mount, MsFlags};
use nix::sys::stat::{mknodat, Mode, SFlag};
use nix::sys::statvfs::FsFlags;
use nix::unistd::{fchownat, symlinkat, unlinkat, Gid, Uid, UnlinkatFlags};

use crate::sys::copy_tree::{self, EntryError};
use crate::sys::in_root;
use crate::sys::mount_api::{self, MountAttr};
use crate::sys::mount_target::{self, TargetError, Want};
use crate::sys::new_mount::{self, NewFs, NewFsError};

pub trait Syscall {
    /// openat2(2) of `path` inside `root` (RESOLVE_IN_ROOT, see `in_root`).
    fn open_in_root(&self, root: &OwnedFd, path: &Path, flags: i32) -> io::Result<OwnedFd>;

    /// mount(2) with MS_REMOUNT in `flags`, no source or type, and the
    /// filesystem's `data` ("" for none) on the mount `target` is open on,
    /// through `/proc/self/fd`: a spec's `remount`, and `sb_flags`. A
    /// superblock flag is the one change mount_setattr cannot make.
    fn remount(&self, target: &OwnedFd, flags: MsFlags, data: &str) -> nix::Result<()>;

    /// mount_setattr(2) on the mount `target` is open on: its attributes
    /// and propagation (`AT_RECURSIVE` in `flags`: the mounts below too).
    fn mount_setattr(&self, target: &OwnedFd, attr: MountAttr, flags: libc::c_int) -> nix::Result<()>;

    /// fstatvfs(2): the flags of the mount `target` is open on.
    fn mount_flags_of(&self, target: &OwnedFd) -> nix::Result<FsFlags>;

    /// A mount's destination opened inside `root`, made if missing
    /// (`mount_target::open`).
    fn open_target(&self, root: &OwnedFd, dest: &Path, want: Want) -> Result<OwnedFd, TargetError>;

    /// open_tree(OPEN_TREE_CLONE): a detached copy of the mount at `source`.
    fn open_tree(&self, source: &Path, recursive: bool) -> io::Result<OwnedFd>;

    /// fsopen, fsconfig, fsmount: a detached mount of a new filesystem.
    fn new_fs(&self, fs: &NewFs) -> Result<OwnedFd, NewFsError>;

    /// move_mount(2) of the detached mount `from` onto `to`.
    fn move_mount(&self, from: &OwnedFd, to: &OwnedFd) -> nix::Result<()>;

    /// Every entry of directory `from` copied into directory `to`
    /// (`copy_tree`): `tmpcopyup` into a detached tmpfs.
    fn copy_tree(&self, from: &OwnedFd, to: &OwnedFd) -> Result<(), EntryError>;

    /// fstat(2): whether `fd` is a directory.
    fn is_dir(&self, fd: &OwnedFd) -> nix::Result<bool> {
        self.file_kind(fd).map(|(mode, _)| mode & libc::S_IFMT == libc::S_IFDIR)
    }

    /// fstat(2): the file type and permissions, and the device a node is.
    fn file_kind(&self, fd: &OwnedFd) -> nix::Result<(u32, u64)>;

    /// fstatfs(2): the filesystem type (its magic) `fd` is on.
    fn fs_magic(&self, fd: &OwnedFd) -> nix::Result<i64>;

    /// open_tree(OPEN_TREE_CLONE) of the mount `fd` is open on.
    fn clone_tree(&self, fd: &OwnedFd, recursive: bool) -> io::Result<OwnedFd>;

    /// A directory opened inside `root` with no symlink followed, made if
    /// missing (`mount_target::open_dir_no_symlinks`).
    fn open_dir_no_symlinks(&self, root: &OwnedFd, path: &Path) -> Result<OwnedFd, TargetError>;

    /// mknodat(2) of `name` in `dir`: `mode` holds the file type and the permissions.
    fn mknod_at(&self, dir: &OwnedFd, name: &OsStr, mode: u32, dev: u64) -> nix::Result<()>;

    /// fchownat(2) of `name` in `dir`, not following a symlink.
    fn chown_at(&self, dir: &OwnedFd, name: &OsStr, uid: u32, gid: u32) -> nix::Result<()>;

    /// symlinkat(2): `name` in `dir`, pointing at `target`.
    fn symlink_at(&self, target: &Path, dir: &OwnedFd, name: &OsStr) -> nix::Result<()>;

    /// unlinkat(2) of the non-directory `name` in `dir`.
    fn unlink_at(&self, dir: &OwnedFd, name: &OsStr) -> nix::Result<()>;

    /// open(`path`, O_PATH|O_DIRECTORY) in our own view: the rootfs.
    fn open_dir(&self, path: &Path) -> io::Result<OwnedFd>;

    /// openat(`dir`, "..", O_PATH): the directory above.
    fn parent_of(&self, dir: &OwnedFd) -> nix::Result<OwnedFd>;

    /// fchdir(2).
    fn fchdir(&self, dir: &OwnedFd) -> nix::Result<()>;

    /// pivot_root(".", "."): the working directory becomes the root, and the
    /// old root is stacked on top of it.
    fn pivot_root_here(&self) -> nix::Result<()>;

    /// mount(2) of a propagation type (`MS_REC` for all below) on a path of
    /// our own mount namespace, never one the container controls: `.`
    /// right after pivot_root, `/`.
    fn set_propagation(&self, path: &Path, flags: MsFlags) -> nix::Result<()>;

    /// umount2(`path`, MNT_DETACH).
    fn umount_detach(&self, path: &Path) -> nix::Result<()>;

    /// chdir(2).
    fn chdir(&self, path: &Path) -> nix::Result<()>;

    /// chroot("."): the working directory becomes the root (`--no-pivot`).
    fn chroot_here(&self) -> nix::Result<()>;

    /// /proc/self/mountinfo: the mounts of our mount namespace as we see them.
    fn mountinfo(&self) -> io::Result<String>;
}

/// The kernel.
pub struct LinuxSyscall;

impl Syscall for LinuxSyscall {
    fn open_in_root(&self, root: &OwnedFd, path: &Path, flags: i32) -> io::Result<OwnedFd> {
        in_root::open(Some(root), path, flags)
    }

    fn remount(&self, target: &OwnedFd, flags: MsFlags, data: &str) -> nix::Result<()> {
        // Through the descriptor, so the path is never looked up again.
        let path = format!("/proc/self/fd/{}", target.as_raw_fd());
        let data = (!data.is_empty()).then_some(data);
        mount(None::<&str>, path.as_str(), None::<&str>, flags, data)
    }

    fn mount_setattr(&self, target: &OwnedFd, attr: MountAttr, flags: libc::c_int) -> nix::Result<()> {
        mount_api::mount_setattr(target, attr, flags)
    }

    fn mount_flags_of(&self, target: &OwnedFd) -> nix::Result<FsFlags> {
        // Not nix's fstatvfs: its flags() drops the bits nix does not name,
        // ST_NOSYMFOLLOW among them, which a remount must keep.
        let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: a valid descriptor and a buffer of the right type.
        let rc = unsafe { libc::fstatvfs(target.as_raw_fd(), stat.as_mut_ptr()) };
        nix::errno::Errno::result(rc)?;
        // SAFETY: fstatvfs succeeded and filled it.
        Ok(FsFlags::from_bits_retain(unsafe { stat.assume_init() }.f_flag))
    }

    fn open_target(&self, root: &OwnedFd, dest: &Path, want: Want) -> Result<OwnedFd, TargetError> {
        mount_target::open(root, dest, want)
    }

    fn open_tree(&self, source: &Path, recursive: bool) -> io::Result<OwnedFd> {
        mount_api::open_tree_clone(source, recursive)
    }

    fn new_fs(&self, fs: &NewFs) -> Result<OwnedFd, NewFsError> {
        new_mount::new_fs(fs)
    }

    fn move_mount(&self, from: &OwnedFd, to: &OwnedFd) -> nix::Result<()> {
        mount_api::move_mount(from, to)
    }

    fn copy_tree(&self, from: &OwnedFd, to: &OwnedFd) -> Result<(), EntryError> {
        copy_tree::copy_dir(from, to)
    }

    fn file_kind(&self, fd: &OwnedFd) -> nix::Result<(u32, u64)> {
        nix::sys::stat::fstat(fd.as_raw_fd()).map(|st| (st.st_mode, st.st_rdev))
    }

    fn fs_magic(&self, fd: &OwnedFd) -> nix::Result<i64> {
        nix::sys::statfs::fstatfs(fd).map(|fs| fs.filesystem_type().0)
    }

    fn clone_tree(&self, fd: &OwnedFd, recursive: bool) -> io::Result<OwnedFd> {
        mount_api::clone_tree(fd, recursive)
    }

    fn open_dir_no_symlinks(&self, root: &OwnedFd, path: &Path) -> Result<OwnedFd, TargetError> {
        mount_target::open_dir_no_symlinks(root, path)
    }

    fn mknod_at(&self, dir: &OwnedFd, name: &OsStr, mode: u32, dev: u64) -> nix::Result<()> {
        let kind = SFlag::from_bits_truncate(mode & libc::S_IFMT);
        mknodat(Some(dir.as_raw_fd()), name, kind, Mode::from_bits_truncate(mode & !libc::S_IFMT), dev)
    }

    fn chown_at(&self, dir: &OwnedFd, name: &OsStr, uid: u32, gid: u32) -> nix::Result<()> {
        let (uid, gid) = (Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)));
        fchownat(Some(dir.as_raw_fd()), name, uid, gid, AtFlags::AT_SYMLINK_NOFOLLOW)
    }

    fn symlink_at(&self, target: &Path, dir: &OwnedFd, name: &OsStr) -> nix::Result<()> {
        symlinkat(target, Some(dir.as_raw_fd()), name)
    }

    fn unlink_at(&self, dir: &OwnedFd, name: &OsStr) -> nix::Result<()> {
        unlinkat(Some(dir.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir)
    }

    fn open_dir(&self, path: &Path) -> io::Result<OwnedFd> {
        in_root::open(None, path, libc::O_PATH | libc::O_DIRECTORY)
    }

    fn parent_of(&self, dir: &OwnedFd) -> nix::Result<OwnedFd> {
        let flags = nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(Some(dir.as_raw_fd()), "..", flags, Mode::empty())?;
        // SAFETY: openat just returned this descriptor to us.
        Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
    }

    fn fchdir(&self, dir: &OwnedFd) -> nix::Result<()> {
        nix::unistd::fchdir(dir.as_raw_fd())
    }

    fn pivot_root_here(&self) -> nix::Result<()> {
        nix::unistd::pivot_root(".", ".")
    }

    fn set_propagation(&self, path: &Path, flags: MsFlags) -> nix::Result<()> {
        mount(None::<&str>, path, None::<&str>, flags, None::<&str>)
    }

    fn umount_detach(&self, path: &Path) -> nix::Result<()> {
        nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH)
    }

    fn chdir(&self, path: &Path) -> nix::Result<()> {
        nix::unistd::chdir(path)
    }

    fn chroot_here(&self) -> nix::Result<()> {
        nix::unistd::chroot(".")
    }

    fn mountinfo(&self) -> io::Result<String> {
        std::fs::read_to_string("/proc/self/mountinfo")
    }
}

#[cfg(test)]
pub use recording::{Call, Recording};

/// The test double: records each call with the path its descriptor was
/// opened for, and answers from what the test set.
#[cfg(test)]
mod recording {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::os::fd::RawFd;
    use std::path::PathBuf;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Call {
        Open {
            path: PathBuf,
            flags: i32,
        },
        Remount {
            path: PathBuf,
            flags: MsFlags,
            data: String,
        },
        SetAttr {
            path: PathBuf,
            attr: MountAttr,
            flags: libc::c_int,
        },
        Statvfs {
            path: PathBuf,
        },
        Target {
            path: PathBuf,
            want: Want,
        },
        OpenTree {
            source: PathBuf,
            recursive: bool,
        },
        NewFs(NewFs),
        /// `from` as labelled: `tree:<source>` or `fs:<type>`.
        Move {
            from: PathBuf,
            to: PathBuf,
        },
        CopyTree {
            from: PathBuf,
            to: PathBuf,
        },
        Fstat {
            path: PathBuf,
        },
        CloneTree {
            path: PathBuf,
            recursive: bool,
        },
        Statfs {
            path: PathBuf,
        },
        OpenDir {
            path: PathBuf,
        },
        Mknod {
            path: PathBuf,
            mode: u32,
            dev: u64,
        },
        Chown {
            path: PathBuf,
            uid: u32,
            gid: u32,
        },
        Symlink {
            target: PathBuf,
            path: PathBuf,
        },
        Unlink {
            path: PathBuf,
        },
        OpenHostDir {
            path: PathBuf,
        },
        Parent {
            path: PathBuf,
        },
        Fchdir {
            path: PathBuf,
        },
        PivotRootHere,
        Propagation {
            path: PathBuf,
            flags: MsFlags,
        },
        UmountDetach {
            path: PathBuf,
        },
        Chdir {
            path: PathBuf,
        },
        ChrootHere,
        MountInfo,
    }

    #[derive(Default)]
    pub struct Recording {
        calls: RefCell<Vec<Call>>,
        opened: RefCell<HashMap<RawFd, PathBuf>>,
        current: FsFlags,
        open_fails: Option<nix::errno::Errno>,
        setattr_fails: Option<nix::errno::Errno>,
        fails: Option<(&'static str, nix::errno::Errno)>,
        fails_at: Vec<(&'static str, PathBuf, nix::errno::Errno)>,
        mountinfo: String,
        file_sources: Vec<PathBuf>,
        nodes: Vec<(PathBuf, u32, u64)>,
        missing: Vec<PathBuf>,
        mount_roots: Option<Vec<PathBuf>>,
        procfs: Vec<PathBuf>,
        sysfs: Vec<PathBuf>,
    }

    impl Recording {
        /// A double whose mounts have the flags `current` (`mount_flags_of`).
        pub fn with_mount_flags(current: FsFlags) -> Self {
            Recording { current, ..Default::default() }
        }

        /// A double whose every open fails with `errno`.
        pub fn failing_open(errno: nix::errno::Errno) -> Self {
            Recording { open_fails: Some(errno), ..Default::default() }
        }

        /// A double whose every mount_setattr fails with `errno`.
        pub fn failing_setattr(errno: nix::errno::Errno) -> Self {
            Recording { setattr_fails: Some(errno), ..Default::default() }
        }

        /// A double whose calls named `call` (`open_target`, `open_tree`,
        /// `new_fs`, `move_mount`, `open_dir_no_symlinks`, `mknod_at`,
        /// `chown_at`, `symlink_at`, `unlink_at`) fail with `errno`.
        pub fn failing(call: &'static str, errno: nix::errno::Errno) -> Self {
            Recording { fails: Some((call, errno)), ..Default::default() }
        }

        /// The call `call` on `path` alone (`set_propagation`,
        /// `umount_detach`, `remount`) fails with `errno`.
        pub fn failing_at(mut self, call: &'static str, path: &str, errno: nix::errno::Errno) -> Self {
            self.fails_at.push((call, path.into(), errno));
            self
        }

        /// What `mountinfo` answers.
        pub fn with_mountinfo(mut self, text: &str) -> Self {
            self.mountinfo = text.into();
            self
        }

        /// `source`, when open_tree'd, is a file (other sources are directories).
        pub fn with_file_source(mut self, source: &str) -> Self {
            self.file_sources.push(source.into());
            self
        }

        /// `path` (an open or open_tree label) is a node of `mode` and `rdev`.
        pub fn with_node(mut self, path: &str, mode: u32, rdev: u64) -> Self {
            self.nodes.push((path.into(), mode, rdev));
            self
        }

        /// Only these paths are a mount's root: mount_setattr on any other
        /// fails with EINVAL, as the kernel's.
        pub fn with_mount_roots(mut self, roots: &[&str]) -> Self {
            self.mount_roots = Some(roots.iter().map(PathBuf::from).collect());
            self
        }

        /// What is opened at or below `path` is on a procfs (`fs_magic`).
        pub fn with_procfs(mut self, path: &str) -> Self {
            self.procfs.push(path.into());
            self
        }

        /// What is opened at or below `path` is on a sysfs (`fs_magic`).
        pub fn with_sysfs(mut self, path: &str) -> Self {
            self.sysfs.push(path.into());
            self
        }

        /// Opening `path` in the root fails with ENOENT.
        pub fn with_missing(mut self, path: &str) -> Self {
            self.missing.push(path.into());
            self
        }

        fn fail(&self, call: &'static str) -> Option<nix::errno::Errno> {
            self.fails.filter(|(name, _)| *name == call).map(|(_, errno)| errno)
        }

        fn fail_on(&self, call: &'static str, path: &Path) -> Option<nix::errno::Errno> {
            let at = self.fails_at.iter().find(|(name, p, _)| *name == call && p == path).map(|(_, _, errno)| *errno);
            at.or_else(|| self.fail(call))
        }

        /// A real descriptor labelled `label`, so the step can hold and drop it.
        fn labelled(&self, label: PathBuf) -> OwnedFd {
            let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
            self.opened.borrow_mut().insert(fd.as_raw_fd(), label);
            fd
        }

        pub fn calls(&self) -> Vec<Call> {
            self.calls.borrow().clone()
        }

        fn path_of(&self, fd: &OwnedFd) -> PathBuf {
            self.opened.borrow().get(&fd.as_raw_fd()).cloned().unwrap_or_default()
        }
    }

    impl Syscall for Recording {
        fn open_in_root(&self, _root: &OwnedFd, path: &Path, flags: i32) -> io::Result<OwnedFd> {
            self.calls.borrow_mut().push(Call::Open { path: path.to_path_buf(), flags });
            if let Some(errno) = self.open_fails {
                return Err(errno.into());
            }
            if self.missing.iter().any(|m| m == path) {
                return Err(nix::errno::Errno::ENOENT.into());
            }
            // A real descriptor, so the step can hold and drop it.
            let fd: OwnedFd = std::fs::File::open("/dev/null")?.into();
            self.opened.borrow_mut().insert(fd.as_raw_fd(), path.to_path_buf());
            Ok(fd)
        }

        fn remount(&self, target: &OwnedFd, flags: MsFlags, data: &str) -> nix::Result<()> {
            let path = self.path_of(target);
            if let Some((_, _, errno)) = self.fails_at.iter().find(|(call, at, _)| *call == "remount" && *at == path) {
                return Err(*errno);
            }
            self.calls.borrow_mut().push(Call::Remount { path, flags, data: data.to_string() });
            Ok(())
        }

        fn mount_setattr(&self, target: &OwnedFd, attr: MountAttr, flags: libc::c_int) -> nix::Result<()> {
            let path = self.path_of(target);
            self.calls.borrow_mut().push(Call::SetAttr { path: path.clone(), attr, flags });
            if self.mount_roots.as_ref().is_some_and(|roots| !roots.contains(&path)) {
                return Err(nix::errno::Errno::EINVAL);
            }
            self.setattr_fails.map_or(Ok(()), Err)
        }

        fn mount_flags_of(&self, target: &OwnedFd) -> nix::Result<FsFlags> {
            self.calls.borrow_mut().push(Call::Statvfs { path: self.path_of(target) });
            Ok(self.current)
        }

        fn open_target(&self, _root: &OwnedFd, dest: &Path, want: Want) -> Result<OwnedFd, TargetError> {
            self.calls.borrow_mut().push(Call::Target { path: dest.to_path_buf(), want });
            if let Some(errno) = self.fail("open_target") {
                return Err(TargetError { call: "openat2", path: dest.to_path_buf(), errno });
            }
            Ok(self.labelled(dest.to_path_buf()))
        }

        fn open_tree(&self, source: &Path, recursive: bool) -> io::Result<OwnedFd> {
            self.calls.borrow_mut().push(Call::OpenTree { source: source.to_path_buf(), recursive });
            if let Some(errno) = self.fail("open_tree") {
                return Err(errno.into());
            }
            let kind = if self.file_sources.iter().any(|f| f == source) { "file" } else { "tree" };
            Ok(self.labelled(PathBuf::from(format!("{kind}:{}", source.display()))))
        }

        fn new_fs(&self, fs: &NewFs) -> Result<OwnedFd, NewFsError> {
            self.calls.borrow_mut().push(Call::NewFs(fs.clone()));
            if let Some(errno) = self.fail("new_fs") {
                return Err(NewFsError { call: "fsconfig(FSCONFIG_CMD_CREATE)", param: None, errno });
            }
            Ok(self.labelled(PathBuf::from(format!("fs:{}", fs.fstype))))
        }

        fn move_mount(&self, from: &OwnedFd, to: &OwnedFd) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Move { from: self.path_of(from), to: self.path_of(to) });
            self.fail("move_mount").map_or(Ok(()), Err)
        }

        fn copy_tree(&self, from: &OwnedFd, to: &OwnedFd) -> Result<(), EntryError> {
            self.calls.borrow_mut().push(Call::CopyTree { from: self.path_of(from), to: self.path_of(to) });
            match self.fail("copy_tree") {
                Some(errno) => Err(EntryError { call: "mkdirat", entry: "sub".into(), errno }),
                None => Ok(()),
            }
        }

        fn file_kind(&self, fd: &OwnedFd) -> nix::Result<(u32, u64)> {
            let path = self.path_of(fd);
            self.calls.borrow_mut().push(Call::Fstat { path: path.clone() });
            if let Some((_, mode, rdev)) = self.nodes.iter().find(|(p, _, _)| *p == path) {
                return Ok((*mode, *rdev));
            }
            let file = path.starts_with("file:") || self.file_sources.contains(&path);
            Ok((if file { libc::S_IFREG | 0o644 } else { libc::S_IFDIR | 0o755 }, 0))
        }

        fn fs_magic(&self, fd: &OwnedFd) -> nix::Result<i64> {
            let path = self.path_of(fd);
            self.calls.borrow_mut().push(Call::Statfs { path: path.clone() });
            let on = |list: &[PathBuf]| list.iter().any(|p| path.starts_with(p));
            let magic = if on(&self.procfs) {
                nix::sys::statfs::PROC_SUPER_MAGIC
            } else if on(&self.sysfs) {
                nix::sys::statfs::SYSFS_MAGIC
            } else {
                nix::sys::statfs::TMPFS_MAGIC
            };
            Ok(magic.0)
        }

        fn clone_tree(&self, fd: &OwnedFd, recursive: bool) -> io::Result<OwnedFd> {
            let path = self.path_of(fd);
            self.calls.borrow_mut().push(Call::CloneTree { path: path.clone(), recursive });
            if let Some(errno) = self.fail("clone_tree") {
                return Err(errno.into());
            }
            Ok(self.labelled(PathBuf::from(format!("tree:{}", path.display()))))
        }

        fn open_dir_no_symlinks(&self, _root: &OwnedFd, path: &Path) -> Result<OwnedFd, TargetError> {
            self.calls.borrow_mut().push(Call::OpenDir { path: path.to_path_buf() });
            if let Some(errno) = self.fail("open_dir_no_symlinks") {
                return Err(TargetError { call: "openat2", path: path.to_path_buf(), errno });
            }
            Ok(self.labelled(path.to_path_buf()))
        }

        fn mknod_at(&self, dir: &OwnedFd, name: &OsStr, mode: u32, dev: u64) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Mknod { path: self.path_of(dir).join(name), mode, dev });
            self.fail("mknod_at").map_or(Ok(()), Err)
        }

        fn chown_at(&self, dir: &OwnedFd, name: &OsStr, uid: u32, gid: u32) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Chown { path: self.path_of(dir).join(name), uid, gid });
            self.fail("chown_at").map_or(Ok(()), Err)
        }

        fn symlink_at(&self, target: &Path, dir: &OwnedFd, name: &OsStr) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Symlink { target: target.to_path_buf(), path: self.path_of(dir).join(name) });
            self.fail("symlink_at").map_or(Ok(()), Err)
        }

        fn unlink_at(&self, dir: &OwnedFd, name: &OsStr) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Unlink { path: self.path_of(dir).join(name) });
            self.fail("unlink_at").map_or(Ok(()), Err)
        }

        fn open_dir(&self, path: &Path) -> io::Result<OwnedFd> {
            self.calls.borrow_mut().push(Call::OpenHostDir { path: path.to_path_buf() });
            Ok(self.labelled(path.to_path_buf()))
        }

        fn parent_of(&self, dir: &OwnedFd) -> nix::Result<OwnedFd> {
            let path = self.path_of(dir);
            self.calls.borrow_mut().push(Call::Parent { path: path.clone() });
            let parent = path.parent().map(Path::to_path_buf).unwrap_or(path);
            Ok(self.labelled(parent))
        }

        fn fchdir(&self, dir: &OwnedFd) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Fchdir { path: self.path_of(dir) });
            self.fail("fchdir").map_or(Ok(()), Err)
        }

        fn pivot_root_here(&self) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::PivotRootHere);
            self.fail("pivot_root_here").map_or(Ok(()), Err)
        }

        fn set_propagation(&self, path: &Path, flags: MsFlags) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Propagation { path: path.to_path_buf(), flags });
            self.fail_on("set_propagation", path).map_or(Ok(()), Err)
        }

        fn umount_detach(&self, path: &Path) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::UmountDetach { path: path.to_path_buf() });
            self.fail_on("umount_detach", path).map_or(Ok(()), Err)
        }

        fn chdir(&self, path: &Path) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::Chdir { path: path.to_path_buf() });
            self.fail("chdir").map_or(Ok(()), Err)
        }

        fn chroot_here(&self) -> nix::Result<()> {
            self.calls.borrow_mut().push(Call::ChrootHere);
            self.fail("chroot_here").map_or(Ok(()), Err)
        }

        fn mountinfo(&self) -> io::Result<String> {
            self.calls.borrow_mut().push(Call::MountInfo);
            Ok(self.mountinfo.clone())
        }
    }
}
