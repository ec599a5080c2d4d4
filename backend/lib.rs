//! cachelens: a team dashboard for Triton's GPU kernel cache.
//!
//! `scan` reads cache dirs (pure, no I/O beyond reading), `db` owns all SQL, `explain` the key
//! components and causes, `web` the server; `run` wires them to the command line.
#![forbid(unsafe_code)]

pub mod answers;
pub mod bounded;
pub mod cli;
pub mod collect;
pub mod db;
pub mod demo;
pub mod explain;
pub mod failpoint;
pub mod fmt;
pub mod gate;
pub mod locate;
pub mod lock;
pub mod model;
pub mod progress;
pub mod prune;
pub mod rules;
pub mod run;
pub mod scan;
#[cfg(test)]
pub(crate) mod test_corpus;
pub mod upload;
pub mod web;
