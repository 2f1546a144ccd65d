//! One process of a container (its init or an exec): pid, stdio paths,
//! lifecycle flags and the exit status that Wait, State and Delete report.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::io::{ProcessIo, Stdio};

/// How a process ended: the exit code, or 128+signal; and when.
#[derive(Debug, Clone, Copy)]
pub struct ExitStatus {
    pub code: u32,
    pub at: SystemTime,
}

/// The exit status, once known, for any number of waiters. An exit may be
/// held: known, but not yet told to waiters, while a Start is in flight,
/// so that a Wait never returns before State can say "stopped" (as in
/// containerd's runc shim, where the exit waits for Start's lock).
#[derive(Default)]
pub struct ExitCell {
    slot: Mutex<Slot>,
    cond: Condvar,
}

#[derive(Default)]
struct Slot {
    exit: Option<ExitStatus>,
    held: bool,
}

impl Slot {
    fn told(&self) -> Option<ExitStatus> {
        self.exit.filter(|_| !self.held)
    }
}

impl ExitCell {
    /// Records the exit (the first one counts) and tells every waiter.
    pub fn set(&self, exit: ExitStatus) {
        let mut slot = self.slot.lock().unwrap();
        slot.exit.get_or_insert(exit);
        slot.held = false;
        self.cond.notify_all();
    }

    /// Records the exit without telling the waiters until [`release`](Self::release).
    pub fn hold(&self, exit: ExitStatus) {
        let mut slot = self.slot.lock().unwrap();
        if slot.exit.is_none() {
            slot.exit = Some(exit);
            slot.held = true;
        }
    }

    /// Tells the waiters a held exit.
    pub fn release(&self) {
        let mut slot = self.slot.lock().unwrap();
        slot.held = false;
        self.cond.notify_all();
    }

    /// The exit, held or not.
    pub fn get(&self) -> Option<ExitStatus> {
        self.slot.lock().unwrap().exit
    }

    pub fn wait(&self) -> ExitStatus {
        let mut slot = self.slot.lock().unwrap();
        loop {
            if let Some(exit) = slot.told() {
                return exit;
            }
            slot = self.cond.wait(slot).unwrap();
        }
    }

    pub fn wait_timeout(&self, timeout: Duration) -> Option<ExitStatus> {
        let slot = self.slot.lock().unwrap();
        let (slot, _) = self.cond.wait_timeout_while(slot, timeout, |s| s.told().is_none()).unwrap();
        slot.told()
    }
}

/// Where a process is in its life, as the init and exec state machines of
/// containerd's runc shim (pkg/process) have it; `Starting` is a Start in
/// flight, which the shim runs without holding its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Created,
    Starting,
    Running,
    /// The container is frozen (only its init is in this state; its execs
    /// report it through the init).
    Paused,
    Stopped,
    Deleted,
}

/// What happens to a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Start,
    Started,
    StartFailed,
    /// Reaped (or, never to run, released with 255).
    Exit,
    Pause,
    Resume,
    Delete,
}

impl State {
    /// The state after `event`, or None where the event is not allowed.
    /// Every transition of a process is decided here.
    pub fn on(self, event: Event) -> Option<State> {
        use Event as E;
        use State as S;
        match (self, event) {
            (S::Created, E::Start) => Some(S::Starting),
            (S::Starting, E::Started) => Some(S::Running),
            (S::Starting, E::StartFailed) => Some(S::Created),
            // An exit during a start waits for it: the start event goes out first.
            (S::Starting, E::Exit) => Some(S::Starting),
            (S::Created | S::Running | S::Paused, E::Exit) => Some(S::Stopped),
            (S::Running, E::Pause) => Some(S::Paused),
            (S::Paused, E::Resume) => Some(S::Running),
            (S::Created | S::Stopped, E::Delete) => Some(S::Deleted),
            _ => None,
        }
    }

    /// How errors name it.
    pub fn word(self) -> &'static str {
        match self {
            State::Created => "created",
            State::Starting => "starting",
            State::Running => "running",
            State::Paused => "paused",
            State::Stopped => "stopped",
            State::Deleted => "deleted",
        }
    }
}

pub struct Process {
    /// None for the init.
    pub exec_id: Option<String>,
    /// 0 until the process exists (an exec before Start).
    pub pid: i32,
    pub stdio: Stdio,
    pub io: Option<ProcessIo>,
    pub exit: Arc<ExitCell>,
    state: State,
    pub exit_published: bool,
    /// An exec's process, parsed when Exec arrived, until it is started.
    pub spec: Option<Box<oci_spec::runtime::Process>>,
}

