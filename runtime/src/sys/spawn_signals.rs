//! Signal dispositions a container must not inherit from whoever started
//! us. An ignored signal survives fork and execve, so an ignore our caller
//! left (nohup's SIGHUP, a background shell's SIGINT and SIGQUIT, and
//! glibc's posix_spawn's 32 and 33: how Rust's `Command` starts programs,
//! the shim its server and helpers) would reach the container. runc (1.1
//! and 1.3 alike) hands every signal to its container at its default, but
//! 32 (SIGCANCEL), which it passes on as its caller left it: so do we. Our
//! shim's `start` records how containerd left 32 for its server and
//! helpers, whose own 32 our posix_spawn ignored, so that a container gets
//! containerd's 32 as under containerd's runc shim (whose Go exec leaves 32
//! alone).

#[cfg(test)]
/// glibc's SIGSETXID, which its sigaction() refuses to touch.
const SIGSETXID: libc::c_int = 33;

/// glibc's SIGCANCEL, which its sigaction() refuses to touch too.
const SIGCANCEL: libc::c_int = 32;

/// The environment variable in which our shim's `start` tells its server,
/// and so its helpers, how containerd left signal 32: `ignored` or `default`.
pub const CALLER_SIGCANCEL_ENV: &str = "RUSTPOD_CALLER_SIGCANCEL";

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

/// Puts every signal that arrived ignored, but 32, back to its default;
/// call first thing, before creating containers (their processes inherit
/// our dispositions). A handled signal (glibc's own 33) stays as it is.
/// Every entry point runs this, so it asks the kernel once which signals
/// are ignored (`SigIgn` in /proc/self/status) instead of once per signal.
pub fn reset_inherited_ignores() {
    let ignored = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| ignored_mask(&s));
    let highest = libc::SIGRTMAX();
    for sig in (1..=highest).filter(|&s| s != SIGCANCEL && s != libc::SIGKILL && s != libc::SIGSTOP) {
        // Without /proc (it cannot be read), ask rt_sigaction itself.
        let is_ignored = match ignored {
            Some(mask) => mask & (1u64 << (sig - 1)) != 0,
            None => {
                let mut old = KernelSigaction::default();
                rt_sigaction(sig, None, Some(&mut old)) && old.handler == libc::SIG_IGN
            }
        };
        if is_ignored {
            rt_sigaction(sig, Some(&KernelSigaction { handler: libc::SIG_DFL, ..Default::default() }), None);
        }
    }
}

/// The `SigIgn` mask of a /proc/PID/status text (bit N-1 for signal N).
fn ignored_mask(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// How this process got signal 32, as `CALLER_SIGCANCEL_ENV` says it.
pub fn sigcancel_disposition() -> &'static str {
    let mut old = KernelSigaction::default();
    match rt_sigaction(SIGCANCEL, None, Some(&mut old)) && old.handler == libc::SIG_IGN {
        true => "ignored",
        false => "default",
    }
}

/// Puts signal 32 back as `CALLER_SIGCANCEL_ENV` says our shim's caller left
/// it; without the variable (not started by our shim) 32 stays as it is.
pub fn restore_caller_sigcancel() {
    let handler = match std::env::var(CALLER_SIGCANCEL_ENV).as_deref() {
        Ok("default") => libc::SIG_DFL,
        Ok("ignored") => libc::SIG_IGN,
        _ => return,
    };
    rt_sigaction(SIGCANCEL, Some(&KernelSigaction { handler, ..Default::default() }), None);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dispositions are the process's, shared by the test threads: the
    /// tests that change them take turns.
    static DISPOSITIONS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn handler(sig: libc::c_int) -> libc::sighandler_t {
        let mut old = KernelSigaction::default();
        assert!(rt_sigaction(sig, None, Some(&mut old)));
        old.handler
    }

    #[test]
    fn inherited_ignores_go_back_to_default_but_32s() {
        let _turn = DISPOSITIONS.lock().unwrap_or_else(|p| p.into_inner());
        let ignore = KernelSigaction { handler: libc::SIG_IGN, ..Default::default() };
        for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, SIGSETXID, SIGCANCEL] {
            assert!(rt_sigaction(sig, Some(&ignore), None));
        }
        reset_inherited_ignores();
        for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, SIGSETXID] {
            assert_eq!(handler(sig), libc::SIG_DFL, "signal {sig}");
        }
        assert_eq!(handler(SIGCANCEL), libc::SIG_IGN, "32 stays as the caller left it");
        rt_sigaction(SIGCANCEL, Some(&KernelSigaction { handler: libc::SIG_DFL, ..Default::default() }), None);
    }

    #[test]
    fn the_ignored_mask_is_read_from_status() {
        assert_eq!(ignored_mask("Name:\tx\nSigBlk:\t0000000000000000\nSigIgn:\t0000000080000006\n"), Some(0x8000_0006));
        assert_eq!(ignored_mask("Name:\tx\n"), None);
    }

    #[test]
    fn signal_32_follows_what_the_caller_left() {
        let _turn = DISPOSITIONS.lock().unwrap_or_else(|p| p.into_inner());
        assert!(rt_sigaction(SIGCANCEL, Some(&KernelSigaction { handler: libc::SIG_IGN, ..Default::default() }), None));
        assert_eq!(sigcancel_disposition(), "ignored");
        std::env::set_var(CALLER_SIGCANCEL_ENV, "default");
        restore_caller_sigcancel();
        assert_eq!((handler(SIGCANCEL), sigcancel_disposition()), (libc::SIG_DFL, "default"));
        std::env::set_var(CALLER_SIGCANCEL_ENV, "ignored");
        restore_caller_sigcancel();
        assert_eq!(handler(SIGCANCEL), libc::SIG_IGN);
        std::env::remove_var(CALLER_SIGCANCEL_ENV);
        rt_sigaction(SIGCANCEL, Some(&KernelSigaction { handler: libc::SIG_DFL, ..Default::default() }), None);
    }
}
