// Link flags for the `rustpod` binary as a plain `cargo build` makes it (a
// dynamic PIE): pack its ~33,000 relative relocations (DT_RELR, glibc
// 2.36+), so ld.so reads a few KiB instead of ~800 KiB of relocation table
// at every exec. hack/build.sh links it static at a fixed address, where
// there is nothing left to relocate.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
