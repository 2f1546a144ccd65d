//! The pod sandbox's infra process: holds the pod's namespaces by sleeping
//! forever, reaps zombies (it is PID 1 of a shared PID namespace), and exits
//! 0 on SIGINT or SIGTERM. Built static so the pause image needs nothing else.

use std::ptr;

extern "C" fn on_terminate(_: libc::c_int) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(0) }
}

extern "C" fn on_child(_: libc::c_int) {
    // SAFETY: waitpid is async-signal-safe; reap every exited child.
    unsafe { while libc::waitpid(-1, ptr::null_mut(), libc::WNOHANG) > 0 {} }
}

fn install(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) -> std::io::Result<()> {
    // SAFETY: a zeroed sigaction with a plain handler and an empty mask is valid.
    let rc = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, ptr::null_mut())
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("-v") {
        println!("rustpod-pause {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    if std::process::id() != 1 {
        eprintln!("rustpod-pause: warning: not running as PID 1");
    }
    let installed = install(libc::SIGINT, on_terminate)
        .and_then(|_| install(libc::SIGTERM, on_terminate))
        .and_then(|_| install(libc::SIGCHLD, on_child));
    if let Err(err) = installed {
        eprintln!("rustpod-pause: install signal handlers: {err}");
        std::process::exit(1);
    }
    loop {
        // SAFETY: pause only sleeps until a signal arrives.
        unsafe { libc::pause() };
    }
}
