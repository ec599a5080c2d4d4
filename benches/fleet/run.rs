//! One binary's run: the nodes' real clients uploading through the counting proxy, one after
//! the other (first uploads, then unchanged re-uploads), every route after; then a fresh database
//! that `--parallel` nodes at a time fill while readers time every route; the figures.

use crate::Args;
use crate::fleet::Facts;
use crate::pool::Fleet;
use crate::proxy::{self, Proxy};
use crate::request::{Load, Outcome, client, fill, get, kb, pct};
use crate::routes::{ROUTES, Route};
use crate::server::Server;
use crate::store::{Db, DbSize, PgCpu};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One node's `cachelens scan --server` as measured.
#[derive(Clone, Default)]
pub struct NodeRun {
    pub machine: String,
    /// From the client's `--json` summary.
    pub entries: i64,
    pub new: i64,
    pub changed: i64,
    pub unchanged: i64,
    pub partial: i64,
    pub relocated: i64,
    pub wall: f64,
    /// Server CPU (user + system) from the client's start to its exit, ms; with `--parallel`,
    /// not measured per node (0).
    pub cpu_ms: f64,
    /// Server CPU after the client exited until the server was quiet (`--settle-secs`): the
    /// background work the upload queued (summary rebuild, checkpoint).
    pub bg_ms: f64,
    /// Wire bytes client → server and back (per node only when one at a time).
    pub up: u64,
    pub down: u64,
    /// The client's peak RSS (kB) and CPU (user + system, s), from `/usr/bin/time`.
    pub rss_kb: u64,
    pub client_cpu: f64,
    pub error: Option<String>,
}

/// A phase: its nodes and its totals.
#[derive(Default)]
pub struct Phase {
    pub label: String,
    pub rows: Vec<NodeRun>,
    /// Wall time of the phase (first client start to last client exit).
    pub wall: f64,
    /// Server CPU over the phase, the quiet wait after it included, ms.
    pub cpu_ms: f64,
    pub bg_ms: f64,
    pub up: u64,
    pub down: u64,
    /// Nodes not started because `--pass-minutes` ran out.
    pub skipped: usize,
    /// On PostgreSQL, its processes' CPU for the database over the phase, the quiet wait included.
    pub pg_ms: Option<f64>,
}

impl Phase {
    pub fn entries(&self) -> i64 {
        self.rows.iter().map(|r| r.entries).sum()
    }
}

/// Server CPU time (utime + stime) in ms, from `/proc/<pid>/stat`.
pub fn cpu_ms(pid: u32) -> f64 {
    static TCK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let tck = *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
            .unwrap_or(100.0)
    });
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    let rest = &s[s.rfind(')').map_or(0, |i| i + 1)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // after the comm: state is field 3; utime 14, stime 15
    let n = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (n(14) + n(15)) * 1000.0 / tck
}

/// Wait until the server has been quiet (under 2% of a core) for `secs`, at most 180 s; the CPU
/// it used meanwhile (ms). On PostgreSQL its processes must be quiet too: a server waiting on a
/// long statement uses no CPU of its own.
pub async fn settle(pid: u32, secs: f64, pg: Option<&PgCpu>) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    let (start, t) = (cpu_ms(pid), Instant::now());
    let pg_ms = || pg.map_or(0.0, PgCpu::ms);
    loop {
        let (c0, g0) = (cpu_ms(pid), pg_ms());
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let (c1, g1) = (cpu_ms(pid), pg_ms());
        if c1 - c0 + g1 - g0 <= secs * 1000.0 * 0.02 || t.elapsed() > Duration::from_secs(180) {
            return c1 - start;
        }
    }
}

