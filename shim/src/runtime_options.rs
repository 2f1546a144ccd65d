//! The cgroup driver, `--no-pivot` and the stdio owner containerd asks for, from each options
//! type it sends: runc's `containerd.runc.v1.Options`; CRI's `runtimeoptions.v1.Options`, which
//! carries the handler's `options` table as TOML (containerd 1.6 sends it to every runtime type
//! that is not runc's); and the v1 `containerd.linux.runc.CreateOptions` that ctr sends to a
//! runtime type not named runc's (`ctr run --no-pivot --runtime io.containerd.rustpod.v1`).

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
    #[error("runtime options: {0} is not a boolean (a TOML {1})")]
    TomlNotBool(&'static str, &'static str),
    #[error("{CREATE_OPTIONS}: {0}")]
    Create(ProtobufError),
    #[error("{CREATE_OPTIONS}: {0} is not supported by this shim")]
    CreateField(&'static str),
}

/// ctr's options type for a runtime type not named `io.containerd.runc.*`.
const CREATE_OPTIONS: &str = "containerd.linux.runc.CreateOptions";

/// The fields of `containerd.linux.runc.CreateOptions` this shim honours
/// (`no_new_keyring` as well: no session keyring is ever made).
#[derive(Debug, Default, PartialEq, Eq)]
struct CreateOptions {
    no_pivot_root: bool,
    io_uid: u32,
    io_gid: u32,
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
        return systemd_cgroup_in_toml(&cri_toml(any)?);
    }
    Ok(false)
}

/// runc's `NoPivotRoot`: the rootfs is moved onto `/` rather than pivoted into.
pub fn no_pivot_root(options: &MessageField<Any>) -> Result<bool, OptionsError> {
    let Some(any) = options.as_ref() else { return Ok(false) };
    if any.type_url.ends_with("containerd.runc.v1.Options") {
        return Ok(RuncOptions::parse_from_bytes(&any.value).map_err(OptionsError::Runc)?.no_pivot_root);
    }
    if any.type_url.ends_with("runtimeoptions.v1.Options") {
        let doc: toml_edit::DocumentMut = cri_toml(any)?.parse()?;
        return match doc.get("NoPivotRoot") {
            None => Ok(false),
            Some(item) => item.as_bool().ok_or_else(|| OptionsError::TomlNotBool("NoPivotRoot", item.type_name())),
        };
    }
    if any.type_url.ends_with(CREATE_OPTIONS) {
        return Ok(parse_create_options(&any.value)?.no_pivot_root);
    }
    Ok(false)
}

/// The handler's options table that a runtimeoptions.v1.Options carries (or names a file of).
fn cri_toml(any: &Any) -> Result<String, OptionsError> {
    let cri = parse_cri_options(&any.value)?;
    let toml = if cri.config_body.is_empty() && !cri.config_path.is_empty() {
        std::fs::read(&cri.config_path).map_err(|source| OptionsError::File { path: cri.config_path.clone(), source })?
    } else {
        cri.config_body
    };
    Ok(String::from_utf8_lossy(&toml).into_owned())
}

