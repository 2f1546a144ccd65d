//! Why our rootfs steps could not make a mount, in runc's words, which
//! clients and tests parse: `error mounting "SRC" to rootfs at "DEST": `
//! then the syscall, the path it was on and the errno.

use std::path::PathBuf;

use nix::errno::Errno;

use crate::sys::mount_target::TargetError;
use crate::sys::new_mount::NewFsError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error mounting {src:?} to rootfs at {dest:?}: {detail}")]
pub struct RootfsError {
    /// The spec mount's source (its type when it has none).
    pub src: String,
    pub dest: PathBuf,
    pub detail: Detail,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Detail {
    /// A syscall on a path inside the rootfs (or the bind's source).
    #[error("{call} {}: {errno}", path.display())]
    Call { call: &'static str, path: PathBuf, errno: Errno },
    /// Making the new filesystem.
    #[error("{0}")]
    NewFs(NewFsError),
    /// A mount landing on procfs where runc refuses one.
    #[error("the destination is on procfs: only a procfs on /proc, or the files lxcfs emulates")]
    InsideProc,
    /// `tmpcopyup`'s copy of the image's files into the new tmpfs: the
    /// entry under the destination, the call and the errno.
    #[error("tmpcopyup: copying the image's files: {0}")]
    Copy(crate::sys::copy_tree::EntryError),
    /// The remount that sets iversion or silent.
    #[error("{0}")]
    Remount(crate::engine::mount::step_error::StepError),
    /// What these steps do not make yet; the engine's route does.
    #[error("{0} is not made by rustpod's own rootfs steps yet")]
    NotCovered(&'static str),
}

/// A step on a path inside the rootfs that is no spec mount (device nodes,
/// /dev's links, pivot_root, masked paths): what it was doing, the call,
/// the path and the errno.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{step}: {call} {}: {errno}", path.display())]
pub struct StepFailed {
    pub step: &'static str,
    pub call: &'static str,
    pub path: PathBuf,
    pub errno: Errno,
}

impl From<TargetError> for Detail {
    fn from(e: TargetError) -> Self {
        Detail::Call { call: e.call, path: e.path, errno: e.errno }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_runcs_line() {
        let err = RootfsError {
            src: "tmpfs".into(),
            dest: "/etc/passwd/x".into(),
            detail: Detail::Call { call: "openat2", path: "/etc/passwd/x".into(), errno: Errno::ENOTDIR },
        };
        assert_eq!(
            err.to_string(),
            r#"error mounting "tmpfs" to rootfs at "/etc/passwd/x": openat2 /etc/passwd/x: ENOTDIR: Not a directory"#
        );
        let err = StepFailed { step: "creating device nodes", call: "mknodat", path: "/dev/fuse".into(), errno: Errno::EPERM };
        assert_eq!(err.to_string(), "creating device nodes: mknodat /dev/fuse: EPERM: Operation not permitted");
    }
}
