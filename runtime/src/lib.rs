//! rustpod: the container operations behind the `rustpod` CLI and the
//! containerd shim, built on youki's libcontainer with our own fixes for the
//! places where it falls short of the OCI spec or runc's behaviour.
//!
//! A [`Runtime`] (a state root and its cgroup driver) creates containers and
//! hands out [`Container`] handles, which carry every operation.
//!
//! Four layers, each in its folder, each importing only those below it
//! (docs/layers.md): `api` (what the binaries use), `ops` (one file per
//! operation), `engine` (the steps) and `sys` (the syscalls).

mod api;
mod engine;
mod ops;
mod sys;

#[cfg(test)]
mod layer_rule;

pub use api::*;
