//! One binary's run: the fleet uploaded, the first page after the landing, every route cold and
//! under concurrent clients, the fleet-scale upload phase; and the figures' tables.

use crate::fleet::{self, Corpus, Facts};
use crate::request::{Load, kb, ms, pct};
pub use crate::request::{Outcome, client, fill, get};
use crate::routes::ROUTES;
use crate::server::Server;
use crate::{Args, Run};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// One route's figures.
pub struct Row {
    pub label: &'static str,
    pub cold: Outcome,
    /// p50, p99, max (ms), requests, timeouts, errors, req/s; None when not driven.
    pub load: Option<(f64, f64, f64, usize, usize, usize, f64)>,
    pub rss_mb: u64,
    /// A slow first visit that stored what the second one read: its time.
    pub first_visit: Option<String>,
    /// Answers under load that were 202 (a report being computed, shown with its progress):
    /// (count, p99 ms). They are not in `load`'s figures.
    pub pending: Option<(usize, f64)>,
}

/// Upload the fleet; returns its facts and the ingest figure.
async fn build_fleet(
    a: &Args,
    c: &Corpus,
    s: &Server,
    tokens: &BTreeMap<String, String>,
) -> anyhow::Result<(Facts, String)> {
    let bench: Vec<String> = (1..=a.machines).map(|i| format!("bench-{i:02}")).collect();
    let mut plan: Vec<(String, &cachelens::model::ScanReport, usize, usize)> =
        bench.iter().map(|m| (m.clone(), &c.h100, a.entries, a.events)).collect();
    plan.push(("pair-old".into(), &c.mi300_old, a.entries, 0));
    plan.push(("pair-new".into(), &c.mi300_new, a.entries, 0));
    plan.push(("up".into(), &c.a100_old, a.entries, 0));
    plan.push(("up".into(), &c.a100_new, 2 * a.entries, 0)); // both generations, as Triton leaves them
    let mut f = fleet::facts(c, &bench, a.entries, a.variety);
    let (t, mut total) = (Instant::now(), 0);
    for (m, tmpl, n, events) in plan {
        let t1 = Instant::now();
        let (tm, mm, v) = (tmpl.clone(), m.clone(), a.variety);
        let root = format!("/bench/{m}/triton-cache");
        let report = tokio::task::spawn_blocking(move || fleet::report(&tm, &mm, &root, n, v, events)).await?;
        let up =
            cachelens::upload::upload_report(&s.url, &tokens[&m], report, cachelens::upload::Retry::new(3)).await?;
        total += n;
        if m == "up" {
            (f.from, f.to) = (f.to, up.response.scan_id);
        }
        eprintln!(
            "  uploaded {m}: {n} entries, {events} events, {} gzip, in {:.1}s (RSS {} MB)",
            kb(up.body_bytes),
            t1.elapsed().as_secs_f64(),
            s.mem_mb().0
        );
    }
    total += upload_autotune(c, s, tokens).await?;
    let secs = t.elapsed().as_secs_f64();
    Ok((
        f,
        format!("{total} entries in {secs:.0} s ({:.0} entries/s, uploads one after the other)", total as f64 / secs),
    ))
}

/// Upload the real autotune machine as scanned; its entry count.
async fn upload_autotune(c: &Corpus, s: &Server, tokens: &BTreeMap<String, String>) -> anyhow::Result<usize> {
    let mut report = c.autotune.clone();
    report.machine = "h100-autotune".into();
    report.root = "/bench/h100-autotune/inductor".into();
    report.client_id = cachelens::collect::new_client_id();
    let n = report.entries.len();
    cachelens::upload::upload_report(&s.url, &tokens["h100-autotune"], report, cachelens::upload::Retry::new(3))
        .await?;
    Ok(n)
}

/// One autotune decision's id on the autotune machine, read back from the server.
async fn a_decision(url: &str) -> anyhow::Result<i64> {
    let v: serde_json::Value =
        client().get(format!("{url}/api/v1/autotune?machine=h100-autotune&limit=1")).send().await?.json().await?;
    let first = v.get("decisions").and_then(|d| d.get(0)).or_else(|| v.get(0));
    first.and_then(|d| d["id"].as_i64()).ok_or_else(|| {
        anyhow::anyhow!(
            "no autotune decision id on h100-autotune: {}",
            v.to_string().chars().take(120).collect::<String>()
        )
    })
}

/// The fleet's live entries (the machines' counts summed), read back from the server.
async fn fleet_entries(url: &str) -> anyhow::Result<i64> {
    let v: serde_json::Value = client().get(format!("{url}/api/v1/machines?limit=10000")).send().await?.json().await?;
    Ok(v.as_array().into_iter().flatten().filter_map(|m| m["entries"].as_i64()).sum())
}

