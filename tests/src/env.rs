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
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// `BIN --version`'s first version number as (major, minor, patch): containerd 2.x's
/// "… containerd/v2 v2.3.4 …" gives (2, 3, 4), Debian's runc "runc version 1.3.6+ds1" (1, 3, 6);
/// (0, 0, 0) when it prints none.
pub fn version_of(bin: &Path) -> (u32, u32, u32) {
    let out = crate::process::run(bin, &["--version"], b"");
    let version = out
        .stdout
        .split_whitespace()
        .map(|w| w.strip_prefix('v').unwrap_or(w))
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.contains('.'))
        .unwrap_or_default();
    let mut parts = version.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap_or(0)
    });
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// `bin` is runc (not crun standing in for it as RUNC_BIN) of a version before `version`: where
/// Debian 12's runc 1.1.5 still does what runc changed since (tests/RUNC_DIFFERENCES.md).
pub fn runc_before(bin: &Path, version: (u32, u32, u32)) -> bool {
    is_runc(bin) && !is_crun(bin) && version_of(bin) < version
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

/// `bin` is the oracle and the oracle is crun (`RUNC_BIN=/usr/bin/crun`, crun 1.28 in the sid
/// guest), not runc: tests record where it differs from runc.
pub fn is_crun(bin: &Path) -> bool {
    is_runc(bin) && bin.file_name().is_some_and(|name| name == "crun")
}