/// The real client: `BIN scan DIR --server URL --token T --machine M --json --quiet`, under
/// `/usr/bin/time` for its peak RSS and CPU.
fn run_client(bin: &Path, dir: &Path, url: &str, token: &str, machine: &str, tmp: &Path) -> NodeRun {
    let timef = tmp.join(format!("{machine}.time"));
    let gnu_time = Path::new("/usr/bin/time").exists();
    let mut cmd = if gnu_time {
        let mut c = std::process::Command::new("/usr/bin/time");
        c.args(["-f", "%M %U %S", "-o"]).arg(&timef).arg(bin);
        c
    } else {
        std::process::Command::new(bin)
    };
    cmd.arg("scan")
        .arg(dir)
        .args(["--server", url, "--token", token, "--machine", machine, "--json", "--quiet"])
        .env_remove("CACHELENS_DB")
        .env_remove("CACHELENS_SERVER")
        .env_remove("CACHELENS_TOKEN")
        .env_remove("CACHELENS_MACHINE");
    let t = Instant::now();
    let out = cmd.output();
    let mut r = NodeRun { machine: machine.to_string(), wall: t.elapsed().as_secs_f64(), ..Default::default() };
    if let Ok(text) = std::fs::read_to_string(&timef)
        && let Some(last) = text.lines().last()
    {
        let f: Vec<&str> = last.split_whitespace().collect();
        r.rss_kb = f.first().and_then(|v| v.parse().ok()).unwrap_or(0);
        r.client_cpu = f.iter().skip(1).filter_map(|v| v.parse::<f64>().ok()).sum();
    }
    match out {
        Err(e) => r.error = Some(format!("could not run: {e}")),
        Ok(o) => {
            let v: Option<serde_json::Value> = serde_json::from_slice(&o.stdout).ok();
            if let Some(v) = v {
                let v = v["scans"][0].clone();
                let n = |k: &str| v.get(k).and_then(|x| x.as_i64()).unwrap_or(0);
                (r.entries, r.new, r.changed, r.unchanged) =
                    (n("entries"), n("new_entries"), n("changed_entries"), n("unchanged_entries"));
                (r.partial, r.relocated) = (n("partial"), n("relocated"));
            }
            if !o.status.success() {
                let err = String::from_utf8_lossy(&o.stderr);
                r.error = Some(format!("{}: {}", o.status, err.trim().lines().last().unwrap_or("")));
            }
        }
    }
    r
}

fn show_node(r: &NodeRun, per_node_server: bool) {
    let server = if per_node_server {
        format!("{:>9.0} {:>9.0} {:>11} {:>10}", r.cpu_ms, r.bg_ms, kb(r.up as usize), kb(r.down as usize))
    } else {
        format!("{:>9} {:>9} {:>11} {:>10}", "-", "-", "-", "-")
    };
    println!(
        "  {:<9} {:>7} {:>7} {:>7} {:>9} {:>8.1} {} {:>8} {:>8.1}{}",
        r.machine,
        r.entries,
        r.new,
        r.unchanged,
        r.changed,
        r.wall,
        server,
        r.rss_kb / 1024,
        r.client_cpu,
        r.error.as_ref().map(|e| format!("  ERROR {e}")).unwrap_or_default()
    );
}

fn node_header() {
    println!(
        "  {:<9} {:>7} {:>7} {:>7} {:>9} {:>8} {:>9} {:>9} {:>11} {:>10} {:>8} {:>8}",
        "node",
        "entries",
        "new",
        "unchgd",
        "changed",
        "wall s",
        "srv CPU",
        "after ms",
        "wire up",
        "wire down",
        "cli MB",
        "cli CPU"
    );
}

/// Every node, one after the other, through the proxy; the server settles after each.
async fn sequential(
    a: &Args,
    s: &Server,
    px: &Proxy,
    nodes: &[(String, PathBuf)],
    tokens: &BTreeMap<String, String>,
    label: &str,
    pg: Option<&PgCpu>,
) -> Phase {
    let pid = s.pid().unwrap_or(0);
    println!("\n{label}, one node at a time (srv CPU: server ms while the client ran; after: until it was quiet)");
    node_header();
    let mut p = Phase { label: label.into(), ..Default::default() };
    let (t, c0, (u0, d0)) = (Instant::now(), cpu_ms(pid), px.bytes());
    let g0 = pg.map(PgCpu::ms);
    for (n, (m, dir)) in nodes.iter().enumerate() {
        if a.pass_minutes > 0.0 && t.elapsed().as_secs_f64() > a.pass_minutes * 60.0 {
            p.skipped = nodes.len() - n;
            println!("  (--pass-minutes {} reached: the {} nodes left not started)", a.pass_minutes, p.skipped);
            break;
        }
        let (c, (u, d)) = (cpu_ms(pid), px.bytes());
        let (bin, dir, url, token, m2, tmp) =
            (s.bin.clone(), dir.clone(), px.url.clone(), tokens[m].clone(), m.clone(), a.work.clone());
        let mut r = tokio::task::spawn_blocking(move || run_client(&bin, &dir, &url, &token, &m2, &tmp)).await.unwrap();
        r.cpu_ms = cpu_ms(pid) - c;
        let (u1, d1) = px.bytes();
        (r.up, r.down) = (u1 - u, d1 - d);
        r.bg_ms = settle(pid, a.settle_secs, pg).await;
        show_node(&r, true);
        p.rows.push(r);
    }
    p.wall = p.rows.iter().map(|r| r.wall).sum();
    p.cpu_ms = cpu_ms(pid) - c0;
    p.pg_ms = pg.zip(g0).map(|(pg, g0)| pg.ms() - g0);
    p.bg_ms = p.rows.iter().map(|r| r.bg_ms).sum();
    let (u1, d1) = px.bytes();
    (p.up, p.down) = (u1 - u0, d1 - d0);
    println!("  ({} nodes in {:.0} s, settling included)", p.rows.len(), t.elapsed().as_secs_f64());

    p
}

