//! What containerd's runtime options ask of this shim, decoded once into one value from each
//! options type it sends: runc's `containerd.runc.v1.Options`; CRI's
//! `runtimeoptions.v1.Options`, which carries the handler's `options` table as TOML (containerd
//! sends it to a runtime type that is not runc's); and the v1 `containerd.linux.runc.CreateOptions`
//! that ctr sends to a runtime type not named runc's (`ctr run --no-pivot --runtime
//! io.containerd.rustpod.v1`). All three go through runc's rules: what this shim cannot honour
//! is refused, naming it, rather than ignored.

use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{CodedInputStream, Error as ProtobufError, Message, MessageField};
use containerd_shim::protos::shim::oci::Options as RuncOptions;

/// Why the options containerd sent cannot be read or honoured (the request is at fault).
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
    #[error("runtime options: {key} is a TOML {found}, not {wanted}")]
    TomlType { key: String, found: &'static str, wanted: &'static str },
    #[error("runtime options: unknown key {0:?} (runc's options are NoPivotRoot, NoNewKeyring, ShimCgroup, IoUid, IoGid, BinaryName, Root, SystemdCgroup, CriuImagePath, CriuWorkPath)")]
    UnknownKey(String),
    #[error("runc options: BinaryName {0:?} is not supported: this shim runs rustpod itself (drop BinaryName from the handler's options)")]
    BinaryName(String),
    #[error("runc options: Root {0:?} is not supported: this shim keeps its containers' state under containerd's state dir (drop Root from the handler's options)")]
    Root(String),
    #[error("runtime options of type {0:?} are not supported (this shim reads containerd.runc.v1.Options, runtimeoptions.v1.Options and {CREATE_OPTIONS})")]
    UnknownType(String),
    #[error("{CREATE_OPTIONS}: {0}")]
    Create(ProtobufError),
    #[error("{CREATE_OPTIONS}: {0} is not supported by this shim")]
    CreateField(&'static str),
}

const RUNC_OPTIONS: &str = "containerd.runc.v1.Options";
const CRI_OPTIONS: &str = "runtimeoptions.v1.Options";
/// ctr's options type for a runtime type not named `io.containerd.runc.*`.
const CREATE_OPTIONS: &str = "containerd.linux.runc.CreateOptions";

/// What the options ask of this shim. `NoNewKeyring` needs nothing: no session keyring is
/// ever made. `TaskApiAddress` and `TaskApiVersion` are containerd's own (it dials that
/// address instead of ours).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// The systemd cgroup driver; a malformed option is an error, so that a pod never
    /// silently lands outside its slice.
    pub systemd_cgroup: bool,
    /// runc's `NoPivotRoot`: the rootfs is moved onto `/` rather than pivoted into.
    pub no_pivot_root: bool,
    /// runc's `IoUid`/`IoGid`: who must own the container's stdio pipes. containerd 2.x sets
    /// them to the host ids of a user-namespaced container's root, so that it can reopen
    /// `/dev/stdout` (`/proc/self/fd/1`); None when both are 0.
    pub io_owner: Option<(u32, u32)>,
    /// runc's `ShimCgroup`: the cgroup `start` puts the shim's server in.
    pub shim_cgroup: Option<String>,
    /// runc's `CriuWorkPath`: where criu works when a Create restores.
    pub criu_work_path: Option<String>,
    /// runc's `CriuImagePath`: the images a Create restores from when the request names no
    /// checkpoint (containerd's task service turns it into the request's checkpoint).
    pub criu_image_path: Option<String>,
}

