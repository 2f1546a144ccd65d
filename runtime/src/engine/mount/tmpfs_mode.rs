//! Where the engine makes the rootfs: a tmpfs over a directory the image
//! has gets that directory's mode, as runc gives it (`mode=` first in its
//! data, so the spec's own wins). libcontainer 0.7 leaves such a tmpfs at
//! 1777, so any user of the container could write where the image let none.
//! Our own rootfs steps do the same in `engine::rootfs::mounts`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use oci_spec::runtime::Mount;

/// Puts `mode=` first in the options of each tmpfs of `mounts` that has
/// none and lands on a directory of the image at `rootfs` (looked up with
/// RESOLVE_IN_ROOT, as the container would see it). A missing destination,
/// or one that is no directory, is left for the mount itself to make or
/// refuse; so is a rootfs that cannot be opened (the engine names it).
pub fn from_the_image(mounts: &mut [Mount], rootfs: &Path) {
    let Ok(root) = std::fs::File::open(rootfs).map(OwnedFd::from) else { return };
    for mount in mounts.iter_mut().filter(|m| m.typ().as_deref() == Some("tmpfs")) {
        let mut options = mount.options().clone().unwrap_or_default();
        if options.iter().any(|o| o.starts_with("mode=")) {
            continue;
        }
        let Some(mode) = dir_mode(&root, mount.destination()) else { continue };
        options.insert(0, format!("mode={mode:04o}"));
        mount.set_options(Some(options));
    }
}

/// The permission bits of the directory at `dest` inside `root`, if it is one.
fn dir_mode(root: &OwnedFd, dest: &Path) -> Option<u32> {
    let dir = crate::sys::in_root::open(Some(root), dest, libc::O_PATH | libc::O_DIRECTORY).ok()?;
    nix::sys::stat::fstat(dir.as_raw_fd()).ok().map(|st| st.st_mode & 0o7777)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use oci_spec::runtime::MountBuilder;

    use super::*;

    fn tmpfs(dest: &str, options: &[&str]) -> Mount {
        let options = options.iter().map(|o| o.to_string()).collect::<Vec<_>>();
        MountBuilder::default().destination(dest).typ("tmpfs").source("tmpfs").options(options).build().unwrap()
    }

    #[test]
    fn a_tmpfs_over_an_image_directory_gets_its_mode_unless_the_spec_gives_one() {
        let rootfs = std::env::temp_dir().join(format!("rustpod-tmpfs-mode-{}", std::process::id()));
        std::fs::create_dir_all(rootfs.join("d750")).unwrap();
        std::fs::set_permissions(rootfs.join("d750"), std::fs::Permissions::from_mode(0o750)).unwrap();
        std::fs::write(rootfs.join("file"), "").unwrap();
        // A link out of the image is followed inside it, as the container would.
        std::os::unix::fs::symlink("/d750", rootfs.join("up")).unwrap();
        let mut mounts = vec![
            tmpfs("/d750", &["size=1m"]),
            tmpfs("/up", &[]),
            tmpfs("/d750", &["mode=1777"]),
            tmpfs("/missing", &[]),
            tmpfs("/file", &[]),
        ];
        from_the_image(&mut mounts, &rootfs);
        std::fs::remove_dir_all(&rootfs).unwrap();
        let options: Vec<Vec<String>> = mounts.iter().map(|m| m.options().clone().unwrap_or_default()).collect();
        assert_eq!(options, [vec!["mode=0750", "size=1m"], vec!["mode=0750"], vec!["mode=1777"], vec![], vec![]]);
    }
}
