//! `process.cwd` checked from the host before the engine's init chdirs
//! there: the init's own failure reaches us only as "failed to unix
//! syscall", with no path and no errno. Errors use runc's words.

use std::io;
use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

use crate::error::{Error, Result};
use crate::sys::in_root;

/// For create: the cwd in the bundle's rootfs. A missing one is made by the
/// init (as runc does); a file in the way cannot be. Paths under a mount
/// destination are not checked: the mount replaces what the rootfs has.
pub fn check_in_rootfs(config: &Path, spec: &Spec, rootfs: &Path) -> Result<()> {
    let Some(cwd) = spec.process().as_ref().map(|p| p.cwd().clone()) else {
        return Ok(());
    };
    if under_a_mount(spec, &cwd) {
        return Ok(());
    }
    match open_dir(rootfs, &cwd) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::Config {
            path: config.to_path_buf(),
            reason: format!("process.cwd {}: mkdir {}: {}", cwd.display(), cwd.display(), errno_text(&e)),
        }),
        _ => Ok(()),
    }
}

/// For exec: the cwd must already exist in the running container, whose
/// root (with its mounts) the host sees at /proc/<pid>/root.
pub fn check_in_container(container_root: &Path, cwd: &Path) -> Result<()> {
    open_dir(container_root, cwd).map(drop).map_err(|e| {
        Error::Invalid(format!("chdir to cwd ({:?}) set in config.json failed: {}", cwd.display().to_string(), errno_text(&e)))
    })
}

fn under_a_mount(spec: &Spec, cwd: &Path) -> bool {
    let destinations: Vec<PathBuf> = spec.mounts().iter().flatten().map(|m| m.destination().clone()).collect();
    destinations.iter().any(|d| cwd.starts_with(d))
}

/// Resolved inside `root` (symlinks stay in it), as the init would see it.
fn open_dir(root: &Path, path: &Path) -> io::Result<std::os::fd::OwnedFd> {
    let root = in_root::open(None, root, libc::O_PATH | libc::O_DIRECTORY)?;
    in_root::open(Some(&root), path, libc::O_PATH | libc::O_DIRECTORY)
}

/// `not a directory (ENOTDIR)`: Go's lower-case text, as runc prints it,
/// and the errno's name.
fn errno_text(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => {
            let errno = nix::errno::Errno::from_raw(code);
            let text = errno.desc();
            let lower = text[..1].to_lowercase() + &text[1..];
            format!("{lower} ({errno:?})")
        }
        None => err.to_string(),
    }
}
