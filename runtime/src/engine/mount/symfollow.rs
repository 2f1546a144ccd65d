//! A mount's `nosymfollow`/`symfollow` (MS_NOSYMFOLLOW, on that mount only,
//! as runc): the engine would hand them to mount(2) as data and fail, so
//! they are taken out of its spec and our createContainer step
//! (`rootfs_hook`) sets them with mount_setattr(2) before pivot_root.
//! (`rnosymfollow`/`rsymfollow`, recursive, the engine applies itself.)

use std::os::fd::OwnedFd;
use std::path::Path;

use crate::sys::in_root;

/// The options this module applies.
const OPTIONS: &[&str] = &["nosymfollow", "symfollow"];

pub fn is_symfollow(option: &str) -> bool {
    OPTIONS.contains(&option)
}

/// Sets or clears MOUNT_ATTR_NOSYMFOLLOW on the mount at `dest`, resolved
/// inside the rootfs so a symlink cannot point it at the host; the last
/// option given wins, as with mount(2) flags.
pub fn apply(root: &OwnedFd, dest: &Path, options: &[String]) -> Result<(), String> {
    let Some(last) = options.last() else { return Ok(()) };
    let target = in_root::open(Some(root), dest, libc::O_PATH).map_err(|e| format!("open {}: {e}", dest.display()))?;
    let attr = libc::MOUNT_ATTR_NOSYMFOLLOW;
    let (set, clear) = if last == "nosymfollow" { (attr, 0) } else { (0, attr) };
    crate::engine::mount::cgroup_flags::set_attr(&target, set, clear, 0)
        .map_err(|e| format!("mount_setattr {} ({last}): {e}", dest.display()))
}
