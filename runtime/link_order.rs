// The ordered link of a binary, shared by runtime/build.rs and shim/build.rs
// (each `include!`s it): the functions the binary's processes run, listed in
// the package's symbol-order.txt by hack/symbol-order.sh, placed together at
// the start of its code. The kernel maps a binary 64 KiB around each page a
// process touches (fault-around), so code scattered over the whole binary
// keeps most of it resident. Only where rustc links with its own lld
// (x86_64 Linux since 1.90): GNU ld has no --symbol-ordering-file.

/// The link flags of a workspace binary: packed relative relocations
/// (DT_RELR) for a plain `cargo build` (a dynamic PIE; hack/build.sh links
/// static at a fixed address, where nothing is left to relocate), and the
/// symbol order. `this_file` is this file's path from the build script.
fn link_flags(this_file: &str) {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={this_file}");
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu") {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    link_in_symbol_order();
}

/// Hands `<package>/symbol-order.txt` to lld, if it exists and lld links.
fn link_in_symbol_order() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let order = std::path::Path::new(&dir).join("symbol-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    if order.exists() && links_with_rust_lld() {
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}", order.display());
        // Names the build no longer has (after a toolchain or Cargo.lock
        // change) are skipped: a stale list costs memory, not correctness.
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// rustc links x86_64-unknown-linux-gnu with its bundled lld from 1.90 on.
fn links_with_rust_lld() -> bool {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64")
        || std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
    {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc).arg("--version").output() else { return false };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&out.stdout);
    let mut numbers = version.split_whitespace().nth(1).unwrap_or_default().split('.');
    let (major, minor) = (numbers.next(), numbers.next().and_then(|m| m.parse::<u32>().ok()));
    major == Some("1") && minor.is_some_and(|m| m >= 90)
}