/// `n` nodes at a time; wire and CPU only in total.
async fn parallel(
    a: &Args,
    s: &Server,
    px: &Proxy,
    nodes: &[(String, PathBuf)],
    tokens: &BTreeMap<String, String>,
    label: &str,
    pg: Option<&PgCpu>,
) -> Phase {
    let pid = s.pid().unwrap_or(0);
    println!("\n{label}, {} nodes at a time (server CPU and wire bytes in total only)", a.parallel);
    node_header();
    let (t, c0, (u0, d0)) = (Instant::now(), cpu_ms(pid), px.bytes());
    let g0 = pg.map(PgCpu::ms);
    let gate = Arc::new(tokio::sync::Semaphore::new(a.parallel.max(1)));
    let mut tasks = vec![];
    let budget = a.pass_minutes * 60.0;
    for (m, dir) in nodes {
        let (bin, dir, url, token, m2, tmp) =
            (s.bin.clone(), dir.clone(), px.url.clone(), tokens[m].clone(), m.clone(), a.work.clone());
        let gate = gate.clone();
        tasks.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.unwrap();
            if budget > 0.0 && t.elapsed().as_secs_f64() > budget {
                return None;
            }
            let r = tokio::task::spawn_blocking(move || run_client(&bin, &dir, &url, &token, &m2, &tmp)).await.unwrap();
            show_node(&r, false);
            Some(r)
        }));
    }
    let mut p = Phase { label: label.into(), ..Default::default() };
    for t in tasks {
        match t.await.unwrap() {
            Some(r) => p.rows.push(r),
            None => p.skipped += 1,
        }
    }
    if p.skipped > 0 {
        println!("  (--pass-minutes {} reached: {} nodes not started)", a.pass_minutes, p.skipped);
    }
    p.wall = t.elapsed().as_secs_f64();
    let during = cpu_ms(pid) - c0;
    p.bg_ms = settle(pid, a.settle_secs, pg).await;
    p.cpu_ms = during + p.bg_ms;
    p.pg_ms = pg.zip(g0).map(|(pg, g0)| pg.ms() - g0);
    let (u1, d1) = px.bytes();
    (p.up, p.down) = (u1 - u0, d1 - d0);
    p
}

