//! `run`: create and start; in the foreground also wait, delete, and
//! return the container's exit code.

use std::path::Path;

use crate::create::{self, CreateOptions};
use crate::error::{Error, Result};
use crate::{delete, start, wait};

pub fn run(root: &Path, id: &str, opts: CreateOptions, detach: bool) -> Result<i32> {
    let container = create::create(root, id, opts)?;
    if let Err(err) = start::start(root, id) {
        let _ = delete::delete(root, id, true);
        return Err(err);
    }
    if detach {
        return Ok(0);
    }
    let pid = container
        .pid()
        .ok_or_else(|| Error::Invalid(format!("container {id} has no init pid")))?;
    let code = wait::forward_signals_until_exit(pid);
    let cleanup = delete::delete(root, id, true);
    let code = code?;
    cleanup?;
    Ok(code)
}
