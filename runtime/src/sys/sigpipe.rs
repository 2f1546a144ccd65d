//! SIGPIPE for a process that starts containers. Rust sets it to SIG_IGN,
//! and an ignored signal survives execve, so containers would start with
//! it ignored. SIG_DFL instead would let a write to a closed pipe inside the
//! engine (before the user's program runs) kill the container's init
//! silently. A no-op handler gives both what they need: our writes get
//! EPIPE, and execve resets a handled signal to its default.

extern "C" fn ignore(_: libc::c_int) {}

/// Installs the no-op SIGPIPE handler; call before creating containers.
pub fn handle_for_children() {
    // SAFETY: a zeroed sigaction with a plain handler and empty mask is
    // valid, and the handler does nothing.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGPIPE, &action, std::ptr::null_mut());
    }
}
