//! `spec`: write a starter config.json into a bundle, as `runc spec` does.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use oci_spec::runtime::{LinuxDeviceCgroupBuilder, Spec};

use crate::error::{Error, Result};

/// The default spec; `rootless` maps the caller's uid/gid into a user
/// namespace.
pub fn default_spec(rootless: bool) -> Spec {
    let mut spec =
        if rootless { Spec::rootless(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw()) } else { Spec::default() };
    spec.set_hostname(Some("rustpod".to_string()));
    as_runc_starter(&mut spec);
    spec
}

/// What runc's starter spec has and oci-spec's default lacks: a deny-all
/// device rule (so a CAP_MKNOD process cannot open host devices it makes),
/// no inheritable capabilities (CVE-2022-29162, runc >= 1.1.2) and no ambient
/// ones (runc >= 1.2: a non-root user would keep them across exec), and the
/// spec version this build implements, as runc writes its own.
fn as_runc_starter(spec: &mut Spec) {
    spec.set_version(crate::engine::spec_support::OCI_VERSION_MAX.to_string());
    if let Some(process) = spec.process_mut() {
        let mut caps = process.capabilities().clone().unwrap_or_default();
        caps.set_inheritable(None);
        caps.set_ambient(None);
        process.set_capabilities(Some(caps));
    }
    // A rootless spec has no resources at all, as runc's.
    let Some(resources) = spec.linux_mut().as_mut().and_then(|l| l.resources_mut().as_mut()) else {
        return;
    };
    let deny_all = LinuxDeviceCgroupBuilder::default().allow(false).access("rwm").build().expect("a literal rule builds");
    resources.set_devices(Some(vec![deny_all]));
}

/// Writes `<bundle>/config.json`; refuses to overwrite one.
pub fn write(bundle: &Path, rootless: bool) -> Result<()> {
    let path = bundle.join("config.json");
    let mut file = OpenOptions::new().write(true).create_new(true).open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => Error::Invalid(format!("{}: file exists; remove it first", path.display())),
        _ => Error::io("create", &path, e),
    })?;
    let data = serde_json::to_string_pretty(&default_spec(rootless)).map_err(|e| Error::Invalid(e.to_string()))?;
    file.write_all(data.as_bytes()).and_then(|_| file.write_all(b"\n")).map_err(|e| Error::io("write", &path, e))
}
