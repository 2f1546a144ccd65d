//! A mount's `nosymfollow`/`symfollow` (MS_NOSYMFOLLOW, on that mount only,
//! as runc): the engine would hand them to mount(2) as data and fail, so
//! they are taken out of its spec and our createContainer step
//! (`rootfs_hook`) sets them with mount_setattr(2) before pivot_root.
//! (`rnosymfollow`/`rsymfollow`, recursive, the engine applies itself.)
//! Its syscalls go through the `Syscall` seam.

use std::os::fd::OwnedFd;
use std::path::Path;

use crate::engine::mount::step_error::StepError;
use crate::sys::mount_api::MountAttr;
use crate::sys::syscall::Syscall;

/// The options this module applies.
const OPTIONS: &[&str] = &["nosymfollow", "symfollow"];

pub fn is_symfollow(option: &str) -> bool {
    OPTIONS.contains(&option)
}

/// Sets or clears MOUNT_ATTR_NOSYMFOLLOW on the mount at `dest`, resolved
/// inside the rootfs so a symlink cannot point it at the host; the last
/// option given wins, as with mount(2) flags.
pub fn apply(sys: &dyn Syscall, root: &OwnedFd, dest: &Path, options: &[String]) -> Result<(), StepError> {
    let Some(last) = options.last() else { return Ok(()) };
    let target = sys.open_in_root(root, dest, libc::O_PATH).map_err(|e| StepError::open(dest, &e))?;
    let attr = libc::MOUNT_ATTR_NOSYMFOLLOW;
    let (set, clear) = if last == "nosymfollow" { (attr, 0) } else { (0, attr) };
    sys.mount_setattr(&target, MountAttr::flags(set, clear), 0).map_err(|errno| StepError::call("mount_setattr", dest, last, errno))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::sys::syscall::{Call, Recording};

    fn run(options: &[&str]) -> Vec<Call> {
        let sys = Recording::default();
        let root: OwnedFd = std::fs::File::open("/").unwrap().into();
        let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        apply(&sys, &root, Path::new("/data"), &options).unwrap();
        sys.calls()
    }

    fn set_attr(set: u64, clear: u64) -> Call {
        // On that mount only: never AT_RECURSIVE (that is `rnosymfollow`).
        Call::SetAttr { path: PathBuf::from("/data"), attr: MountAttr::flags(set, clear), flags: 0 }
    }

    #[test]
    fn the_last_option_wins_on_that_mount_only() {
        let attr = libc::MOUNT_ATTR_NOSYMFOLLOW;
        let open = Call::Open { path: PathBuf::from("/data"), flags: libc::O_PATH };
        assert_eq!(run(&["symfollow", "nosymfollow"]), vec![open.clone(), set_attr(attr, 0)]);
        assert_eq!(run(&["nosymfollow", "symfollow"]), vec![open, set_attr(0, attr)]);
    }

    #[test]
    fn no_option_makes_no_syscall() {
        assert_eq!(run(&[]), vec![]);
    }
}
