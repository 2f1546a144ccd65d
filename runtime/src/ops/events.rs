//! `events`: container statistics as runc's event stream prints them, one
//! JSON object a line.

use std::io::Write;
use std::time::Duration;

use libcontainer::container::Container;
use serde_json::json;

use crate::engine::container_dir::ContainerDir;
use crate::error::{Error, Result};

/// Writes a `stats` event once (`once`), or every `interval` until the
/// container stops or the writer fails.
pub(crate) fn events(dir: &ContainerDir, container: &mut Container, interval: Duration, once: bool, out: &mut dyn Write) -> Result<()> {
    let id = dir.id.as_str();
    loop {
        container.refresh_status().map_err(|e| Error::engine("load state of", id, &e))?;
        if !container.status().eq(&libcontainer::container::ContainerStatus::Running)
            && !container.status().eq(&libcontainer::container::ContainerStatus::Paused)
        {
            return Err(Error::WrongStatus {
                id: id.to_string(),
                op: "events",
                status: crate::engine::state::status_word(container.status()).to_string(),
                wanted: "running",
            });
        }
        let stats = crate::engine::cgroup::stats::read(container)?;
        let event = json!({"type": "stats", "id": id, "data": crate::engine::cgroup::stats::runc_shape(&stats)});
        let write = writeln!(out, "{event}").and_then(|_| out.flush());
        if write.is_err() || once {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}
