//! `GET /metrics` on a real server on 127.0.0.1: every per-machine figure equals the JSON API's
//! for every machine of a real fleet (the h100-hook corpus carries real hook events), before
//! and after a real upload; the read token guards it; upload counters and request histograms
//! move with real requests.

use crate::common::*;
use crate::upload::{cli_upload, post_raw, text};
use cachelens::web::{AppState, Config};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const TOKEN: &str = "metrics-read-token-0123456789";

/// One sample of the exposition: metric name and labels.
pub type Sample = (String, BTreeMap<String, String>);

/// Parse OpenMetrics/Prometheus text: `name{k="v",...} value` per sample line, `#` lines
/// skipped. Label values are unescaped (`\\`, `\"`, `\n`). Panics on a line it cannot read.
pub fn parse(body: &str) -> BTreeMap<Sample, f64> {
    let mut out = BTreeMap::new();
    for line in body.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("no value: {line}"));
        let name = line[..name_end].to_string();
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices().peekable();
            let mut key = String::new();
            let end = loop {
                let (i, c) = chars.next().unwrap_or_else(|| panic!("unclosed labels: {line}"));
                match c {
                    '}' => break i,
                    ',' => {}
                    '=' => {
                        assert_eq!(chars.next().map(|x| x.1), Some('"'), "{line}");
                        let mut val = String::new();
                        loop {
                            match chars.next().unwrap_or_else(|| panic!("unclosed value: {line}")).1 {
                                '"' => break,
                                '\\' => match chars.next().unwrap().1 {
                                    'n' => val.push('\n'),
                                    other => val.push(other),
                                },
                                other => val.push(other),
                            }
                        }
                        labels.insert(std::mem::take(&mut key), val);
                    }
                    other => key.push(other),
                }
            };
            rest = &r[end + 1..];
        }
        let value = rest.split_whitespace().next().unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|e| panic!("bad value in {line}: {e}"));
        assert!(out.insert((name, labels), value).is_none(), "duplicate sample: {line}");
    }
    out
}

fn label(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The sample `name{pairs}`.
fn key(name: &str, pairs: &[(&str, &str)]) -> Sample {
    (name.to_string(), label(pairs))
}

/// The value of `name{machine=M}`.
fn per_machine(m: &BTreeMap<Sample, f64>, name: &str, machine: &str) -> Option<f64> {
    m.get(&key(name, &[("machine", machine)])).copied()
}

/// An in-process server on 127.0.0.1:0 for `state`; returns its base URL.
pub async fn serve(state: AppState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, cachelens::web::app(state)).await.unwrap() });
    url
}

/// GET with the read token: (status, content type, body).
pub async fn get_at(url: &str, token: Option<&str>) -> (u16, String, String) {
    let mut req = cachelens::upload::client().unwrap().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let ct = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, ct, resp.text().await.unwrap())
}

