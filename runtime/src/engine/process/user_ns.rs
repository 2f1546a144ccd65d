//! A new user namespace made by the init's own clone (`CLONE_NEWUSER` with
//! the other new namespaces, which it then owns): the parent writes its
//! maps while the init waits at its go signal, then the init becomes root
//! in it before any other step. libcontainer's intermediate unshares it and
//! asks its main process for the maps; here no intermediate is needed,
//! since every namespace the init makes comes after the user namespace in
//! the same clone or from the init itself.

use nix::sched::CloneFlags;
use nix::unistd::Pid;
use oci_spec::runtime::{LinuxNamespaceType, Spec};

use crate::engine::idmap::userns::{write_map, UsernsError};

/// `CLONE_NEWUSER` when `spec` lists a user namespace without a path.
pub fn new_flag(spec: &Spec) -> CloneFlags {
    match is_new(spec) {
        true => CloneFlags::CLONE_NEWUSER,
        false => CloneFlags::empty(),
    }
}

/// Whether `spec` asks for a new user namespace.
pub fn is_new(spec: &Spec) -> bool {
    let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    listed.into_iter().flatten().any(|ns| ns.typ() == LinuxNamespaceType::User && ns.path().is_none())
}

/// Whether `spec` joins a user namespace by path.
pub fn is_joined(spec: &Spec) -> bool {
    let listed = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref());
    listed.into_iter().flatten().any(|ns| ns.typ() == LinuxNamespaceType::User && ns.path().is_some())
}

/// The parent's step: `spec`'s uid and gid maps written for `pid`'s new
/// user namespace (gid first would work too; the kernel takes each once).
pub fn write_maps(spec: &Spec, pid: Pid) -> Result<(), UsernsError> {
    let linux = spec.linux().as_ref();
    let uid = linux.and_then(|l| l.uid_mappings().as_deref()).unwrap_or_default();
    let gid = linux.and_then(|l| l.gid_mappings().as_deref()).unwrap_or_default();
    write_map(pid.as_raw(), "uid_map", uid)?;
    write_map(pid.as_raw(), "gid_map", gid)
}
