//! The cgroup driver (and the stdio owner) containerd asks for, from either options type it sends:
//! runc's `containerd.runc.v1.Options`, or CRI's `runtimeoptions.v1.Options`,
//! which carries the handler's `options` table as TOML (containerd 1.6 sends
//! it to every runtime type that is not runc's).

use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{CodedInputStream, Error as ProtobufError, Message, MessageField};
use containerd_shim::protos::shim::oci::Options as RuncOptions;

/// Why the options containerd sent cannot be read (the request is at fault).
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error("runc options: {0}")]
    Runc(ProtobufError),
    #[error("runtimeoptions.v1.Options: {0}")]
    Cri(ProtobufError),
    #[error("runtimeoptions.v1.Options: bad wire type in tag {0:#x}")]
    WireType(u32),
    #[error("runtime options file {path}: read: {source}")]
    File { path: String, source: std::io::Error },
    #[error("runtime options TOML: {0}")]
    Toml(#[from] toml_edit::TomlError),
    #[error("runtime options: SystemdCgroup is a {0}, not a boolean")]
    NotBool(&'static str),
    #[error("runc options: BinaryName {0:?} is not supported: this shim runs rustpod itself (drop BinaryName from the handler's options)")]
    BinaryName(String),
}

/// The fields of runtimeoptions.v1.Options we read.
#[derive(Debug, Default, PartialEq, Eq)]
struct CriOptions {
    config_path: String,
    config_body: Vec<u8>,
}

/// Whether containerd asked for the systemd cgroup driver; a malformed
/// option is an error, so that a pod never silently lands outside its slice.
pub fn systemd_cgroup(options: &MessageField<Any>) -> Result<bool, OptionsError> {
    let Some(any) = options.as_ref() else { return Ok(false) };
    if any.type_url.ends_with("containerd.runc.v1.Options") {
        let runc = RuncOptions::parse_from_bytes(&any.value).map_err(OptionsError::Runc)?;
        return Ok(runc.systemd_cgroup);
    }
    if any.type_url.ends_with("runtimeoptions.v1.Options") {
        let cri = parse_cri_options(&any.value)?;
        let toml = if cri.config_body.is_empty() && !cri.config_path.is_empty() {
            std::fs::read(&cri.config_path).map_err(|source| OptionsError::File { path: cri.config_path.clone(), source })?
        } else {
            cri.config_body
        };
        return systemd_cgroup_in_toml(&String::from_utf8_lossy(&toml));
    }
    Ok(false)
}

/// runc's `IoUid`/`IoGid`: who must own the container's stdio pipes. containerd 2.x sets them
/// to the host ids of a user-namespaced container's root, so that it can reopen
/// `/dev/stdout` (`/proc/self/fd/1`); None when both are 0 or the options are not runc's.
pub fn io_owner(options: &MessageField<Any>) -> Result<Option<(u32, u32)>, OptionsError> {
    let Some(any) = options.as_ref().filter(|a| a.type_url.ends_with("containerd.runc.v1.Options")) else {
        return Ok(None);
    };
    let runc = RuncOptions::parse_from_bytes(&any.value).map_err(OptionsError::Runc)?;
    Ok((runc.io_uid != 0 || runc.io_gid != 0).then_some((runc.io_uid, runc.io_gid)))
}

/// runc's `CriuWorkPath`: where criu works when a Create restores (None: unset, or the options
/// are not runc's).
pub fn criu_work_path(options: &MessageField<Any>) -> Result<Option<String>, OptionsError> {
    let Some(any) = options.as_ref().filter(|a| a.type_url.ends_with("containerd.runc.v1.Options")) else {
        return Ok(None);
    };
    let runc = RuncOptions::parse_from_bytes(&any.value).map_err(OptionsError::Runc)?;
    Ok((!runc.criu_work_path.is_empty()).then_some(runc.criu_work_path))
}

/// runc's options this shim cannot honour, refused rather than ignored: `BinaryName` (an OCI
/// runtime binary to run) when a runc-typed handler (`runtime_path` this shim) names one: the
/// shim runs rustpod itself.
pub fn refuse_unsupported(options: &MessageField<Any>) -> Result<(), OptionsError> {
    let Some(any) = options.as_ref().filter(|a| a.type_url.ends_with("containerd.runc.v1.Options")) else {
        return Ok(());
    };
    let runc = RuncOptions::parse_from_bytes(&any.value).map_err(OptionsError::Runc)?;
    if !runc.binary_name.is_empty() {
        return Err(OptionsError::BinaryName(runc.binary_name));
    }
    Ok(())
}

/// `SystemdCgroup` of the handler's options table.
fn systemd_cgroup_in_toml(text: &str) -> Result<bool, OptionsError> {
    let doc: toml_edit::DocumentMut = text.parse()?;
    match doc.get("SystemdCgroup") {
        None => Ok(false),
        Some(item) => item.as_bool().ok_or_else(|| OptionsError::NotBool(item.type_name())),
    }
}

/// Decodes runtimeoptions.v1.Options: config_path = 2, config_body = 3.
fn parse_cri_options(bytes: &[u8]) -> Result<CriOptions, OptionsError> {
    let bad = OptionsError::Cri;
    let mut input = CodedInputStream::from_bytes(bytes);
    let mut options = CriOptions::default();
    while let Some(tag) = input.read_raw_tag_or_eof().map_err(bad)? {
        match tag {
            // Field 2 and 3, wire type 2 (length-delimited).
            0x12 => options.config_path = input.read_string().map_err(bad)?,
            0x1a => options.config_body = input.read_bytes().map_err(bad)?,
            _ => input
                .skip_field(containerd_shim::protos::protobuf::rt::WireType::new(tag & 7).ok_or(OptionsError::WireType(tag))?)
                .map_err(bad)?,
        }
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// runtimeoptions.v1.Options as containerd encodes it.
    fn cri_options(type_url: &str, body: &str) -> MessageField<Any> {
        let mut value = Vec::new();
        for (tag, bytes) in [(0x0a, type_url.as_bytes()), (0x1a, body.as_bytes())] {
            value.push(tag);
            value.push(bytes.len() as u8);
            value.extend_from_slice(bytes);
        }
        MessageField::some(Any { type_url: "runtimeoptions.v1.Options".into(), value, ..Default::default() })
    }

    #[test]
    fn cri_handler_options_toml_turns_on_systemd() {
        let options = cri_options("io.containerd.rustpod.v1", "BinaryName = \"\"\nSystemdCgroup = true\n");
        assert_eq!(systemd_cgroup(&options).ok(), Some(true));
        assert_eq!(systemd_cgroup(&cri_options("", "Root = \"/x\"\n")).ok(), Some(false));
    }

    #[test]
    fn runc_options_turn_on_systemd() {
        let runc = RuncOptions { systemd_cgroup: true, ..Default::default() };
        let any = Any {
            type_url: "containerd.runc.v1.Options".into(),
            value: runc.write_to_bytes().unwrap(),
            ..Default::default()
        };
        assert_eq!(systemd_cgroup(&MessageField::some(any)).ok(), Some(true));
        assert_eq!(systemd_cgroup(&MessageField::none()).ok(), Some(false));
    }

    #[test]
    fn runc_io_ids_own_the_pipes() {
        let runc = RuncOptions { io_uid: 65536, io_gid: 65537, ..Default::default() };
        let any = Any { type_url: "containerd.runc.v1.Options".into(), value: runc.write_to_bytes().unwrap(), ..Default::default() };
        assert_eq!(io_owner(&MessageField::some(any)).unwrap(), Some((65536, 65537)));
        assert_eq!(io_owner(&cri_options("", "IoUid = 5\n")).unwrap(), None);
        assert_eq!(io_owner(&MessageField::none()).unwrap(), None);
    }

    #[test]
    fn a_binary_name_is_refused() {
        let runc = RuncOptions { binary_name: "/usr/bin/crun".into(), ..Default::default() };
        let any = Any { type_url: "containerd.runc.v1.Options".into(), value: runc.write_to_bytes().unwrap(), ..Default::default() };
        assert!(refuse_unsupported(&MessageField::some(any)).unwrap_err().to_string().contains("BinaryName \"/usr/bin/crun\""));
        assert!(refuse_unsupported(&cri_options("", "BinaryName = \"x\"\n")).is_ok());
    }

    #[test]
    fn a_malformed_option_is_an_error() {
        let not_bool = systemd_cgroup(&cri_options("", "SystemdCgroup = \"yes\"\n")).expect_err("a string");
        assert_eq!(not_bool.to_string(), "runtime options: SystemdCgroup is a string, not a boolean");
        assert!(systemd_cgroup(&cri_options("", "SystemdCgroup = \n")).is_err());
    }
}
