//! Load benchmark of every GET route of the dashboard and the API, against a `cachelens` binary
//! run as its own server (run by `scripts/load-bench.sh`; prints figures, never fails on time).
//!
//! For each binary (`CACHELENS_BIN_BEFORE` first when set, then `CACHELENS_BIN`): a fresh
//! database, `serve`, the fleet of `fleet.rs` uploaded through the server's own upload path,
//! the first `/` right after the last scan landed, every route of `routes.rs` once on its own
//! (cold), then each driven by `--clients` concurrent clients (p50/p99), the server's RSS all
//! along; with `--upload-nodes N`, N nodes then upload `--upload-entries`-entry scans at once
//! while readers time pages (`scripts/upload-load.sh`). A request that takes longer than
//! `--timeout` is reported as a timeout (and the server restarted); a server whose RSS passes
//! `--rss-cap-mb` is killed and reported.

mod drive;
mod drive_upload;
mod fleet;
mod request;
mod routes;
mod server;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct Args {
    pub work: PathBuf,
    pub machines: usize,
    pub entries: usize,
    pub variety: usize,
    pub events: usize,
    pub clients: usize,
    pub requests: usize,
    pub route_secs: f64,
    pub timeout: Duration,
    pub first_timeout: Duration,
    pub slow_ms: f64,
    pub rss_cap_mb: u64,
    pub upload_nodes: usize,
    pub upload_entries: usize,
    pub readers: usize,
    pub skip_routes: bool,
    pub reuse: bool,
    /// Time only the routes whose label contains one of these (comma-separated `--only`).
    pub only: Vec<String>,
}

fn args() -> Args {
    let mut a = Args {
        work: PathBuf::from("target/load-bench"),
        machines: 20,
        entries: 50_000,
        variety: 100,
        events: 20_000,
        clients: 16,
        requests: 400,
        route_secs: 10.0,
        timeout: Duration::from_secs(30),
        first_timeout: Duration::from_secs(300),
        slow_ms: 3000.0,
        rss_cap_mb: 6000,
        upload_nodes: 0,
        upload_entries: 50_000,
        readers: 4,
        skip_routes: false,
        reuse: false,
        only: vec![],
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_default();
        let n = |s: String| -> usize { s.parse().unwrap_or_else(|_| panic!("{k}: a number")) };
        match k.as_str() {
            "--work" => a.work = PathBuf::from(v()),
            "--machines" => a.machines = n(v()).max(2),
            "--entries" => a.entries = n(v()),
            "--variety" => a.variety = n(v()),
            "--events" => a.events = n(v()),
            "--clients" => a.clients = n(v()),
            "--requests" => a.requests = n(v()),
            "--route-seconds" => a.route_secs = n(v()) as f64,
            "--timeout" => a.timeout = Duration::from_secs(n(v()) as u64),
            "--first-timeout" => a.first_timeout = Duration::from_secs(n(v()) as u64),
            "--slow-ms" => a.slow_ms = n(v()) as f64,
            "--rss-cap-mb" => a.rss_cap_mb = n(v()) as u64,
            "--upload-nodes" => a.upload_nodes = n(v()),
            "--upload-entries" => a.upload_entries = n(v()),
            "--readers" => a.readers = n(v()),
            "--skip-routes" => a.skip_routes = true,
            "--reuse" => a.reuse = true,
            "--only" => a.only = v().split(',').map(str::to_string).collect(),
            "--bench" => {} // cargo bench passes it
            other => panic!("unknown flag {other} (see benches/load/main.rs)"),
        }
    }
    a
}

/// Figures of one binary, for the before/after table.
pub struct Run {
    pub name: String,
    pub rows: Vec<drive::Row>,
    pub first: String,
    pub ingest: String,
    pub hwm_mb: u64,
    pub upload: Vec<String>,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    cachelens::upload::install_crypto();
    server::kill_all_on_signal();
    let a = args();
    std::fs::create_dir_all(&a.work)?;
    let t = Instant::now();
    let corpus = fleet::Corpus::load()?;
    eprintln!(
        "corpus scanned in {:.1}s: {} H100 template entries ({} hook events), A100 {}→{}, MI300 {}→{}",
        t.elapsed().as_secs_f64(),
        corpus.h100.entries.len(),
        corpus.h100.events.len(),
        corpus.a100_old.entries.len(),
        corpus.a100_new.entries.len(),
        corpus.mi300_old.entries.len(),
        corpus.mi300_new.entries.len()
    );
    let mut bins = vec![];
    if let Ok(b) = std::env::var("CACHELENS_BIN_BEFORE") {
        bins.push(("before", PathBuf::from(b)));
    }
    let after =
        std::env::var("CACHELENS_BIN").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from("target/release/cachelens"));
    bins.push((if bins.is_empty() { "build" } else { "after" }, after));
    println!(
        "load bench: {} machines × {} entries + an upgraded machine ({} + {}) + a release pair, {} hook events per machine, \
         {} clients, {} cores (machine shared with other work: load average {})",
        a.machines,
        a.entries,
        a.entries,
        2 * a.entries,
        a.events,
        a.clients,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        request::load_average()
    );
    let mut runs = vec![];
    for (name, bin) in &bins {
        println!("\n== {name}: {}", bin.display());
        runs.push(drive::run_binary(&a, &corpus, name, bin).await?);
    }
    if runs.len() == 2 {
        drive::print_compare(&runs[0], &runs[1]);
    }
    Ok(())
}
