//! Events to containerd: queued in order and forwarded by one thread over
//! containerd's ttrpc socket, reconnecting (and retrying) while containerd
//! is down, so that nothing (an exit above all) is lost across a restart,
//! and flushed before the shim exits.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use containerd_shim::protos::events::task::{
    TaskCreate, TaskDelete, TaskExecAdded, TaskExecStarted, TaskExit, TaskOOM, TaskPaused, TaskResumed, TaskStart,
};
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::well_known_types::timestamp::Timestamp;
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::shim::event::Envelope;
use containerd_shim::protos::shim::events::ForwardRequest;
use containerd_shim::protos::shim_sync::{Client, EventsClient};

use crate::process::ExitStatus;

/// Beyond this many undelivered events the oldest are dropped.
const MAX_QUEUED: usize = 4096;
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Publisher {
    namespace: String,
    queue: Arc<Queue>,
}

struct Queue {
    events: Mutex<VecDeque<Envelope>>,
    ready: Condvar,
    /// Signalled when the queue empties (what `flush` waits for).
    drained: Condvar,
}

impl Queue {
    fn new() -> Arc<Queue> {
        Arc::new(Queue { events: Mutex::new(VecDeque::new()), ready: Condvar::new(), drained: Condvar::new() })
    }

    /// Drops the oldest event, which containerd took (or rejected).
    fn pop_sent(&self) {
        let mut events = self.events.lock().unwrap();
        events.pop_front();
        if events.is_empty() {
            self.drained.notify_all();
        }
    }
}

#[cfg(test)]
impl Publisher {
    /// A publisher without a forwarding thread: its events stay queued.
    pub fn unforwarded() -> Publisher {
        Publisher { namespace: "test".into(), queue: Queue::new() }
    }

    /// The events queued so far, oldest first.
    pub fn queued(&self) -> Vec<Envelope> {
        self.queue.events.lock().unwrap().iter().cloned().collect()
    }
}

impl Publisher {
    /// Starts the forwarding thread for containerd at `address` (TTRPC_ADDRESS).
    pub fn start(address: String, namespace: String) -> Publisher {
        let queue = Queue::new();
        let worker = Arc::clone(&queue);
        std::thread::Builder::new()
            .name("events".into())
            .stack_size(256 * 1024)
            .spawn(move || forward_loop(&address, &worker))
            .expect("spawn events thread");
        Publisher { namespace, queue }
    }

    /// Waits (up to `within`) until containerd took every queued event; returns how many it
    /// has not. The shim calls it before it exits: containerd's Delete queues /tasks/delete
    /// just before its Shutdown, and what is still queued at exit is lost.
    pub fn flush(&self, within: Duration) -> usize {
        let events = self.queue.events.lock().unwrap();
        let (events, _) = self.queue.drained.wait_timeout_while(events, within, |e| !e.is_empty()).unwrap();
        events.len()
    }

    fn publish<M: Message>(&self, topic: &str, event: M) {
        let data = match event.write_to_bytes() {
            Ok(data) => data,
            Err(e) => {
                log::error!("encode event {topic}: {e}");
                return;
            }
        };
        let mut any = Any::new();
        any.type_url = type_url::<M>();
        any.value = data;
        let mut envelope = Envelope::new();
        envelope.timestamp = MessageField::some(timestamp(std::time::SystemTime::now()));
        envelope.namespace = self.namespace.clone();
        envelope.topic = topic.to_string();
        envelope.event = MessageField::some(any);
        let mut events = self.queue.events.lock().unwrap();
        if events.len() >= MAX_QUEUED {
            // Real loss: containerd has been away for thousands of events.
            if let Some(lost) = events.pop_front() {
                log::error!("containerd is unreachable: event {} dropped", lost.topic);
            }
        }
        events.push_back(envelope);
        self.queue.ready.notify_one();
    }

