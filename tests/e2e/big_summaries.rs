//! What a landing costs the summary tables as the fleet grows: a fleet of `BIG_SUMMARIES_NODES`
//! (12) machines of `BIG_SUMMARIES_ENTRIES` (5,000) entries each, real corpus entries (the H100
//! JIT cache) cloned under new keys over 100 kernel names as `benches/load/fleet.rs` does,
//! neighbours sharing 80% of their keys; then one more machine lands, one machine re-scans
//! having lost 10% of its entries, and one compiles 50 entries of a new kernel. Prints, for each landing, the update of the marked machines
//! and kernels against the whole build from the data (what every landing cost before 0045:
//! `rebuild_summaries_whole` runs the same statements over the whole fleet), on the same data.
//! Times are printed, not asserted on; the two must agree row for row.
//!
//!     cargo test --test e2e big_summaries -- --nocapture

use crate::common::*;
use cachelens::model::Entry;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Clone `n` of a template entry under a new key, its kernel one of 100 names.
fn clone_entry(e: &Entry, n: usize) -> Entry {
    let mut c = e.clone();
    c.key = format!("S{n:07}{}", &e.key[..e.key.len().min(40)]);
    c.dir = c.key.clone();
    let kernel = format!("{}_v{}", e.kernel.as_deref().unwrap_or("k"), n % 100);
    if let Some(serde_json::Value::Object(m)) = &mut c.metadata {
        m.insert("name".into(), serde_json::json!(kernel));
    }
    c.kernel = Some(kernel);
    c
}

async fn timed<F: std::future::Future<Output = sqlx::Result<()>>>(f: F) -> f64 {
    let t = std::time::Instant::now();
    f.await.unwrap();
    t.elapsed().as_secs_f64() * 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_summaries_a_landing_updates_what_it_touched() {
    let (nodes, per) = (env("BIG_SUMMARIES_NODES", 12), env("BIG_SUMMARIES_ENTRIES", 5_000));
    let tpl = cachelens::collect::scan_report(&corpus_read_only("h100-jit-3.6.0").join("triton-cache"), "t").unwrap();
    let kernels: Vec<&Entry> = tpl.entries.iter().filter(|e| e.kernel.is_some()).collect();
    let stride = per / 5; // neighbours share 80%
    let ring = per * 5;
    let window = |i: usize, n: usize| -> Vec<Entry> {
        (0..n)
            .map(|j| {
                let c = (i * stride + j) % ring;
                clone_entry(kernels[c % kernels.len()], c)
            })
            .collect()
    };
    let (_dir, pool) = fresh_db().await;
    let db = cachelens::db::Db::new(pool.clone());
    let t = std::time::Instant::now();
    for i in 0..nodes {
        let r = crate::big_report::report(&format!("node-{i:03}"), "/cache/triton", window(i, per), &tpl);
        cachelens::collect::ingest_report(&db, &r, "upload").await.unwrap();
    }
    println!("big_summaries: {nodes} machines x {per} entries ingested in {:.1} s", t.elapsed().as_secs_f64());
    let first = timed(db.update_summaries()).await;
    println!("big_summaries: first (whole) build of {} entries: {first:.0} ms", nodes * per);

    let mut rows = vec![];
    // one more machine lands; node-000 re-scans having lost a tenth of its entries; node-001
    // compiles 50 entries of one new kernel
    let mut one_kernel = window(1, per);
    one_kernel.extend((0..50).map(|j| {
        let mut c = clone_entry(kernels[j % kernels.len()], 9_000_000 + j);
        c.kernel = Some("fresh_kernel".into());
        c
    }));
    let landings = [
        (
            "a new machine's upload",
            crate::big_report::report(&format!("node-{nodes:03}"), "/cache/triton", window(nodes, per), &tpl),
        ),
        (
            "a re-scan that lost 10%",
            crate::big_report::report("node-000", "/cache/triton", window(0, per - per / 10), &tpl),
        ),
        ("50 entries of one new kernel", crate::big_report::report("node-001", "/cache/triton", one_kernel, &tpl)),
    ];
    for (what, r) in landings {
        cachelens::collect::ingest_report(&db, &r, "upload").await.unwrap();
        let marked: (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM page_dirty_machines), (SELECT COUNT(*) FROM page_dirty_kernels)",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        let update = timed(db.update_summaries()).await;
        let kept = crate::summaries::summary_rows(&pool).await;
        let whole = timed(db.rebuild_summaries_whole()).await;
        assert_eq!(crate::summaries::summary_rows(&pool).await, kept, "{what}: the update equals the whole build");
        rows.push((what, marked, update, whole));
    }
    println!("big_summaries: | landing | marked machines / kernels | update ms | whole build ms (before) |");
    for (what, (m, k), update, whole) in rows {
        println!("big_summaries: | {what} | {m} / {k} | {update:.0} | {whole:.0} |");
    }
}
