//! Capabilities a process asks for that the runtime does not have: the
//! engine's capset() then fails with only "failed syscall". Said as runc
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
    let ours = caps::read(None, CapSet::Permitted)
        .map_err(|e| Error::Invalid(format!("read our permitted capabilities: {e}")))?;
    match missing(process, &ours).as_slice() {
        [] => Ok(()),
        names => Err(Error::Invalid(format!(
            "unable to apply caps: capset: operation not permitted ({} not in the runtime's permitted set)",
            names.join(", ")
        ))),
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
