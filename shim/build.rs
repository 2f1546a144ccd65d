// Link flags for the shim binary (runtime/link_order.rs): DT_RELR for a
// plain `cargo build`, and the functions a pod's server runs placed together
// at the start of the code: a long-lived server scattered over the whole
// code keeps most of it resident.
include!("../runtime/link_order.rs");

fn main() {
    link_flags("../runtime/link_order.rs");
}
