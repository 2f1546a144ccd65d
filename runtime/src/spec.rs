//! `spec`: write a starter config.json into a bundle, as `runc spec` does.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use oci_spec::runtime::Spec;

use crate::error::{Error, Result};

/// The default spec; `rootless` maps the caller's uid/gid into a user
/// namespace.
pub fn default_spec(rootless: bool) -> Spec {
    let mut spec = if rootless {
        Spec::rootless(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw())
    } else {
        Spec::default()
    };
    spec.set_hostname(Some("rustpod".to_string()));
    spec
}

/// Writes `<bundle>/config.json`; refuses to overwrite one.
pub fn write(bundle: &Path, rootless: bool) -> Result<()> {
    let path = bundle.join("config.json");
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                Error::Invalid(format!("{}: file exists; remove it first", path.display()))
            }
            _ => Error::io("create", &path, e),
        })?;
    let data = serde_json::to_string_pretty(&default_spec(rootless))
        .map_err(|e| Error::Invalid(e.to_string()))?;
    file.write_all(data.as_bytes())
        .and_then(|_| file.write_all(b"\n"))
        .map_err(|e| Error::io("write", &path, e))
}