/// The upgraded machine's two scans, read back from the server (a reused database).
async fn up_scans(url: &str) -> anyhow::Result<(i64, i64)> {
    let v: serde_json::Value = client().get(format!("{url}/api/v1/scans?machine=up")).send().await?.json().await?;
    let mut ids: Vec<i64> = v.as_array().into_iter().flatten().filter_map(|s| s["id"].as_i64()).collect();
    ids.sort();
    anyhow::ensure!(ids.len() >= 2, "the reused database has no upgraded machine `up` with two scans");
    Ok((ids[ids.len() - 2], ids[ids.len() - 1]))
}

/// GET / until it answers (the first page after a landing may wait for the summary rebuild):
/// up to three tries of `first_timeout`. Returns what the wait was.
async fn settle(a: &Args, s: &Server) -> String {
    let (t, http) = (Instant::now(), client());
    let mut tries = vec![];
    for _ in 0..3 {
        let o = get(&http, &s.url, "/", a.first_timeout).await;
        let ok = matches!(o, Outcome::Ok(..));
        tries.push(o.show());
        if ok {
            break;
        }
    }
    format!(
        "{} (answered after {:.1} s; RSS then {} MB)",
        tries.join(", then "),
        t.elapsed().as_secs_f64(),
        s.mem_mb().0
    )
}

