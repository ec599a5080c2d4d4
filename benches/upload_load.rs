//! Upload load test: N concurrent clients (machines) each upload scans of M entries to one
//! server while readers load the HTML pages (overview, kernel search, a kernel page, an entry
//! page) and the JSON API; prints throughput and read latency per kind, then checks
//! that every scan was stored exactly once. Run by `scripts/upload-load.sh`.
//!
//! Env: `CLIENTS` (50), `ENTRIES` (1000 per scan), `SCANS` (2 per client, each sent twice:
//! the repeat must change nothing), `READERS` (4).
//! Reports are real corpus entries (demo/h100-jit-3.6.0) cloned under new keys.

#[path = "../backend/test_corpus.rs"]
mod test_corpus;

use cachelens::model::ScanReport;
use cachelens::upload::{Retry, upload_report};
use cachelens::web::{AppState, Config};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

fn env(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

/// A report of `n` entries for `machine`: corpus entries cycled under fresh keys.
fn synth(base: &ScanReport, machine: &str, scan: usize, n: usize) -> ScanReport {
    // Only the first client carries the IR text (the others reference the same sha256s): 50
    // copies of every blob would only measure memory, and dedup makes the others send none.
    let mut r = ScanReport {
        entries: vec![],
        blobs: Default::default(),
        unchanged: vec![],
        skipped: base.skipped.clone(),
        best_configs: base.best_configs.clone(),
        events: base.events.clone(),
        event_files: base.event_files.clone(),
        client_id: String::new(),
        machine: String::new(),
        root: base.root.clone(),
        beside: vec![],
        inductor_autotune: vec![],
        hazards: None,
        ..*base
    };
    if machine == "load-000" && scan == 0 {
        r.blobs = base.blobs.clone();
    }
    r.machine = machine.into();
    r.client_id = cachelens::collect::new_client_id();
    r.scanned_at += scan as i64 * 60_000;
    r.entries = (0..n)
        .map(|i| {
            let mut e = base.entries[i % base.entries.len()].clone();
            e.key = format!("LOAD{i:06}{}", &e.key[..e.key.len().min(40)]);
            e.dir = e.key.clone();
            e
        })
        .collect();
    r.unchanged.clear();
    r
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let (clients, entries, scans, readers) =
        (env("CLIENTS", 50), env("ENTRIES", 1000), env("SCANS", 2), env("READERS", 4));
    let tmp = tempfile::TempDir::new()?;
    let jit = test_corpus::unpacked("h100-jit-3.6.0");
    let base = Arc::new(cachelens::collect::scan_report(&jit.join("triton-cache"), "base")?);

    let db = tmp.path().join("load.db");
    let store = cachelens::db::Db::open(&db).await?;
    let pool = store.pool().clone();
    let mut tokens = vec![];
    for c in 0..clients {
        tokens.push(cachelens::db::tokens::create(&store, &format!("load-{c:03}")).await?);
    }
    let app = cachelens::web::app(AppState::new(store.clone(), Config::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!(
        "upload load: {clients} clients × {scans} scans × {entries} entries (each scan sent twice), {readers} readers; server {url}, db {}",
        db.display()
    );

    // readers, until the uploads are done: the JSON API, and the HTML pages a person opens
    // (overview, kernel search, a kernel page, an entry page), each timed on its own
    let (ki, kernel) = base
        .entries
        .iter()
        .enumerate()
        .find_map(|(i, e)| e.kernel.clone().map(|k| (i, k)))
        .ok_or_else(|| anyhow::anyhow!("no kernel entry in the corpus cache"))?;
    let ki = ki % entries.max(1);
    let entry_key = format!("LOAD{ki:06}{}", &base.entries[ki].key[..base.entries[ki].key.len().min(40)]);
    let targets: Arc<Vec<(&'static str, String)>> = Arc::new(vec![
        ("api", "/api/v1/machines".into()),
        ("api", "/api/v1/scans?limit=50".into()),
        ("api", "/api/v1/kernels".into()),
        ("api", "/api/v1/entries?limit=100".into()),
        ("api", "/api/v1/entries?machine=load-001&limit=200".into()),
        ("overview", "/".into()),
        ("kernel search", format!("/kernels?q={}", &kernel[..kernel.len().min(4)])),
        ("kernel page", format!("/kernels/{kernel}")),
        ("entry page", format!("/entries/load-000/{entry_key}")),
    ]);
    let done = Arc::new(AtomicBool::new(false));
    let mut reader_tasks = vec![];
    for r in 0..readers {
        let (url, done, targets) = (url.clone(), done.clone(), targets.clone());
        reader_tasks.push(tokio::spawn(async move {
            let http = cachelens::upload::client().unwrap();
            let (mut lat, mut errors, mut i) = (BTreeMap::<&str, Vec<f64>>::new(), BTreeMap::<String, usize>::new(), r);
            while !done.load(Ordering::Relaxed) {
                let (kind, path) = &targets[i % targets.len()];
                i += 1;
                let t = Instant::now();
                match http.get(format!("{url}{path}")).send().await {
                    Ok(resp) if resp.status().is_success() => {
                        let _ = resp.bytes().await;
                        lat.entry(*kind).or_default().push(t.elapsed().as_secs_f64() * 1000.0);
                    }
                    // the kernel and entry pages exist once the first scans are stored
                    Ok(resp) if resp.status() == reqwest::StatusCode::NOT_FOUND && kind.ends_with(" page") => {}
                    Ok(resp) => *errors.entry(format!("{kind} {}", resp.status())).or_default() += 1,
                    Err(e) => *errors.entry(format!("{kind} {e}")).or_default() += 1,
                }
            }
            (lat, errors)
        }));
    }

    let started = Instant::now();
    let sent = Arc::new(AtomicUsize::new(0));
    let mut tasks = vec![];
    for (c, token) in tokens.iter().enumerate() {
        let (url, token, base, sent) = (url.clone(), token.clone(), base.clone(), sent.clone());
        tasks.push(tokio::spawn(async move {
            let machine = format!("load-{c:03}");
            let mut ids = vec![];
            for s in 0..scans {
                let report = tokio::task::spawn_blocking({
                    let (base, machine) = (base.clone(), machine.clone());
                    move || synth(&base, &machine, s, entries)
                })
                .await?;
                let mut repeat = report.clone();
                repeat.blobs.clear(); // a repeat needs none: the server has them now
                let first = upload_report(&url, &token, report, Retry::new(6)).await?;
                let again = upload_report(&url, &token, repeat, Retry::new(6)).await?;
                anyhow::ensure!(
                    first.response.created && !again.response.created,
                    "{machine} scan {s}: created flags wrong"
                );
                anyhow::ensure!(first.response.scan_id == again.response.scan_id, "{machine} scan {s}: ids differ");
                sent.fetch_add(first.body_bytes + again.body_bytes, Ordering::Relaxed);
                ids.push(first.response.scan_id);
            }
            anyhow::Ok(ids)
        }));
    }
    let mut scan_ids = vec![];
    for t in tasks {
        scan_ids.extend(t.await??);
    }
    let secs = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let (mut lat, mut read_errors) = (BTreeMap::<&str, Vec<f64>>::new(), BTreeMap::<String, usize>::new());
    for r in reader_tasks {
        let (l, e) = r.await?;
        for (k, v) in l {
            lat.entry(k).or_default().extend(v);
        }
        for (k, n) in e {
            *read_errors.entry(k).or_default() += n;
        }
    }

    let uploads = clients * scans * 2;
    println!("time: {secs:.1} s for {uploads} uploads ({} new scans + {} repeats)", clients * scans, clients * scans);
    println!(
        "uploads/s: {:.1} (new scans/s {:.1}, entries ingested/s {:.0})",
        uploads as f64 / secs,
        (clients * scans) as f64 / secs,
        (clients * scans * entries) as f64 / secs
    );
    println!("sent: {:.1} MiB gzip in all", sent.load(Ordering::Relaxed) as f64 / 1048576.0);
    let n: usize = lat.values().map(Vec::len).sum();
    let n_errors: usize = read_errors.values().sum();
    println!("reads during the load: {n} requests ({:.0}/s), {n_errors} errors {read_errors:?}", n as f64 / secs);
    for (kind, v) in &mut lat {
        println!(
            "  {kind:<13} {:>6} requests, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            v.len(),
            pct(v, 0.5),
            pct(v, 0.99),
            pct(v, 1.0)
        );
    }

    // exactly once: one row per (machine, client_id), every id answered is there, entries match
    let (n_scans, dup, n_entries, blobs): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM scans),
                (SELECT COUNT(*) FROM (SELECT 1 FROM scans GROUP BY machine_id, client_id HAVING COUNT(*) > 1)),
                (SELECT COUNT(*) FROM entries), (SELECT COUNT(*) FROM blobs)",
    )
    .fetch_one(&pool)
    .await?;
    scan_ids.sort();
    scan_ids.dedup();
    let ok = n_scans as usize == clients * scans
        && dup == 0
        && scan_ids.len() == clients * scans
        && n_entries as usize == clients * entries;
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&pool).await?;
    println!(
        "stored: {n_scans} scans (expected {}), {dup} duplicated, {n_entries} entries (expected {}), {blobs} IR blobs (corpus has {}), integrity {integrity}",
        clients * scans,
        clients * entries,
        base.blobs.len()
    );
    anyhow::ensure!(ok && integrity == "ok" && blobs as usize == base.blobs.len(), "verification FAILED");
    println!("verification: every scan stored exactly once");
    Ok(())
}
