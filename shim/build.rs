// Link flags for the shim binary.
// - Packed relative relocations (DT_RELR), as for `rustpod`, for a plain
//   `cargo build` (a dynamic PIE); see runtime/build.rs.
// - The functions a pod's server runs placed together at the start of the
//   code (symbol-order.txt, written by hack/shim-symbol-order.sh): the kernel
//   maps a binary 64 KiB around each page a process touches, so a long-lived
//   server scattered over the whole code keeps most of it resident. Only
//   where rustc links with its own lld (x86_64 Linux since 1.90): GNU ld has
//   no --symbol-ordering-file.
use std::path::Path;
use std::process::Command;

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu") {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");

    let order = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("symbol-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    println!("cargo:rerun-if-changed=build.rs");
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
    let Ok(out) = Command::new(rustc).arg("--version").output() else { return false };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&out.stdout);
    let mut numbers = version.split_whitespace().nth(1).unwrap_or_default().split('.');
    let (major, minor) = (numbers.next(), numbers.next().and_then(|m| m.parse::<u32>().ok()));
    major == Some("1") && minor.is_some_and(|m| m >= 90)
}
