//! The errno of an I/O error from a syscall, for error lines that name it
//! (`EINVAL: Invalid argument` rather than "Invalid argument (os error 22)").

use nix::errno::Errno;

/// `e`'s errno; EIO for an error that carries none.
pub fn errno_of(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}
