//! Writes a file as a whole, as runc writes its pid file: a new file with an
//! exact mode beside the target, then renamed over it. A symlink planted at
//! the path is replaced, never followed, and readers never see a partial file.
//! Not fsync'ed, as runc and crun do not: the files are a running
//! container's state, which no reboot keeps (or a checkpoint's
//! descriptors.json, whose criu images beside it are not synced either),
//! and readers rely on the rename alone. On a disk-backed `--root` the
//! sync cost each `run` ~0.4 ms.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Replaces `path` with a regular file holding `data`, with mode `mode`
/// whatever the umask.
pub fn write(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    let tmp = temp_path(path);
    let result = write_new(&tmp, data, mode).and_then(|()| rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// `.<name>.<pid>.tmp` in the same directory, so the rename stays on one
/// filesystem.
fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// O_EXCL: fails on anything already there, a symlink included.
fn write_new(tmp: &Path, data: &[u8], mode: u32) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(tmp)
        .map_err(|e| Error::io("create", tmp, e))?;
    // The mode given to open is masked by the umask; set it exactly.
    file.set_permissions(fs::Permissions::from_mode(mode)).map_err(|e| Error::io("fchmod", tmp, e))?;
    file.write_all(data).map_err(|e| Error::io("write", tmp, e))
}

fn rename(tmp: &Path, path: &Path) -> Result<()> {
    fs::rename(tmp, path).map_err(|e| Error::io("rename", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rustpod-atomic-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_symlink_at_the_path_is_replaced_not_followed() {
        let dir = scratch("symlink");
        fs::write(dir.join("victim"), "keep").unwrap();
        std::os::unix::fs::symlink(dir.join("victim"), dir.join("out")).unwrap();
        write(&dir.join("out"), b"42", 0o644).unwrap();
        assert_eq!(fs::read_to_string(dir.join("victim")).unwrap(), "keep");
        let meta = fs::symlink_metadata(dir.join("out")).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o644);
        assert_eq!(fs::read_to_string(dir.join("out")).unwrap(), "42");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_mode_is_exact_whatever_the_umask() {
        let dir = scratch("mode");
        write(&dir.join("secret"), b"x", 0o600).unwrap();
        let mode = fs::metadata(dir.join("secret")).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600);
        fs::remove_dir_all(&dir).unwrap();
    }
}
