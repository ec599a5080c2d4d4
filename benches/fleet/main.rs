//! Fleet benchmark through the real client and the real HTTP API (run by
//! `scripts/fleet-bench.sh`, whose header gives every flag; prints figures, never fails on time).
//!
//! A pool of distinct real cache entries on disk (`pool.rs`: the H100 corpus entries of
//! `demo/*.tar.xz` cloned under new keys), each node's cache dir a window of it made of hard
//! links; then, per binary (`CACHELENS_BIN_BEFORE` first when set, then `CACHELENS_BIN`): a fresh
//! database, `BIN serve` behind a counting TCP proxy (`proxy.rs`), and each node's
//! `BIN scan DIR --server PROXY --token T --machine node-NNN`, one at a time; the same again
//! unchanged; every GET route of `benches/load/routes.rs` cold and under `--clients` clients;
//! the database's size; then a fresh database that `--parallel` nodes at a time fill while
//! `--clients` readers time every route (`run.rs`). With `--pg URL`, each binary's run again on
//! databases of that PostgreSQL server (`store.rs`), side by side with SQLite's.

#[allow(dead_code)] // Facts only
#[path = "../load/fleet.rs"]
mod fleet;
mod pool;
mod proxy;
#[path = "../load/request.rs"]
mod request;
#[path = "../load/routes.rs"]
mod routes;
mod run;
#[allow(dead_code)]
#[path = "../load/server.rs"]
mod server;
mod store;

use fleet::test_corpus;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct Args {
    pub work: PathBuf,
    pub nodes: usize,
    pub entries: usize,
    pub overlap: f64,
    pub pool: usize,
    pub variety: usize,
    pub link_groups: bool,
    pub clients: usize,
    pub parallel: usize,
    pub readers: usize,
    pub twins: usize,
    pub pass_minutes: f64,
    pub requests: usize,
    pub route_secs: f64,
    pub timeout: Duration,
    pub slow_ms: f64,
    pub settle_secs: f64,
    pub rss_cap_mb: u64,
    pub tables: usize,
    pub skip_routes: bool,
    pub rebuild: bool,
    /// A PostgreSQL server whose role may create databases: every run again there.
    pub pg: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        work: PathBuf::from("target/fleet-bench"),
        nodes: 40,
        entries: 10_000,
        overlap: 0.8,
        pool: 0,
        variety: 100,
        link_groups: false,
        clients: 16,
        parallel: 4,
        readers: 4,
        twins: 4,
        pass_minutes: 0.0,
        requests: 400,
        route_secs: 5.0,
        timeout: Duration::from_secs(30),
        slow_ms: 3000.0,
        settle_secs: 3.0,
        rss_cap_mb: 6000,
        tables: 12,
        skip_routes: false,
        rebuild: false,
        pg: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_default();
        let n = |s: String| -> usize { s.parse().unwrap_or_else(|_| panic!("{k}: a number")) };
        let f = |s: String| -> f64 { s.parse().unwrap_or_else(|_| panic!("{k}: a number")) };
        match k.as_str() {
            "--work" => a.work = PathBuf::from(v()),
            "--nodes" => a.nodes = n(v()).max(1),
            "--entries" => a.entries = n(v()).max(1),
            "--overlap" => a.overlap = f(v()).clamp(0.0, 1.0),
            "--pool" => a.pool = n(v()),
            "--variety" => a.variety = n(v()).max(1),
            "--group-files" => {
                a.link_groups = match v().as_str() {
                    "copy" => false,
                    "link" => true,
                    o => panic!("--group-files copy|link, not {o}"),
                }
            }
            "--clients" => a.clients = n(v()),
            "--parallel" => a.parallel = n(v()),
            "--readers" => a.readers = n(v()),
            "--twins" => a.twins = n(v()),
            "--pass-minutes" => a.pass_minutes = f(v()),
            "--requests" => a.requests = n(v()),
            "--route-seconds" => a.route_secs = f(v()),
            "--timeout" => a.timeout = Duration::from_secs(n(v()) as u64),
            "--slow-ms" => a.slow_ms = f(v()),
            "--settle-secs" => a.settle_secs = f(v()),
            "--rss-cap-mb" => a.rss_cap_mb = n(v()) as u64,
            "--tables" => a.tables = n(v()),
            "--skip-routes" => a.skip_routes = true,
            "--rebuild" => a.rebuild = true,
            "--pg" => a.pg = Some(v()),
            "--bench" => {} // cargo bench passes it
            other => panic!("unknown flag {other} (see scripts/fleet-bench.sh)"),
        }
    }
    a
}

