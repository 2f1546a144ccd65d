//! What a process asks for that the runtime cannot give (capabilities it
//! lacks, rlimits above its hard limits without CAP_SYS_RESOURCE): the
//! engine then fails with only "failed syscall" or "EPERM". Said as runc
//! says it, before anything is made.

use caps::{CapSet, Capability, CapsHashSet};
use oci_spec::runtime::Process;

use crate::error::{Error, Result};

/// The capabilities `process` asks to hold (permitted, effective,
/// inheritable, ambient) that are not in `ours`.
pub fn missing(process: &Process, ours: &CapsHashSet) -> Vec<String> {
    let Some(sets) = process.capabilities() else { return Vec::new() };
    let mut missing: Vec<String> = [sets.permitted(), sets.effective(), sets.inheritable(), sets.ambient()]
        .into_iter()
        .flatten()
        .flatten()
        // oci-spec prints `SYS_ADMIN`; the spec and the caps crate say `CAP_SYS_ADMIN`.
        .map(|cap| match cap.to_string() {
            name if name.starts_with("CAP_") => name,
            name => format!("CAP_{name}"),
        })
        .filter(|name| name.parse::<Capability>().is_ok_and(|c| !ours.contains(&c)))
        .collect();
    missing.sort();
    missing.dedup();
    missing
}

/// Fails as runc does when `process` asks for a capability we cannot give.
pub fn check(process: Option<&Process>) -> Result<()> {
    let Some(process) = process else { return Ok(()) };
    let ours = caps::read(None, CapSet::Permitted).map_err(|e| Error::Invalid(format!("read our permitted capabilities: {e}")))?;
    match missing(process, &ours).as_slice() {
        [] => Ok(()),
        names => Err(Error::Invalid(format!(
            "unable to apply caps: capset: operation not permitted ({} not in the runtime's permitted set)",
            names.join(", ")
        ))),
    }
}

/// Fails as runc does when `process` asks for an rlimit above our hard
/// limit and we may not raise it (setrlimit needs CAP_SYS_RESOURCE there).
pub fn check_rlimits(process: Option<&Process>) -> Result<()> {
    let Some(rlimits) = process.and_then(|p| p.rlimits().as_ref()) else { return Ok(()) };
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SYS_RESOURCE).unwrap_or(false) {
        return Ok(());
    }
    for rlimit in rlimits {
        let resource = resource_number(rlimit.typ());
        let mut ours = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: a valid resource number and a pointer to a local.
        if unsafe { libc::getrlimit(resource as _, &mut ours) } != 0 {
            continue;
        }
        if rlimit.hard() > ours.rlim_max {
            return Err(Error::Invalid(format!(
                "error setting rlimit type {resource}: operation not permitted \
                 (setrlimit: hard limit {} is above the runtime's {} and it lacks CAP_SYS_RESOURCE)",
                rlimit.hard(),
                ours.rlim_max
            )));
        }
    }
    Ok(())
}

/// The kernel's number of an OCI rlimit type (runc's "rlimit type N").
fn resource_number(typ: oci_spec::runtime::PosixRlimitType) -> u32 {
    use oci_spec::runtime::PosixRlimitType as T;

    match typ {
        T::RlimitCpu => libc::RLIMIT_CPU,
        T::RlimitFsize => libc::RLIMIT_FSIZE,
        T::RlimitData => libc::RLIMIT_DATA,
        T::RlimitStack => libc::RLIMIT_STACK,
        T::RlimitCore => libc::RLIMIT_CORE,
        T::RlimitRss => libc::RLIMIT_RSS,
        T::RlimitNproc => libc::RLIMIT_NPROC,
        T::RlimitNofile => libc::RLIMIT_NOFILE,
        T::RlimitMemlock => libc::RLIMIT_MEMLOCK,
        T::RlimitAs => libc::RLIMIT_AS,
        T::RlimitLocks => libc::RLIMIT_LOCKS,
        T::RlimitSigpending => libc::RLIMIT_SIGPENDING,
        T::RlimitMsgqueue => libc::RLIMIT_MSGQUEUE,
        T::RlimitNice => libc::RLIMIT_NICE,
        T::RlimitRtprio => libc::RLIMIT_RTPRIO,
        T::RlimitRttime => libc::RLIMIT_RTTIME,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{Capability as SpecCap, LinuxCapabilitiesBuilder, ProcessBuilder};

    #[test]
    fn names_each_requested_capability_we_lack_once() {
        let asked = [SpecCap::Chown, SpecCap::SysResource, SpecCap::SysAdmin].into_iter().collect::<std::collections::HashSet<_>>();
        let caps = LinuxCapabilitiesBuilder::default()
            .bounding(asked.clone())
            .permitted(asked.clone())
            .effective(asked)
            .inheritable(std::collections::HashSet::new())
            .ambient(std::collections::HashSet::new())
            .build()
            .unwrap();
        let process = ProcessBuilder::default().capabilities(caps).build().unwrap();
        let ours: CapsHashSet = [Capability::CAP_CHOWN, Capability::CAP_SYS_ADMIN].into_iter().collect();
        assert_eq!(missing(&process, &ours), vec!["CAP_SYS_RESOURCE"]);
    }

    #[test]
    fn rlimit_types_are_the_kernels_numbers() {
        use oci_spec::runtime::PosixRlimitType as T;
        assert_eq!(resource_number(T::RlimitNofile), 7, "runc's 'rlimit type 7'");
        assert_eq!(resource_number(T::RlimitNproc), 6);
    }

    #[test]
    fn the_bounding_set_alone_asks_for_nothing() {
        let asked = [SpecCap::SysResource].into_iter().collect::<std::collections::HashSet<_>>();
        let none = std::collections::HashSet::new();
        let caps = LinuxCapabilitiesBuilder::default()
            .bounding(asked)
            .permitted(none.clone())
            .effective(none.clone())
            .inheritable(none.clone())
            .ambient(none)
            .build()
            .unwrap();
        let process = ProcessBuilder::default().capabilities(caps).build().unwrap();
        assert!(missing(&process, &CapsHashSet::new()).is_empty());
    }
}