impl Process {
    pub fn new(exec_id: Option<&str>, stdio: Stdio) -> Process {
        Process {
            exec_id: exec_id.map(str::to_string),
            pid: 0,
            stdio,
            io: None,
            exit: Arc::new(ExitCell::default()),
            state: State::Created,
            exit_published: false,
            spec: None,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Moves to the state after `event`; a FailedPrecondition naming the
    /// process (`what`, e.g. "container c1") and its state if not allowed.
    pub fn apply(&mut self, event: Event, what: &str) -> Result<State> {
        let next = self.check(event, what)?;
        self.state = next;
        Ok(next)
    }

    /// The state `event` would lead to, or the error `apply` would give.
    pub fn check(&self, event: Event, what: &str) -> Result<State> {
        self.state.on(event).ok_or_else(|| Error::WrongState(format!("{what} is {}: cannot {}", self.state.word(), event.verb())))
    }

    /// Ends a start: running (or back to created if it failed), and stopped
    /// if it exited meanwhile.
    pub fn finish_start(&mut self, ok: bool) {
        let event = if ok { Event::Started } else { Event::StartFailed };
        self.state = self.state.on(event).unwrap_or(self.state);
        if self.exit.get().is_some() {
            self.state = self.state.on(Event::Exit).unwrap_or(self.state);
            self.exit.release();
        }
    }

    pub fn exited(&self) -> Option<ExitStatus> {
        self.exit.get()
    }

    /// Records the exit; returns true if the exit event may go out now
    /// (false while a start is in flight: that start will send it).
    pub fn set_exited(&mut self, exit: ExitStatus) -> bool {
        if self.state == State::Starting {
            self.exit.hold(exit);
        } else {
            self.exit.set(exit);
        }
        if let Some(io) = &self.io {
            io.on_exit();
        }
        self.state = self.state.on(Event::Exit).unwrap_or(self.state);
        self.state != State::Starting && !self.exit_published
    }
}

impl Event {
    fn verb(self) -> &'static str {
        match self {
            Event::Start => "start it",
            Event::Started | Event::StartFailed => "finish a start",
            Event::Exit => "record an exit",
            Event::Pause => "pause it",
            Event::Resume => "resume it",
            Event::Delete => "delete it",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Event as E, State as S};

    const ALL_STATES: [S; 6] = [S::Created, S::Starting, S::Running, S::Paused, S::Stopped, S::Deleted];
    const ALL_EVENTS: [E; 7] = [E::Start, E::Started, E::StartFailed, E::Exit, E::Pause, E::Resume, E::Delete];

    #[test]
    fn a_process_lives_created_starting_running_stopped_deleted() {
        let mut s = S::Created;
        for (event, want) in [(E::Start, S::Starting), (E::Started, S::Running), (E::Exit, S::Stopped), (E::Delete, S::Deleted)] {
            s = s.on(event).unwrap_or_else(|| panic!("{event:?} refused in {s:?}"));
            assert_eq!(s, want);
        }
    }

    #[test]
    fn pause_and_resume_only_between_running_and_paused() {
        assert_eq!(S::Running.on(E::Pause), Some(S::Paused));
        assert_eq!(S::Paused.on(E::Resume), Some(S::Running));
        assert_eq!(S::Paused.on(E::Exit), Some(S::Stopped), "a paused container can be killed");
        for s in ALL_STATES {
            assert_eq!(s.on(E::Pause).is_some(), s == S::Running, "pause in {s:?}");
            assert_eq!(s.on(E::Resume).is_some(), s == S::Paused, "resume in {s:?}");
        }
    }

    #[test]
    fn only_a_created_process_starts_and_only_once() {
        for s in ALL_STATES {
            assert_eq!(s.on(E::Start).is_some(), s == S::Created, "start in {s:?}");
        }
        assert_eq!(S::Starting.on(E::StartFailed), Some(S::Created), "a failed start can be deleted as created");
    }

    #[test]
    fn a_running_or_starting_process_is_not_deleted() {
        for s in ALL_STATES {
            assert_eq!(s.on(E::Delete).is_some(), matches!(s, S::Created | S::Stopped), "delete in {s:?}");
        }
    }

    #[test]
    fn a_deleted_process_is_final() {
        for e in ALL_EVENTS {
            assert_eq!(S::Deleted.on(e), None, "{e:?} after delete");
        }
    }

    #[test]
    fn an_exit_during_a_start_is_held_for_it() {
        assert_eq!(S::Starting.on(E::Exit), Some(S::Starting));
        let mut p = super::Process::new(None, Default::default());
        p.apply(E::Start, "container c").expect("start");
        assert!(!p.set_exited(super::ExitStatus { code: 1, at: std::time::SystemTime::now() }), "held");
        p.finish_start(true);
        assert_eq!(p.state(), S::Stopped);
    }

    #[test]
    fn a_refused_event_names_the_process_and_its_state() {
        let mut p = super::Process::new(Some("e1"), Default::default());
        let e = p.apply(E::Resume, "exec e1 of c").expect_err("a created process is not resumed");
        assert_eq!(e.code(), ttrpc::Code::FAILED_PRECONDITION);
        assert_eq!(e.to_string(), "exec e1 of c is created: cannot resume it");
        assert_eq!(p.state(), S::Created, "a refused event changes nothing");
    }
}
