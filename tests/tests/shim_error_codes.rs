// The gRPC codes a shim answers containerd with, side by side: containerd's runc shim
// (containerd-shim-runc-v2) driving runc, the same shim driving rustpod, and our shim, each
// serving a running container of one private containerd. containerd branches on these codes
// (NotFound: what it cleans up is gone; AlreadyExists; FailedPrecondition), so an exec id it
// does not know, a duplicate exec id and a bad exec spec must come back as from the runc shim.
// The calls go to each task's shim socket, on the task service it serves (1.6's runc shim
// `containerd.task.v2.Task`, 2.x's `containerd.task.v3.Task`, ours both), exactly as containerd
// makes them (ctr cannot send a malformed spec or an unknown exec id to a Start).
//
// One deliberate difference: a process spec that is not JSON is refused at Exec by both, the
// runc shim with Unknown (its json.Unmarshal error passes through errdefs.ToGRPC unmapped), ours
// with InvalidArgument (tests/RUNC_DIFFERENCES.md). Either way nothing of it is kept: a Start of
// that exec id is NotFound on every path.

use containerd_shim_protos::protobuf::well_known_types::any::Any;
use containerd_shim_protos::protobuf::MessageField;
use containerd_shim_protos::shim::shim::{CloseIORequest, ExecProcessRequest, KillRequest, ResizePtyRequest, StateRequest, WaitRequest};
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::shim_task::Task;
use rustpod_tests::skip_if;
use ttrpc::proto::Code;

const PROCESS_TYPE: &str = "types.containerd.io/opencontainers/runtime-spec/1/Process";
const GOOD_SPEC: &[u8] = br#"{"args":["true"],"cwd":"/","user":{"uid":0,"gid":0},"env":["PATH=/bin:/usr/bin"]}"#;
const NOT_JSON: &[u8] = b"this is not a process spec";

/// The exec requests this file makes, on a task's shim.
trait ExecCalls {
    fn exec(&self, exec_id: &str, spec: &[u8]) -> Code;
    fn unknown_exec(&self, exec_id: &str) -> Vec<(&'static str, Code)>;
    fn close_io(&self, exec_id: &str) -> Code;
}

impl ExecCalls for Task {
    fn exec(&self, exec_id: &str, spec: &[u8]) -> Code {
        let any = Any { type_url: PROCESS_TYPE.into(), value: spec.to_vec(), ..Default::default() };
        let req = ExecProcessRequest { id: self.id.clone(), exec_id: exec_id.into(), spec: MessageField::some(any), ..Default::default() };
        self.call("Exec", &req)
    }

    /// The codes of the requests naming an exec id the shim does not know
    /// (CloseIO apart: see `close_io`).
    fn unknown_exec(&self, exec_id: &str) -> Vec<(&'static str, Code)> {
        let (id, eid) = (self.id.clone(), exec_id.to_string());
        vec![
            ("Start", self.start(exec_id)),
            ("Kill", self.call("Kill", &KillRequest { id: id.clone(), exec_id: eid.clone(), signal: 9, ..Default::default() })),
            ("State", self.call("State", &StateRequest { id: id.clone(), exec_id: eid.clone(), ..Default::default() })),
            ("Wait", self.call("Wait", &WaitRequest { id: id.clone(), exec_id: eid.clone(), ..Default::default() })),
            ("ResizePty", self.call("ResizePty", &ResizePtyRequest { id, exec_id: eid, width: 80, height: 24, ..Default::default() })),
            ("Delete", self.delete(exec_id)),
        ]
    }

