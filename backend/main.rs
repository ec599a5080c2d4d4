//! `cachelens`: clap → tracing → run(); exit 1 on error, 3 when a scan finds its root locked
//! (the gate sets its own status).
#![forbid(unsafe_code)]

use cachelens::cli::Cli;
use clap::Parser;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: a server's requests allocate many small, short-lived
/// values (parsed metadata, findings, rows) across threads, and glibc's arenas spent about a
/// fifth of a loaded server's CPU in locking and consolidation (measured in the commit that
/// chose it: `git log -S mimalloc`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("CACHELENS_LOG").unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .init();
    match cachelens::run::run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) if e.is::<cachelens::lock::Locked>() => {
            eprintln!("error: {}", cachelens::fmt::term(&format!("{e:#}")));
            ExitCode::from(cachelens::lock::EXIT_LOCKED)
        }
        Err(e) => {
            // an error may name a dir or file of a cache: one line, escaped like the rest
            eprintln!("error: {}", cachelens::fmt::term(&format!("{e:#}")));
            ExitCode::from(1)
        }
    }
}
