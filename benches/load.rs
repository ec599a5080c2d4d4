//! Load benchmark of the dashboard pages (run by `scripts/load-bench.sh`; prints figures, never
//! fails on time).
//!
//! Builds (once, then reuses) a database of `--machines` × `--entries` entries by cloning the
//! rows of the real demo corpus under new keys with SQL — artifacts, autotune results and
//! Inductor best configs included — serves it in-process on 127.0.0.1, and drives it with
//! `--clients` concurrent HTTP clients, printing p50/p99 for the overview, the kernel search
//! (htmx partial), a kernel page and an entry page.

use cachelens::db;
use cachelens::web::{AppState, Config, app};
use sqlx::SqlitePool;
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Args {
    db: PathBuf,
    machines: i64,
    entries: i64,
    clients: usize,
    requests: usize,
}

fn args() -> Args {
    let mut a =
        Args { db: PathBuf::from("bench-out/load.db"), machines: 20, entries: 50_000, clients: 16, requests: 800 };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_default();
        match k.as_str() {
            "--db" => a.db = PathBuf::from(v()),
            "--machines" => a.machines = v().parse().expect("--machines N"),
            "--entries" => a.entries = v().parse().expect("--entries N"),
            "--clients" => a.clients = v().parse().expect("--clients N"),
            "--requests" => a.requests = v().parse().expect("--requests N"),
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

async fn count(pool: &SqlitePool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string())).fetch_one(pool).await.unwrap()
}

/// Clone the live corpus rows into `machines` synthetic machines of `per_machine` entries each.
async fn synthesize(pool: &SqlitePool, machines: i64, per_machine: i64) -> anyhow::Result<()> {
    let templates = count(pool, "SELECT COUNT(*) FROM entries WHERE removed_at IS NULL AND machine_id IN (SELECT id FROM machines WHERE name NOT LIKE 'bench-%')").await;
    let copies = (per_machine + templates - 1) / templates;
    let now = db::now_ms();
    for m in 1..=machines {
        let t = Instant::now();
        let mut tx = pool.begin().await?;
        let name = format!("bench-{m:02}");
        let mid: i64 = sqlx::query_scalar("INSERT INTO machines(name, created_at) VALUES (?, ?) RETURNING id")
            .bind(&name)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
        let mut scan_id = 0;
        for (i, frac) in [(0, 4), (1, 2), (2, 1)] {
            scan_id = sqlx::query_scalar(
                "INSERT INTO scans(machine_id, client_id, scanned_at, root, entries, new_entries, changed_entries, removed_entries,
                                   bytes, skipped, skipped_json, relocated, duration_ms, source)
                 VALUES (?1, ?2, ?3, '/bench/cache', ?4, ?4, 0, 0, ?4 * 300000, 0, '{}', 0, 1000, 'local') RETURNING id",
            )
            .bind(mid).bind(format!("bench-{m}-{i}")).bind(now - (2 - i) * 86_400_000).bind(per_machine / frac)
            .fetch_one(&mut *tx).await?;
        }
        // keys: template key + template row id + copy number (two corpus machines can hold the
        // same key). Kernel names: each template kernel becomes 100 kernels (`<name>_v<n % 100>`); `sig`
        // remembers the template row so artifacts and autotune rows can follow.
        sqlx::query(
            "WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n + 1 < ?3),
                  t AS (SELECT e.* FROM entries e JOIN machines tm ON tm.id = e.machine_id
                        WHERE e.removed_at IS NULL AND tm.name NOT LIKE 'bench-%')
             INSERT INTO entries(machine_id, root, dir, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas,
                                 triton_version, meta_hash, signature, shapes, created_at, bytes, registers, spills, shared_bytes,
                                 resources_json, metadata_json, group_json, relocated, partial, binary_sha256, sig,
                                 first_scan_id, last_scan_id, first_seen_at, last_seen_at)
             SELECT ?1, '/bench/cache', t.key || t.id || '-' || n, t.key || t.id || '-' || n, t.kind, t.kernel || '_v' || (n % 100), t.backend, t.arch, t.warp_size,
                    t.num_warps, t.num_stages, t.num_ctas, t.triton_version, t.meta_hash, t.signature, t.shapes,
                    t.created_at - (n % 30) * 86400000, t.bytes, t.registers, t.spills, t.shared_bytes, t.resources_json,
                    t.metadata_json, t.group_json, t.relocated, t.partial, t.binary_sha256, 'bench:' || t.id,
                    ?2, ?2, ?4, ?4
             FROM seq, t ORDER BY n, t.id LIMIT ?5",
        )
        .bind(mid).bind(scan_id).bind(copies).bind(now).bind(per_machine)
        .execute(&mut *tx).await?;
        for sql in [
            "INSERT INTO artifacts(entry_id, name, ext, bytes, sha256)
             SELECT ne.id, a.name, a.ext, a.bytes, a.sha256 FROM entries ne
             JOIN artifacts a ON a.entry_id = CAST(substr(ne.sig, 7) AS INTEGER) WHERE ne.machine_id = ?",
            "INSERT INTO autotune(entry_id, idx, config_json, num_warps, num_stages, timings_json, best_ms, winner)
             SELECT ne.id, a.idx, a.config_json, a.num_warps, a.num_stages, a.timings_json, a.best_ms, a.winner FROM entries ne
             JOIN autotune a ON a.entry_id = CAST(substr(ne.sig, 7) AS INTEGER) WHERE ne.machine_id = ?",
            "INSERT INTO best_configs(machine_id, path, triton_cache_hash, num_warps, num_stages, config_json, last_seen_at)
             SELECT ne.machine_id, b.path || '.' || ne.id, ne.key, b.num_warps, b.num_stages, b.config_json, b.last_seen_at
             FROM entries ne JOIN entries te ON te.id = CAST(substr(ne.sig, 7) AS INTEGER)
             JOIN best_configs b ON b.triton_cache_hash = te.key AND b.machine_id = te.machine_id WHERE ne.machine_id = ?",
        ] {
            sqlx::query(sql).bind(mid).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        eprintln!("  {name}: {per_machine} entries in {:.1}s", t.elapsed().as_secs_f64());
    }
    Ok(())
}