/// runc's `IoUid`/`IoGid`: who must own the container's stdio pipes. containerd 2.x sets them
/// to the host ids of a user-namespaced container's root, so that it can reopen
/// `/dev/stdout` (`/proc/self/fd/1`); None when both are 0 or the options are not runc's.
pub fn io_owner(options: &MessageField<Any>) -> Result<Option<(u32, u32)>, OptionsError> {
    let (uid, gid) = match options.as_ref() {
        Some(any) if any.type_url.ends_with("containerd.runc.v1.Options") => {
            let runc = RuncOptions::parse_from_bytes(&any.value).map_err(OptionsError::Runc)?;
            (runc.io_uid, runc.io_gid)
        }
        // ctr's `--uidmap` with this runtime type.
        Some(any) if any.type_url.ends_with(CREATE_OPTIONS) => {
            let create = parse_create_options(&any.value)?;
            (create.io_uid, create.io_gid)
        }
        _ => return Ok(None),
    };
    Ok((uid != 0 || gid != 0).then_some((uid, gid)))
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
/// shim runs rustpod itself; and every field of ctr's CreateOptions but those it honours.
pub fn refuse_unsupported(options: &MessageField<Any>) -> Result<(), OptionsError> {
    if let Some(any) = options.as_ref().filter(|a| a.type_url.ends_with(CREATE_OPTIONS)) {
        return parse_create_options(&any.value).map(drop);
    }
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

/// Decodes containerd.linux.runc.CreateOptions (containerd's runctypes proto): the fields this
/// shim honours, and an error naming the first other one set.
fn parse_create_options(bytes: &[u8]) -> Result<CreateOptions, OptionsError> {
    use containerd_shim::protos::protobuf::rt::WireType;
    const UNSUPPORTED: [(u32, &str); 9] = [
        (2, "open_tcp"),
        (3, "external_unix_sockets"),
        (4, "terminal"),
        (5, "file_locks"),
        (6, "empty_namespaces"),
        (7, "cgroups_mode"),
        (9, "shim_cgroup"),
        (12, "criu_work_path"),
        (13, "criu_image_path"),
    ];
    let bad = OptionsError::Create;
    let mut input = CodedInputStream::from_bytes(bytes);
    let mut options = CreateOptions::default();
    while let Some(tag) = input.read_raw_tag_or_eof().map_err(bad)? {
        let (field, wire) = (tag >> 3, tag & 7);
        match (field, wire) {
            (1, 0) => options.no_pivot_root = input.read_bool().map_err(bad)?,
            (8, 0) => drop(input.read_bool().map_err(bad)?),
            (10, 0) => options.io_uid = input.read_uint32().map_err(bad)?,
            (11, 0) => options.io_gid = input.read_uint32().map_err(bad)?,
            // proto3 leaves defaults off the wire; what is there was set.
            _ => {
                let name = UNSUPPORTED.iter().find(|(n, _)| *n == field).map_or("an unknown field", |(_, name)| name);
                let set = match wire {
                    0 => input.read_uint64().map_err(bad)? != 0,
                    2 => !input.read_bytes().map_err(bad)?.is_empty(),
                    _ => {
                        input.skip_field(WireType::new(wire).ok_or(OptionsError::WireType(tag))?).map_err(bad)?;
                        true
                    }
                };
                if set {
                    return Err(OptionsError::CreateField(name));
                }
            }
        }
    }
    Ok(options)
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

    /// containerd.linux.runc.CreateOptions as ctr encodes it: (field, varint) pairs.
    fn create_options(fields: &[(u32, u64)]) -> MessageField<Any> {
        let mut out = Vec::new();
        let mut stream = containerd_shim::protos::protobuf::CodedOutputStream::vec(&mut out);
        for (field, value) in fields {
            stream.write_uint64(*field, *value).unwrap();
        }
        stream.flush().unwrap();
        drop(stream);
        MessageField::some(Any { type_url: format!("type.googleapis.com/{CREATE_OPTIONS}"), value: out, ..Default::default() })
    }

    #[test]
    fn no_pivot_root_comes_from_each_options_type() {
        let runc = RuncOptions { no_pivot_root: true, ..Default::default() };
        let any = Any { type_url: "containerd.runc.v1.Options".into(), value: runc.write_to_bytes().unwrap(), ..Default::default() };
        assert!(no_pivot_root(&MessageField::some(any)).unwrap());
        assert!(no_pivot_root(&cri_options("", "NoPivotRoot = true\n")).unwrap());
        assert!(!no_pivot_root(&cri_options("", "SystemdCgroup = true\n")).unwrap());
        let err = no_pivot_root(&cri_options("", "NoPivotRoot = 1\n")).unwrap_err();
        assert_eq!(err.to_string(), "runtime options: NoPivotRoot is not a boolean (a TOML integer)");
        assert!(no_pivot_root(&create_options(&[(1, 1)])).unwrap());
        assert!(!no_pivot_root(&MessageField::none()).unwrap());
    }

    #[test]
    fn ctrs_create_options_give_the_pipes_owner_and_refuse_what_is_not_honoured() {
        let both = create_options(&[(1, 1), (8, 1), (10, 100000), (11, 100001)]);
        assert_eq!(io_owner(&both).unwrap(), Some((100000, 100001)));
        assert!(refuse_unsupported(&both).is_ok());
        let err = refuse_unsupported(&create_options(&[(1, 1), (4, 1)])).unwrap_err();
        assert_eq!(err.to_string(), "containerd.linux.runc.CreateOptions: terminal is not supported by this shim");
        // A field at its default is not on the wire, or is zero: nothing asked.
        assert!(refuse_unsupported(&create_options(&[(4, 0)])).is_ok());
    }

    #[test]
    fn a_malformed_option_is_an_error() {
        let not_bool = systemd_cgroup(&cri_options("", "SystemdCgroup = \"yes\"\n")).expect_err("a string");
        assert_eq!(not_bool.to_string(), "runtime options: SystemdCgroup is a string, not a boolean");
        assert!(systemd_cgroup(&cri_options("", "SystemdCgroup = \n")).is_err());
    }
}
