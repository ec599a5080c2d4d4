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

fn gzip(json: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(json)?;
    Ok(enc.finish()?)
}

pub async fn run(
    a: &Args,
    c: &Corpus,
    s: &Server,
    tokens: &BTreeMap<String, String>,
    f: &Facts,
) -> anyhow::Result<Vec<String>> {
    // Bodies made first, so that the upload phase measures the server, not this client's JSON
    // encoding. The nodes' reports differ only in the machine's name (machine, root, the hook
    // events' host) and the client id: one report is encoded, and each node's body is that text
    // with its own name and id (an encoding each took 17 s at 50,000 entries: 14 min for 50).
    let t = Instant::now();
    let first =
        fleet::report(&c.h100, "node-001", "/bench/node-001/triton-cache", a.upload_entries, a.variety, a.events);
    let (json, client_id) = (Arc::new(serde_json::to_string(&first)?), first.client_id.clone());
    drop(first);
    let gate = Arc::new(tokio::sync::Semaphore::new(2));
    let mut made = vec![];
    for i in 1..=a.upload_nodes {
        let (gate, json, client_id) = (gate.clone(), json.clone(), client_id.clone());
        made.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await?;
            tokio::task::spawn_blocking(move || {
                let own = json
                    .replace("node-001", &format!("node-{i:03}"))
                    .replace(&client_id, &cachelens::collect::new_client_id());
                gzip(own.as_bytes())
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

    // readers: every route, round robin
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = vec![];
    for r in 0..a.readers {
        let (done, url, f, timeout) = (done.clone(), s.url.clone(), f.clone(), a.timeout);
        readers.push(tokio::spawn(async move {
            let http = client();
            // answers not timed, by what they were: `202 computing` (a report being computed), an
            // HTTP status, `timeout`, `error`
            let (mut lat, mut bad, mut i) = (BTreeMap::<&str, Vec<f64>>::new(), BTreeMap::<String, usize>::new(), r);
            while !done.load(Ordering::Relaxed) {
                // every route, the stored reports' and nearest's among them: each landing changes
                // the fleet they read
                let route = &ROUTES[i % ROUTES.len()];
                i += 1;
                let kind = if route.pattern.starts_with("/api/") { "api" } else { "pages" };
                match get(&http, &url, &fill(route, &f, i), timeout).await {
                    Outcome::Ok(d, _) => {
                        let ms = d.as_secs_f64() * 1000.0;
                        lat.entry(kind).or_default().push(ms);
                        lat.entry(route.label).or_default().push(ms);
                    }
                    Outcome::Pending(_) => *bad.entry("202 computing".into()).or_default() += 1,
                    Outcome::Status(code, _) => *bad.entry(format!("HTTP {code} ({})", route.label)).or_default() += 1,
                    Outcome::Timeout => *bad.entry(format!("timeout ({})", route.label)).or_default() += 1,
                    Outcome::Error(_) => *bad.entry("error".into()).or_default() += 1,
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
            // A whole report's POST is answered only once ingested, behind every upload queued
            // ahead of it (over an hour for the last of 50 × 50,000): no read timeout here.
            let retry = cachelens::upload::Retry {
                read: std::time::Duration::from_secs(7200),
                ..cachelens::upload::Retry::new(6)
            };
            let (_, _, tries) = cachelens::upload::post_gzipped(&http, &url, &token, &body, retry).await?;
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
    let (mut lat, mut bad) = (BTreeMap::<&str, Vec<f64>>::new(), BTreeMap::<String, usize>::new());
    for r in readers {
        let (l, b) = r.await?;
        for (k, n) in b {
            *bad.entry(k).or_default() += n;
        }
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
    let q = |v: &[f64], q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
    let mut routes = vec![];
    for (k, v) in &mut lat {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        if k == &"pages" || k == &"api" {
            out.push(format!(
                "reads during it, {k}: {} requests, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                v.len(),
                q(v, 0.5),
                q(v, 0.99),
                q(v, 1.0)
            ));
        } else {
            routes.push((q(v, 0.99), *k, v.len()));
        }
    }
    // the routes slowest at p99 (each route's own figure; few requests each, so rough)
    routes.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    for (p99, k, n) in routes.iter().take(6) {
        out.push(format!("  slowest: {k}: {n} requests, p99 {p99:.1} ms"));
    }
    out.push(format!("reads not timed (answered but not 200, or no answer): {}", bad.values().sum::<usize>()));
    for (k, n) in &bad {
        out.push(format!("  {k}: {n}"));
    }
    for l in &out {
        println!("upload phase: {l}");
    }
    Ok(out)
}
