//! One process of a container (its init or an exec): pid, stdio paths,
//! lifecycle flags and the exit status that Wait, State and Delete report.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use crate::io::{ProcessIo, Stdio};

/// How a process ended: the exit code, or 128+signal; and when.
#[derive(Debug, Clone, Copy)]
pub struct ExitStatus {
    pub code: u32,
    pub at: SystemTime,
}

/// The exit status, once known, for any number of waiters.
#[derive(Default)]
pub struct ExitCell {
    exit: Mutex<Option<ExitStatus>>,
    cond: Condvar,
}

impl ExitCell {
    pub fn set(&self, exit: ExitStatus) {
        let mut slot = self.exit.lock().unwrap();
        if slot.is_none() {
            *slot = Some(exit);
        }
        self.cond.notify_all();
    }

    pub fn get(&self) -> Option<ExitStatus> {
        *self.exit.lock().unwrap()
    }

    pub fn wait(&self) -> ExitStatus {
        let mut slot = self.exit.lock().unwrap();
        loop {
            if let Some(exit) = *slot {
                return exit;
            }
            slot = self.cond.wait(slot).unwrap();
        }
    }

    pub fn wait_timeout(&self, timeout: Duration) -> Option<ExitStatus> {
        let slot = self.exit.lock().unwrap();
        let (slot, _) = self.cond.wait_timeout_while(slot, timeout, |s| s.is_none()).unwrap();
        *slot
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Created,
    Running,
    Stopped,
}

pub struct Process {
    /// Empty for the init.
    pub exec_id: String,
    /// 0 until the process exists (an exec before Start).
    pub pid: i32,
    pub stdio: Stdio,
    pub io: Option<ProcessIo>,
    pub exit: Arc<ExitCell>,
    /// Start (or exec-started) has been published.
    pub started: bool,
    /// A Start is in flight: an exit now must wait for the start event.
    pub starting: bool,
    pub exit_published: bool,
    /// An exec's process, parsed when Exec arrived, until it is started.
    pub spec: Option<Box<oci_spec::runtime::Process>>,
}

impl Process {
    pub fn new(exec_id: &str, stdio: Stdio) -> Process {
        Process {
            exec_id: exec_id.to_string(),
            pid: 0,
            stdio,
            io: None,
            exit: Arc::new(ExitCell::default()),
            started: false,
            starting: false,
            exit_published: false,
            spec: None,
        }
    }

    pub fn status(&self) -> Status {
        if self.exit.get().is_some() {
            Status::Stopped
        } else if self.started {
            Status::Running
        } else {
            Status::Created
        }
    }

    pub fn exited(&self) -> Option<ExitStatus> {
        self.exit.get()
    }

    /// Records the exit; returns true if the exit event may go out now
    /// (false while a start is in flight: that start will send it).
    pub fn set_exited(&mut self, exit: ExitStatus) -> bool {
        self.exit.set(exit);
        if let Some(io) = &self.io {
            io.on_exit();
        }
        !self.starting && !self.exit_published
    }
}
