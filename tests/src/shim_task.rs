// A raw client of one shim's task service, for the requests ctr cannot make (a malformed exec
// spec, an unknown exec id, a Create naming a checkpoint that is not there): each call goes to
// the shim's socket on the task service it serves (containerd 2.x's `containerd.task.v3.Task`,
// 1.x's `containerd.task.v2.Task`) exactly as containerd makes it, and answers with its gRPC code.

use std::path::Path;

use containerd_shim_protos::shim::shim::{ConnectRequest, DeleteRequest, StartRequest};
use containerd_shim_protos::shim_sync::Client;
use ttrpc::proto::{Code, Codec, Request, RequestInit};

/// The task service's names: containerd 2.x's, then 1.x's.
const SERVICES: [&str; 2] = ["containerd.task.v3.Task", "containerd.task.v2.Task"];
const TIMEOUT_NS: i64 = 30_000_000_000;

/// A connection to a shim, about container `id`.
pub struct Task {
    pub id: String,
    pub client: Client,
    pub service: &'static str,
}

impl Task {
    /// Connects to the shim at `address` (serving `id`), on the task service it answers.
    pub fn connect(address: &str, id: &str) -> Task {
        let client = Client::connect(address).unwrap_or_else(|e| panic!("connect to the shim at {address}: {e}"));
        let connect = ConnectRequest { id: id.to_string(), ..Default::default() };
        for service in SERVICES {
            let task = Task { id: id.to_string(), client: client.clone(), service };
            if task.call("Connect", &connect) != Code::UNIMPLEMENTED {
                return task;
            }
        }
        panic!("the shim at {address} serves none of {SERVICES:?}");
    }

    /// The same shim, about container `id`.
    pub fn about(&self, id: &str) -> Task {
        Task { id: id.to_string(), client: self.client.clone(), service: self.service }
    }

    /// The code `method` is answered with (OK on success).
    pub fn call<M: Codec>(&self, method: &str, msg: &M) -> Code
    where
        M::E: std::fmt::Debug,
    {
        let mut req = <Request as RequestInit>::init_request(self.service.into(), method.into(), TIMEOUT_NS, vec![]);
        RequestInit::set_payload(&mut req, msg.encode().expect("encode the request"));
        match self.client.request(req) {
            Ok(_) => Code::OK,
            Err(ttrpc::Error::RpcStatus(status)) => status.code(),
            Err(other) => panic!("{method} on {}: not an answer: {other:?}", self.id),
        }
    }

    pub fn start(&self, exec_id: &str) -> Code {
        self.call("Start", &StartRequest { id: self.id.clone(), exec_id: exec_id.into(), ..Default::default() })
    }

    pub fn delete(&self, exec_id: &str) -> Code {
        self.call("Delete", &DeleteRequest { id: self.id.clone(), exec_id: exec_id.into(), ..Default::default() })
    }
}

/// The ttrpc address of the shim serving the task whose bundle containerd made at `bundle`:
/// `address` (containerd 1.x, and our shim under any), else `bootstrap.json`'s `address`
/// (containerd 2.x's own runc shim writes only that).
pub fn address_in(bundle: &Path) -> String {
    if let Ok(address) = std::fs::read_to_string(bundle.join("address")) {
        return address.trim().to_string();
    }
    let path = bundle.join("bootstrap.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let recorded: serde_json::Value = serde_json::from_str(&text).expect("bootstrap.json is JSON");
    recorded["address"].as_str().unwrap_or_else(|| panic!("no address in {text}")).to_string()
}
