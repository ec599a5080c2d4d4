//! An invalidation report of any size: a machine holding 10,000 entries of one kernel, upgraded
//! in place (the old generation and its recompile both present, as Triton leaves them), whose
//! report pairs every entry. Real corpus entries (the A100 Triton 3.4.0 cache and its 3.5.1
//! recompile) cloned under new keys as `benches/load/fleet.rs` clones them, ingested as
//! uploads are. Prints how long the report took and the process's peak memory while it was
//! computed (VmHWM, reset first), not asserted on.

use crate::common::*;
use cachelens::model::{Entry, ScanReport};
use cachelens::web::{AppState, Config};
use serde_json::json;
use std::collections::{BTreeMap, HashSet};

/// Entries a generation holds.
const N: usize = 10_000;

/// The one kernel every clone belongs to.
const KERNEL: &str = "matmul_one";

/// Clone `n` of a template key: a plain name, the same for the same (key, n) anywhere
/// (`fleet.rs::clone_key`).
fn clone_key(key: &str, n: usize) -> String {
    format!("B{n:06}{}", &key[..key.len().min(44)])
}

/// Clone `n` of an entry under a new key, its kernel renamed to [`KERNEL`] (`fleet.rs::clone_entry`).
fn clone_entry(e: &Entry, n: usize) -> Entry {
    let mut c = e.clone();
    c.key = clone_key(&e.key, n);
    c.dir = c.key.clone();
    c.kernel = Some(KERNEL.into());
    if let Some(serde_json::Value::Object(m)) = &mut c.metadata {
        m.insert("name".into(), json!(KERNEL));
    }
    c
}

/// `n` clones of the templates' entries, clone 0 first (`fleet.rs::report`).
fn clones(t: &[&Entry], n: usize) -> Vec<Entry> {
    (0..n).map(|i| clone_entry(t[i % t.len()], i / t.len())).collect()
}

pub(crate) fn report(machine: &str, root: &str, entries: Vec<Entry>, blobs: &ScanReport) -> ScanReport {
    ScanReport {
        client_id: cachelens::collect::new_client_id(),
        machine: machine.into(),
        root: root.into(),
        scanned_at: cachelens::db::now_ms(),
        entries,
        unchanged: vec![],
        events: vec![],
        event_files: vec![],
        ..blobs.clone()
    }
}

/// The process's resident peak (VmHWM) and now (VmRSS), in MiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (kb("VmHWM:") / 1024, kb("VmRSS:") / 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_upgrade_of_10000_entries_of_one_kernel_is_paired_whole() {
    let old =
        cachelens::collect::scan_report(&corpus_read_only("a100-upgrade-1-triton-3.4.0").join("triton-cache"), "t")
            .unwrap();
    let both =
        cachelens::collect::scan_report(&corpus_read_only("a100-upgrade-2-triton-3.5.1").join("triton-cache"), "t")
            .unwrap();
    fn kernels(entries: Vec<&Entry>) -> Vec<&Entry> {
        let mut v: Vec<&Entry> = entries.into_iter().filter(|e| e.kernel.is_some() && e.metadata.is_some()).collect();
        v.sort_by(|a, b| (&a.kernel, &a.key).cmp(&(&b.kernel, &b.key)));
        v
    }
    let old_keys: HashSet<&str> = old.entries.iter().map(|e| e.key.as_str()).collect();
    // The kernels' compiles of each generation: the 3.5.1 generation is what the second
    // snapshot adds to the first.
    let gen1 = kernels(old.entries.iter().collect());
    let gen2 = kernels(both.entries.iter().filter(|e| !old_keys.contains(e.key.as_str())).collect());
    assert_eq!(gen1.len(), gen2.len(), "each generation compiles the same kernels");
    // The corpus's own report: which 3.4.0 compile each 3.5.1 one replaced.
    let (_keep, corpus) = corpus_db(&[
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let corpus = AppState::new(corpus, Config::default());
    let real = get_json(&corpus, "/api/v1/invalidations?machine=a100-1&limit=1000").await;
    let short = |k: &str| k[..k.len().min(44)].to_string();
    let pair_of: BTreeMap<String, String> = arr(&real["invalidated"])
        .iter()
        .map(|i| (short(i["new_key"].as_str().unwrap()), short(i["old_key"].as_str().unwrap())))
        .collect();
    assert_eq!(pair_of.len(), gen1.len(), "{real}");
    // The new generation in the order of the old one: clone i of each is a pair.
    let gen2: Vec<&Entry> = gen1
        .iter()
        .map(|o| *gen2.iter().find(|n| pair_of.get(&short(&n.key)) == Some(&short(&o.key))).unwrap())
        .collect();
    let by_kernel = |g: &[&Entry]| {
        let mut m = BTreeMap::new();
        for e in g {
            *m.entry(e.kernel.clone()).or_insert(0) += 1;
        }
        m
    };
    assert_eq!(by_kernel(&gen1), by_kernel(&gen2));

    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = AppState::new(pool.clone(), Config::default());
    let (old_clones, new_clones) = (clones(&gen1, N), clones(&gen2, N));
    let root = "/cache/triton";
    cachelens::collect::ingest_report(&store, &report("up", root, old_clones.clone(), &old), "test").await.unwrap();
    let mut all = old_clones;
    all.extend(new_clones);
    let mut blobs = both.clone();
    blobs.blobs.extend(old.blobs.clone());
    cachelens::collect::ingest_report(&store, &report("up", root, all, &blobs), "test").await.unwrap();
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM entry_rows WHERE kernel = 'matmul_one' AND removed_at IS NULL").await,
        2 * N as i64
    );

    // The peak from here on: the report alone (other tests running beside it count too).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let (_, rss_before) = memory();
    let t = std::time::Instant::now();
    let (st, body) = get(&state, "/api/v1/invalidations?machine=up&limit=10").await;
    let took = t.elapsed();
    let (peak, rss_after) = memory();
    println!(
        "report of {N} + {N} entries of one kernel: {st} in {:.1} s; VmRSS {rss_before} MiB before, \
         peak {peak} MiB while computing (peak reset: {reset}), {rss_after} MiB after",
        took.as_secs_f64()
    );
    assert_eq!(st, 200, "{body}");
    let r: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (r["old_entries"].as_u64(), r["new_entries"].as_u64(), r["kept"].as_u64()),
        (Some(N as u64), Some(2 * N as u64), Some(N as u64)),
        "{r}"
    );
    assert_eq!(r["invalidated_total"], N, "every new entry replaced an old one: {}", r["summary"]);
    assert_eq!((r["new_total"].as_u64(), r["removed_total"].as_u64()), (Some(0), Some(0)), "{r}");
    assert_eq!(r["by_cause"], json!([{"cause": "compiler", "count": N}]), "{r}");
    assert!(
        r["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{N} of {N} entries recompiled after Triton 3.4.0 → 3.5.1")),
        "{}",
        r["summary"]
    );
    // Each clone is paired with a clone of its own template's 3.4.0 compile.
    let mut seen = 0;
    for offset in (0..N).step_by(1000) {
        let page = get_json(&state, &format!("/api/v1/invalidations?machine=up&limit=1000&offset={offset}")).await;
        for i in arr(&page["invalidated"]) {
            let (o, n) = (i["old_key"].as_str().unwrap(), i["new_key"].as_str().unwrap());
            assert_eq!(pair_of.get(&n[7..]), Some(&o[7..].to_string()), "{i}");
            seen += 1;
        }
    }
    assert_eq!(seen, N);
}
