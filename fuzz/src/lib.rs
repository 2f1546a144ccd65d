//! The fuzzed functions, shared by the cargo-fuzz targets and the
//! stable-toolchain fallback (tests/random.rs). Each must never panic.

use std::path::PathBuf;
use std::sync::OnceLock;

use rustpod::engine_bundle::{self, Bundle, EngineOptions};

/// A bundle directory with an empty rootfs, made once per process.
fn scratch_bundle() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rustpod-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("rootfs")).expect("create fuzz bundle");
        dir
    })
}

/// config.json bytes: parse; if they parse, validate and normalize for the
/// engine, and the engine spec must serialize and parse again.
pub fn config_parse(data: &[u8]) {
    let Ok(spec) = engine_bundle::parse_spec_bytes(data) else {
        return;
    };
    let path = scratch_bundle().clone();
    let config = path.join("config.json");
    let _ = rustpod::validate::check(&config, &spec);
    let bundle = Bundle {
        rootfs: path.join("rootfs"),
        path,
        spec,
        pids_limit_zero: false,
    };
    for systemd in [false, true] {
        let opts = EngineOptions {
            systemd_cgroup: systemd,
        };
        if let Ok(engine) = engine_bundle::engine_spec("fuzz", &bundle, &opts) {
            let text = serde_json::to_vec(&engine).expect("engine spec serializes");
            engine_bundle::parse_spec_bytes(&text).expect("engine spec parses again");
        }
    }
}

/// Bytes split into arguments (at NUL or whitespace): each goes through the
/// CLI's own parsers for signals, sizes and container ids, and the whole
/// input through the `update --resources` parser.
pub fn cli_args(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for arg in text.split(|c: char| c == '\0' || c.is_whitespace()) {
        let _ = rustpod::signal::parse(arg);
        let _ = rustpod::parse_size(arg);
        if rustpod::container_dir::validate_id(arg).is_ok() {
            assert!(!arg.contains('/') && arg != "." && arg != "..", "id {arg:?} accepted");
        }
    }
    let _ = rustpod::parse_resources(data);
}
