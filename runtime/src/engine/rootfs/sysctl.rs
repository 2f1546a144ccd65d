//! The spec's `linux.sysctl`, written through one checked procfs opened for
//! the step (`sys::procfs`), where the engine builds an unmasked pathrs
//! handle with its checks. A key names a file under /proc/sys as runc reads
//! it: dots separate its parts, or slashes when it has any (then a dot is
//! part of a name, as in `net/ipv4/conf/eth0.100/forwarding`).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use nix::errno::Errno;

use crate::engine::rootfs::error::StepFailed;
use crate::sys::io_errno::errno_of;
use crate::sys::procfs::ProcFd;

const STEP: &str = "writing sysctl";

/// The file under procfs's root that `key` names, or None for a key with an
/// empty part, `.` or `..`.
pub fn path_of(key: &str) -> Option<PathBuf> {
    let sep = if key.contains('/') { '/' } else { '.' };
    let parts: Vec<&str> = key.split(sep).collect();
    if parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return None;
    }
    Some(parts.iter().fold(PathBuf::from("sys"), |path, part| path.join(part)))
}

/// Writes each value, in the order of the keys' names so a failure is
/// the same on every run.
pub fn write_all(proc: &ProcFd, sysctl: &HashMap<String, String>) -> Result<(), StepFailed> {
    let mut keys: Vec<&String> = sysctl.keys().collect();
    keys.sort();
    for key in keys {
        let fail = |call: &'static str, path: PathBuf| move |errno: Errno| StepFailed { step: STEP, call, path, errno };
        let path = path_of(key).ok_or_else(|| fail("openat2", PathBuf::from(key))(Errno::EINVAL))?;
        let shown = PathBuf::from("/proc").join(&path);
        let file = proc.open(&path, libc::O_WRONLY).map_err(|e| fail("openat2", shown.clone())(errno_of(&e)))?;
        std::fs::File::from(file).write_all(sysctl[key].as_bytes()).map_err(|e| fail("write", shown)(errno_of(&e)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_a_file_under_proc_sys_as_runc_reads_it() {
        assert_eq!(path_of("net.ipv4.ip_forward"), Some("sys/net/ipv4/ip_forward".into()));
        assert_eq!(path_of("net/ipv4/conf/eth0.100/forwarding"), Some("sys/net/ipv4/conf/eth0.100/forwarding".into()));
        for bad in ["net..x", "../x", "net/../../etc", ".kernel", "kernel.", ""] {
            assert_eq!(path_of(bad), None, "{bad:?}");
        }
    }

    /// On the kernel, through a new procfs: a key that names no file fails
    /// with the path and the errno, and nothing is written.
    #[test]
    fn a_key_with_no_file_fails_named() {
        let proc = match ProcFd::new() {
            Ok(proc) => proc,
            Err(e) if e.err.raw_os_error() == Some(libc::EPERM) => {
                eprintln!("SKIP: a new procfs needs CAP_SYS_ADMIN: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let sysctl = HashMap::from([("kernel.rustpod_no_such_key".to_string(), "1".to_string())]);
        let err = write_all(&proc, &sysctl).unwrap_err();
        assert_eq!(err.to_string(), "writing sysctl: openat2 /proc/sys/kernel/rustpod_no_such_key: ENOENT: No such file or directory");
        let bad = HashMap::from([("net/../../etc".to_string(), "1".to_string())]);
        assert_eq!(write_all(&proc, &bad).unwrap_err().errno, Errno::EINVAL);
    }
}
