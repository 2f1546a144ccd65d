// The shim's `start` as each containerd calls it, driven here as containerd does (no containerd
// 2.x is installable on this machine): 2.3's BootstrapParams on stdin must get a BootstrapResult
// (version 3, ttrpc) whose server answers task API v3 at a socket in the requested socket_dir;
// /dev/null or 1.6's runtime options on stdin must get today's plain address. Every server started
// is shut down through the task API, and the test removes what it made even when it fails.

use containerd_shim_protos::bootstrap_api::{BootstrapParams, BootstrapResult};
use containerd_shim_protos::protobuf::well_known_types::any::Any;
use containerd_shim_protos::protobuf::Message;
use containerd_shim_protos::shim::shim::ShutdownRequest;
use containerd_shim_protos::shim_sync::{Client, TaskClient};
use rustpod_tests::scratch::{unique_name, ScratchDir};
use rustpod_tests::shim::{shim_bin, STATE_ROOT};
use rustpod_tests::{leftovers, needs, skip_if, wait};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// One fake containerd's view: a bundle, a namespace, an address of its own.
struct Start {
    dir: ScratchDir,
    namespace: String,
    id: String,
}

impl Start {
    fn new() -> Self {
        let dir = ScratchDir::new("boot");
        std::fs::create_dir_all(dir.join("bundle")).expect("create bundle");
        std::fs::write(dir.join("bundle/config.json"), r#"{"ociVersion":"1.0.2"}"#).expect("write config.json");
        Start { dir, namespace: unique_name("ns"), id: unique_name("c") }
    }

    /// containerd's `-address`: its socket path (the shim hashes it into its own socket's name).
    fn address(&self) -> String {
        self.dir.join_str("containerd.sock")
    }

    fn params(&self, socket_dir: Option<String>) -> BootstrapParams {
        BootstrapParams {
            instance_id: self.id.clone(),
            namespace: self.namespace.clone(),
            containerd_version: "v2.3.4".into(),
            containerd_ttrpc_address: format!("{}.ttrpc", self.address()),
            containerd_grpc_address: self.address(),
            containerd_binary: "/bin/true".into(),
            socket_dir,
            ..Default::default()
        }
    }

    /// `containerd-shim-rustpod-v1 -namespace NS -address A -publish-binary B -id ID start`
    /// in the bundle, `stdin` piped (None: /dev/null, what containerd gives when it sends
    /// nothing); stdout and stderr combined, as containerd reads them.
    fn run(&self, stdin: Option<&[u8]>) -> Vec<u8> {
        let address = self.address();
        let mut cmd = Command::new(shim_bin());
        cmd.args(["-namespace", &self.namespace, "-address", &address, "-publish-binary", "/bin/true", "-id", &self.id, "start"])
            .current_dir(self.dir.join("bundle"))
            .env("TTRPC_ADDRESS", format!("{address}.ttrpc"))
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("run the shim's start");
        if let Some(bytes) = stdin {
            let mut pipe = child.stdin.take().expect("stdin pipe");
            pipe.write_all(bytes).expect("write stdin");
        }
        let out = child.wait_with_output().expect("wait for start");
        assert!(out.status.success(), "start failed: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "containerd reads stderr with stdout: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }
}

impl Drop for Start {
    fn drop(&mut self) {
        leftovers::kill_processes_under(self.dir.str());
        let _ = std::fs::remove_dir(Path::new(STATE_ROOT).join(&self.namespace));
    }
}

/// Shuts the server at `address` down through task API v3 (what a version 3 answer makes
/// containerd call) and waits for its socket to go.
fn shut_down(address: &str) {
    let client = TaskClient::new(Client::connect(address).expect("connect to the shim's server"));
    let req = ShutdownRequest { now: true, ..Default::default() };
    // The server may close the connection while answering its last request.
    let _ = client.shutdown(ttrpc::context::with_timeout(10_000_000_000), &req);
    let path = address.strip_prefix("unix://").unwrap_or(address).to_string();
    wait::wait_for("the shim's server to remove its socket", || (!Path::new(&path).exists()).then_some(()));
}

fn blocker() -> Option<String> {
    needs::containers().or_else(|| needs::program(&shim_bin()))
}

#[test]
fn start_answers_containerd_2_3_with_a_bootstrap_result_in_its_socket_dir() {
    skip_if!(blocker());
    let start = Start::new();
    let socket_dir = start.dir.join_str("s");
    let params = start.params(Some(socket_dir.clone())).write_to_bytes().expect("encode params");
    let out = start.run(Some(&params));
    let result = BootstrapResult::parse_from_bytes(&out)
        .unwrap_or_else(|e| panic!("stdout is no BootstrapResult ({e}): {:?}", String::from_utf8_lossy(&out)));
    assert_eq!(result.version, 3, "{result:?}");
    assert_eq!(result.protocol, "ttrpc", "{result:?}");
    assert!(result.address.starts_with(&format!("unix://{socket_dir}/")), "not in socket_dir: {result:?}");
    let socket = result.address.trim_start_matches("unix://");
    let mode = std::fs::metadata(socket).expect("the socket exists").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the task API socket is for containerd alone");
    let written = std::fs::read_to_string(start.dir.join("bundle/address")).expect("bundle/address");
    assert_eq!(written, result.address);

    // A second container of the same group is told the same server, in the same format.
    let again = BootstrapResult::parse_from_bytes(&start.run(Some(&params))).expect("second reply decodes");
    assert_eq!(again.address, result.address);
    shut_down(&result.address);
}

#[test]
fn start_answers_a_plain_address_when_stdin_is_empty() {
    skip_if!(blocker());
    let start = Start::new();
    let out = String::from_utf8(start.run(None)).expect("UTF-8 reply");
    assert!(out.starts_with("unix:///run/containerd/s/") && !out.contains('\n'), "{out:?}");
    shut_down(&out);
}

/// containerd 1.6's CRI pipes the handler's options (a protobuf Any), which also decode as
/// BootstrapParams: the reply must stay the plain address 1.6 can read.
#[test]
fn start_answers_a_plain_address_to_runtime_options_on_stdin() {
    skip_if!(blocker());
    let start = Start::new();
    let options = Any { type_url: "runtimeoptions.v1.Options".into(), value: b"\n\x14SystemdCgroup = true".to_vec(), ..Default::default() };
    let out = start.run(Some(&options.write_to_bytes().expect("encode options")));
    let out = String::from_utf8(out).expect("UTF-8 reply");
    assert!(out.starts_with("unix:///run/containerd/s/"), "{out:?}");
    shut_down(&out);
}
