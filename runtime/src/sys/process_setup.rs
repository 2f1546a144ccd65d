//! Steps the runtime takes on its own process before the engine forks a
//! container process from it: all are inherited by what it forks.

use std::fs;
use std::path::Path;

use oci_spec::runtime::Process;

use crate::error::{Error, Result};

/// Writes `process.oomScoreAdj` to our own oom_score_adj (children inherit
/// it). The engine would report a failure only as "io error"; this names
/// the setting and the likely cause.
pub fn write_oom_score_adj(process: Option<&Process>) -> Result<()> {
    let Some(value) = process.and_then(|p| p.oom_score_adj()) else {
        return Ok(());
    };
    let path = Path::new("/proc/self/oom_score_adj");
    fs::write(path, value.to_string()).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied && value < 0 {
            " (lowering oom_score_adj needs CAP_SYS_RESOURCE)"
        } else {
            ""
        };
        Error::Invalid(format!("process.oomScoreAdj {value}: write oom_score_adj: {e}{hint}"))
    })
}

/// Makes us non-dumpable before we join a container's namespaces, so that
/// nothing inside can ptrace us or open our /proc files (and through them
/// host resources) while we are half in.
pub fn make_undumpable() -> Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(Error::sys("prctl(PR_SET_DUMPABLE, 0)", nix::errno::Errno::last()));
    }
    Ok(())
}

/// Drops our supplementary groups before we fork a container's process,
/// which would keep them: the engine's init sets only a non-empty
/// `user.additionalGids`, where runc's sets exactly that list, so a
/// container user would hold whatever groups the runtime's caller had
/// (`disk`, `docker`...; the class of CVE-2022-2989). A caller without
/// CAP_SETGID (EPERM) gives its container no group it does not hold itself.
pub fn drop_supplementary_groups() -> Result<()> {
    let held = nix::unistd::getgroups().map_err(|e| Error::sys("getgroups", e))?;
    if held.is_empty() {
        return Ok(());
    }
    match nix::unistd::setgroups(&[]) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => Ok(()),
        Err(e) => Err(Error::sys("setgroups([]) before forking the container's process", e)),
    }
}
