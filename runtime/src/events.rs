//! `events`: container statistics as runc's event stream prints them, one
//! JSON object a line.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};

/// Writes a `stats` event once (`once`), or every `interval` until the
/// container stops or the writer fails.
pub fn events(root: &Path, id: &str, interval: Duration, once: bool, out: &mut dyn Write) -> Result<()> {
    let dir = ContainerDir::new(root, id)?;
    loop {
        let container = dir.load()?;
        if !container.status().eq(&libcontainer::container::ContainerStatus::Running)
            && !container.status().eq(&libcontainer::container::ContainerStatus::Paused)
        {
            return Err(Error::WrongStatus {
                id: id.to_string(),
                op: "events",
                status: crate::state::status_word(container.status()).to_string(),
                wanted: "running",
            });
        }
        let stats = crate::stats::read(&container)?;
        let event = json!({"type": "stats", "id": id, "data": crate::stats::runc_shape(&stats)});
        let write = writeln!(out, "{event}").and_then(|_| out.flush());
        if write.is_err() || once {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}
