//! The one integration test binary: real corpus caches, real SQLite files, real servers.
mod common;
mod api_read;
mod scan;
mod damaged;
mod pages;
mod explain;
mod history;
mod upload;
mod tokens;
mod fuzz;