async fn build_db(a: &Args) -> anyhow::Result<SqlitePool> {
    let pool = db::open(&a.db).await?;
    let have = count(&pool, "SELECT COUNT(*) FROM machines WHERE name LIKE 'bench-%'").await;
    if have == a.machines {
        eprintln!("reusing {} ({have} synthetic machines)", a.db.display());
        return Ok(pool);
    }
    anyhow::ensure!(
        have == 0,
        "{} holds another bench setup ({have} machines): delete it or pass --machines {have}",
        a.db.display()
    );
    let t = Instant::now();
    let work = a.db.with_extension("corpus");
    let scans = cachelens::demo::load(&pool, &work).await?;
    let _ = std::fs::remove_dir_all(&work);
    eprintln!("seeded {scans} real corpus scans in {:.1}s; cloning…", t.elapsed().as_secs_f64());
    synthesize(&pool, a.machines, a.entries).await?;
    sqlx::query("ANALYZE").execute(&pool).await?;
    eprintln!("built {} in {:.1}s", a.db.display(), t.elapsed().as_secs_f64());
    Ok(pool)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// `requests` GETs spread over `clients` concurrent clients; returns sorted latencies.
async fn drive(base: &str, urls: &[String], htmx: bool, clients: usize, requests: usize) -> Vec<Duration> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap();
    let mut tasks = vec![];
    for c in 0..clients {
        let (client, urls, base) = (client.clone(), urls.to_vec(), base.to_string());
        tasks.push(tokio::spawn(async move {
            let mut lat = vec![];
            for i in (c..requests).step_by(clients) {
                let mut req = client.get(format!("{base}{}", urls[i % urls.len()]));
                if htmx {
                    req = req.header("HX-Request", "true");
                }
                let t = Instant::now();
                let resp = req.send().await.expect("request");
                assert!(resp.status().is_success(), "{}", resp.status());
                resp.bytes().await.expect("body");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = vec![];
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    all
}

fn enc(s: &str) -> String {
    cachelens::fmt::enc(s)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let a = args();
    if let Some(d) = a.db.parent() {
        std::fs::create_dir_all(d)?;
    }
    let pool = build_db(&a).await?;
    let entries = count(&pool, "SELECT COUNT(*) FROM entries").await;
    let t = Instant::now();
    db::Db::new(pool.clone()).fresh_summaries().await?;
    eprintln!("{entries} entries; summary tables (re)built in {:.1}s", t.elapsed().as_secs_f64());

    let kernels: Vec<String> = sqlx::query_scalar("SELECT kernel FROM page_kernel_totals ORDER BY random() LIMIT 200")
        .fetch_all(&pool)
        .await?;
    let picks: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, e.key FROM entries e JOIN machines m ON m.id = e.machine_id WHERE e.kind = 'kernel' AND m.name LIKE 'bench-%'
         AND e.id IN (SELECT abs(random()) % (SELECT MAX(id) FROM entries) FROM entries LIMIT 2000) LIMIT 200",
    )
    .fetch_all(&pool)
    .await?;
    let terms = ["soft", "matmul", "layer", "add_k", "fused", "poi", "per_", "red", "kernel_v1", "mul"];
    let scenarios: Vec<(&str, Vec<String>, bool)> = vec![
        ("overview  GET /", vec!["/".into()], false),
        ("search    GET /kernels?q=… (htmx partial)", terms.iter().map(|t| format!("/kernels?q={t}")).collect(), true),
        (
            "search    GET /kernels?q=…&machine=… (full page)",
            terms
                .iter()
                .enumerate()
                .map(|(i, t)| format!("/kernels?q={t}&machine=bench-{:02}&sort=size", i as i64 % a.machines + 1))
                .collect(),
            false,
        ),
        ("kernel    GET /kernels/{name}", kernels.iter().map(|k| format!("/kernels/{}", enc(k))).collect(), false),
        (
            "entry     GET /entries/{m}/{key}",
            picks.iter().map(|(m, k)| format!("/entries/{}/{}", enc(m), enc(k))).collect(),
            false,
        ),
        (
            "machine   GET /machines/{name}",
            (1..=a.machines).map(|i| format!("/machines/bench-{i:02}")).collect(),
            false,
        ),
    ];

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(async move { axum::serve(listener, app(AppState::new(pool, Config::default()))).await });
    println!(
        "{} machines × {} entries, {} clients, {} requests per page, {} cores",
        a.machines,
        a.entries,
        a.clients,
        a.requests,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("{:<52} {:>9} {:>9} {:>9} {:>8}", "page", "p50 ms", "p99 ms", "max ms", "req/s");
    for (label, urls, htmx) in &scenarios {
        drive(&base, urls, *htmx, a.clients, a.clients * 2).await; // warm caches
        let t = Instant::now();
        let lat = drive(&base, urls, *htmx, a.clients, a.requests).await;
        let rps = lat.len() as f64 / t.elapsed().as_secs_f64();
        println!("{label:<52} {:>9.1} {:>9.1} {:>9.1} {:>8.0}", pct(&lat, 0.5), pct(&lat, 0.99), pct(&lat, 1.0), rps);
    }
    server.abort();
    Ok(())
}
