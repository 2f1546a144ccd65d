// Which binaries the suite drives: RUSTPOD_BIN (the runtime under test), RUNC_BIN (the oracle),
// and where the repository (for hack/ scripts) is.

use std::path::{Path, PathBuf};

pub const DEFAULT_RUNC: &str = "/usr/sbin/runc";
const FALLBACK_TARGET: &str = "/var/tmp/rustpod-target";

/// `$RUSTPOD_BIN`, else `$CARGO_TARGET_DIR/debug/rustpod` if built, else the lead's target dir.
pub fn rustpod_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("RUSTPOD_BIN") {
        return PathBuf::from(bin);
    }
    std::env::var_os("CARGO_TARGET_DIR")
        .map(|dir| Path::new(&dir).join("debug/rustpod"))
        .filter(|bin| bin.exists())
        .unwrap_or_else(|| Path::new(FALLBACK_TARGET).join("debug/rustpod"))
}

/// `$RUNC_BIN`, else /usr/sbin/runc.
pub fn runc_bin() -> PathBuf {
    std::env::var_os("RUNC_BIN").map_or_else(|| PathBuf::from(DEFAULT_RUNC), PathBuf::from)
}

/// The workspace checkout this crate belongs to.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Both runtimes are the same file (the suite is being validated against runc).
pub fn testing_runc_itself() -> bool {
    is_runc(&rustpod_bin())
}

/// `bin` is the runc binary (`$RUNC_BIN`), by the file it resolves to.
pub fn is_runc(bin: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(bin) == canon(&runc_bin())
}
