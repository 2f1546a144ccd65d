// A container ready for a test: its runtime (with cleanup guard), its bundle and its id.
// Fields drop in order, so the container is deleted before its bundle is removed.

use crate::bundle::Bundle;
use crate::runtime::Runtime;

/// `sleep 1000`: a container init that stays up until killed (SIGKILL: it is pid 1).
pub const SLEEP: &[&str] = &["sleep", "1000"];
/// An init that exits 143 on SIGTERM (a pid-1 shell ignores SIGTERM without a trap).
pub const TRAP_TERM: &[&str] = &["sh", "-c", "trap 'exit 143' TERM; sleep 1000 & wait"];

pub struct Fixture {
    pub rt: Runtime,
    pub bundle: Bundle,
    pub id: String,
}

impl Fixture {
    /// A bundle running `args` on the runtime under test; nothing created yet.
    pub fn new(args: &[&str]) -> Self {
        Self::on(Runtime::under_test(), args)
    }

    /// A bundle running `args` on runtime `rt`; nothing created yet.
    pub fn on(rt: Runtime, args: &[&str]) -> Self {
        let id = rt.new_id("ct");
        Fixture { rt, bundle: Bundle::new(args), id }
    }

    /// A created (not started) container running `args`.
    pub fn created(args: &[&str]) -> Self {
        let fx = Self::new(args);
        fx.rt.create(&fx.id, &fx.bundle);
        fx
    }

    /// A running container running `args`.
    pub fn running(args: &[&str]) -> Self {
        let fx = Self::new(args);
        fx.rt.start_container(&fx.id, &fx.bundle);
        fx
    }

    /// A running container running TRAP_TERM, once its init catches SIGTERM (a TERM sent
    /// before the shell ran `trap` is lost: seen in the v2 guest, the init never stopped).
    pub fn running_with_term_trap() -> Self {
        let fx = Self::running(TRAP_TERM);
        crate::signals::wait_until_it_catches_term(fx.rt.pid(&fx.id));
        fx
    }

    /// `exec id argv…` in this container.
    pub fn exec(&self, argv: &[&str]) -> crate::Output {
        self.rt.exec(&self.id, argv)
    }

    /// `exec [flags] id argv…` in this container.
    pub fn exec_with(&self, flags: &[&str], argv: &[&str]) -> crate::Output {
        self.rt.cmd(&[&["exec"][..], flags, &[self.id.as_str()], argv].concat())
    }

    pub fn status(&self) -> String {
        self.rt.status(&self.id)
    }

    #[track_caller]
    pub fn assert_nothing_left(&self) {
        self.rt.assert_nothing_left(&self.id, self.bundle.path());
    }
}
