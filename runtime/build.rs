// Link flags for the `rustpod` binary: pack its ~33,000 relative relocations
// (DT_RELR, glibc 2.36+). ld.so then reads a few KiB instead of ~800 KiB of
// relocation table at every exec, which is a third of an exec's CPU here and
// ~1.2 MiB of a long-lived shim's RSS; runc's and crun's executions pay
// nothing similar.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
