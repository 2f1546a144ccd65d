// Link flags for the shim binary as a plain `cargo build` makes it: packed
// relative relocations (DT_RELR), as for `rustpod`; see runtime/build.rs.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
