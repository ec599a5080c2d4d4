//! Uploads at fleet scale (issue 14 item 6): `--upload-nodes` nodes upload one
//! `--upload-entries`-entry scan each, all at once, into the server already holding the fleet,
//! while `--readers` clients time the routes; prints the ingest rate and the read p50/p99.

use crate::Args;
use crate::drive::{Outcome, client, fill, get};
use crate::fleet::{self, Corpus, Facts};
use crate::routes::ROUTES;
use crate::server::Server;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

fn gzip(r: &cachelens::model::ScanReport) -> anyhow::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    serde_json::to_writer(&mut enc, r)?;
    enc.flush()?;
    Ok(enc.finish()?)
}

pub async fn run(
    a: &Args,
    c: &Corpus,
    s: &Server,
    tokens: &BTreeMap<String, String>,
    f: &Facts,
) -> anyhow::Result<Vec<String>> {
    // bodies made first (two at a time: each report is large before gzip), so that the upload
    // phase measures the server, not this client's JSON encoding
    let t = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(2));
    let mut made = vec![];
    for i in 1..=a.upload_nodes {
        let (gate, tmpl, n, v, ev) = (gate.clone(), c.h100.clone(), a.upload_entries, a.variety, a.events);
        made.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await?;
            tokio::task::spawn_blocking(move || {
                let m = format!("node-{i:03}");
                gzip(&fleet::report(&tmpl, &m, &format!("/bench/{m}/triton-cache"), n, v, ev))
            })
            .await?
        }));
    }
    let mut bodies = vec![];
    for m in made {
        bodies.push(m.await??);
    }
    let mib = bodies.iter().map(Vec::len).sum::<usize>() as f64 / 1048576.0;
    eprintln!("  {} upload bodies made in {:.1}s ({mib:.0} MiB gzip)", bodies.len(), t.elapsed().as_secs_f64());

    // readers: the routes whose cold request was not slow, round robin
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = vec![];
    for r in 0..a.readers {
        let (done, url, f, timeout) = (done.clone(), s.url.clone(), f.clone(), a.timeout);
        readers.push(tokio::spawn(async move {
            let http = client();
            let (mut lat, mut bad, mut i) = (BTreeMap::<&str, Vec<f64>>::new(), 0usize, r);
            while !done.load(Ordering::Relaxed) {
                let route = &ROUTES[i % ROUTES.len()];
                i += 1;
                if route.label.contains("invalidations")
                    || route.label.contains("history")
                    || route.label.contains("nearest")
                {
                    continue; // the slow ones are timed in the route phase; here: reads under upload load
                }
                let kind = if route.pattern.starts_with("/api/") { "api" } else { "pages" };
                match get(&http, &url, &fill(route, &f, i), timeout).await {
                    Outcome::Ok(d, _) => lat.entry(kind).or_default().push(d.as_secs_f64() * 1000.0),
                    _ => bad += 1,
                }
            }
            (lat, bad)
        }));
    }
    let started = Instant::now();
    let http = cachelens::upload::client()?;
    let mut ups = vec![];
    for (i, body) in bodies.into_iter().enumerate() {
        let (http, url, token) = (http.clone(), s.url.clone(), tokens[&format!("node-{:03}", i + 1)].clone());
        ups.push(tokio::spawn(async move {
            // The real client's POST: retries, and waits on a busy server (503 Retry-After).
            let t = Instant::now();
            let url = format!("{url}/api/v1/scans");
            let (_, _, tries) =
                cachelens::upload::post_gzipped(&http, &url, &token, &body, cachelens::upload::Retry::new(6)).await?;
            anyhow::Ok((t.elapsed().as_secs_f64(), tries))
        }));
    }
    let (mut per, mut posts) = (vec![], 0);
    for u in ups {
        let (secs, tries) = u.await??;
        per.push(secs);
        posts += tries;
    }
    let secs = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let (mut lat, mut bad) = (BTreeMap::<&str, Vec<f64>>::new(), 0);
    for r in readers {
        let (l, b) = r.await?;
        bad += b;
        for (k, v) in l {
            lat.entry(k).or_default().extend(v);
        }
    }
    let entries = a.upload_nodes * a.upload_entries;
    let mut out = vec![format!(
        "{} nodes × {} entries at once: {secs:.0} s, {:.0} entries/s ingested, slowest node {:.0} s, {posts} POSTs (retries and busy answers included); RSS {} MB",
        a.upload_nodes,
        a.upload_entries,
        entries as f64 / secs,
        per.iter().cloned().fold(0.0, f64::max),
        s.mem_mb().0
    )];
    for (k, v) in &mut lat {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let p = |q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
        out.push(format!(
            "reads during it, {k}: {} requests, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            v.len(),
            p(0.5),
            p(0.99),
            p(1.0)
        ));
    }
    out.push(format!("reads that failed or timed out: {bad}"));
    for l in &out {
        println!("upload phase: {l}");
    }
    Ok(out)
}