/// The window rule: node i+1's window starts `entries × (1 − overlap)` after node i's (neighbours
/// share `overlap` of their keys), on a ring of `--pool` keys, by default `entries / (1 −
/// overlap)` or what the windows reach if less.
fn plan(a: &Args) -> pool::Plan {
    let stride = (a.entries as f64 * (1.0 - a.overlap)).round() as usize;
    let reach = (a.nodes - 1) * stride + a.entries;
    let pool = if a.pool > 0 {
        a.pool.max(a.entries)
    } else if stride == 0 {
        a.entries
    } else {
        reach.min((a.entries as f64 / (1.0 - a.overlap) - 1e-6).ceil() as usize)
    };
    pool::Plan { nodes: a.nodes, entries: a.entries, pool, stride, variety: a.variety, link_groups: a.link_groups }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    cachelens::upload::install_crypto();
    server::kill_all_on_signal();
    let mut a = args();
    std::fs::create_dir_all(&a.work)?;
    a.work = a.work.canonicalize()?;
    let t = Instant::now();
    let roots: Vec<PathBuf> = pool::ARCHIVES.iter().map(|x| test_corpus::unpacked(x)).collect();
    let templates = pool::templates(&roots)?;
    let kernels = templates.iter().filter(|t| t.is_kernel()).count();
    let p = plan(&a);
    let (nt, tpl) = (templates.len(), t.elapsed().as_secs_f64());
    let fleet = tokio::task::spawn_blocking({
        let work = a.work.clone();
        let rebuild = a.rebuild;
        move || pool::build(&work, templates, p, rebuild)
    })
    .await??;
    let held: usize = (0..p.nodes).map(|i| p.new_keys(i)).filter(|&n| n > 0).count();
    println!(
        "fleet bench: {} nodes × {} entries, neighbours share {:.0}% of their keys (stride {}), {} distinct keys \
         ({:.1} machines per key; {} nodes bring keys no node before them has), group files {}; \
         {nt} corpus entries as templates ({kernels} compiled kernels; found in {tpl:.1} s), {} kernel name variants; \
         {} clients after the uploads, {} nodes at a time and {} readers in the parallel pass; {} cores (load average {})",
        p.nodes,
        p.entries,
        a.overlap * 100.0,
        p.stride,
        p.distinct(),
        (p.nodes * p.entries) as f64 / p.distinct() as f64,
        held,
        if p.link_groups { "hard-linked (every entry relocated)" } else { "written per node with its own paths" },
        p.variety,
        a.clients,
        a.parallel,
        a.readers,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        request::load_average()
    );
    println!("disk: {} (pool at {})", fleet.built, fleet.pool.display());
    let mut bins = vec![];
    if let Ok(b) = std::env::var("CACHELENS_BIN_BEFORE") {
        bins.push(("before", PathBuf::from(b)));
    }
    let after =
        std::env::var("CACHELENS_BIN").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from("target/release/cachelens"));
    bins.push((if bins.is_empty() { "build" } else { "after" }, after));
    let mut runs = vec![];
    // each binary on SQLite, then with --pg on PostgreSQL: the stores of one build side by side
    let stores: Vec<Option<&str>> = [None].into_iter().chain(a.pg.as_deref().map(Some)).collect();
    for (name, bin) in &bins {
        for pg in &stores {
            let store = if pg.is_some() { "PostgreSQL" } else { "SQLite" };
            println!("\n== {name} on {store}: {}", bin.display());
            let t = Instant::now();
            let r = run::run_binary(&a, &fleet, name, bin, *pg).await?;
            let name = &r.name;
            println!("\n== {name}: figures ({:.0} s for this run)", t.elapsed().as_secs_f64());
            let figs = run::figures(&a, &fleet, &r);
            for (k, v) in &figs {
                println!("  {k}: {v}");
            }
            if !r.during_bad.is_empty() {
                println!("  reads during the parallel pass not timed, by kind:");
                for (k, n) in &r.during_bad {
                    println!("    {k}: {n}");
                }
            }
            runs.push((r, figs));
        }
    }
    // side by side (one column per binary)
    let names: Vec<&str> = runs.iter().map(|r| r.0.name.as_str()).collect();
    println!("\n== figures{}", if runs.len() > 1 { format!(": {}", names.join(" / ")) } else { String::new() });
    println!("| figure | {} |\n| --- |{}", names.join(" | "), " --- |".repeat(runs.len()));
    // every figure of either run (the builds' tables may differ), in the first run's order, each
    // figure only the other has after the one it follows there
    let mut keys: Vec<&String> = runs[0].1.iter().map(|x| &x.0).collect();
    for r in &runs[1..] {
        for (i, (k, _)) in r.1.iter().enumerate() {
            if !keys.contains(&k) {
                let at = i
                    .checked_sub(1)
                    .and_then(|p| keys.iter().position(|x| *x == &r.1[p].0))
                    .map_or(keys.len(), |p| p + 1);
                keys.insert(at, k);
            }
        }
    }
    for k in keys {
        let cells: Vec<String> =
            runs.iter().map(|r| r.1.iter().find(|x| &x.0 == k).map_or("-".into(), |x| x.1.clone())).collect();
        println!("| {k} | {} |", cells.join(" | "));
    }
    if !a.skip_routes {
        println!(
            "\n| route | {} |\n| --- |{}",
            names
                .iter()
                .map(|n| format!(
                    "{n}: p50 / p99 ms (n) while {} nodes upload, {} readers | {n}: cold after | {n}: p50 / p99 ms (n) after, {} clients",
                    a.parallel, a.readers, a.clients
                ))
                .collect::<Vec<_>>()
                .join(" | "),
            " --- | --- | --- |".repeat(runs.len())
        );
        let cells: Vec<_> = runs.iter().map(|r| run::route_cells(&r.0)).collect();
        for (i, row) in cells[0].iter().enumerate() {
            let cols: Vec<String> = cells.iter().map(|c| format!("{} | {} | {}", c[i].1, c[i].2, c[i].3)).collect();
            println!("| {} | {} |", row.0, cols.join(" | "));
        }
    }
    Ok(())
}
