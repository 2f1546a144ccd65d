//! Our createContainer step inside the container's mount namespace, before
//! pivot_root: one hook that re-executes our binary with the rootfs and, per
//! mount destination, the options the engine dropped (a cgroup mount's
//! `ro,nosuid,nodev,noexec`, `nosymfollow`/`symfollow`, superblock flags
//! such as `lazytime`, a mount's propagation), and applies them.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use oci_spec::runtime::Hook;

use crate::sys::syscall::LinuxSyscall;

use crate::engine::mount::{cgroup_flags as cgroup_mount_flags, copyup as mount_copyup, propagation as mount_propagation};
use crate::engine::mount::{sb_flags as mount_sb_flags, symfollow as mount_symfollow};

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
/// symfollow options, all superblock flags or all cgroup mount flags.
pub fn main(args: Vec<OsString>) -> i32 {
    match apply_all(args) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("rustpod: mount options in the rootfs: {err}");
            1
        }
    }
}

fn apply_all(args: Vec<OsString>) -> Result<(), String> {
    let (root, entries) = parse_rootfs_hook_args(args)?;
    for (destination, options) in entries {
        apply(&root, destination, options)?;
    }
    Ok(())
}

/// One entry, by the step its options belong to; the step's error as the
/// hook's one line.
fn apply(root: &OwnedFd, destination: PathBuf, options: Vec<String>) -> Result<(), String> {
    if options.iter().all(|o| mount_propagation::propagation_flags(o).is_some()) {
        mount_propagation::apply(&LinuxSyscall, root, &mount_propagation::MountPropagation { destination, flags: options })
            .map_err(|e| e.to_string())
    } else if options.iter().all(|o| mount_symfollow::is_symfollow(o)) {
        mount_symfollow::apply(&LinuxSyscall, root, &destination, &options).map_err(|e| e.to_string())
    } else if options.iter().all(|o| mount_copyup::is_copyup(o)) {
        mount_copyup::apply(root, &destination)
    } else if options.iter().all(|o| mount_sb_flags::is_sb_flag(o)) {
        mount_sb_flags::apply(&LinuxSyscall, root, &destination, &options).map_err(|e| e.to_string())
    } else {
        cgroup_mount_flags::apply(root, &destination, &options)
    }
}

/// Takes the options `which` picks out of each mount's options, as
/// (destination, options) for [`hook`].
pub fn take_options(mounts: &mut [oci_spec::runtime::Mount], which: fn(&str) -> bool) -> Vec<(PathBuf, Vec<String>)> {
    let mut taken = Vec::new();
    for mount in mounts {
        let Some(options) = mount.options().clone() else { continue };
        let (picked, rest): (Vec<String>, Vec<String>) = options.into_iter().partition(|o| which(o));
        if !picked.is_empty() {
            taken.push((mount.destination().clone(), picked));
            mount.set_options(Some(rest));
        }
    }
    taken
}

/// Parses [`hook`]'s arguments: the rootfs, opened `O_PATH`, and
/// each (destination, options).
fn parse_rootfs_hook_args(args: Vec<OsString>) -> Result<(OwnedFd, Vec<(PathBuf, Vec<String>)>), String> {
    let (rootfs, pairs) = args.split_first().ok_or("missing rootfs argument")?;
    if pairs.len() % 2 != 0 {
        return Err("arguments must be destination/options pairs".into());
    }
    let root = crate::sys::in_root::open(None, Path::new(rootfs), libc::O_PATH)
        .map_err(|e| format!("open rootfs {rootfs:?}: {e}"))?;
    let entries = pairs
        .chunks(2)
        .map(|pair| {
            let options = pair[1].to_string_lossy().split(',').map(str::to_string).collect();
            (PathBuf::from(&pair[0]), options)
        })
        .collect();
    Ok((root, entries))
}
