//! `start`'s handshake with containerd: 2.3's bootstrap protocol
//! (`BootstrapParams` on stdin, a `BootstrapResult` on stdout), and the plain
//! address that containerd 1.6 to 2.2 read when stdin carries no params.

use std::io::Read;
use std::os::fd::AsFd;

use containerd_shim::bootstrap::{BootstrapParams, BootstrapResult, LogLevel};
use containerd_shim::protos::protobuf::{Enum, Message};
use containerd_shim::{Flags, StartOpts};

/// The task API version we answer 2.3 with: the server serves
/// `containerd.task.v3` (and v2 for older containerds).
pub const TASK_API_VERSION: i32 = 3;
/// The only transport the server speaks.
const PROTOCOL: &str = "ttrpc";
/// containerd caps what it sends at 10 MiB; so do we.
const MAX_INPUT: u64 = 10 << 20;

/// How `start` must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// containerd 1.6 to 2.2: the address alone (task API v2).
    Address,
    /// containerd 2.3 and later: a protobuf `BootstrapResult`.
    Result,
}

/// What containerd piped to `start`: empty for a terminal or `/dev/null`
/// (a shim started by hand, or a containerd that sends nothing).
pub fn read_stdin() -> std::io::Result<Vec<u8>> {
    let stdin = std::io::stdin();
    if !carries_data(stdin.as_fd()) {
        return Ok(Vec::new());
    }
    let mut input = Vec::new();
    stdin.lock().take(MAX_INPUT).read_to_end(&mut input)?;
    Ok(input)
}

/// Only a pipe, socket or file can carry params; a terminal or `/dev/null`
/// (a character device) carries none, and reading a terminal would block.
fn carries_data(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let Ok(file) = fd.try_clone_to_owned().map(std::fs::File::from) else { return false };
    file.metadata().map(|m| m.file_type()).is_ok_and(|t| t.is_fifo() || t.is_socket() || t.is_file())
}

/// The options `start` works with, and how it must answer: from the
/// bootstrap params when `input` is params for this very shim (`-id` and
/// `-namespace`), else from the flags and environment as before 2.3.
pub fn start_opts(input: &[u8], flags: &Flags, env_ttrpc_address: String) -> (StartOpts, Reply) {
    let legacy = || StartOpts {
        id: flags.id.clone(),
        publish_binary: flags.publish_binary.clone(),
        address: flags.address.clone(),
        ttrpc_address: env_ttrpc_address.clone(),
        namespace: flags.namespace.clone(),
        debug: flags.debug,
        ..Default::default()
    };
    let Some(params) = params_for(input, &flags.id, &flags.namespace) else {
        return (legacy(), Reply::Address);
    };
    let debug = flags.debug || params.log_level.value() <= LogLevel::LOG_LEVEL_DEBUG.value();
    let mut opts = StartOpts::from(params);
    opts.debug = debug;
    // The socket's name hashes containerd's address: keep it the one the
    // group's other containers got, whichever way it came.
    if opts.address.is_empty() {
        opts.address = flags.address.clone();
    }
    if opts.ttrpc_address.is_empty() {
        opts.ttrpc_address = env_ttrpc_address;
    }
    if opts.publish_binary.is_empty() {
        opts.publish_binary = flags.publish_binary.clone();
    }
    (opts, Reply::Result)
}

/// `input` as this shim's `BootstrapParams`. containerd before 2.3 pipes the
/// runtime options (a protobuf `Any`), which decode as params too (type URL
/// as `instance_id`, value as `namespace`): only params naming this shim's
/// id and namespace are params, as containerd's Go shim decides.
fn params_for(input: &[u8], id: &str, namespace: &str) -> Option<BootstrapParams> {
    if input.is_empty() {
        return None;
    }
    let params = BootstrapParams::parse_from_bytes(input).ok()?;
    (params.instance_id == id && params.namespace == namespace).then_some(params)
}