    fn close_io(&self, exec_id: &str) -> Code {
        self.call("CloseIO", &CloseIORequest { id: self.id.clone(), exec_id: exec_id.into(), stdin: true, ..Default::default() })
    }
}

/// Runs `sleep` as task `id` through `flags`' path and connects to its shim.
fn running_task(ctd: &ShimContainerd, id: &str, flags: &[String]) -> Task {
    let mut args = vec!["run", "-d"];
    args.extend(flags.iter().map(String::as_str));
    args.extend_from_slice(&[shim::IMAGE, id, "sleep", "1000"]);
    ctd.ctr(&args).ok();
    ctd.wait_task(id, "RUNNING");
    Task::connect(&ctd.shim_address(id), id)
}

#[test]
fn exec_errors_get_the_runc_shims_codes() {
    skip_if!(shim::blocker_with_runc());
    let ctd = ShimContainerd::start();
    let paths = shim::paths();
    let tasks: Vec<(&str, Task)> =
        paths.iter().enumerate().map(|(i, (who, flags))| (*who, running_task(&ctd, &format!("codes{i}"), flags))).collect();
    let (reference, ref_task) = &tasks[0];
    let expected_unknown = ref_task.unknown_exec("nosuch");
    for (who, task) in &tasks {
        // An exec id nobody added: NotFound, as containerd's cleanup expects.
        let got = task.unknown_exec("nosuch");
        assert_eq!(got, expected_unknown, "{who}: codes for an unknown exec id (left), {reference}'s (right)");
        assert!(got.iter().all(|(_, code)| *code == Code::NOT_FOUND), "{who}: {got:?}");
        // The runc shim's CloseIO returns its NotFound without errdefs.ToGRPC, so it
        // reaches containerd as Unknown (1.6); ours says NotFound, as for every other call.
        let closed = task.close_io("nosuch");
        assert_ne!(closed, Code::OK, "{who}: CloseIO of an unknown exec id succeeded");
        if *who == "rustpod-shim" {
            assert_eq!(closed, Code::NOT_FOUND, "{who}: CloseIO of an unknown exec id");
        }

        // A resize of an init without a terminal: nothing to do, as the reference answers.
        let resize = ResizePtyRequest { id: task.id.clone(), width: 80, height: 24, ..Default::default() };
        let ref_resize = ResizePtyRequest { id: ref_task.id.clone(), ..resize.clone() };
        assert_eq!(task.call("ResizePty", &resize), ref_task.call("ResizePty", &ref_resize), "{who}: ResizePty without a terminal");

        // An unknown container: NotFound ("container not created").
        let other = task.about("nosuch-container");
        assert_eq!(other.start(""), Code::NOT_FOUND, "{who}: Start of an unknown container");

        // The same exec id twice: AlreadyExists; the first, never started, is deleted.
        assert_eq!(task.exec("dup", GOOD_SPEC), Code::OK, "{who}: Exec of a good spec");
        assert_eq!(task.exec("dup", GOOD_SPEC), Code::ALREADY_EXISTS, "{who}: Exec of an exec id in use");
        assert_eq!(task.delete("dup"), Code::OK, "{who}: Delete of an exec never started");
        assert_eq!(task.start("dup"), Code::NOT_FOUND, "{who}: Start of a deleted exec");

        // A spec that is not JSON: refused at Exec, and nothing of it kept.
        let refused = task.exec("bad", NOT_JSON);
        eprintln!("{who}: Exec of a spec that is not JSON: {refused:?}; CloseIO of an unknown exec: {closed:?}");
        assert_ne!(refused, Code::OK, "{who}: Exec accepted a spec that is not JSON");
        if *who == "rustpod-shim" {
            assert_eq!(refused, Code::INVALID_ARGUMENT, "{who}: Exec of a spec that is not JSON");
        } else {
            let by_reference = tasks[0].1.exec("bad-ref", NOT_JSON);
            assert_eq!(refused, by_reference, "{who}: the runc shim answers alike whatever runtime it drives");
        }
        assert_eq!(task.start("bad"), Code::NOT_FOUND, "{who}: Start of an exec whose spec was refused");
    }
    for (_, task) in &tasks {
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", &task.id]).ok();
        ctd.wait_task(&task.id, "STOPPED");
        ctd.ctr(&["task", "delete", &task.id]).ok();
        ctd.ctr(&["container", "rm", &task.id]).ok();
    }
}
