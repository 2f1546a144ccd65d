//! Our createContainer step inside the container's mount namespace, before
//! pivot_root: one hook that re-executes our binary with the rootfs and, per
//! mount destination, the options the engine dropped (a cgroup mount's
//! `ro,nosuid,nodev,noexec`, `nosymfollow`/`symfollow`, superblock flags
//! such as `lazytime`, a mount's propagation), and applies them.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use oci_spec::runtime::Hook;

use crate::engine::mount::copyup::CopyupError;
use crate::engine::mount::step_error::StepError;
use crate::sys::syscall::LinuxSyscall;

use crate::engine::mount::{cgroup_flags as cgroup_mount_flags, copyup as mount_copyup, propagation as mount_propagation};
use crate::engine::mount::{sb_flags as mount_sb_flags, symfollow as mount_symfollow};

/// Why the hook failed: its arguments, the rootfs, or a mount's step.
#[derive(Debug, thiserror::Error)]
pub enum RootfsHookError {
    #[error("missing rootfs argument")]
    NoRootfs,
    #[error("arguments must be destination/options pairs")]
    NotPairs,
    #[error("open rootfs {rootfs:?}: {errno}")]
    OpenRootfs { rootfs: OsString, errno: Errno },
    #[error(transparent)]
    Step(#[from] StepError),
    #[error(transparent)]
    Copyup(#[from] CopyupError),
}

/// The rootfs, opened `O_PATH`, and each (destination, options).
type Entries = (OwnedFd, Vec<(PathBuf, Vec<String>)>);

/// argv[0] by which our binaries recognise the hook invocation.
pub const HOOK_ARG0: &str = "rustpod-rootfs";

/// The hook applying `entries` (destination, options) in order inside
/// `rootfs`, none when there is nothing to apply: it re-executes the running
/// binary (`/proc/self/exe`) as `HOOK_ARG0 <rootfs> (<destination> <options>)…`.
pub fn hook<'a>(rootfs: &Path, entries: impl IntoIterator<Item = (&'a Path, &'a [String])>) -> Option<Hook> {
    let mut args = vec![HOOK_ARG0.to_string(), rootfs.display().to_string()];
    for (destination, options) in entries {
        args.push(destination.display().to_string());
        args.push(options.join(","));
    }
    if args.len() == 2 {
        return None;
    }
    Some(self_exec_hook(args))
}

/// A hook re-executing the running binary (`/proc/self/exe`) with `args`
/// (argv[0] first, which selects the job).
pub fn self_exec_hook(args: Vec<String>) -> Hook {
    let mut hook = Hook::default();
    hook.set_path(PathBuf::from("/proc/self/exe"));
    hook.set_args(Some(args));
    hook
}

/// The hook's body: `<rootfs> (<destination> <options>)…`; returns the
/// exit code. An entry's options are all propagation options, all
/// symfollow options, all superblock flags, `tmpcopyup` (and `ro`), or all
/// cgroup mount flags.
pub fn main(args: Vec<OsString>) -> i32 {
    match apply_all(args) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("rustpod: mount options in the rootfs: {err}");
            1
        }
    }
}

fn apply_all(args: Vec<OsString>) -> Result<(), RootfsHookError> {
    let (root, entries) = parse_rootfs_hook_args(args)?;
    for (destination, options) in entries {
        apply(&root, destination, options)?;
    }
    Ok(())
}

/// One entry, by the step its options belong to.
fn apply(root: &OwnedFd, destination: PathBuf, options: Vec<String>) -> Result<(), RootfsHookError> {
    if options.iter().all(|o| mount_propagation::propagation_flags(o).is_some()) {
        mount_propagation::apply(&LinuxSyscall, root, &mount_propagation::MountPropagation { destination, flags: options })?;
    } else if options.iter().all(|o| mount_symfollow::is_symfollow(o)) {
        mount_symfollow::apply(&LinuxSyscall, root, &destination, &options)?;
    } else if options.first().is_some_and(|o| mount_copyup::is_copyup(o)) {
        mount_copyup::apply(root, &destination, options.iter().any(|o| o == "ro"))?;
    } else if options.iter().all(|o| mount_sb_flags::is_sb_flag(o)) {
        mount_sb_flags::apply(&LinuxSyscall, root, &destination, &options)?;
    } else {
        cgroup_mount_flags::apply(&LinuxSyscall, root, &destination, &options)?;
    }
    Ok(())
}

/// Takes the options `which` picks out of each mount's options, as
/// (destination, options) for [`hook`].
pub fn take_options(mounts: &mut [oci_spec::runtime::Mount], which: fn(&str) -> bool) -> Vec<(PathBuf, Vec<String>)> {
    take_with(mounts, |options| {
        let (picked, rest): (Vec<String>, Vec<String>) = options.iter().cloned().partition(|o| which(o));
        (!picked.is_empty()).then_some((picked, rest))
    })
}

/// For each mount with options, `split` gives the hook's options and
/// those the engine keeps, or none to leave the mount as it is.
pub fn take_with(
    mounts: &mut [oci_spec::runtime::Mount],
    split: impl Fn(&[String]) -> Option<(Vec<String>, Vec<String>)>,
) -> Vec<(PathBuf, Vec<String>)> {
    let mut taken = Vec::new();
    for mount in mounts {
        let Some((picked, rest)) = mount.options().as_deref().and_then(&split) else { continue };
        taken.push((mount.destination().clone(), picked));
        mount.set_options(Some(rest));
    }
    taken
}

/// Parses [`hook`]'s arguments: the rootfs, opened `O_PATH`, and
/// each (destination, options).
fn parse_rootfs_hook_args(args: Vec<OsString>) -> Result<Entries, RootfsHookError> {
    let (rootfs, pairs) = args.split_first().ok_or(RootfsHookError::NoRootfs)?;
    if pairs.len() % 2 != 0 {
        return Err(RootfsHookError::NotPairs);
    }
    let root = crate::sys::in_root::open(None, Path::new(rootfs), libc::O_PATH)
        .map_err(|e| RootfsHookError::OpenRootfs { rootfs: rootfs.clone(), errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)) })?;
    let entries = pairs
        .chunks(2)
        .map(|pair| {
            let options = pair[1].to_string_lossy().split(',').map(str::to_string).collect();
            (PathBuf::from(&pair[0]), options)
        })
        .collect();
    Ok((root, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_before_the_rootfs_is_opened() {
        assert!(matches!(parse_rootfs_hook_args(Vec::new()), Err(RootfsHookError::NoRootfs)));
        let odd = vec![OsString::from("/"), OsString::from("/d")];
        assert!(matches!(parse_rootfs_hook_args(odd), Err(RootfsHookError::NotPairs)));
        let missing = vec![OsString::from("/nonexistent/rustpod-rootfs")];
        let err = parse_rootfs_hook_args(missing).expect_err("a missing rootfs is refused");
        assert_eq!(err.to_string(), r#"open rootfs "/nonexistent/rustpod-rootfs": ENOENT: No such file or directory"#);
    }
}