impl RuntimeOptions {
    /// Decodes what containerd sent. Nothing, or an empty Any (what containerd 2's
    /// `ctr containers restore` sends), is the defaults, as containerd's runc shim reads them;
    /// bytes with no type name nothing we could honour, so they are refused.
    pub fn decode(options: &MessageField<Any>) -> Result<RuntimeOptions, OptionsError> {
        let Some(any) = options.as_ref().filter(|any| !(any.type_url.is_empty() && any.value.is_empty())) else {
            return Ok(RuntimeOptions::default());
        };
        let url = any.type_url.as_str();
        let runc = if url.ends_with(RUNC_OPTIONS) {
            RuncOptions::parse_from_bytes(&any.value).map_err(OptionsError::Runc)?
        } else if url.ends_with(CRI_OPTIONS) {
            runc_from_toml(&cri_toml(any)?)?
        } else if url.ends_with(CREATE_OPTIONS) {
            runc_from_create_options(&any.value)?
        } else {
            return Err(OptionsError::UnknownType(any.type_url.clone()));
        };
        RuntimeOptions::from_runc(runc)
    }

    fn from_runc(runc: RuncOptions) -> Result<RuntimeOptions, OptionsError> {
        if !runc.binary_name.is_empty() {
            return Err(OptionsError::BinaryName(runc.binary_name));
        }
        if !runc.root.is_empty() {
            return Err(OptionsError::Root(runc.root));
        }
        let set = |s: String| (!s.is_empty()).then_some(s);
        Ok(RuntimeOptions {
            systemd_cgroup: runc.systemd_cgroup,
            no_pivot_root: runc.no_pivot_root,
            io_owner: (runc.io_uid != 0 || runc.io_gid != 0).then_some((runc.io_uid, runc.io_gid)),
            shim_cgroup: set(runc.shim_cgroup),
            criu_work_path: set(runc.criu_work_path),
            criu_image_path: set(runc.criu_image_path),
        })
    }
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

/// The handler's options table, read with runc's key names as containerd's CRI reads them for
/// runc's shim; a key runc's options do not have is refused (a typo must not pass unseen).
fn runc_from_toml(text: &str) -> Result<RuncOptions, OptionsError> {
    let doc: toml_edit::DocumentMut = text.parse()?;
    let mut runc = RuncOptions::default();
    for (key, item) in doc.iter() {
        let wrong = |wanted| OptionsError::TomlType { key: key.to_string(), found: item.type_name(), wanted };
        let boolean = || item.as_bool().ok_or_else(|| wrong("a boolean"));
        let string = || item.as_str().map(str::to_string).ok_or_else(|| wrong("a string"));
        let id = || item.as_integer().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| wrong("an id (0 to 4294967295)"));
        match key {
            "SystemdCgroup" => runc.systemd_cgroup = boolean()?,
            "NoPivotRoot" => runc.no_pivot_root = boolean()?,
            "NoNewKeyring" => runc.no_new_keyring = boolean()?,
            "IoUid" => runc.io_uid = id()?,
            "IoGid" => runc.io_gid = id()?,
            "ShimCgroup" => runc.shim_cgroup = string()?,
            "BinaryName" => runc.binary_name = string()?,
            "Root" => runc.root = string()?,
            "CriuImagePath" => runc.criu_image_path = string()?,
            "CriuWorkPath" => runc.criu_work_path = string()?,
            "TaskApiAddress" => runc.task_api_address = string()?,
            "TaskApiVersion" => runc.task_api_version = id()?,
            _ => return Err(OptionsError::UnknownKey(key.to_string())),
        }
    }
    Ok(runc)
}

