//! The shim's command line as containerd drives it: `start` (daemonize the
//! group's server, or reuse it), `delete` (clean up after a dead shim), the
//! server itself, and `-v` / `-info`.
//!
//! containerd-shim 0.12's `run` cannot serve containerd 1.6: it answers
//! `start` in containerd 2.x's JSON and registers the task API only under
//! `containerd.task.v3`. So the actions are ours; the crate still provides
//! flag parsing, socket addresses and `spawn`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::types::introspection::{RuntimeInfo, RuntimeVersion};
use containerd_shim::{api, util, Error, Flags, StartOpts};

use crate::containers::state_root;
use crate::events::timestamp;
use crate::runtime_options::RuntimeOptions;
use rustpod::spawn_signals;

/// Why a command (`start`, `delete`, `-info`, the server) failed; `main`
/// prints it after the action and the id.
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error("unknown action {0:?}")]
    UnknownAction(String),
    #[error("read bootstrap params from stdin: {0}")]
    ReadStdin(#[source] std::io::Error),
    #[error("runtime options on stdin: {0}")]
    ParseOptions(#[source] protobuf::Error),
    #[error(transparent)]
    Options(#[from] crate::runtime_options::OptionsError),
    #[error("encode features: {0}")]
    EncodeFeatures(#[source] serde_json::Error),
    /// Encoding a reply to containerd: `what` names it.
    #[error("encode {what}: {source}")]
    Encode { what: &'static str, source: protobuf::Error },
    /// Spawning the server, or writing its address.
    #[error(transparent)]
    Start(#[from] Error),
    /// write(2) of the reply on stdout: `what` names it.
    #[error("write {what}: {source}")]
    Write { what: &'static str, source: std::io::Error },
    #[error("remove socket {path}: {source}")]
    RemoveSocket { path: String, source: std::io::Error },
    #[error(transparent)]
    Serve(#[from] crate::server::ServeError),
    #[error(transparent)]
    ShimCgroup(#[from] crate::shim_cgroup::ShimCgroupError),
}

impl CommandError {
    fn encode(what: &'static str) -> impl FnOnce(protobuf::Error) -> CommandError {
        move |source| CommandError::Encode { what, source }
    }

    fn write(what: &'static str) -> impl FnOnce(std::io::Error) -> CommandError {
        move |source| CommandError::Write { what, source }
    }
}

/// Annotations that put containers in one shim (one per pod).
const GROUP_ANNOTATIONS: [&str; 2] = ["io.kubernetes.cri.sandbox-id", "io.containerd.runc.v2.group"];

/// Runs the action on the command line; returns the exit code.
pub fn main() -> i32 {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.iter().any(|a| a == "-v" || a == "-version" || a == "--version") {
        println!("{}:\n  Version:  {}\n  Runtime:  {}", env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"), crate::RUNTIME_ID);
        return 0;
    }
    let flags = match containerd_shim::parse(&args) {
        Ok(flags) => flags,
        Err(e) => return fail("parse arguments", &e),
    };
    if flags.info {
        return info();
    }
    if flags.namespace.is_empty() {
        return fail("start", &"-namespace is required");
    }
    let result = match flags.action.as_str() {
        "start" => start_command(&flags),
        "delete" => delete_command(&flags),
        "" => crate::server::serve(&flags).map_err(CommandError::from),
        other => Err(CommandError::UnknownAction(other.to_string())),
    };
    match result {
        Ok(()) => 0,
        Err(e) => fail(&format!("{} {}", if flags.action.is_empty() { "serve" } else { &flags.action }, flags.id), &e),
    }
}

fn fail(what: &str, err: &dyn std::fmt::Display) -> i32 {
    eprintln!("{}: {what}: {err}", crate::RUNTIME_ID);
    1
}

/// The type URL containerd gives the OCI features document in `RuntimeInfo`.
const FEATURES_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/features/Features";

/// `-info`: containerd 2.x asks what runtime this is and, through the OCI
/// features document (as containerd's runc shim passes on `runc features`),
/// what it supports: CRI reads user-namespace and recursive read-only
/// support there.
fn runtime_info() -> Result<RuntimeInfo, CommandError> {
    let features = serde_json::to_vec(&rustpod::features::features()).map_err(CommandError::EncodeFeatures)?;
    Ok(RuntimeInfo {
        name: crate::RUNTIME_ID.to_string(),
        version: MessageField::some(RuntimeVersion { version: env!("CARGO_PKG_VERSION").to_string(), ..Default::default() }),
        features: MessageField::some(Any { type_url: FEATURES_TYPE_URL.to_string(), value: features, ..Default::default() }),
        ..Default::default()
    })
}

fn info() -> i32 {
    let options = crate::bootstrap::read_stdin().map_err(CommandError::ReadStdin).and_then(|input| check_info_options(&input));
    let encoded =
        options.and_then(|()| runtime_info()).and_then(|info| info.write_to_bytes().map_err(CommandError::encode("runtime info")));
    match encoded {
        Ok(bytes) => {
            let _ = std::io::stdout().write_all(&bytes);
            0
        }
        Err(e) => fail("info", &e),
    }
}

/// containerd pipes the handler's options (an `Any`) to `-info`: what Create would refuse
/// (runc's `BinaryName`) fails `-info` too, so that no feature is claimed for such a handler.
fn check_info_options(input: &[u8]) -> Result<(), CommandError> {
    if input.is_empty() {
        return Ok(());
    }
    let any = Any::parse_from_bytes(input).map_err(CommandError::ParseOptions)?;
    Ok(RuntimeOptions::decode(&MessageField::some(any)).map(drop)?)
}

/// `start`: prints the address of the group's server (spawning it first if
/// none answers) after writing it to `<bundle>/address`. The working
/// directory is the bundle. containerd 2.3 sends `BootstrapParams` on stdin
/// and gets a `BootstrapResult` back; older ones get the plain address.
fn start_command(flags: &Flags) -> Result<(), CommandError> {
    let input = crate::bootstrap::read_stdin().map_err(CommandError::ReadStdin)?;
    let (opts, reply) = crate::bootstrap::start_opts(&input, flags, std::env::var("TTRPC_ADDRESS").unwrap_or_default());
    let shim_cgroup = (reply == crate::bootstrap::Reply::Address).then(|| shim_cgroup_of(&input)).flatten();
    let address = start(opts, shim_cgroup.as_deref())?;
    let bytes = crate::bootstrap::encode_reply(&address, reply).map_err(CommandError::encode("bootstrap result"))?;
    std::io::stdout().write_all(&bytes).map_err(CommandError::write("reply"))
}

/// runc's `ShimCgroup` in the runtime options containerd 1.6 to 2.2 pipe to `start`. Options
/// that do not decode are left to Create, which refuses them (InvalidArgument), as containerd's
/// runc shim leaves them.
fn shim_cgroup_of(input: &[u8]) -> Option<String> {
    let any = Any::parse_from_bytes(input).ok().filter(|_| !input.is_empty())?;
    RuntimeOptions::decode(&MessageField::some(any)).ok()?.shim_cgroup
}

fn start(opts: StartOpts, shim_cgroup: Option<&str>) -> Result<String, CommandError> {
    let grouping = grouping(&opts, Path::new("config.json"));
    let address = opts.socket_address(&grouping);
    let address = if crate::server::serving(&address) {
        address
    } else {
        // Our posix_spawn ignores signal 32 in the server: tell it (and its
        // helpers) how containerd left it, which containers must get.
        let sigcancel = (spawn_signals::CALLER_SIGCANCEL_ENV, spawn_signals::sigcancel_disposition());
        let (pid, address) = containerd_shim::spawn(opts, &grouping, vec![sigcancel])?;
        if let Err(e) = place_server(pid, shim_cgroup) {
            abandon_server(pid, &address);
            return Err(e);
        }
        address
    };
    util::write_address(&address)?;
    Ok(address)
}

/// The new server's cgroup and OOM score, before containerd learns its address.
fn place_server(pid: u32, shim_cgroup: Option<&str>) -> Result<(), CommandError> {
    if let Some(cgroup) = shim_cgroup {
        crate::shim_cgroup::join(cgroup, pid)?;
    }
    // As containerd's runc shim: the server (and the containers it
    // starts, which inherit it) is a likelier OOM victim than containerd.
    Ok(containerd_shim::cgroup::adjust_oom_score(pid)?)
}

/// A server `start` cannot hand over: killed (our child, by pid) and reaped, its socket removed.
fn abandon_server(pid: u32, address: &str) {
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(pid, None);
    let _ = std::fs::remove_file(crate::server::socket_path(address));
}

/// `delete`: the shim died; remove its socket, kill and remove the
/// container, unmount its rootfs, and report it killed (137).
fn delete_command(flags: &Flags) -> Result<(), CommandError> {
    let bundle = if flags.bundle.is_empty() { std::env::current_dir().unwrap_or_default() } else { PathBuf::from(&flags.bundle) };
    let root = state_root(&flags.namespace, &bundle);
    let mut errors = Vec::new();
    // First: containerd kills this command after its shim cleanup timeout
    // (5 s by default), and the socket needs none of the rest.
    if let Err(e) = remove_dead_socket(flags, &bundle) {
        errors.push(e.to_string());
    }
    if let Err(e) = rustpod::Runtime::new(&root).delete(&flags.id, true) {
        errors.push(e.to_string());
    }
    if let Err(e) = crate::mount::unmount_all(&bundle.join("rootfs")) {
        errors.push(e.to_string());
    }
    for e in &errors {
        eprintln!("{}: delete {}: {e}", crate::RUNTIME_ID, flags.id);
    }
    let response = api::DeleteResponse {
        exit_status: 128 + libc::SIGKILL as u32,
        exited_at: MessageField::some(timestamp(SystemTime::now())),
        ..Default::default()
    };
    let bytes = response.write_to_bytes().map_err(CommandError::encode("response"))?;
    std::io::stdout().write_all(&bytes).map_err(CommandError::write("response"))
}

/// The group's server is dead if nothing answers on its socket: remove the
/// socket file, as its server would have on shutdown.
fn remove_dead_socket(flags: &Flags, bundle: &Path) -> Result<(), CommandError> {
    let opts = StartOpts { id: flags.id.clone(), address: flags.address.clone(), namespace: flags.namespace.clone(), ..Default::default() };
    let address = opts.socket_address(&grouping(&opts, &bundle.join("config.json")));
    if crate::server::serving(&address) {
        return Ok(());
    }
    let path = crate::server::socket_path(&address);
    match std::fs::remove_file(path) {
        Err(source) if source.kind() != std::io::ErrorKind::NotFound => Err(CommandError::RemoveSocket { path: path.to_string(), source }),
        _ => Ok(()),
    }
}

/// What groups containers into one shim: the bundle's group annotation, else the id.
fn grouping(opts: &StartOpts, config: &Path) -> String {
    group_of(config).unwrap_or_else(|| opts.id.clone())
}

/// The group annotation of a bundle's config.json, if any.
fn group_of(config: &Path) -> Option<String> {
    let data = std::fs::read(config).ok()?;
    let spec: serde_json::Value = serde_json::from_slice(&data).ok()?;
    let annotations = spec.get("annotations")?;
    GROUP_ANNOTATIONS.iter().find_map(|key| annotations.get(key)?.as_str().filter(|v| !v.is_empty()).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_refuses_the_options_create_refuses() {
        let runc = containerd_shim::protos::shim::oci::Options { binary_name: "crun".into(), ..Default::default() };
        let any = Any { type_url: "containerd.runc.v1.Options".into(), value: runc.write_to_bytes().unwrap(), ..Default::default() };
        let refused = check_info_options(&any.write_to_bytes().unwrap()).unwrap_err();
        assert!(matches!(refused, CommandError::Options(_)) && refused.to_string().contains("BinaryName"), "{refused}");
        let plain = Any { type_url: "containerd.runc.v1.Options".into(), ..Default::default() };
        assert!(check_info_options(&plain.write_to_bytes().unwrap()).is_ok());
        assert!(check_info_options(b"").is_ok());
        let garbage = check_info_options(b"\xff\xff").unwrap_err();
        assert!(garbage.to_string().starts_with("runtime options on stdin: "), "{garbage}");
    }

    /// What containerd 2.x decodes from `-info`: the features JSON under its type URL.
    #[test]
    fn info_carries_the_oci_features_document() {
        let bytes = runtime_info().expect("runtime info").write_to_bytes().expect("encode");
        let info = RuntimeInfo::parse_from_bytes(&bytes).expect("decode");
        assert_eq!(info.name, crate::RUNTIME_ID);
        let features = info.features.as_ref().expect("features present");
        assert_eq!(features.type_url, FEATURES_TYPE_URL);
        let doc: serde_json::Value = serde_json::from_slice(&features.value).expect("features are JSON");
        assert_eq!(doc, rustpod::features::features());
        assert!(doc["ociVersionMin"].is_string() && doc["ociVersionMax"].is_string(), "{doc}");
    }
}