    /// TaskCreate; `checkpoint` is the image path a restore starts from ("" for none).
    pub fn task_create(&self, id: &str, bundle: &str, pid: i32, stdio: &crate::io::Stdio, checkpoint: &str) {
        let io = containerd_shim::protos::events::task::TaskIO {
            stdin: stdio.stdin.clone(),
            stdout: stdio.stdout.clone(),
            stderr: stdio.stderr.clone(),
            terminal: stdio.terminal,
            ..Default::default()
        };
        let event = TaskCreate {
            container_id: id.to_string(),
            bundle: bundle.to_string(),
            pid: pid as u32,
            io: MessageField::some(io),
            checkpoint: checkpoint.to_string(),
            ..Default::default()
        };
        self.publish("/tasks/create", event);
    }

    pub fn task_start(&self, id: &str, pid: i32) {
        let event = TaskStart { container_id: id.to_string(), pid: pid as u32, ..Default::default() };
        self.publish("/tasks/start", event);
    }

    /// `exec_id` is None for the init, whose exit carries the container id.
    pub fn task_exit(&self, id: &str, exec_id: Option<&str>, pid: i32, exit: ExitStatus) {
        let event = TaskExit {
            container_id: id.to_string(),
            id: exec_id.unwrap_or(id).to_string(),
            pid: pid as u32,
            exit_status: exit.code,
            exited_at: MessageField::some(timestamp(exit.at)),
            ..Default::default()
        };
        self.publish("/tasks/exit", event);
    }

    pub fn task_delete(&self, id: &str, pid: i32, exit: Option<ExitStatus>) {
        let event = TaskDelete {
            container_id: id.to_string(),
            id: id.to_string(),
            pid: pid as u32,
            exit_status: exit.map_or(0, |e| e.code),
            exited_at: MessageField::from_option(exit.map(|e| timestamp(e.at))),
            ..Default::default()
        };
        self.publish("/tasks/delete", event);
    }

    pub fn exec_added(&self, id: &str, exec_id: &str) {
        let event = TaskExecAdded { container_id: id.to_string(), exec_id: exec_id.to_string(), ..Default::default() };
        self.publish("/tasks/exec-added", event);
    }

    pub fn exec_started(&self, id: &str, exec_id: &str, pid: i32) {
        let event = TaskExecStarted { container_id: id.to_string(), exec_id: exec_id.to_string(), pid: pid as u32, ..Default::default() };
        self.publish("/tasks/exec-started", event);
    }

    pub fn paused(&self, id: &str) {
        self.publish("/tasks/paused", TaskPaused { container_id: id.to_string(), ..Default::default() });
    }

    pub fn resumed(&self, id: &str) {
        self.publish("/tasks/resumed", TaskResumed { container_id: id.to_string(), ..Default::default() });
    }

    pub fn oom(&self, id: &str) {
        self.publish("/tasks/oom", TaskOOM { container_id: id.to_string(), ..Default::default() });
    }
}

/// The Any type URL of a task event: its full protobuf name. Every task
/// event is in package `containerd.events`; spelling it out spares each shim
/// building the protobuf reflection tables (a few hundred KiB of heap and
/// ~0.3 ms) just to read the name back.
fn type_url<M: Message>() -> String {
    format!("containerd.events.{}", M::NAME)
}

pub fn timestamp(at: std::time::SystemTime) -> Timestamp {
    let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp { seconds: since.as_secs() as i64, nanos: since.subsec_nanos() as i32, ..Default::default() }
}

