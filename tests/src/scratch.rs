// Temporary directories under /var/tmp/rustpod-tests, unique per process, removed on Drop;
// also the unique-name generator shared with container ids.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where every test's bundles, roots and scratch files live.
pub const BASE: &str = "/var/tmp/rustpod-tests";

/// `<prefix>-<pid>-<counter>`: unique within this machine while the process lives.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    pub fn new(prefix: &str) -> Self {
        let path = Path::new(BASE).join(unique_name(prefix));
        // A stale dir of a killed earlier run with the same pid would make create_dir fail.
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        ScratchDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path as UTF-8, for use as a command-line argument.
    pub fn str(&self) -> &str {
        self.path.to_str().expect("scratch paths are UTF-8")
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// `join` as a String, for command-line arguments.
    pub fn join_str(&self, name: &str) -> String {
        self.join(name).to_str().expect("scratch paths are UTF-8").to_string()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("warning: cannot remove {}: {e}", self.path.display());
            }
        }
    }
}
