// `update` never changes a container's device rules (issue 23, item 1): the attack is an update
// whose resources allow every device (`{"devices":[{"allow":true,"access":"rwm"}]}`), which
// would leave `a *:* rwm` in the container's devices.list, any device of the host open to it.
// runc (1.1.5 and 1.5.1) accepts the command and keeps the list as it was. Made through the CLI
// (`update --resources`), through containerd's runc shim with `--runc-binary` rustpod (its Update
// runs `update --resources -`), and through our shim's Update, each next to runc. On cgroup v2
// the device rules are our own eBPF program, attached once by create; update drops the field
// on both versions before anything is applied, and these v1 checks skip loudly there.

use containerd_shim_protos::protobuf::well_known_types::any::Any;
use containerd_shim_protos::protobuf::MessageField;
use containerd_shim_protos::shim::shim::UpdateTaskRequest;
use containerd_shim_protos::shim_sync::Client;
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, cgroup_v1_file, ShimContainerd, IMAGE};
use rustpod_tests::{cgroup, needs, skip_if, Bundle, Runtime, SLEEP};
use ttrpc::proto::{Codec, Request, RequestInit};

const ALLOW_ALL: &str = r#"{"devices":[{"allow":true,"access":"rwm"}]}"#;

#[track_caller]
fn assert_unchanged(who: &str, before: &str, after: &str) {
    assert!(!after.lines().any(|l| l == "a *:* rwm"), "{who}: update allowed every device: {after:?}");
    assert_eq!(before, after, "{who}: update changed the device rules");
}

#[test]
fn update_cannot_allow_every_device_through_the_cli() {
    skip_if!(needs::cgroup_v1("devices"));
    let dir = ScratchDir::new("updev");
    let resources = dir.join_str("r.json");
    std::fs::write(&resources, ALLOW_ALL).expect("write r.json");
    for rt in Runtime::runc_and_under_test() {
        let who = rt.bin().display().to_string();
        let bundle = Bundle::new(SLEEP);
        let id = rt.new_id("updev");
        rt.start_container(&id, &bundle);
        let before = cgroup::v1_file("devices", &id, "devices.list");
        assert_ne!(before, "a *:* rwm", "{who}: the container allowed every device before the attack");
        let out = rt.cmd(&["update", "--resources", &resources, &id]);
        assert!(out.success(), "{who}: update refused (runc accepts it): {}", out.describe());
        assert_unchanged(&who, &before, &cgroup::v1_file("devices", &id, "devices.list"));
        rt.cmd(&["delete", "--force", &id]).ok();
    }
}

/// Calls task `id`'s shim's Update with `resources`, as containerd 1.6's Update would (ctr 1.6
/// has no `task update`): on `containerd.task.v2.Task`, the one containerd's runc shim serves.
fn shim_update(ctd: &ShimContainerd, id: &str, resources: &str) {
    let address_file = format!("{}/state/io.containerd.runtime.v2.task/{}/{id}/address", ctd.dir(), ctd.namespace);
    let address = std::fs::read_to_string(&address_file).expect("read shim address");
    let client = Client::connect(address.trim()).expect("connect to the shim");
    let update = UpdateTaskRequest {
        id: id.into(),
        resources: MessageField::some(Any {
            type_url: "types.containerd.io/opencontainers/runtime-spec/1/LinuxResources".into(),
            value: resources.as_bytes().to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut req = <Request as RequestInit>::init_request("containerd.task.v2.Task".into(), "Update".into(), 10_000_000_000, vec![]);
    RequestInit::set_payload(&mut req, Codec::encode(&update).expect("encode UpdateTaskRequest"));
    client.request(req).unwrap_or_else(|e| panic!("Update of {id} refused (runc accepts it): {e}"));
}

/// The attack on task `id` (running `sleep`), started with `flags`: devices.list before, after.
fn attack_task(ctd: &ShimContainerd, id: &str, flags: &[String]) -> (String, String) {
    let mut args = vec!["run", "-d"];
    args.extend(flags.iter().map(String::as_str));
    args.extend_from_slice(&[IMAGE, id, "sleep", "1000"]);
    ctd.ctr(&args).ok();
    ctd.wait_task(id, "RUNNING");
    let (pid, _) = ctd.task(id).expect("task listed");
    let list = cgroup_v1_file(pid, "devices", "devices.list").expect("the task has a devices cgroup");
    let read = || std::fs::read_to_string(&list).expect("read devices.list");
    let before = read();
    shim_update(ctd, id, ALLOW_ALL);
    let after = read();
    ctd.ctr(&["task", "kill", "-s", "SIGKILL", id]).ok();
    ctd.wait_task(id, "STOPPED");
    ctd.ctr(&["task", "delete", id]).ok();
    ctd.ctr(&["container", "rm", id]).ok();
    (before, after)
}

#[test]
fn update_cannot_allow_every_device_through_the_shims() {
    skip_if!(shim::blocker().or_else(|| needs::cgroup_v1("devices")));
    let ctd = ShimContainerd::start();
    for (i, (who, flags)) in shim::paths().iter().enumerate() {
        let (before, after) = attack_task(&ctd, &format!("updev{i}"), flags);
        assert_unchanged(who, &before, &after);
    }
}
