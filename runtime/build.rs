// Link flags for the `rustpod` binary (link_order.rs): DT_RELR for a plain
// `cargo build`, and the functions a container's lifecycle runs (create,
// start, exec, the init, kill, delete, run) placed together. Each command is
// a new process, whose peak RSS is mostly the code pages it maps.
include!("link_order.rs");

fn main() {
    link_flags("link_order.rs");
}