/// Drops the invalidation reports an earlier run stored in a reused database (the machine pairs
/// and the upgrade its routes visited), so that this run's first visits compute them again.
async fn drop_reports(db: &Path) -> anyhow::Result<()> {
    use sqlx::ConnectOptions;
    let mut c = sqlx::sqlite::SqliteConnectOptions::new().filename(db).foreign_keys(true).connect().await?;
    let t = Instant::now();
    let n = sqlx::query("DELETE FROM inv_reports").execute(&mut c).await?.rows_affected();
    println!("reused fleet: {n} stored invalidation reports dropped in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

pub async fn run_binary(a: &Args, c: &Corpus, name: &str, bin: &Path) -> anyhow::Result<Run> {
    let db = a.work.join(format!("{name}.db"));
    let reuse = a.reuse && db.exists();
    if !reuse {
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
        }
    } else {
        drop_reports(&db).await?;
    }
    let mut s = Server::new(bin, &db, a.rss_cap_mb);
    let _ = std::fs::remove_file(&s.log);
    let mut names: Vec<String> = (1..=a.machines).map(|i| format!("bench-{i:02}")).collect();
    names.extend(["pair-old", "pair-new", "up", "h100-autotune"].map(String::from));
    names.extend((1..=a.upload_nodes).map(|i| format!("node-{i:03}")));
    let mut tokens = BTreeMap::new();
    for m in names {
        tokens.insert(m.clone(), s.token(&m)?);
    }
    s.start().await?;
    let (f, ingest) = if reuse {
        let bench: Vec<String> = (1..=a.machines).map(|i| format!("bench-{i:02}")).collect();
        let mut f = fleet::facts(c, &bench, a.entries, a.variety);
        (f.from, f.to) = up_scans(&s.url).await?;
        if a_decision(&s.url).await.is_err() {
            upload_autotune(c, &s, &tokens).await?; // a fleet built before the autotune machine
        }
        (f, format!("reused {} (built by an earlier run through this binary's uploads)", db.display()))
    } else {
        build_fleet(a, c, &s, &tokens).await?
    };
    let first = settle(a, &s).await;
    let mut f = f;
    // (a build from before the decision ids answers without them: its /autotune/{id} row is a 404)
    f.decision = a_decision(&s.url).await.unwrap_or_else(|e| {
        eprintln!("  {name}: {e:#}");
        0
    });
    let label = if reuse {
        "first GET / after the server started on the reused fleet"
    } else {
        "first GET / right after the last scan landed"
    };
    f.deep = fleet_entries(&s.url).await.map(|n| n * 9 / 10).unwrap_or(100_000);
    println!("fleet: {ingest}\n{label}: {first}");
    let http = client();
    let mut rows = vec![];
    if !a.skip_routes {
        println!(
            "{:<34} {:>22} {:>9} {:>9} {:>9} {:>6} {:>7} {:>7}",
            "route", "cold (1 request)", "p50 ms", "p99 ms", "max ms", "n", "timeout", "RSS MB"
        );
        for r in ROUTES.iter().filter(|r| a.only.is_empty() || a.only.iter().any(|o| r.label.contains(o.as_str()))) {
            let mut cold = get(&http, &s.url, &fill(r, &f, 0), a.timeout).await;
            let mut first_visit = None;
            if let Outcome::Pending(d) = cold {
                // A report being computed: answered at once; asked again (as the page does, but
                // every 100 ms) until it holds the report, which is then the cold figure.
                let t = Instant::now();
                let mut polls = 0;
                while let Outcome::Pending(_) = cold {
                    if t.elapsed() > a.first_timeout {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    cold = get(&http, &s.url, &fill(r, &f, 0), a.timeout).await;
                    polls += 1;
                }
                first_visit = Some(format!(
                    "202 in {} at once, the report ready {:.2} s later ({polls} polls)",
                    ms(d.as_secs_f64() * 1000.0),
                    t.elapsed().as_secs_f64()
                ));
            }
            if s.alive() && cold.ms().is_some_and(|m| m >= a.slow_ms) {
                // A first visit that computes what later visits read (a stored report): time
                // the second visit as the cold figure, and say what the first took.
                let again = get(&http, &s.url, &fill(r, &f, 0), a.timeout).await;
                if again.ms().is_some_and(|m| m < a.slow_ms) {
                    first_visit = Some(cold.show());
                    cold = again;
                }
            }
            let (mut load, mut pending) = (None, None);
            if !s.alive() || matches!(cold, Outcome::Timeout) {
                s.restart().await?;
                settle(a, &s).await;
            } else if cold.ms().is_some_and(|m| m < a.slow_ms) {
                let load_of =
                    Load { clients: a.clients, requests: a.requests, route_secs: a.route_secs, timeout: a.timeout };
                let (lat, pend, to, er, secs) = crate::request::drive(load_of, &s.url, r, &f).await;
                pending = (!pend.is_empty()).then(|| (pend.len(), pct(&pend, 0.99)));
                load =
                    Some((pct(&lat, 0.5), pct(&lat, 0.99), pct(&lat, 1.0), lat.len(), to, er, lat.len() as f64 / secs));
                if to > 0 || !s.alive() {
                    s.restart().await?;
                    settle(a, &s).await;
                }
            }
            let row = Row { label: r.label, cold, load, rss_mb: s.mem_mb().0, first_visit, pending };
            print_row(&row);
            rows.push(row);
        }
    }
    let mut upload = vec![];
    if a.upload_nodes > 0 {
        upload = crate::drive_upload::run(a, c, &s, &tokens, &f).await?;
    }
    s.stop();
    let hwm_mb = s.hwm_kb.load(Ordering::Relaxed) / 1024;
    let killed = s.killed.load(Ordering::Relaxed);
    println!("server peak RSS (VmHWM, every restart included): {hwm_mb} MB; killed by the RSS cap: {killed} times");
    Ok(Run { name: name.into(), rows, first, ingest, hwm_mb, upload })
}

fn load_cells(l: &Option<(f64, f64, f64, usize, usize, usize, f64)>) -> (String, String, String, String, String) {
    match l {
        Some((p50, p99, max, n, to, er, _)) => (
            format!("{p50:.1}"),
            if *to > 0 && (*to as f64) >= 0.01 * (*n + *to) as f64 { "timeout".into() } else { format!("{p99:.1}") },
            format!("{max:.1}"),
            format!("{n}{}", if *er > 0 { format!(" ({er} err)") } else { String::new() }),
            to.to_string(),
        ),
        None => ("-".into(), "-".into(), "-".into(), "not driven".into(), "-".into()),
    }
}

fn print_row(r: &Row) {
    let (p50, p99, max, n, to) = load_cells(&r.load);
    println!(
        "{:<34} {:>22} {:>9} {:>9} {:>9} {:>6} {:>7} {:>7}",
        r.label,
        r.cold.show(),
        p50,
        p99,
        max,
        n,
        to,
        r.rss_mb
    );
    if let Some(f) = &r.first_visit {
        println!("{:<34} (the first visit, which computed and stored it: {f}; cold is the report's answer)", "");
    }
    if let Some((n, p99)) = r.pending {
        println!("{:<34} (+ {n} answers 202 under load, a report being computed: p99 {p99:.1} ms)", "");
    }
}

pub fn print_compare(b: &Run, a: &Run) {
    println!("\n== before / after ({} / {})", b.name, a.name);
    println!("fleet ingest: before {} | after {}", b.ingest, a.ingest);
    println!("first GET / after the landing: before {} | after {}", b.first, a.first);
    println!("server peak RSS: before {} MB | after {} MB", b.hwm_mb, a.hwm_mb);
    println!(
        "| route | before cold | before p50 / p99 ms | after cold | after p50 / p99 ms |\n| --- | --- | --- | --- | --- |"
    );
    for (rb, ra) in b.rows.iter().zip(&a.rows) {
        let (b50, b99, ..) = load_cells(&rb.load);
        let (a50, a99, ..) = load_cells(&ra.load);
        println!("| {} | {} | {b50} / {b99} | {} | {a50} / {a99} |", rb.label, rb.cold.show(), ra.cold.show());
        for (side, r) in [("before", rb), ("after", ra)] {
            if let Some(f) = &r.first_visit {
                println!("|   {side}: first visit {f} | | | | |");
            }
            if let Some((n, p99)) = r.pending {
                println!("|   {side}: + {n} answers 202 (computing), p99 {p99:.1} ms | | | | |");
            }
        }
    }
    for (x, y) in b.upload.iter().zip(&a.upload) {
        println!("upload: before {x}\n        after  {y}");
    }
}
