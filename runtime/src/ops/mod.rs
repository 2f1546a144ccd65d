//! The `ops` layer: one file per operation of runc's CLI (create, start,
//! run, delete, kill, exec, pause, resume, ps, list, update, events,
//! features, spec). An operation composes `engine` steps and may use `sys`;
//! it never imports another operation (what two need is an engine step) nor
//! `api` (but the crate's error type).

pub mod checkpoint;
pub mod create;
pub mod delete;
pub mod events;
pub mod exec;
pub mod features;
pub mod kill;
pub mod list;
pub mod pause;
pub mod ps;
pub mod restore;
pub mod resume;
pub mod run;
pub mod spec;
pub mod start;
pub mod update;
