//! A fresh mount's superblock flags `lazytime`/`nolazytime`,
//! `iversion`/`noiversion` and `silent`/`loud` (runc 1.5's mount flags):
//! the engine would hand them to mount(2) as data and fail, so they are
//! taken out of its spec and our createContainer step (`rootfs_hook`)
//! remounts the filesystem with them before pivot_root, keeping the
//! mount's other flags. A bind mount cannot change its source's superblock:
//! `spec_support` refuses them there. Its syscalls go through the `Syscall`
//! seam.

use std::os::fd::OwnedFd;
use std::path::Path;

use nix::mount::MsFlags;
use nix::sys::statvfs::FsFlags;

use crate::engine::mount::step_error::StepError;
use crate::sys::syscall::Syscall;

/// Each option with its flag and whether it sets (true) or clears it.
const OPTIONS: &[(&str, MsFlags, bool)] = &[
    ("lazytime", MsFlags::MS_LAZYTIME, true),
    ("nolazytime", MsFlags::MS_LAZYTIME, false),
    ("iversion", MsFlags::MS_I_VERSION, true),
    ("noiversion", MsFlags::MS_I_VERSION, false),
    ("silent", MsFlags::MS_SILENT, true),
    ("loud", MsFlags::MS_SILENT, false),
];

pub fn is_sb_flag(option: &str) -> bool {
    OPTIONS.iter().any(|(name, _, _)| *name == option)
}

/// Remounts the filesystem at `dest` (resolved inside the rootfs) with
/// `options` applied in order over the flags it has.
pub fn apply(sys: &dyn Syscall, root: &OwnedFd, dest: &Path, options: &[String]) -> Result<(), StepError> {
    let target = sys.open_in_root(root, dest, libc::O_PATH).map_err(|e| StepError::open(dest, &e))?;
    let current = sys.mount_flags_of(&target).map_err(|errno| StepError::call("fstatvfs", dest, &options.join(","), errno))?;
    let mut flags = MsFlags::MS_REMOUNT | kept_flags(current);
    for option in options {
        let (_, flag, set) = OPTIONS.iter().find(|(name, _, _)| name == option).ok_or_else(|| StepError::NotOurs {
            dest: dest.to_path_buf(),
            option: option.clone(),
            kind: "superblock flag",
        })?;
        flags.set(*flag, *set);
    }
    // mount(2), not mount_setattr: these are superblock flags, which
    // mount_setattr's MOUNT_ATTR_* (per-mount) cannot set.
    sys.remount(&target, flags, "").map_err(|errno| StepError::call("mount(MS_REMOUNT)", dest, &options.join(","), errno))
}

/// A remount sets the mount's flags anew: those it has, as mount(2) flags
/// (its atime mode the kernel keeps by itself).
fn kept_flags(current: FsFlags) -> MsFlags {
    let pairs = [
        (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_SYNCHRONOUS, MsFlags::MS_SYNCHRONOUS),
        (FsFlags::ST_MANDLOCK, MsFlags::MS_MANDLOCK),
    ];
    let kept = pairs.iter().filter(|(st, _)| current.contains(*st)).fold(MsFlags::empty(), |acc, (_, ms)| acc | *ms);
    // ST_NOSYMFOLLOW / MS_NOSYMFOLLOW (Linux 5.10), which nix does not name.
    const ST_NOSYMFOLLOW: libc::c_ulong = 0x2000;
    if current.bits() & ST_NOSYMFOLLOW != 0 {
        return kept | MsFlags::from_bits_retain(libc::MS_NOSYMFOLLOW);
    }
    kept
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::sys::syscall::{Call, Recording};

    fn remount_flags(current: FsFlags, options: &[&str]) -> Result<Vec<Call>, StepError> {
        let sys = Recording::with_mount_flags(current);
        let root: OwnedFd = std::fs::File::open("/").unwrap().into();
        let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        apply(&sys, &root, Path::new("/tmp"), &options)?;
        Ok(sys.calls())
    }

    #[test]
    fn remounts_keeping_the_mounts_flags_with_the_options_over_them() {
        let calls = remount_flags(FsFlags::ST_RDONLY | FsFlags::ST_NOSUID, &["lazytime", "noiversion"]).unwrap();
        let tmp = PathBuf::from("/tmp");
        let want = MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_LAZYTIME;
        assert_eq!(
            calls,
            vec![
                Call::Open { path: tmp.clone(), flags: libc::O_PATH },
                Call::Statvfs { path: tmp.clone() },
                Call::Remount { path: tmp, flags: want, data: String::new() },
            ]
        );
    }

    #[test]
    fn a_later_option_undoes_an_earlier_one() {
        let calls = remount_flags(FsFlags::empty(), &["lazytime", "nolazytime", "silent"]).unwrap();
        let Some(Call::Remount { flags, .. }) = calls.last() else { panic!("no remount in {calls:?}") };
        assert_eq!(*flags, MsFlags::MS_REMOUNT | MsFlags::MS_SILENT);
    }

    #[test]
    fn refuses_an_option_that_is_no_superblock_flag_before_remounting() {
        let err = remount_flags(FsFlags::empty(), &["lazytime", "rw"]).unwrap_err();
        assert_eq!(err.to_string(), r#"/tmp: "rw" is not a superblock flag"#);
    }
}
