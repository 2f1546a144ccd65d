//! The namespaces a user-namespaced init joins by path, opened by the
//! parent. The engine's init opens each `/proc/<pid>/ns/*` file only once
//! it is in the user namespace; a pod's sandbox that has not exec'd yet is
//! not dumpable and its memory belongs to the host's user namespace, so
//! that open fails with EACCES. runc opens every namespace file before its
//! first setns(2). Here the parent opens them, keeps each fd open across
//! the engine's forks at or above `3 + preserve_fds` (the engine marks
//! those close-on-exec before the user's program runs), and the engine is
//! given `/proc/self/fd/<n>`, which any process may open for itself.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::fcntl::{fcntl, open, FcntlArg, OFlag};
use nix::sys::stat::Mode;
use oci_spec::runtime::{LinuxNamespaceType, Spec};

use crate::error::{Error, Result};

/// Opens what `spec` joins by path when it has a user namespace, and
/// returns the spec to give the engine with the fds it names (keep them
/// until the init is started); None when nothing needs it.
pub fn hold(spec: &Spec, preserve_fds: i32) -> Result<Option<(Spec, Vec<OwnedFd>)>> {
    if !applies(spec) {
        return Ok(None);
    }
    let lowest: RawFd = 3 + preserve_fds;
    let mut spec = spec.clone();
    let mut held = Vec::new();
    let listed = spec.linux_mut().as_mut().and_then(|l| l.namespaces_mut().as_mut());
    for ns in listed.into_iter().flatten() {
        let Some(path) = ns.path().clone() else { continue };
        let fd = open(&path, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|errno| Error::io("open the namespace", &path, errno.into()))?;
        // SAFETY: open just returned this fd.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let kept = fcntl(fd.as_raw_fd(), FcntlArg::F_DUPFD(lowest)).map_err(|e| Error::sys("fcntl(F_DUPFD) of a namespace fd", e))?;
        // SAFETY: fcntl just returned this fd (without close-on-exec: the engine's forks inherit it).
        held.push(unsafe { OwnedFd::from_raw_fd(kept) });
        ns.set_path(Some(PathBuf::from(format!("/proc/self/fd/{kept}"))));
    }
    Ok(Some((spec, held)))
}

/// A user namespace (new or joined) with another namespace given by path,
/// and no mount namespace given by path (joining one would change what
/// `/proc/self` resolves to before the rest are joined).
fn applies(spec: &Spec) -> bool {
    let listed: Vec<_> = spec.linux().as_ref().and_then(|l| l.namespaces().clone()).unwrap_or_default();
    let user = listed.iter().any(|ns| ns.typ() == LinuxNamespaceType::User);
    let by_path = |typ: Option<LinuxNamespaceType>| listed.iter().any(|ns| ns.path().is_some() && typ.is_none_or(|t| ns.typ() == t));
    user && by_path(None) && !by_path(Some(LinuxNamespaceType::Mount))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{LinuxBuilder, LinuxNamespaceBuilder, SpecBuilder};

    fn spec(namespaces: &[(LinuxNamespaceType, Option<&str>)]) -> Spec {
        let namespaces: Vec<_> = namespaces
            .iter()
            .map(|(t, p)| {
                let b = LinuxNamespaceBuilder::default().typ(*t);
                match p {
                    Some(p) => b.path(*p).build().unwrap(),
                    None => b.build().unwrap(),
                }
            })
            .collect();
        SpecBuilder::default().linux(LinuxBuilder::default().namespaces(namespaces).build().unwrap()).build().unwrap()
    }

    #[test]
    fn only_a_user_namespace_with_others_by_path_is_held() {
        use LinuxNamespaceType::*;
        let pod = "/proc/1/ns/uts";
        assert!(applies(&spec(&[(User, Some("/proc/1/ns/user")), (Uts, Some(pod)), (Mount, None)])));
        assert!(applies(&spec(&[(User, None), (Network, Some("/proc/1/ns/net"))])));
        assert!(!applies(&spec(&[(Uts, Some(pod)), (Mount, None)])), "no user namespace: opened as root");
        assert!(!applies(&spec(&[(User, None), (Mount, None)])), "nothing by path");
        assert!(!applies(&spec(&[(User, None), (Uts, Some(pod)), (Mount, Some("/proc/1/ns/mnt"))])));
    }

    #[test]
    fn each_path_becomes_a_kept_fd_above_the_preserved_ones() {
        use LinuxNamespaceType::*;
        let own = |t: &str| format!("/proc/{}/ns/{t}", std::process::id());
        let given = spec(&[(User, Some(&own("user"))), (Uts, Some(&own("uts"))), (Mount, None)]);
        let (engine, fds) = hold(&given, 5).unwrap().expect("held");
        assert_eq!(fds.len(), 2);
        let paths: Vec<_> = engine.linux().as_ref().unwrap().namespaces().as_ref().unwrap().iter().map(|n| n.path().clone()).collect();
        for (path, fd) in paths.iter().flatten().zip(&fds) {
            assert!(fd.as_raw_fd() >= 8, "fd {} is among the preserved ones", fd.as_raw_fd());
            assert_eq!(path, &PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())));
            let flags = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFD).unwrap();
            assert_eq!(flags & libc::FD_CLOEXEC, 0, "the engine's forks must inherit it");
        }
        assert_eq!(paths[2], None);
    }
}