/// The routes' placeholders, from the fleet on disk and the server.
async fn facts(fleet: &Fleet, done: usize, url: &str) -> Facts {
    let plan = &crate::pool::Plan { nodes: done.max(1), ..fleet.plan };
    let names: Vec<String> = fleet.nodes.iter().take(plan.nodes).map(|(m, _)| m.clone()).collect();
    let mut f = Facts {
        machines: names.clone(),
        up: names[0].clone(),
        pair_old: names[0].clone(),
        pair_new: names[names.len() - 1].clone(),
        autotune: names[0].clone(),
        ..Default::default()
    };
    let mut kernels = std::collections::BTreeSet::new();
    // kernel entries spread over the nodes and their windows
    let (mut s, mut tries) = (0usize, 0usize);
    while f.entries.len() < 64 && tries < 100_000 {
        tries += 1;
        let i = s % plan.nodes;
        let k = (s.wrapping_mul(7919) + tries) % plan.entries;
        s += 1;
        let j = plan.at(i, k);
        let (t, v) = fleet.entry(j);
        if !t.is_kernel() {
            continue;
        }
        let art = t.files.iter().find(|x| x.ends_with(".ttir")).unwrap_or(&t.files[0]);
        f.entries.push((names[i].clone(), fleet.key(j), t.renamed(art, v)));
        kernels.insert(format!("{}_v{v}", t.kernel.as_deref().unwrap_or_default()));
    }
    f.kernels = kernels.into_iter().collect();
    // two clones of one kernel on the first node
    let per = fleet.templates.len();
    for k in 0..plan.entries.saturating_sub(per) {
        if f.upgrade_pairs.len() >= 16 {
            break;
        }
        let (j1, j2) = (plan.at(0, k), plan.at(0, k + per));
        if fleet.entry(j1).0.is_kernel() {
            f.upgrade_pairs.push((fleet.key(j1), fleet.key(j2)));
        }
    }
    if f.upgrade_pairs.is_empty() {
        f.upgrade_pairs.push((fleet.key(plan.at(0, 0)), fleet.key(plan.at(0, 1))));
    }
    let http = client();
    let json = |path: String| {
        let http = http.clone();
        async move { http.get(path).send().await.ok()?.json::<serde_json::Value>().await.ok() }
    };
    if let Some(v) = json(format!("{url}/api/v1/scans?machine={}", f.up)).await {
        let mut ids: Vec<i64> = v.as_array().into_iter().flatten().filter_map(|s| s["id"].as_i64()).collect();
        ids.sort();
        if let (Some(first), Some(last)) = (ids.first(), ids.last()) {
            (f.from, f.to) = (if ids.len() > 1 { ids[ids.len() - 2] } else { *first }, *last);
        }
    }
    if let Some(v) = json(format!("{url}/api/v1/autotune?machine={}&limit=1", f.autotune)).await {
        let first = v.get("decisions").and_then(|d| d.get(0)).or_else(|| v.get(0));
        f.decision = first.and_then(|d| d["id"].as_i64()).unwrap_or(0);
    }
    if let Some(v) = json(format!("{url}/api/v1/machines?limit=10000")).await {
        let n: i64 = v.as_array().into_iter().flatten().filter_map(|m| m["entries"].as_i64()).sum();
        f.deep = n * 9 / 10;
    }
    f
}

/// One route's figures after the uploads.
pub struct RouteAfter {
    pub label: &'static str,
    pub cold: String,
    /// p50, p99, n, not timed
    pub load: Option<(f64, f64, usize, usize)>,
}

/// Every route once (cold), then under `--clients` clients.
async fn routes_after(a: &Args, s: &mut Server, f: &Facts) -> anyhow::Result<Vec<RouteAfter>> {
    let http = client();
    let load = Load { clients: a.clients, requests: a.requests, route_secs: a.route_secs, timeout: a.timeout };
    println!(
        "\nroutes after the uploads, {} clients: {:<34} {:>22} {:>9} {:>9} {:>6}",
        a.clients, "route", "cold (1 request)", "p50 ms", "p99 ms", "n"
    );
    let mut out = vec![];
    for r in ROUTES {
        let mut cold = get(&http, &s.url, &fill(r, f, 0), a.timeout).await;
        let t = Instant::now();
        while matches!(cold, Outcome::Pending(_)) && t.elapsed() < Duration::from_secs(120) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cold = get(&http, &s.url, &fill(r, f, 0), a.timeout).await;
        }
        let mut load_fig = None;
        if !s.alive() || matches!(cold, Outcome::Timeout) {
            s.restart().await?;
        } else if cold.ms().is_some_and(|m| m < a.slow_ms) {
            let (lat, pend, to, er, _) = crate::request::drive(load, &s.url, r, f).await;
            load_fig = Some((pct(&lat, 0.5), pct(&lat, 0.99), lat.len(), pend.len() + to + er));
            if to > 0 || !s.alive() {
                s.restart().await?;
            }
        }
        let row = RouteAfter { label: r.label, cold: cold.show(), load: load_fig };
        println!("{}", show_after(&row));
        out.push(row);
    }
    Ok(out)
}

