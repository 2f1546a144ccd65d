//! The Task ttrpc service containerd calls: it only translates. Each request
//! becomes plain values (exec ids as Option, signals, the exec's parsed
//! process spec, stdio, rootfs mounts, options) for `Containers`, and each
//! answer or typed error becomes the response or gRPC status containerd
//! expects from its runc shim.

use std::sync::Arc;

use containerd_shim::api;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::well_known_types::empty::Empty;
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::shim::oci::ProcessDetails;
use containerd_shim::protos::types::task::ProcessInfo;
use containerd_shim::{TtrpcContext, TtrpcResult};
use nix::sys::signal::Signal;

use crate::containers::{Containers, NewContainer};
use crate::error::{Error, Result};
use crate::events::timestamp;
use crate::io::Stdio;
use crate::mount::MountSpec;
use crate::process::ExitStatus;
use crate::runtime_options::RuntimeOptions;

pub struct TaskService {
    containers: Arc<Containers>,
}

impl TaskService {
    pub fn new(containers: Arc<Containers>) -> TaskService {
        TaskService { containers }
    }
}

/// containerd's exec id: empty for the init.
fn exec_id_of(raw: &str) -> Option<&str> {
    (!raw.is_empty()).then_some(raw)
}

fn stdio_of(terminal: bool, stdin: &str, stdout: &str, stderr: &str) -> Stdio {
    Stdio { stdin: stdin.to_string(), stdout: stdout.to_string(), stderr: stderr.to_string(), terminal }
}

/// The container a Create asks for (with the checkpoint its Start restores,
/// if any); malformed runtime options are InvalidArgument.
fn new_container(req: &api::CreateTaskRequest) -> Result<NewContainer> {
    let options = RuntimeOptions::decode(&req.options).map_err(|e| Error::InvalidArgument(format!("create {}: {e}", req.id)))?;
    let restore = crate::checkpoint::restore_of(req, &options)?;
    Ok(NewContainer {
        id: req.id.clone(),
        bundle: req.bundle.clone(),
        stdio: stdio_of(req.terminal, &req.stdin, &req.stdout, &req.stderr),
        rootfs: req
            .rootfs
            .iter()
            .map(|m| MountSpec { typ: m.type_.clone(), source: m.source.clone(), options: m.options.clone() })
            .collect(),
        systemd_cgroup: options.systemd_cgroup,
        no_pivot: options.no_pivot_root,
        io_owner: options.io_owner,
        restore,
    })
}

fn delete_response(pid: i32, exit: Option<ExitStatus>) -> api::DeleteResponse {
    api::DeleteResponse {
        pid: pid as u32,
        exit_status: exit.map_or(0, |e| e.code),
        exited_at: MessageField::from_option(exit.map(|e| timestamp(e.at))),
        ..Default::default()
    }
}

/// The exec's OCI process, parsed when Exec arrives so that a bad one is
/// refused then (InvalidArgument), not when it is started. As containerd's
/// runc shim does, the request's terminal flag wins over the spec's.
fn parse_exec_spec(req: &api::ExecProcessRequest) -> Result<Box<oci_spec::runtime::Process>> {
    let bad = |why: String| Error::InvalidArgument(format!("exec {} in {}: process spec: {why}", req.exec_id, req.id));
    let value = req.spec.as_ref().map(|s| s.value.as_slice()).unwrap_or_default();
    if value.is_empty() {
        return Err(bad("missing".into()));
    }
    let mut process: oci_spec::runtime::Process = serde_json::from_slice(value).map_err(|e| bad(e.to_string()))?;
    if process.args().as_ref().is_none_or(|args| args.is_empty()) {
        return Err(bad("args must not be empty".into()));
    }
    rustpod::validate::exec_process(&process).map_err(|e| bad(e.to_string()))?;
    process.set_terminal(Some(req.terminal));
    Ok(Box::new(process))
}

fn parse_signal(raw: u32) -> Result<Signal> {
    Signal::try_from(raw as i32).map_err(|_| Error::InvalidArgument(format!("invalid signal {raw}")))
}