/// What `start` prints for the server at `address`.
pub fn encode_reply(address: &str, reply: Reply) -> containerd_shim::protos::protobuf::Result<Vec<u8>> {
    match reply {
        Reply::Address => Ok(address.as_bytes().to_vec()),
        Reply::Result => BootstrapResult {
            version: TASK_API_VERSION,
            address: address.to_string(),
            protocol: PROTOCOL.to_string(),
            ..Default::default()
        }
        .write_to_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_shim::bootstrap::Extension;
    use containerd_shim::protos::protobuf::well_known_types::any::Any;
    use containerd_shim::protos::protobuf::EnumOrUnknown;

    const ID: &str = "c1";
    const NS: &str = "k8s.io";
    const ENV_TTRPC: &str = "/run/containerd/containerd.sock.ttrpc";

    fn flags() -> Flags {
        Flags {
            id: ID.into(),
            namespace: NS.into(),
            address: "/run/containerd/containerd.sock".into(),
            publish_binary: "/usr/bin/containerd".into(),
            action: "start".into(),
            ..Default::default()
        }
    }

    /// What containerd 2.3's `start` writes on stdin.
    fn params(socket_dir: Option<&str>) -> BootstrapParams {
        BootstrapParams {
            instance_id: ID.into(),
            namespace: NS.into(),
            log_level: EnumOrUnknown::new(LogLevel::LOG_LEVEL_INFO),
            containerd_version: "v2.3.4".into(),
            containerd_ttrpc_address: "/run/ctd2/containerd.sock.ttrpc".into(),
            containerd_grpc_address: "/run/containerd/containerd.sock".into(),
            containerd_binary: "/opt/ctd2/bin/containerd".into(),
            socket_dir: socket_dir.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn params_with_socket_dir_put_the_socket_there() {
        let input = params(Some("/run/ctd2/s")).write_to_bytes().unwrap();
        let (opts, reply) = start_opts(&input, &flags(), ENV_TTRPC.into());
        assert_eq!(reply, Reply::Result);
        assert_eq!(opts.socket_dir.as_deref(), Some("/run/ctd2/s"));
        let address = opts.socket_address(ID);
        assert!(address.starts_with("unix:///run/ctd2/s/"), "{address}");
        assert_eq!(opts.ttrpc_address, "/run/ctd2/containerd.sock.ttrpc", "params win over the environment");
        assert_eq!(opts.publish_binary, "/opt/ctd2/bin/containerd");
        assert_eq!(opts.containerd_version, "v2.3.4");
        assert!(!opts.debug);
    }

    #[test]
    fn params_without_socket_dir_keep_containerds_socket_root() {
        let input = params(None).write_to_bytes().unwrap();
        let (opts, reply) = start_opts(&input, &flags(), ENV_TTRPC.into());
        assert_eq!(reply, Reply::Result);
        assert_eq!(opts.socket_dir, None);
        // The same socket a pre-2.3 start of the group computes.
        let (legacy, _) = start_opts(b"", &flags(), ENV_TTRPC.into());
        assert_eq!(opts.socket_address(ID), legacy.socket_address(ID));
        assert!(opts.socket_address(ID).starts_with("unix:///run/containerd/s/"));
    }

    #[test]
    fn params_debug_level_or_flag_turn_debug_on() {
        let mut p = params(None);
        p.log_level = EnumOrUnknown::new(LogLevel::LOG_LEVEL_TRACE);
        let (opts, _) = start_opts(&p.write_to_bytes().unwrap(), &flags(), ENV_TTRPC.into());
        assert!(opts.debug);
        let mut f = flags();
        f.debug = true;
        let (opts, _) = start_opts(&params(None).write_to_bytes().unwrap(), &f, ENV_TTRPC.into());
        assert!(opts.debug);
    }

    #[test]
    fn params_without_ttrpc_address_fall_back_to_the_environment() {
        let mut p = params(None);
        p.containerd_ttrpc_address.clear();
        let (opts, reply) = start_opts(&p.write_to_bytes().unwrap(), &flags(), ENV_TTRPC.into());
        assert_eq!(reply, Reply::Result);
        assert_eq!(opts.ttrpc_address, ENV_TTRPC);
    }

    #[test]
    fn empty_stdin_is_todays_start() {
        let (opts, reply) = start_opts(b"", &flags(), ENV_TTRPC.into());
        assert_eq!(reply, Reply::Address);
        assert_eq!((opts.id.as_str(), opts.namespace.as_str()), (ID, NS));
        assert_eq!(opts.ttrpc_address, ENV_TTRPC);
        assert_eq!(opts.address, "/run/containerd/containerd.sock");
        assert_eq!(opts.socket_dir, None);
    }

    /// containerd 1.6's CRI pipes the handler's options as an `Any`: it
    /// decodes as params naming another "id", and must not be taken for them.
    #[test]
    fn runtime_options_on_stdin_are_not_params() {
        let any = Any { type_url: "runtimeoptions.v1.Options".into(), value: b"\n\x14SystemdCgroup = true".to_vec(), ..Default::default() };
        let input = any.write_to_bytes().unwrap();
        assert!(BootstrapParams::parse_from_bytes(&input).is_ok(), "the ambiguity this guards against");
        let (opts, reply) = start_opts(&input, &flags(), ENV_TTRPC.into());
        assert_eq!(reply, Reply::Address);
        assert_eq!(opts.id, ID);
    }

    #[test]
    fn params_for_another_shim_or_garbage_are_not_params() {
        let mut other = params(None);
        other.instance_id = "someone-else".into();
        assert_eq!(start_opts(&other.write_to_bytes().unwrap(), &flags(), ENV_TTRPC.into()).1, Reply::Address);
        assert_eq!(start_opts(&[0xff, 0xfe, 0x01], &flags(), ENV_TTRPC.into()).1, Reply::Address);
    }

    #[test]
    fn params_with_extensions_are_read() {
        let mut p = params(None);
        p.extensions.push(Extension {
            value: Some(Any { type_url: "runtimeoptions.v1.Options".into(), ..Default::default() }).into(),
            ..Default::default()
        });
        let (opts, reply) = start_opts(&p.write_to_bytes().unwrap(), &flags(), ENV_TTRPC.into());
        assert_eq!(reply, Reply::Result);
        assert_eq!(opts.extensions.len(), 1);
    }

    #[test]
    fn result_decodes_to_version_3_ttrpc_and_the_address() {
        let bytes = encode_reply("unix:///run/containerd/s/abc", Reply::Result).unwrap();
        let result = BootstrapResult::parse_from_bytes(&bytes).unwrap();
        assert_eq!(result.version, 3);
        assert_eq!(result.protocol, "ttrpc");
        assert_eq!(result.address, "unix:///run/containerd/s/abc");
        // containerd trims whitespace off the reply before a fallback parse;
        // the message must neither start nor end with any.
        assert!(!bytes.first().unwrap().is_ascii_whitespace() && !bytes.last().unwrap().is_ascii_whitespace());
    }

    #[test]
    fn plain_reply_is_the_address_alone() {
        assert_eq!(encode_reply("unix:///run/containerd/s/abc", Reply::Address).unwrap(), b"unix:///run/containerd/s/abc");
    }

    #[test]
    fn dev_null_and_pipes() {
        let null = std::fs::File::open("/dev/null").unwrap();
        assert!(!carries_data(null.as_fd()));
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert!(carries_data(r.as_fd()));
    }
}