/// Sends queued events in order; an event leaves the queue only once
/// containerd took it (or rejected it as invalid).
fn forward_loop(address: &str, queue: &Queue) {
    let mut client: Option<EventsClient> = None;
    let mut backoff = Duration::from_millis(50);
    loop {
        let envelope = {
            let mut events = queue.events.lock().unwrap();
            while events.is_empty() {
                events = queue.ready.wait(events).unwrap();
            }
            events.front().cloned().expect("queue is not empty")
        };
        let events = match client.as_ref() {
            Some(c) => c,
            None => match connect(address) {
                Ok(c) => client.insert(c),
                Err(e) => {
                    log::debug!("connect to containerd at {address}: {e}");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            },
        };
        let mut req = ForwardRequest::new();
        req.envelope = MessageField::some(envelope);
        let ctx = ttrpc::context::with_timeout(FORWARD_TIMEOUT.as_nanos() as i64);
        match events.forward(ctx, &req) {
            Ok(_) => {
                crate::logger::containerd_back();
                backoff = Duration::from_millis(50);
                queue.pop_sent();
            }
            Err(ttrpc::Error::RpcStatus(status)) => {
                log::warn!("containerd rejected event {}: {}", req.envelope.topic, status.message);
                queue.pop_sent();
            }
            Err(e) => {
                // containerd restarts: the event waits for it, in order.
                crate::logger::containerd_gone(&e);
                log::debug!("forward event {} to {address}: {e}", req.envelope.topic);
                client = None;
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// Why containerd's events socket could not be reached: connect(2) to it,
/// or setting up the ttrpc client on the connection.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error(transparent)]
    Connect(#[from] containerd_shim::Error),
    #[error(transparent)]
    Client(#[from] ttrpc::Error),
}

fn connect(address: &str) -> Result<EventsClient, ConnectError> {
    let fd = containerd_shim::util::connect(address)?;
    let client = Client::new(fd)?;
    Ok(EventsClient::new(client))
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_shim::protos::protobuf::well_known_types::empty::Empty;
    use containerd_shim::protos::protobuf::MessageFull;
    use containerd_shim::protos::shim_sync::{create_events, Events};

    /// containerd's side of Forward, on a real ttrpc socket: records the topics, slowly.
    #[derive(Default)]
    struct SlowReceiver {
        topics: Mutex<Vec<String>>,
    }

    impl Events for SlowReceiver {
        fn forward(&self, _ctx: &ttrpc::TtrpcContext, req: ForwardRequest) -> ttrpc::Result<Empty> {
            std::thread::sleep(Duration::from_millis(100));
            self.topics.lock().unwrap().push(req.envelope.topic.clone());
            Ok(Empty::new())
        }
    }

    /// The shim exits right after flush: everything queued must be with containerd by then,
    /// in order, however slowly containerd takes it.
    #[test]
    fn flush_returns_once_containerd_took_every_queued_event() {
        let dir = std::env::temp_dir().join(format!("rustpod-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("events.sock");
        let _ = std::fs::remove_file(&socket);
        let receiver = Arc::new(SlowReceiver::default());
        let service: Arc<dyn Events + Send + Sync> = receiver.clone();
        let mut server =
            ttrpc::Server::new().bind(&format!("unix://{}", socket.display())).unwrap().register_service(create_events(service));
        server.start().unwrap();

        let publisher = Publisher::start(socket.display().to_string(), "test".into());
        publisher.task_start("c", 1);
        publisher.task_exit("c", None, 1, ExitStatus { code: 9, at: std::time::SystemTime::now() });
        publisher.task_delete("c", 1, None);
        let left = publisher.flush(Duration::from_secs(10));
        let topics = receiver.topics.lock().unwrap().clone();
        server.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(left, 0, "events still queued");
        assert_eq!(topics, ["/tasks/start", "/tasks/exit", "/tasks/delete"]);
    }

    #[test]
    fn flush_gives_up_when_containerd_does_not_answer() {
        let publisher = Publisher::start("/nonexistent/rustpod-events.sock".into(), "test".into());
        assert_eq!(publisher.flush(Duration::from_millis(10)), 0, "nothing queued yet");
        publisher.task_start("c", 1);
        assert_eq!(publisher.flush(Duration::from_millis(200)), 1);
    }

    fn same_as_descriptor<M: MessageFull>() {
        assert_eq!(type_url::<M>(), M::descriptor().full_name());
    }

    #[test]
    fn type_urls_are_the_protobuf_full_names() {
        same_as_descriptor::<TaskCreate>();
        same_as_descriptor::<TaskStart>();
        same_as_descriptor::<TaskExit>();
        same_as_descriptor::<TaskDelete>();
        same_as_descriptor::<TaskExecAdded>();
        same_as_descriptor::<TaskExecStarted>();
        same_as_descriptor::<TaskPaused>();
        same_as_descriptor::<TaskResumed>();
        same_as_descriptor::<TaskOOM>();
    }
}
