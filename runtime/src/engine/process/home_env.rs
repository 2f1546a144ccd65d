//! HOME for a process whose environment lacks it, found as runc finds it:
//! the user's entry in the container's own /etc/passwd, else `/`. Left to
//! the engine, glibc's NSS would look it up inside the container, where our
//! static binary could load the container's own NSS modules.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use oci_spec::runtime::Process;

use crate::sys::in_root;

/// A passwd file larger than this is not read (HOME falls back to `/`).
const MAX_PASSWD_BYTES: u64 = 4 << 20;

/// Adds `HOME=<home>` to `process.env` unless it already has a non-empty
/// HOME; `root` is the container's root as the host sees it.
pub fn set_if_missing(process: &mut Process, root: &Path) {
    let env = process.env().clone().unwrap_or_default();
    if has_home(&env) {
        return;
    }
    let home = read_passwd(root).and_then(|passwd| home_of(&passwd, process.user().uid())).unwrap_or_else(|| "/".to_string());
    let mut env = without_home(env);
    env.push(format!("HOME={home}"));
    process.set_env(Some(env));
}

/// Whether `env` sets a non-empty HOME.
pub fn has_home(env: &[String]) -> bool {
    env.iter().any(|kv| kv.strip_prefix("HOME=").is_some_and(|v| !v.is_empty()))
}

/// `env` without HOME.
pub fn without_home(mut env: Vec<String>) -> Vec<String> {
    env.retain(|kv| !kv.starts_with("HOME="));
    env
}

/// The container's /etc/passwd, if it is a regular file of sane size.
fn read_passwd(root: &Path) -> Option<String> {
    let file = open_regular(root, Path::new("/etc/passwd"))?;
    let mut text = String::new();
    file.take(MAX_PASSWD_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Opens `path` inside `root` for reading only if it is a regular file.
/// The container controls what is there: a device node it made (a tape
/// rewinds, a watchdog arms when opened) or a FIFO must never be opened
/// by us on the host. So: an O_PATH handle (which opens nothing), fstat,
/// then a real open of that same inode through /proc/self/fd.
fn open_regular(root: &Path, path: &Path) -> Option<std::fs::File> {
    let root = in_root::open(None, root, libc::O_PATH | libc::O_DIRECTORY).ok()?;
    let handle: OwnedFd = in_root::open(Some(&root), path, libc::O_PATH).ok()?;
    let meta = nix::sys::stat::fstat(handle.as_raw_fd()).ok()?;
    let regular = meta.st_mode & libc::S_IFMT == libc::S_IFREG;
    if !regular || meta.st_size as u64 > MAX_PASSWD_BYTES {
        return None;
    }
    let reopen = format!("/proc/self/fd/{}", handle.as_raw_fd());
    std::fs::File::open(reopen).ok()
}

/// The home field of the first passwd entry for `uid`, if not empty.
fn home_of(passwd: &str, uid: u32) -> Option<String> {
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.len() >= 6 && fields[2].parse() == Ok(uid))
        .map(|fields| fields[5].to_string())
        .filter(|home| !home.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
        broken line\n\
        nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n\
        empty:x:7:7:::/bin/sh\n";

    #[test]
    fn finds_the_home_of_a_uid() {
        assert_eq!(home_of(PASSWD, 0).as_deref(), Some("/root"));
        assert_eq!(home_of(PASSWD, 65534).as_deref(), Some("/nonexistent"));
    }

    #[test]
    fn unknown_uid_or_empty_home_has_none() {
        assert_eq!(home_of(PASSWD, 1000), None);
        assert_eq!(home_of(PASSWD, 7), None);
    }

    #[test]
    fn a_set_home_is_kept_and_an_empty_one_replaced() {
        let dir = std::env::temp_dir().join(format!("rustpod-home-env-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(dir.join("etc/passwd"), PASSWD).unwrap();
        let mut process = Process::default();
        process.set_env(Some(vec!["HOME=/tmp".into()]));
        set_if_missing(&mut process, &dir);
        assert_eq!(process.env().as_deref(), Some(&["HOME=/tmp".to_string()][..]));
        process.set_env(Some(vec!["PATH=/bin".into(), "HOME=".into()]));
        set_if_missing(&mut process, &dir);
        assert_eq!(process.env().as_deref(), Some(&["PATH=/bin".to_string(), "HOME=/root".to_string()][..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn scratch_root(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rustpod-home-env-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("rootfs/etc")).unwrap();
        dir
    }

    fn home_in(rootfs: &Path) -> Option<Vec<String>> {
        let mut process = Process::default();
        process.set_env(None);
        set_if_missing(&mut process, rootfs);
        process.env().clone()
    }

    #[test]
    fn a_symlink_cannot_lead_the_lookup_out_of_the_rootfs() {
        let dir = scratch_root("symlink");
        std::fs::write(dir.join("passwd"), "root:x:0:0:root:/escaped:/bin/sh\n").unwrap();
        for target in ["../../passwd", "/../../passwd", "/proc/self/root/etc/passwd"] {
            let link = dir.join("rootfs/etc/passwd");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link).unwrap();
            assert_eq!(home_in(&dir.join("rootfs")).as_deref(), Some(&["HOME=/".to_string()][..]), "{target}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_at_etc_passwd_does_not_block() {
        let dir = scratch_root("fifo");
        nix::unistd::mkfifo(&dir.join("rootfs/etc/passwd"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        assert_eq!(home_in(&dir.join("rootfs")).as_deref(), Some(&["HOME=/".to_string()][..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_device_node_at_etc_passwd_is_not_opened() {
        let dir = scratch_root("device");
        // c 1 3 (null) opens fine: only the type check can refuse it.
        let dev = nix::sys::stat::makedev(1, 3);
        nix::sys::stat::mknod(
            &dir.join("rootfs/etc/passwd"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o644),
            dev,
        )
        .unwrap();
        assert_eq!(home_in(&dir.join("rootfs")).as_deref(), Some(&["HOME=/".to_string()][..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlink_inside_the_rootfs_is_followed_there() {
        let dir = scratch_root("inner-link");
        std::fs::write(dir.join("rootfs/etc/passwd.real"), "root:x:0:0:root:/inner:/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd.real", dir.join("rootfs/etc/passwd")).unwrap();
        assert_eq!(home_in(&dir.join("rootfs")).as_deref(), Some(&["HOME=/inner".to_string()][..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_passwd_means_root_dir() {
        let mut process = Process::default();
        process.set_env(None);
        set_if_missing(&mut process, Path::new("/nonexistent-rootfs"));
        assert_eq!(process.env().as_deref(), Some(&["HOME=/".to_string()][..]));
    }
}