/// ProcessDetails naming an exec, as containerd's runc shim attaches to Pids.
fn exec_details(exec_id: &str) -> Option<Any> {
    let details = ProcessDetails { exec_id: exec_id.to_string(), ..Default::default() };
    let value = details.write_to_bytes().ok()?;
    Some(Any { type_url: "containerd.runc.v1.ProcessDetails".into(), value, ..Default::default() })
}

impl containerd_shim::Task for TaskService {
    fn create(&self, _ctx: &TtrpcContext, req: api::CreateTaskRequest) -> TtrpcResult<api::CreateTaskResponse> {
        let pid = self.containers.create(new_container(&req)?)?;
        Ok(api::CreateTaskResponse { pid: pid as u32, ..Default::default() })
    }

    fn start(&self, _ctx: &TtrpcContext, req: api::StartRequest) -> TtrpcResult<api::StartResponse> {
        let pid = self.containers.start(&req.id, exec_id_of(&req.exec_id))?;
        Ok(api::StartResponse { pid: pid as u32, ..Default::default() })
    }

    fn delete(&self, _ctx: &TtrpcContext, req: api::DeleteRequest) -> TtrpcResult<api::DeleteResponse> {
        let (pid, exit) = self.containers.delete(&req.id, exec_id_of(&req.exec_id))?;
        Ok(delete_response(pid, exit))
    }

    fn state(&self, _ctx: &TtrpcContext, req: api::StateRequest) -> TtrpcResult<api::StateResponse> {
        let p = self.containers.state(&req.id, exec_id_of(&req.exec_id))?;
        Ok(api::StateResponse {
            id: p.id,
            bundle: p.bundle,
            pid: p.pid as u32,
            status: p.status.into(),
            stdin: p.stdio.stdin,
            stdout: p.stdio.stdout,
            stderr: p.stdio.stderr,
            terminal: p.stdio.terminal,
            exit_status: p.exit.map_or(0, |e| e.code),
            exited_at: MessageField::from_option(p.exit.map(|e| timestamp(e.at))),
            exec_id: req.exec_id,
            ..Default::default()
        })
    }

    fn pids(&self, _ctx: &TtrpcContext, req: api::PidsRequest) -> TtrpcResult<api::PidsResponse> {
        let processes = self
            .containers
            .pids(&req.id)?
            .into_iter()
            .map(|(pid, exec_id)| ProcessInfo {
                pid: pid as u32,
                info: MessageField::from_option(exec_id.as_deref().and_then(exec_details)),
                ..Default::default()
            })
            .collect();
        Ok(api::PidsResponse { processes, ..Default::default() })
    }

    /// criu dumps the container (see `checkpoint`); with `exit` criu ends
    /// its processes and the init's exit goes out as any other, the state
    /// staying for containerd's Delete.
    fn checkpoint(&self, _ctx: &TtrpcContext, req: api::CheckpointTaskRequest) -> TtrpcResult<Empty> {
        let opts = crate::checkpoint::options(&req.path, &req.options)?;
        self.containers.checkpoint(&req.id, &opts)?;
        Ok(Empty::new())
    }

