//! `run`: create and start; in the foreground also wait, delete (unless
//! `--keep`), and return the container's exit code. A foreground `terminal: true`
//! container gets a pty proxied to our stdio, as with runc.

use std::path::Path;

use crate::engine::process::console::ConsoleSocket;
use crate::api::Container;
use crate::engine::container_dir::ContainerDir;
use crate::ops::create::{self, CreateOptions};
use crate::error::{Error, Result};
use crate::ops::delete;
use crate::engine::engine_bundle;
use crate::engine::process::wait;

/// How `run` ends: `detach` returns once started; `keep` leaves the
/// stopped container for `delete`, as runc's `--keep`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunMode {
    pub detach: bool,
    pub keep: bool,
}

pub(crate) fn run(root: &Path, id: &str, mut opts: CreateOptions, mode: RunMode) -> Result<i32> {
    let bundle = engine_bundle::load(&opts.bundle)?;
    let wants_tty = bundle
        .spec
        .process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false);
    let console = if wants_tty && !mode.detach && opts.console_socket.is_none() {
        let socket = ConsoleSocket::bind(root)?;
        opts.console_socket = Some(socket.path().to_path_buf());
        Some(socket)
    } else {
        None
    };
    let engine = create::create_from(root, id, &bundle, opts)?;
    let mut container = Container::new(ContainerDir::new(root, id)?, engine);
    let started = console
        .as_ref()
        .map(|c| c.receive_master())
        .transpose()
        .and_then(|master| container.start().map(|_| master));
    let master = match started {
        Ok(master) => master,
        Err(err) => {
            let _ = delete::delete(root, id, true);
            return Err(err);
        }
    };
    if mode.detach {
        return Ok(0);
    }
    let pid = container
        .pid()
        .map(nix::unistd::Pid::from_raw)
        .ok_or_else(|| Error::Invalid(format!("container {id} has no init pid")))?;
    let code = match master {
        Some(master) => crate::engine::process::console::proxy_until_exit(master, pid),
        None => wait::forward_signals_until_exit(pid),
    };
    if mode.keep {
        return code;
    }
    let cleanup = delete::delete(root, id, true);
    let code = code?;
    cleanup?;
    Ok(code)
}
