//! glibc's posix_spawn (how Rust's `Command` starts programs: the shim its
//! server and helpers, a Rust harness the CLI) leaves glibc's internal
//! signals, 32 (SIGCANCEL) and 33 (SIGSETXID), ignored in the child, and an
//! ignored signal survives execve. runc (cgo, so glibc's setxid handler is
//! on 33 before anything else runs) never passes 33's ignore on, but keeps
//! an inherited ignore of 32: so do we, or a container would ignore
//! signal 33 where runc's does not.

/// glibc's SIGSETXID, which its sigaction() refuses to touch.
const SIGSETXID: libc::c_int = 33;

/// The kernel's `struct sigaction` (x86-64 and aarch64 layout).
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// rt_sigaction(2) itself: glibc's wrapper fails with EINVAL on its
/// internal signals.
fn rt_sigaction(sig: libc::c_int, new: Option<&KernelSigaction>, old: Option<&mut KernelSigaction>) -> bool {
    let new = new.map_or(std::ptr::null(), |n| n as *const KernelSigaction);
    let old = old.map_or(std::ptr::null_mut(), |o| o as *mut KernelSigaction);
    // SAFETY: both pointers are null or point at a live kernel sigaction.
    unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, new, old, std::mem::size_of::<u64>()) == 0 }
}

/// Puts signal 33 back to its default if it arrived ignored; call before
/// creating containers. A handled 33 (glibc's own) stays as it is.
pub fn reset_inherited_ignores() {
    let mut old = KernelSigaction::default();
    if rt_sigaction(SIGSETXID, None, Some(&mut old)) && old.handler == libc::SIG_IGN {
        rt_sigaction(SIGSETXID, Some(&KernelSigaction { handler: libc::SIG_DFL, ..Default::default() }), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(sig: libc::c_int) -> libc::sighandler_t {
        let mut old = KernelSigaction::default();
        assert!(rt_sigaction(sig, None, Some(&mut old)));
        old.handler
    }

    #[test]
    fn an_ignored_signal_33_goes_back_to_default() {
        assert!(rt_sigaction(SIGSETXID, Some(&KernelSigaction { handler: libc::SIG_IGN, ..Default::default() }), None));
        reset_inherited_ignores();
        assert_eq!(handler(SIGSETXID), libc::SIG_DFL);
    }
}