    fn pause(&self, _ctx: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<Empty> {
        self.containers.set_frozen(&req.id, true)?;
        Ok(Empty::new())
    }

    fn resume(&self, _ctx: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<Empty> {
        self.containers.set_frozen(&req.id, false)?;
        Ok(Empty::new())
    }

    fn kill(&self, _ctx: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<Empty> {
        let signal = parse_signal(req.signal)?;
        self.containers.kill(&req.id, exec_id_of(&req.exec_id), signal, req.all)?;
        Ok(Empty::new())
    }

    fn exec(&self, _ctx: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<Empty> {
        let spec = parse_exec_spec(&req)?;
        let stdio = stdio_of(req.terminal, &req.stdin, &req.stdout, &req.stderr);
        self.containers.add_exec(&req.id, &req.exec_id, stdio, spec)?;
        Ok(Empty::new())
    }

    fn resize_pty(&self, _ctx: &TtrpcContext, req: api::ResizePtyRequest) -> TtrpcResult<Empty> {
        self.containers.resize_pty(&req.id, exec_id_of(&req.exec_id), req.width, req.height)?;
        Ok(Empty::new())
    }

    fn close_io(&self, _ctx: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<Empty> {
        if req.stdin {
            self.containers.close_stdin(&req.id, exec_id_of(&req.exec_id))?;
        }
        Ok(Empty::new())
    }

    fn update(&self, _ctx: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<Empty> {
        let value = req.resources.as_ref().map(|r| r.value.as_slice()).unwrap_or_default();
        let resources = rustpod::parse_resources(value).map_err(|e| Error::InvalidArgument(format!("update {}: {e}", req.id)))?;
        self.containers.update(&req.id, resources)?;
        Ok(Empty::new())
    }

    fn wait(&self, _ctx: &TtrpcContext, req: api::WaitRequest) -> TtrpcResult<api::WaitResponse> {
        let exit = self.containers.wait(&req.id, exec_id_of(&req.exec_id))?;
        Ok(api::WaitResponse { exit_status: exit.code, exited_at: MessageField::some(timestamp(exit.at)), ..Default::default() })
    }

    fn stats(&self, _ctx: &TtrpcContext, req: api::StatsRequest) -> TtrpcResult<api::StatsResponse> {
        let stats = self.containers.stats(&req.id)?;
        Ok(api::StatsResponse { stats: MessageField::some(stats), ..Default::default() })
    }

    fn connect(&self, _ctx: &TtrpcContext, req: api::ConnectRequest) -> TtrpcResult<api::ConnectResponse> {
        Ok(api::ConnectResponse {
            shim_pid: std::process::id(),
            task_pid: self.containers.init_pid(&req.id) as u32,
            version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        })
    }

    fn shutdown(&self, _ctx: &TtrpcContext, _req: api::ShutdownRequest) -> TtrpcResult<Empty> {
        self.containers.shutdown_if_idle();
        Ok(Empty::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_exec_id_is_the_init() {
        assert_eq!(exec_id_of(""), None);
        assert_eq!(exec_id_of("e1"), Some("e1"));
    }

    fn exec_request(spec: &[u8]) -> api::ExecProcessRequest {
        api::ExecProcessRequest {
            id: "c".into(),
            exec_id: "e".into(),
            spec: MessageField::some(Any {
                type_url: "types.containerd.io/opencontainers/runtime-spec/1/Process".into(),
                value: spec.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn code_of(e: Error) -> ttrpc::Code {
        e.code()
    }

    #[test]
    fn a_bad_exec_spec_is_refused_when_exec_arrives() {
        let invalid = |spec: &[u8]| code_of(parse_exec_spec(&exec_request(spec)).expect_err("refused"));
        assert_eq!(invalid(b""), ttrpc::Code::INVALID_ARGUMENT, "no spec");
        assert_eq!(invalid(b"not json"), ttrpc::Code::INVALID_ARGUMENT);
        assert_eq!(invalid(br#"{"args":"sh","cwd":"/"}"#), ttrpc::Code::INVALID_ARGUMENT, "args of the wrong type");
        assert_eq!(invalid(br#"{"args":[],"cwd":"/"}"#), ttrpc::Code::INVALID_ARGUMENT, "nothing to run");
        assert_eq!(invalid(br#"{"args":["sh"],"cwd":"/","user":{"uid":4294967295,"gid":0}}"#), ttrpc::Code::INVALID_ARGUMENT);
        assert_eq!(invalid(br#"{"args":["sh"],"cwd":"relative"}"#), ttrpc::Code::INVALID_ARGUMENT);
    }

    #[test]
    fn a_good_exec_spec_takes_the_requests_terminal() {
        let mut req = exec_request(br#"{"args":["sh"],"cwd":"/","terminal":false,"user":{"uid":0,"gid":0}}"#);
        req.terminal = true;
        let process = parse_exec_spec(&req).expect("accepted");
        assert_eq!(process.args().as_deref(), Some(&["sh".to_string()][..]));
        assert_eq!(process.terminal(), Some(true));
    }
}
