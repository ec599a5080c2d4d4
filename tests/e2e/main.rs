//! The one integration test binary: real corpus caches, real SQLite files, real servers.
mod api_read;
mod common;
mod damaged;
mod explain;
mod explain_generated;
mod fuzz;
mod history;
mod history_exact;
mod hostile_scan;
mod hostile_server;
mod layouts;
mod pages;
mod scan;
mod summaries;
mod tokens;
mod upload;