/// Decodes containerd.linux.runc.CreateOptions (containerd's runctypes proto) into runc's
/// options (the fields they share), and an error naming the first other one set.
fn runc_from_create_options(bytes: &[u8]) -> Result<RuncOptions, OptionsError> {
    use containerd_shim::protos::protobuf::rt::WireType;
    const UNSUPPORTED: [(u32, &str); 6] =
        [(2, "open_tcp"), (3, "external_unix_sockets"), (4, "terminal"), (5, "file_locks"), (6, "empty_namespaces"), (7, "cgroups_mode")];
    let bad = OptionsError::Create;
    let mut input = CodedInputStream::from_bytes(bytes);
    let mut runc = RuncOptions::default();
    while let Some(tag) = input.read_raw_tag_or_eof().map_err(bad)? {
        let (field, wire) = (tag >> 3, tag & 7);
        match (field, wire) {
            (1, 0) => runc.no_pivot_root = input.read_bool().map_err(bad)?,
            (8, 0) => runc.no_new_keyring = input.read_bool().map_err(bad)?,
            (9, 2) => runc.shim_cgroup = input.read_string().map_err(bad)?,
            (10, 0) => runc.io_uid = input.read_uint32().map_err(bad)?,
            (11, 0) => runc.io_gid = input.read_uint32().map_err(bad)?,
            (12, 2) => runc.criu_work_path = input.read_string().map_err(bad)?,
            (13, 2) => runc.criu_image_path = input.read_string().map_err(bad)?,
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
    Ok(runc)
}

/// The fields of runtimeoptions.v1.Options we read.
#[derive(Debug, Default, PartialEq, Eq)]
struct CriOptions {
    config_path: String,
    config_body: Vec<u8>,
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

    /// runtimeoptions.v1.Options as containerd encodes it: type_url = 1, config_body = 3.
    fn cri_options(type_url: &str, body: &str) -> MessageField<Any> {
        let mut value = Vec::new();
        let mut stream = containerd_shim::protos::protobuf::CodedOutputStream::vec(&mut value);
        stream.write_string(1, type_url).unwrap();
        stream.write_bytes(3, body.as_bytes()).unwrap();
        stream.flush().unwrap();
        drop(stream);
        MessageField::some(Any { type_url: CRI_OPTIONS.into(), value, ..Default::default() })
    }

    fn runc_options(runc: RuncOptions) -> MessageField<Any> {
        let value = runc.write_to_bytes().unwrap();
        MessageField::some(Any { type_url: RUNC_OPTIONS.into(), value, ..Default::default() })
    }

    fn decode(options: &MessageField<Any>) -> RuntimeOptions {
        RuntimeOptions::decode(options).expect("options decode")
    }

    fn refusal(options: &MessageField<Any>) -> String {
        RuntimeOptions::decode(options).expect_err("options refused").to_string()
    }

    #[test]
    fn no_options_are_the_defaults() {
        assert_eq!(decode(&MessageField::none()), RuntimeOptions::default());
        assert_eq!(decode(&MessageField::some(Any::default())), RuntimeOptions::default());
        let untyped = MessageField::some(Any { value: vec![0x0a, 0x01, b'x'], ..Default::default() });
        assert!(refusal(&untyped).starts_with("runtime options of type \"\" are not supported"));
    }

    #[test]
    fn cri_handler_options_toml_reads_runcs_keys() {
        let options = cri_options(
            "io.containerd.rustpod.v1",
            "BinaryName = \"\"\nRoot = \"\"\nSystemdCgroup = true\nNoPivotRoot = true\nShimCgroup = \"/pods/shim\"\nIoUid = 5\nIoGid = 6\nCriuWorkPath = \"/w\"\nCriuImagePath = \"\"\nNoNewKeyring = false\n",
        );
        let expected = RuntimeOptions {
            systemd_cgroup: true,
            no_pivot_root: true,
            io_owner: Some((5, 6)),
            shim_cgroup: Some("/pods/shim".into()),
            criu_work_path: Some("/w".into()),
            criu_image_path: None,
        };
        assert_eq!(decode(&options), expected);
        assert_eq!(decode(&cri_options("", "")), RuntimeOptions::default());
    }

    #[test]
    fn runc_options_are_read() {
        let runc = RuncOptions {
            systemd_cgroup: true,
            io_uid: 65536,
            io_gid: 65537,
            shim_cgroup: "/shim".into(),
            criu_image_path: "/images".into(),
            ..Default::default()
        };
        let got = decode(&runc_options(runc));
        assert!(got.systemd_cgroup && !got.no_pivot_root);
        assert_eq!(got.io_owner, Some((65536, 65537)));
        assert_eq!(got.shim_cgroup.as_deref(), Some("/shim"));
        assert_eq!(got.criu_image_path.as_deref(), Some("/images"));
        assert_eq!(got.criu_work_path, None);
    }

    #[test]
    fn what_this_shim_cannot_honour_is_refused_in_every_options_type() {
        let crun = RuncOptions { binary_name: "/usr/bin/crun".into(), ..Default::default() };
        assert!(refusal(&runc_options(crun)).contains("BinaryName \"/usr/bin/crun\""));
        assert!(refusal(&cri_options("", "BinaryName = \"x\"\n")).contains("BinaryName \"x\""));
        let root = RuncOptions { root: "/run/elsewhere".into(), ..Default::default() };
        assert!(refusal(&runc_options(root)).contains("Root \"/run/elsewhere\" is not supported"));
        assert!(refusal(&cri_options("", "Root = \"/r\"\n")).contains("Root \"/r\""));
        let other = MessageField::some(Any { type_url: "type.googleapis.com/runhcs.v1.Options".into(), ..Default::default() });
        assert!(refusal(&other).starts_with("runtime options of type \"type.googleapis.com/runhcs.v1.Options\" are not supported"));
    }

    #[test]
    fn a_malformed_or_unknown_toml_key_is_an_error() {
        assert_eq!(
            refusal(&cri_options("", "SystemdCgroup = \"yes\"\n")),
            "runtime options: SystemdCgroup is a TOML string, not a boolean"
        );
        assert_eq!(refusal(&cri_options("", "NoPivotRoot = 1\n")), "runtime options: NoPivotRoot is a TOML integer, not a boolean");
        assert!(refusal(&cri_options("", "IoUid = -1\n")).starts_with("runtime options: IoUid is a TOML integer, not an id"));
        assert!(refusal(&cri_options("", "SystemdCgroups = true\n")).starts_with("runtime options: unknown key \"SystemdCgroups\""));
        assert!(RuntimeOptions::decode(&cri_options("", "SystemdCgroup = \n")).is_err());
    }

    /// containerd.linux.runc.CreateOptions as ctr encodes it.
    fn create_options(varints: &[(u32, u64)], strings: &[(u32, &str)]) -> MessageField<Any> {
        let mut out = Vec::new();
        let mut stream = containerd_shim::protos::protobuf::CodedOutputStream::vec(&mut out);
        for (field, value) in varints {
            stream.write_uint64(*field, *value).unwrap();
        }
        for (field, value) in strings {
            stream.write_string(*field, value).unwrap();
        }
        stream.flush().unwrap();
        drop(stream);
        MessageField::some(Any { type_url: format!("type.googleapis.com/{CREATE_OPTIONS}"), value: out, ..Default::default() })
    }

    #[test]
    fn ctrs_create_options_are_read_and_what_is_not_honoured_refused() {
        let all = create_options(&[(1, 1), (8, 1), (10, 100000), (11, 100001)], &[(9, "/shim"), (12, "/w"), (13, "/i")]);
        let got = decode(&all);
        assert!(got.no_pivot_root);
        assert_eq!(got.io_owner, Some((100000, 100001)));
        assert_eq!(
            (got.shim_cgroup.as_deref(), got.criu_work_path.as_deref(), got.criu_image_path.as_deref()),
            (Some("/shim"), Some("/w"), Some("/i"))
        );
        assert_eq!(
            refusal(&create_options(&[(1, 1), (4, 1)], &[])),
            "containerd.linux.runc.CreateOptions: terminal is not supported by this shim"
        );
        // A field at its default is not on the wire, or is zero: nothing asked.
        assert_eq!(decode(&create_options(&[(4, 0)], &[])), RuntimeOptions::default());
    }
}