fn show_after(r: &RouteAfter) -> String {
    let (p50, p99, n) = match r.load {
        Some((p50, p99, n, bad)) => (
            format!("{p50:.1}"),
            format!("{p99:.1}"),
            format!("{n}{}", if bad > 0 { format!(" +{bad}") } else { String::new() }),
        ),
        None => ("-".into(), "-".into(), "not driven".into()),
    };
    format!("  {:<34} {:>22} {:>9} {:>9} {:>6}", r.label, r.cold, p50, p99, n)
}

/// Readers timing every route round robin until `done`: per route label, the answers' latencies
/// (ms), and the answers not timed by kind.
type Reads = (BTreeMap<&'static str, Vec<f64>>, BTreeMap<String, usize>);

fn readers(
    n: usize,
    url: &str,
    f: &Facts,
    timeout: Duration,
    done: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Reads>> {
    (0..n)
        .map(|c| {
            let (done, url, f) = (done.clone(), url.to_string(), f.clone());
            tokio::spawn(async move {
                let http = client();
                let (mut lat, mut bad, mut i) = (BTreeMap::<&'static str, Vec<f64>>::new(), BTreeMap::new(), c);
                while !done.load(Ordering::Relaxed) {
                    let route: &'static Route = &ROUTES[i % ROUTES.len()];
                    i += 1;
                    match get(&http, &url, &fill(route, &f, i), timeout).await {
                        Outcome::Ok(d, _) => lat.entry(route.label).or_default().push(d.as_secs_f64() * 1000.0),
                        Outcome::Pending(_) => *bad.entry("202 computing".to_string()).or_default() += 1,
                        Outcome::Status(code, _) => {
                            *bad.entry(format!("HTTP {code} ({})", route.label)).or_default() += 1
                        }
                        Outcome::Timeout => *bad.entry(format!("timeout ({})", route.label)).or_default() += 1,
                        Outcome::Error(_) => *bad.entry("connection error".to_string()).or_default() += 1,
                    }
                }
                (lat, bad)
            })
        })
        .collect()
}

/// The bytes of the tables and indexes with a row per machine's entry (presence: `entries`,
/// `entry_*` but the per-kernel counts, `artifacts`, `autotune`) and of those with a row per distinct fact or
/// key (`facts`, `fact_*`, `blobs`, `keys`), by `dbstat` name or PostgreSQL relation name. What neither is
/// (summaries, history, scans, …) is in the total only. SQLite's key indexes are
/// `sqlite_autoindex_<table>_N`, hence their prefixes; PostgreSQL's (`<table>_pkey`,
/// `<table>_<cols>_key`) and both stores' named indexes begin with the table's name already.
fn split_by_owner(tables: &[(String, i64)]) -> (i64, i64) {
    let has = |name: &str, p: &[&str]| p.iter().any(|p| name.starts_with(p));
    let machine = ["entries", "entry_", "artifacts", "autotune", "sqlite_autoindex_entries", "sqlite_autoindex_entry_"];
    let machine = [&machine[..], &["sqlite_autoindex_artifacts", "sqlite_autoindex_autotune"]].concat();
    let fact = [
        "facts",
        "fact_",
        "blobs",
        "keys",
        "sqlite_autoindex_facts",
        "sqlite_autoindex_fact_",
        "sqlite_autoindex_blobs",
    ];
    let fact = [&fact[..], &["sqlite_autoindex_keys"]].concat();
    tables.iter().fold((0, 0), |(m, f), (name, bytes)| {
        if has(name, &machine) && !name.contains("entry_counts") {
            (m + bytes, f)
        } else if has(name, &fact) {
            (m, f + bytes)
        } else {
            (m, f)
        }
    })
}

/// Everything measured of one binary.
pub struct BinRun {
    pub name: String,
    pub first: Phase,
    pub again: Phase,
    /// Twins of the first nodes (their dirs under new machine names): every key known.
    pub twins: Phase,
    pub db: DbSize,
    /// (VmRSS, VmHWM) MB after the sequential phases and the routes.
    pub mem: (u64, u64),
    pub after: Vec<RouteAfter>,
    pub par: Option<Phase>,
    pub par_db: Option<DbSize>,
    pub par_mem: (u64, u64),
    /// Per route: p50, p99, n while the nodes uploaded; and the answers not timed.
    pub during: Vec<(&'static str, f64, f64, usize)>,
    pub during_bad: BTreeMap<String, usize>,
}

/// `--twins` nodes' dirs under machine names of their own (`node-001-twin`): a node whose every
/// key, fact and file the server already holds. More twins than nodes go round the nodes again
/// (`node-001-twin2`...): a fleet of many machines running the same jobs, from the dirs at hand.
fn twins(a: &Args, nodes: &[(String, PathBuf)]) -> Vec<(String, PathBuf)> {
    let round = |i: usize| if i < nodes.len() { String::new() } else { (i / nodes.len() + 1).to_string() };
    (0..a.twins)
        .filter_map(|i| nodes.get(i % nodes.len().max(1)).map(|(m, d)| (format!("{m}-twin{}", round(i)), d.clone())))
        .collect()
}

async fn serve(
    a: &Args,
    bin: &Path,
    db: &Db,
    fleet: &Fleet,
) -> anyhow::Result<(Server, Proxy, BTreeMap<String, String>)> {
    db.fresh().await?;
    let mut s = Server::new(bin, &db.arg(), a.rss_cap_mb);
    s.log = db.log(&a.work);
    let _ = std::fs::remove_file(&s.log);
    let mut tokens = BTreeMap::new();
    for (m, _) in fleet.nodes.iter().chain(&twins(a, &fleet.nodes)) {
        tokens.insert(m.clone(), s.token(m)?);
    }
    s.start().await?;
    let addr: std::net::SocketAddr = s.url.trim_start_matches("http://").parse()?;
    let px = proxy::start(addr).await?;
    Ok((s, px, tokens))
}

/// One binary's run on SQLite, or with `pg` on a database of that PostgreSQL server (the run then
/// named `<name>/pg`).
pub async fn run_binary(a: &Args, fleet: &Fleet, name: &str, bin: &Path, pg: Option<&str>) -> anyhow::Result<BinRun> {
    let db = Db::new(&a.work, name, pg)?;
    let (mut s, px, tokens) = serve(a, bin, &db, fleet).await?;
    let cpu = db.cpu();
    let first = sequential(a, &s, &px, &fleet.nodes, &tokens, "first uploads", cpu.as_ref()).await;
    let done = &fleet.nodes[..first.rows.len()];
    let label = "unchanged re-uploads (the same dirs)";
    let again = sequential(a, &s, &px, done, &tokens, label, cpu.as_ref()).await;
    let label = "twins' first uploads (every key known)";
    let twins = sequential(a, &s, &px, &twins(a, done), &tokens, label, cpu.as_ref()).await;
    let f = facts(fleet, done.len(), &s.url).await;
    let after = if a.skip_routes { vec![] } else { routes_after(a, &mut s, &f).await? };
    let mem = s.mem_mb();
    s.stop();
    drop(px);
    let size = db.size().await;
    let mut run = BinRun {
        name: if pg.is_some() { format!("{name}/pg") } else { name.into() },
        first,
        again,
        twins,
        db: size,
        mem,
        after,
        par: None,
        par_db: None,
        par_mem: (0, 0),
        during: vec![],
        during_bad: BTreeMap::new(),
    };
    if a.parallel > 0 {
        let db = Db::new(&a.work, &format!("{name}-parallel"), pg)?;
        let (mut s, px, tokens) = serve(a, bin, &db, fleet).await?;
        let cpu = db.cpu();
        let done = Arc::new(AtomicBool::new(false));
        let rs = if a.skip_routes { vec![] } else { readers(a.readers, &s.url, &f, a.timeout, done.clone()) };
        let label =
            format!("first uploads into a fresh database, with {} readers", if a.skip_routes { 0 } else { a.readers });
        let p = parallel(a, &s, &px, &fleet.nodes, &tokens, &label, cpu.as_ref()).await;
        done.store(true, Ordering::Relaxed);
        let mut lat = BTreeMap::<&'static str, Vec<f64>>::new();
        for r in rs {
            let (l, b) = r.await?;
            for (k, v) in l {
                lat.entry(k).or_default().extend(v);
            }
            for (k, n) in b {
                *run.during_bad.entry(k).or_default() += n;
            }
        }
        for r in ROUTES {
            if let Some(v) = lat.get_mut(r.label) {
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                if !run.during.iter().any(|d| d.0 == r.label) {
                    run.during.push((r.label, pct(v, 0.5), pct(v, 0.99), v.len()));
                }
            }
        }
        run.par_mem = s.mem_mb();
        s.stop();
        drop(px);
        run.par_db = Some(db.size().await);
        run.par = Some(p);
    }
    Ok(run)
}

/// The figures of a run, as (figure, value) lines in a fixed order (for the side-by-side table).
pub fn figures(a: &Args, fleet: &Fleet, r: &BinRun) -> Vec<(String, String)> {
    let mut out = vec![];
    let done = r.first.rows.len();
    let machine_entries = (done * fleet.plan.entries + r.twins.entries().max(0) as usize).max(1) as f64;
    let distinct = crate::pool::Plan { nodes: done.max(1), ..fleet.plan }.distinct();
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let per_k = |cpu: f64, n: i64| if n > 0 { format!("{:.1}", cpu * 1000.0 / n as f64) } else { "-".into() };
    for p in [&r.first, &r.again, &r.twins] {
        let n = p.entries();
        let l = &p.label;
        let errors = p.rows.iter().filter(|x| x.error.is_some()).count();
        out.push((format!("{l}: entries uploaded (nodes failed)"), format!("{n} ({errors})")));
        if p.skipped > 0 {
            out.push((format!("{l}: nodes not started (--pass-minutes)"), p.skipped.to_string()));
        }
        out.push((format!("{l}: client wall time, sum over nodes"), format!("{:.1} s", p.wall)));
        let (partial, relocated) = p.rows.iter().fold((0, 0), |(a, b), x| (a + x.partial, b + x.relocated));
        out.push((
            format!("{l}: entries partial / relocated, as the scanner saw them"),
            format!("{partial} / {relocated}"),
        ));
        out.push((format!("{l}: ingest rate"), format!("{:.0} entries/s", n as f64 / p.wall.max(1e-9))));
        let (r0, rest) = p.rows.split_first().map_or((None, &[][..]), |(a, b)| (Some(a), b));
        if let Some(r0) = r0 {
            out.push((
                format!("{l}: server CPU ms per 1,000 entries, first node"),
                format!("{} (+{} after)", per_k(r0.cpu_ms, r0.entries), per_k(r0.bg_ms, r0.entries)),
            ));
        }
        let (cpu, bg, n_rest) =
            rest.iter().fold((0.0, 0.0, 0), |(c, b, n), x| (c + x.cpu_ms, b + x.bg_ms, n + x.entries));
        out.push((
            format!("{l}: server CPU ms per 1,000 entries, other nodes"),
            format!("{} (+{} after)", per_k(cpu, n_rest), per_k(bg, n_rest)),
        ));
        out.push((format!("{l}: server CPU ms per 1,000 entries, all"), per_k(p.cpu_ms, n)));
        if let Some(g) = p.pg_ms {
            out.push((
                format!("{l}: PostgreSQL's CPU ms per 1,000 entries (its processes for the database)"),
                per_k(g, n),
            ));
        }
        let per_e = |b: u64| if n > 0 { format!("{:.0} B", b as f64 / n as f64) } else { "-".into() };
        out.push((format!("{l}: wire bytes per entry up / down"), format!("{} / {}", per_e(p.up), per_e(p.down))));
        out.push((format!("{l}: wire total up / down"), format!("{} / {}", mb(p.up), mb(p.down))));
        let rss = p.rows.iter().map(|x| x.rss_kb).max().unwrap_or(0) / 1024;
        let ccpu = p.rows.iter().map(|x| x.client_cpu).sum::<f64>() / p.rows.len().max(1) as f64;
        out.push((format!("{l}: client peak RSS, max over nodes / CPU per node"), format!("{rss} MB / {ccpu:.1} s")));
    }
    let db = |d: &DbSize, label: &str, out: &mut Vec<(String, String)>| {
        let total = d.file + d.wal.unwrap_or(0);
        // one figure for both stores, so that a run with --pg shows them side by side
        let size = match d.wal {
            Some(wal) => format!("{} file + {} WAL after a checkpoint", mb(d.file), mb(wal)),
            None => format!("{} (pg_database_size)", mb(d.file)),
        };
        out.push((format!("{label}: database size"), size));
        out.push((
            format!("{label}: database bytes per machine-entry / per distinct key"),
            format!("{:.0} / {:.0} ({distinct} keys)", total as f64 / machine_entries, total as f64 / distinct as f64),
        ));
        if let Some(t) = &d.tables {
            let (machine, fact) = split_by_owner(t);
            out.push((
                format!("{label}: bytes a machine's entry holds (presence) / a distinct key's (facts)"),
                format!("{:.0} / {:.0}", machine as f64 / machine_entries, fact as f64 / distinct as f64),
            ));
            for (name, bytes) in t.iter().take(a.tables) {
                out.push((format!("{label}: size of {name}"), mb(*bytes as u64)));
            }
            let rest: i64 = t.iter().skip(a.tables).map(|x| x.1).sum();
            let others = t.len().saturating_sub(a.tables);
            out.push((format!("{label}: size of the others"), format!("{} ({others})", mb(rest as u64))));
        }
    };
    db(&r.db, "after both sequential passes", &mut out);
    out.push((
        "server VmRSS / VmHWM after the sequential passes and routes".into(),
        format!("{} / {} MB", r.mem.0, r.mem.1),
    ));
    if let Some(p) = &r.par {
        let n = p.entries();
        let l = format!("{} at a time with {} readers", a.parallel, if a.skip_routes { 0 } else { a.readers });
        let errors = p.rows.iter().filter(|x| x.error.is_some()).count();
        out.push((format!("{l}: entries uploaded (nodes failed)"), format!("{n} ({errors})")));
        if p.skipped > 0 {
            out.push((format!("{l}: nodes not started (--pass-minutes)"), p.skipped.to_string()));
        }
        out.push((
            format!("{l}: wall time / ingest rate"),
            format!("{:.1} s / {:.0} entries/s", p.wall, n as f64 / p.wall.max(1e-9)),
        ));
        out.push((format!("{l}: server CPU ms per 1,000 entries (readers' requests included)"), per_k(p.cpu_ms, n)));
        if let Some(g) = p.pg_ms {
            out.push((
                format!("{l}: PostgreSQL's CPU ms per 1,000 entries (its processes for the database)"),
                per_k(g, n),
            ));
        }
        let per_e = |b: u64| if n > 0 { format!("{:.0} B", b as f64 / n as f64) } else { "-".into() };
        out.push((format!("{l}: wire bytes per entry up / down"), format!("{} / {}", per_e(p.up), per_e(p.down))));
        let rss = p.rows.iter().map(|x| x.rss_kb).max().unwrap_or(0) / 1024;
        out.push((format!("{l}: client peak RSS, max over nodes"), format!("{rss} MB")));
        if let Some(d) = &r.par_db {
            db(d, &l, &mut out);
        }
        out.push((format!("{l}: server VmRSS / VmHWM"), format!("{} / {} MB", r.par_mem.0, r.par_mem.1)));
        let bad: usize = r.during_bad.values().sum();
        out.push((
            format!("{l}: reads timed / not timed"),
            format!("{} / {bad}", r.during.iter().map(|d| d.3).sum::<usize>()),
        ));
    }
    out
}

/// Route rows: label → (during p50/p99 n, after cold, after p50/p99 n).
pub fn route_cells(r: &BinRun) -> Vec<(&'static str, String, String, String)> {
    ROUTES
        .iter()
        .enumerate()
        .filter(|(i, rt)| ROUTES.iter().position(|x| x.label == rt.label) == Some(*i))
        .map(|(_, rt)| {
            let during = r
                .during
                .iter()
                .find(|d| d.0 == rt.label)
                .map_or("-".into(), |d| format!("{:.1} / {:.1} ({})", d.1, d.2, d.3));
            let after = r.after.iter().find(|x| x.label == rt.label);
            let cold = after.map_or("-".into(), |x| x.cold.clone());
            let load =
                after.and_then(|x| x.load).map_or("-".into(), |(p50, p99, n, _)| format!("{p50:.1} / {p99:.1} ({n})"));
            (rt.label, during, cold, load)
        })
        .collect()
}