async fn api(url: &str, path: &str) -> Value {
    let (status, _, body) = get_at(&format!("{url}{path}"), Some(TOKEN)).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

async fn scrape(url: &str) -> BTreeMap<Sample, f64> {
    let (status, ct, body) = get_at(&format!("{url}/metrics"), Some(TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    assert!(body.ends_with("# EOF\n"), "an OpenMetrics exposition ends with # EOF");
    parse(&body)
}

/// Every per-machine figure of `/metrics` equals the API's, for every machine the API lists
/// (and no other). Returns the machines' names.
async fn assert_equal_to_api(url: &str) -> Vec<String> {
    let m = scrape(url).await;
    let machines = api(url, "/api/v1/machines?limit=10000").await;
    let mut names = vec![];
    for mach in arr(&machines) {
        let name = mach["name"].as_str().unwrap();
        names.push(name.to_string());
        let get = |metric: &str| {
            per_machine(&m, metric, name).unwrap_or_else(|| panic!("{metric}{{machine={name}}} missing"))
        };
        for (metric, field) in [
            ("cachelens_entries", "entries"),
            ("cachelens_bytes", "bytes"),
            ("cachelens_relocated_entries", "relocated"),
        ] {
            assert_eq!(get(metric), mach[field].as_i64().unwrap() as f64, "{name}: {metric} vs {field}");
        }
        let last_ms = mach["last_scan_at"].as_i64().expect("every machine here was scanned");
        assert_eq!((get("cachelens_last_scan_timestamp_seconds") * 1000.0).round() as i64, last_ms, "{name}");

        let hist = api(url, &format!("/api/v1/history?machine={name}&bucket=day&limit=10000")).await;
        let sum = |k: &str| arr(&hist).iter().map(|p| p[k].as_f64().unwrap_or(0.0)).sum::<f64>();
        for (metric, field) in [
            ("cachelens_cache_hits_total", "hits"),
            ("cachelens_cache_misses_total", "misses"),
            ("cachelens_compiles_total", "compiles"),
            ("cachelens_inferred_compiles_total", "inferred_compiles"),
            ("cachelens_hook_events_total", "hook_events"),
        ] {
            assert_eq!(get(metric), sum(field), "{name}: {metric} vs history {field}");
        }
        let (secs, ms) = (get("cachelens_compile_seconds_total"), sum("compile_ms"));
        assert!((secs * 1000.0 - ms).abs() <= 1e-6 * ms.max(1.0), "{name}: compile seconds {secs} vs {ms} ms");
    }
    // no machine the API does not list
    let listed: BTreeSet<&String> =
        m.keys().filter(|(n, _)| n == "cachelens_entries").filter_map(|(_, l)| l.get("machine")).collect();
    assert_eq!(listed, names.iter().collect(), "machines of /metrics vs /api/v1/machines");
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_machine_figures_equal_the_api_before_and_after_an_upload() {
    let (_keep, pool) = corpus_db(&[
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
        ("h100-hook", "h100-hook-3.6.0", "triton-cache"),
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = AppState::new(pool.clone(), Config { read_token: Some(TOKEN.into()), ..Config::default() });
    let url = serve(state).await;

    // The read token guards /metrics like the pages.
    let (status, _, body) = get_at(&format!("{url}/metrics"), None).await;
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains("cachelens_entries"));
    let (status, _, _) = get_at(&format!("{url}/metrics"), Some("metrics-read-token-wrong-one")).await;
    assert_eq!(status, 401);

    let names = assert_equal_to_api(&url).await;
    assert_eq!(names, ["a100-1", "h100-a", "h100-hook"]);
    let m = scrape(&url).await;
    // The figures are not all zero: the hook corpus's 16 hits, its compile times, relocation.
    assert_eq!(per_machine(&m, "cachelens_cache_hits_total", "h100-hook"), Some(16.0));
    assert!(per_machine(&m, "cachelens_compile_seconds_total", "h100-hook").unwrap() > 1.0);
    assert!(per_machine(&m, "cachelens_compiles_total", "a100-1").unwrap() > 0.0, "inferred compiles");
    assert!(per_machine(&m, "cachelens_relocated_entries", "h100-a").unwrap() > 0.0);
    assert_eq!(m.get(&key("cachelens_uploads_total", &[("status", "201")])), None, "no upload yet");

    // A real upload from the CLI (the hook corpus again, as another machine, with its events).
    let token = cachelens::db::tokens::create(&store, "node-up").await.unwrap();
    let (_t, dir) = unpacked("h100-hook-3.6.0");
    let out = cli_upload(&url, &token, "node-up", &dir.join("triton-cache"), &[]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let names = assert_equal_to_api(&url).await;
    assert!(names.contains(&"node-up".to_string()));
    let after = scrape(&url).await;
    assert_eq!(per_machine(&after, "cachelens_cache_hits_total", "node-up"), Some(16.0), "its hook events counted");
    let uploads = |m: &BTreeMap<Sample, f64>, status: &str| {
        m.get(&key("cachelens_uploads_total", &[("status", status)])).copied().unwrap_or(0.0)
    };
    let bytes = |m: &BTreeMap<Sample, f64>| m[&key("cachelens_upload_bytes_total", &[])];
    assert_eq!(uploads(&after, "201"), 1.0);
    let sent = bytes(&after);
    assert!(sent > 1000.0, "the CLI's upload body counted: {sent}");

    // Rejected uploads: a report of the wrong shape (body read, 422) and no token (401).
    let bad = br#"{"format": "one"}"#.to_vec();
    let (status, _) = post_raw(&url, "/api/v1/scans", Some(&token), bad.clone(), false).await;
    assert_eq!(status, 422);
    let (status, _) = post_raw(&url, "/api/v1/scans", None, bad.clone(), false).await;
    assert_eq!(status, 401);
    let m = scrape(&url).await;
    assert_eq!((uploads(&m, "201"), uploads(&m, "422"), uploads(&m, "401")), (1.0, 1.0, 1.0));
    assert_eq!(bytes(&m), sent + bad.len() as f64, "the 422 body counted, the unread 401 body not");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_durations_by_route_pattern() {
    let (_keep, pool) = corpus_db(&[("h100-a", "h100-jit-3.6.0", "triton-cache")]).await;
    let url = serve(AppState::new(pool, Config::default())).await;
    for path in ["/", "/machines/h100-a", "/machines/h100-a", "/no/such/page", "/api/v1/machines"] {
        get_at(&format!("{url}{path}"), None).await;
    }
    // A made-up method is one `other` label, whatever its name.
    for method in ["BREW", "WHEN"] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        cachelens::upload::client().unwrap().request(method, format!("{url}/")).send().await.unwrap();
    }
    let m = scrape(&url).await;
    let other = label(&[("method", "other"), ("route", "/")]);
    assert_eq!(m.get(&("cachelens_http_request_duration_seconds_count".to_string(), other)), Some(&2.0));
    let count = |route: &str| {
        m.get(&key("cachelens_http_request_duration_seconds_count", &[("method", "GET"), ("route", route)])).copied()
    };
    assert_eq!(count("/"), Some(1.0));
    assert_eq!(count("/machines/{name}"), Some(2.0), "one series per route pattern, not per path");
    assert_eq!(count("unmatched"), Some(1.0));
    assert_eq!(count("/api/v1/machines"), Some(1.0));
    let routes: BTreeSet<&str> = m.keys().filter_map(|(_, l)| l.get("route").map(String::as_str)).collect();
    assert!(!routes.iter().any(|r| r.contains("h100-a") || r.contains("no/such")), "{routes:?}");
    // Buckets are cumulative, ending at +Inf = count.
    let inf = m[&key(
        "cachelens_http_request_duration_seconds_bucket",
        &[("le", "+Inf"), ("method", "GET"), ("route", "/machines/{name}")],
    )];
    assert_eq!(inf, 2.0);
    assert!(m[&key("cachelens_http_request_duration_seconds_sum", &[("method", "GET"), ("route", "/")])] > 0.0);
}
