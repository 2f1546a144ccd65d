//! The part of libcontainer's builder that `create` and `exec` share: the
//! state root, console socket, preserved fds and stdio. The pid file is not
//! the engine's: it would follow a symlink there (see `pid_file`).

use std::path::PathBuf;

use libcontainer::container::builder::ContainerBuilder;
use libcontainer::syscall::syscall::SyscallType;

use crate::container_dir::ContainerDir;
use crate::create::Stdio;
use crate::error::{Error, Result};

/// What every engine process we start is given.
#[derive(Debug, Default)]
pub struct ProcessIo {
    pub console_socket: Option<PathBuf>,
    pub preserve_fds: i32,
    pub stdio: Stdio,
}

/// A builder for `dir`'s container with `io` applied; `op` names the
/// operation in errors.
pub fn builder(dir: &ContainerDir, io: ProcessIo, op: &'static str) -> Result<ContainerBuilder> {
    let engine_err = |e: &dyn std::error::Error| Error::engine(op, &dir.id, e);
    let mut builder = ContainerBuilder::new(dir.id.clone(), SyscallType::default())
        .with_root_path(&dir.root)
        .map_err(|e| engine_err(&e))?
        .with_console_socket(io.console_socket.as_ref())
        .with_preserved_fds(io.preserve_fds);
    if let Some(fd) = io.stdio.stdin {
        builder = builder.with_stdin(fd);
    }
    if let Some(fd) = io.stdio.stdout {
        builder = builder.with_stdout(fd);
    }
    if let Some(fd) = io.stdio.stderr {
        builder = builder.with_stderr(fd);
    }
    Ok(builder)
}
