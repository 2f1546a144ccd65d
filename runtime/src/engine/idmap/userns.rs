//! A throw-away user namespace carrying a given uid/gid mapping, for
//! `mount_setattr(MOUNT_ATTR_IDMAP)`: the kernel takes the mapping of an
//! idmapped mount from a user namespace fd, and the container's own may not
//! exist yet (or the mount asks for other mappings), so we make one as runc
//! does: a child in a new user namespace, its maps written from here, its
//! `/proc/<pid>/ns/user` opened, then the child let go.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use oci_spec::runtime::LinuxIdMapping;

use crate::sys::io_errno::errno_of;

/// Why the user namespace could not be made: the syscall, the file and the
/// errno.
#[derive(Debug, thiserror::Error)]
pub enum UsernsError {
    #[error("pipe2: {0}")]
    Pipe(Errno),
    #[error("clone(CLONE_NEWUSER): {0}")]
    Clone(Errno),
    #[error("open {path}: {errno}")]
    Open { path: String, errno: Errno },
    #[error("write {path} ({map}): {errno}")]
    WriteMap { path: String, map: String, errno: Errno },
}

/// An open user namespace with `uid` and `gid` as its maps.
pub fn with_mappings(uid: &[LinuxIdMapping], gid: &[LinuxIdMapping]) -> Result<OwnedFd, UsernsError> {
    let (hold_rd, hold_wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(UsernsError::Pipe)?;
    let child = clone_into_new_userns(&hold_rd, &hold_wr)?;
    drop(hold_rd);
    let opened = write_maps_and_open(child, uid, gid);
    // The child reads EOF and exits; reap it whatever happened above.
    drop(hold_wr);
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None);
    opened
}

/// clone(CLONE_NEWUSER) with fork semantics: the child only waits for
/// `hold` to close and exits, async-signal-safe calls only (we may have
/// threads).
fn clone_into_new_userns(hold_rd: &OwnedFd, hold_wr: &OwnedFd) -> Result<i32, UsernsError> {
    // SAFETY: no CLONE_VM, no new stack: the child gets a copy of our memory,
    // and below it only calls close, read and _exit.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::CLONE_NEWUSER | libc::SIGCHLD, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(UsernsError::Clone(Errno::last()));
    }
    if pid == 0 {
        let mut byte = 0u8;
        // SAFETY: plain syscalls on descriptors this process owns.
        unsafe {
            libc::close(hold_wr.as_raw_fd());
            libc::read(hold_rd.as_raw_fd(), &mut byte as *mut u8 as *mut libc::c_void, 1);
            libc::_exit(0);
        }
    }
    Ok(pid as i32)
}

fn write_maps_and_open(pid: i32, uid: &[LinuxIdMapping], gid: &[LinuxIdMapping]) -> Result<OwnedFd, UsernsError> {
    write_map(pid, "uid_map", uid)?;
    write_map(pid, "gid_map", gid)?;
    let path = format!("/proc/{pid}/ns/user");
    File::open(&path).map(OwnedFd::from).map_err(|e| UsernsError::Open { errno: errno_of(&e), path })
}

/// The kernel takes a map in one write(2).
pub(crate) fn write_map(pid: i32, file: &str, mappings: &[LinuxIdMapping]) -> Result<(), UsernsError> {
    let text = map_text(mappings);
    let path = format!("/proc/{pid}/{file}");
    let mut f = match File::options().write(true).open(&path) {
        Ok(f) => f,
        Err(e) => return Err(UsernsError::Open { errno: errno_of(&e), path }),
    };
    f.write(text.as_bytes()).map_err(|e| UsernsError::WriteMap { map: text.trim().replace('\n', ", "), errno: errno_of(&e), path })?;
    Ok(())
}

/// A map file's text: `container host size` per line.
fn map_text(mappings: &[LinuxIdMapping]) -> String {
    mappings.iter().map(|m| format!("{} {} {}\n", m.container_id(), m.host_id(), m.size())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(c: u32, h: u32, s: u32) -> LinuxIdMapping {
        oci_spec::runtime::LinuxIdMappingBuilder::default().container_id(c).host_id(h).size(s).build().unwrap()
    }

    #[test]
    fn makes_a_user_namespace_with_the_maps() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let fd = with_mappings(&[map(0, 100000, 65536)], &[map(0, 200000, 10)]).expect("userns");
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert!(link.to_string_lossy().starts_with("user:["), "{link:?}");
        let err = with_mappings(&[map(0, 1, 0)], &[map(0, 1, 1)]).unwrap_err();
        assert!(matches!(err, UsernsError::WriteMap { errno: Errno::EINVAL, .. }), "{err}");
        let err = err.to_string();
        assert!(err.contains("uid_map") && err.contains("EINVAL"), "{err}");
    }

    #[test]
    fn a_map_is_one_line_per_range_and_its_error_names_file_ranges_and_errno() {
        assert_eq!(map_text(&[map(0, 100000, 65536), map(65536, 1, 1)]), "0 100000 65536\n65536 1 1\n");
        let err = UsernsError::WriteMap { path: "/proc/7/uid_map".into(), map: "0 1 0".into(), errno: Errno::EINVAL };
        assert_eq!(err.to_string(), "write /proc/7/uid_map (0 1 0): EINVAL: Invalid argument");
    }
}
