//! The one integration test binary: real corpus caches, real SQLite files, real servers.
mod common;
mod api_read;
mod upload;
mod tokens;
mod fuzz;
