//! What storing a machine's advice costs a landed scan: one extra pass over the machine's live
//! entries (`prune::advice::refresh`, run after a landed scan that changed the machine). A machine of 50,000 live
//! entries (the hook corpus's 20 entries cloned under new keys, with its 48 hook events cloned
//! for each clone: 120,000 events), ingested as an upload is. Prints the pass's time alone
//! (`advice::compute`, 5 runs), with its store (`refresh`), and a landed re-scan in which
//! nothing changed (which keeps the advice just stored: no pass), not asserted on. Reproduce:
//! `cargo test --release --test e2e big_advice -- --nocapture`.

use crate::common::*;
use cachelens::model::{Entry, HookEvent, ScanReport};
use cachelens::prune::advice;
use std::time::Instant;

/// Live entries of the machine.
const N: usize = 50_000;

fn clone_key(key: &str, n: usize) -> String {
    format!("C{n:06}{}", &key[..key.len().min(44)])
}

fn clone_entry(e: &Entry, n: usize) -> Entry {
    let mut c = e.clone();
    c.key = clone_key(&e.key, n);
    c.dir = c.key.clone();
    c
}

/// The hook's events of `n` clones: each template event again for the clone's key.
fn clone_events(evs: &[HookEvent], clones: usize, keys: &[String]) -> Vec<HookEvent> {
    let mut out = Vec::with_capacity(evs.len() * clones);
    for n in 0..clones {
        for (i, e) in evs.iter().enumerate() {
            if !keys.contains(&e.key) {
                continue;
            }
            let mut c = e.clone();
            c.key = clone_key(&e.key, n);
            c.seq = Some((n * evs.len() + i) as i64);
            out.push(c);
        }
    }
    out
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storing_the_advice_of_50000_entries_costs_one_pass() {
    let t = cachelens::collect::scan_report(&corpus_read_only("h100-hook-3.6.0").join("triton-cache"), "t").unwrap();
    let per = t.entries.len();
    let clones = N / per;
    let keys: Vec<String> = t.entries.iter().map(|e| e.key.clone()).collect();
    let entries: Vec<Entry> = (0..N).map(|i| clone_entry(&t.entries[i % per], i / per)).collect();
    let events = clone_events(&t.events, clones, &keys);
    let dirs: Vec<String> = entries.iter().map(|e| e.dir.clone()).collect();
    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let root = "/cache/triton";
    let report = |entries, unchanged, events| ScanReport {
        client_id: cachelens::collect::new_client_id(),
        machine: "big".into(),
        root: root.into(),
        scanned_at: cachelens::db::now_ms(),
        entries,
        unchanged,
        events,
        event_files: vec![],
        ..t.clone()
    };
    let n_events = events.len();
    let started = Instant::now();
    cachelens::collect::ingest_report(&store, &report(entries, vec![], events), "test").await.unwrap();
    let first = ms(started);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM entry_rows WHERE removed_at IS NULL").await, N as i64);

    let mut passes = vec![];
    let mut a = None;
    for _ in 0..5 {
        let s = Instant::now();
        a = advice::compute(&pool, "big").await.unwrap();
        passes.push(ms(s));
    }
    let a = a.unwrap();
    passes.sort_by(f64::total_cmp);
    let s = Instant::now();
    advice::refresh(&store, "big").await.unwrap();
    let refresh = ms(s);
    let s = Instant::now();
    cachelens::collect::ingest_report(&store, &report(vec![], dirs, vec![]), "test").await.unwrap();
    let rescan = ms(s);
    println!(
        "advice of {N} live entries ({n_events} hook events): one pass {:.0} ms (min {:.0}, max {:.0} of 5), \
         with its store {refresh:.0} ms; a landed re-scan with nothing changed {rescan:.0} ms (the stored advice kept: no pass); \
         the first ingest {first:.0} ms",
        passes[2], passes[0], passes[4]
    );
    assert_eq!(a.roots.len(), 1);
    assert_eq!(a.roots[0].entries, N as i64, "every live entry judged");
    let relocated = t.entries.iter().filter(|e| e.group.as_ref().is_some_and(|g| g.relocated)).count();
    let by = |c| a.classes.iter().find(|t| t.class == Some(c)).map_or(0, |t| t.items);
    assert_eq!(by(cachelens::prune::Class::Relocated), (relocated * clones) as i64, "{:?}", a.classes);
}
