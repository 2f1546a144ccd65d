// A live resource update through the shim's Update call changes the container's cgroup. ctr 1.6
// has no `task update`, so the test calls the shim's task API (containerd.task.v3.Task/Update)
// on the socket containerd recorded, exactly as containerd's Update would. The limit is read
// from memory.limit_in_bytes on cgroup v1 and memory.max on v2 (the sid guest).

use containerd_shim_protos::protobuf::well_known_types::any::Any;
use containerd_shim_protos::protobuf::MessageField;
use containerd_shim_protos::shim::shim::UpdateTaskRequest;
use containerd_shim_protos::shim_sync::{Client, TaskClient};
use rustpod_tests::shim::{blocker, cgroup_dir, cgroup_v1_file, ShimContainerd};
use rustpod_tests::{needs, skip_if};

#[test]
fn shim_update_changes_the_cgroup() {
    skip_if!(blocker());
    skip_if!(needs::cgroup_controller("memory"));
    let ctd = ShimContainerd::start();
    ctd.run_detached("upd", &[], &["sleep", "1000"]);
    ctd.wait_task("upd", "RUNNING");
    let (pid, _) = ctd.task("upd").expect("upd listed");
    let limit_file = cgroup_v1_file(pid, "memory", "memory.limit_in_bytes").unwrap_or_else(|| cgroup_dir(pid, "memory").join("memory.max"));

    let address_file = format!("{}/state/io.containerd.runtime.v2.task/{}/upd/address", ctd.dir(), ctd.namespace);
    let address = std::fs::read_to_string(&address_file).expect("read shim address");
    let client = TaskClient::new(Client::connect(address.trim()).expect("connect to the shim"));
    let resources = br#"{"memory":{"limit":67108864}}"#.to_vec();
    let req = UpdateTaskRequest {
        id: "upd".into(),
        resources: MessageField::some(Any {
            type_url: "types.containerd.io/opencontainers/runtime-spec/1/LinuxResources".into(),
            value: resources,
            ..Default::default()
        }),
        ..Default::default()
    };
    client.update(ttrpc::context::with_timeout(10_000_000_000), &req).expect("Update");
    let limit = std::fs::read_to_string(&limit_file).expect("read memory limit");
    assert_eq!(limit.trim(), "67108864", "{}", limit_file.display());
}
