//! Uploads end to end: real servers on 127.0.0.1, the real `cachelens` binary as the client,
//! real corpus caches, and the SQLite file checked row by row afterwards.

use crate::common::*;
use cachelens::db::Store;
use cachelens::web::{AppState, Config};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::Output;

/// A server running `app(state)` in this process on 127.0.0.1:0.
pub struct Server {
    pub url: String,
    pub pool: Store,
    /// The server's database handle (its writers' queue and caches).
    pub db: cachelens::db::Db,
    pub _dir: crate::common::DbDir,
}

pub async fn server(config: Config) -> Server {
    let (dir, pool) = fresh_db().await;
    let state = AppState::new(pool.clone(), config);
    let db = state.db.clone();
    let app = cachelens::web::app(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server { url, pool, db, _dir: dir }
}

/// Row counts of the tables an upload writes: (scans, entries, artifacts, blobs).
pub async fn counts(pool: &Store) -> (i64, i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM scans), (SELECT COUNT(*) FROM entry_rows), (SELECT COUNT(*) FROM entry_files),
                (SELECT COUNT(*) FROM blobs)",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// `cachelens scan PATH --server URL --token T --machine M` (fast retries for tests).
pub async fn cli_upload(url: &str, token: &str, machine: &str, path: &Path, extra: &[&str]) -> Output {
    tokio::process::Command::new(bin())
        .arg("scan")
        .arg(path)
        .args(["--server", url, "--token", token, "--machine", machine])
        .args(extra)
        .env("CACHELENS_UPLOAD_BACKOFF_MS", "100")
        .env_remove("CACHELENS_DB")
        .output()
        .await
        .unwrap()
}

pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// POST raw bytes; returns (status, JSON body).
pub async fn post_raw(url: &str, path: &str, token: Option<&str>, body: Vec<u8>, gzip: bool) -> (u16, Value) {
    let mut req = cachelens::upload::client().unwrap().post(format!("{url}{path}")).body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if gzip {
        req = req.header("content-encoding", "gzip");
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text })))
}

pub fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(vec![], flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

pub async fn get_json_at(url: &str) -> Value {
    let resp = cachelens::upload::client().unwrap().get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "GET {url}");
    resp.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_two_machines_from_the_cli_and_read_them_back() {
    let srv = server(Config::default()).await;
    let (_t1, h100) = unpacked("h100-jit-3.6.0");
    let (_t2, mi300) = unpacked("mi300-upgrade-1-triton-3.6.0");
    for (machine, dir) in [("h100-up", h100.join("triton-cache")), ("mi300-up", mi300.join("triton-cache"))] {
        let token = cachelens::db::tokens::create(&srv.db, machine).await.unwrap();
        let out = cli_upload(&srv.url, &token, machine, &dir, &[]).await;
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains(&format!("on {machine}:")) && stdout.contains("server: "), "{stdout}");
        let local = cachelens::collect::scan_report(&dir, machine).unwrap();
        let machines = get_json_at(&format!("{}/api/v1/machines", srv.url)).await;
        let m = machines.as_array().unwrap().iter().find(|m| m["name"] == machine).expect("machine listed");
        assert_eq!(m["entries"].as_u64().unwrap() as usize, local.entries.len(), "{machine}: every entry stored");
        let entries = get_json_at(&format!("{}/api/v1/entries?machine={machine}&limit=10000", srv.url)).await;
        let entries = entries.as_array().unwrap();
        assert_eq!(entries.len(), local.entries.len());
        let arts: usize = entries.iter().map(|e| e["artifacts"].as_array().unwrap().len()).sum();
        assert_eq!(arts, local.entries.iter().map(|e| e.artifacts.len()).sum::<usize>());
        // IR text arrived: every blob the report carries is on the server
        for sha in local.blobs.keys() {
            assert!(cachelens::db::artifacts::blob(&srv.pool, sha).await.unwrap().is_some(), "blob {sha} stored");
        }
    }
    let machines = get_json_at(&format!("{}/api/v1/machines", srv.url)).await;
    let mi = machines.as_array().unwrap().iter().find(|m| m["name"] == "mi300-up").unwrap();
    assert_eq!(mi["triton_versions"], json!(["3.6.0"]));
    let amd = get_json_at(&format!("{}/api/v1/entries?machine=mi300-up&kernel=softmax_kernel", srv.url)).await;
    assert!(amd.as_array().unwrap().iter().all(|e| e["arch"] == "gfx942" && e["registers"].as_i64().unwrap() > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_scan_twice_is_stored_once() {
    let srv = server(Config::default()).await;
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let token = cachelens::db::tokens::create(&srv.db, "h100-up").await.unwrap();
    let report = cachelens::collect::scan_report(&dir.join("triton-cache"), "h100-up").unwrap();
    let body = gz(&serde_json::to_vec(&report).unwrap());
    let (s1, r1) = post_raw(&srv.url, "/api/v1/scans", Some(&token), body.clone(), true).await;
    assert_eq!(s1, 201, "{r1}");
    let after_first = counts(&srv.pool).await;
    let (s2, r2) = post_raw(&srv.url, "/api/v1/scans", Some(&token), body, true).await;
    assert_eq!(s2, 200, "{r2}");
    assert_eq!(r1["scan_id"], r2["scan_id"]);
    assert_eq!(r2["created"], false);
    assert_eq!(r2["summary"]["entries"], r1["summary"]["entries"], "a repeat answers the stored scan's counts");
    assert_eq!(counts(&srv.pool).await, after_first, "nothing duplicated");
    // also uncompressed JSON, and through the client library (same client_id)
    let (s3, r3) = post_raw(&srv.url, "/api/v1/scans", Some(&token), serde_json::to_vec(&report).unwrap(), false).await;
    assert_eq!((s3, &r3["scan_id"]), (200, &r1["scan_id"]));
    let up =
        cachelens::upload::upload_report(&srv.url, &token, report, cachelens::upload::Retry::new(2)).await.unwrap();
    assert!(!up.response.created);
    assert_eq!(counts(&srv.pool).await, after_first);
    let (scans, entries, arts, blobs) = after_first;
    assert_eq!(scans, 1);
    println!("stored once: {entries} entries, {arts} artifacts, {blobs} blobs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_ir_is_sent_and_stored_once() {
    let srv = server(Config::default()).await;
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let cache = dir.join("triton-cache");
    let retry = cachelens::upload::Retry::new(2);
    let t1 = cachelens::db::tokens::create(&srv.db, "h100-a").await.unwrap();
    let t2 = cachelens::db::tokens::create(&srv.db, "h100-twin").await.unwrap();
    let r = cachelens::collect::scan_report(&cache, "h100-a").unwrap();
    let first = cachelens::upload::upload_report(&srv.url, &t1, r, retry).await.unwrap();
    assert!(first.blobs_total > 0 && first.blobs_sent == first.blobs_total);
    let (_, _, _, blobs) = counts(&srv.pool).await;
    assert_eq!(blobs as usize, first.blobs_total);
    // a later scan of the same machine: no blobs sent. Another machine with the same IR sends
    // them (blobs/missing is no oracle of what other machines uploaded), and they are stored once.
    let again = cachelens::upload::upload_report(
        &srv.url,
        &t1,
        cachelens::collect::scan_report(&cache, "h100-a").unwrap(),
        retry,
    )
    .await
    .unwrap();
    let twin = cachelens::upload::upload_report(
        &srv.url,
        &t2,
        cachelens::collect::scan_report(&cache, "h100-twin").unwrap(),
        retry,
    )
    .await
    .unwrap();
    assert!(again.response.created && twin.response.created);
    // the twin holds every text the server has from h100-a: it proves each, sends none
    assert_eq!((again.blobs_sent, twin.blobs_sent, twin.blobs_proven), (0, 0, first.blobs_total));
    assert!(again.body_bytes * 2 < first.body_bytes, "{} vs {}", again.body_bytes, first.body_bytes);
    let (scans, _, _, blobs_after) = counts(&srv.pool).await;
    assert_eq!((scans, blobs_after), (3, blobs));
    println!(
        "first upload {} KiB gzip with {} blobs; second scan {} KiB with 0 blobs, twin machine {} KiB",
        first.body_bytes / 1024,
        first.blobs_sent,
        again.body_bytes / 1024,
        twin.body_bytes / 1024
    );
}

/// A small valid report, as JSON, to break in various ways.
pub fn tiny_report(machine: &str) -> Value {
    let ir = "module {}\n";
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(ir));
    json!({
        "format": 1, "client_id": "c0ffee", "machine": machine, "root": "/home/u/.triton/cache",
        "scanned_at": 1_700_000_000_000i64, "duration_ms": 5,
        "entries": [{"key": "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRST", "dir": "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRST",
                     "kind": "kernel", "kernel": "add_kernel", "bytes": 10, "sig": "x",
                     "artifacts": [{"name": "add_kernel.ttir", "bytes": 10, "sha256": sha}]}],
        "blobs": { sha: ir },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_uploads_store_nothing() {
    let max = 1 << 20;
    let srv = server(Config { max_upload_bytes: max, ..Config::default() }).await;
    let token = cachelens::db::tokens::create(&srv.db, "node-1").await.unwrap();
    let revoked = cachelens::db::tokens::create(&srv.db, "node-1").await.unwrap();
    let other = cachelens::db::tokens::create(&srv.db, "node-2").await.unwrap();
    let revoked_id = cachelens::db::tokens::list(&srv.pool).await.unwrap()[1].id;
    assert!(cachelens::db::tokens::revoke(&srv.db, revoked_id).await.unwrap());
    let good = serde_json::to_vec(&tiny_report("node-1")).unwrap();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = tiny_report("node-1");
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    // 2 MiB of zeros behind a valid JSON prefix: fine compressed (2 KiB), too large inflated
    let mut bomb = b"{\"format\":1,\"client_id\":\"".to_vec();
    bomb.resize(64 << 20, b'0');
    let bomb = gz(&bomb);
    // (what, token, body, gzip, expected status)
    type Case<'a> = (&'a str, Option<&'a str>, Vec<u8>, bool, u16);
    let cases: Vec<Case> = vec![
        ("no token", None, good.clone(), false, 401),
        ("unknown token", Some("cl_nope"), good.clone(), false, 401),
        ("revoked token", Some(&revoked), good.clone(), false, 401),
        ("another machine's token", Some(&other), good.clone(), false, 403),
        ("malformed JSON", Some(&token), b"{\"format\": 1, \"entries\": [".to_vec(), false, 400),
        ("not gzip", Some(&token), good.clone(), true, 400),
        ("wrong shape", Some(&token), br#"{"format": "one"}"#.to_vec(), false, 422),
        ("oversized body", Some(&token), vec![b' '; max + 1], false, 413),
        ("gzip bomb", Some(&token), bomb, true, 413),
        ("unknown format", Some(&token), with(&|v| v["format"] = 99.into()), false, 422),
        ("invalid machine name", Some(&token), with(&|v| v["machine"] = "../node-1".into()), false, 422),
    ];
    for (what, tok, body, gzip, want) in cases {
        let (status, resp) = post_raw(&srv.url, "/api/v1/scans", tok, body, gzip).await;
        assert_eq!(status, want, "{what}: {resp}");
        assert!(resp["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: JSON {{error}}: {resp}");
        assert_eq!(counts(&srv.pool).await, (0, 0, 0, 0), "{what}: nothing stored");
        let machines: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM machines").fetch_one(&srv.pool).await.unwrap();
        assert_eq!(machines, 0, "{what}: no machine row");
    }
    // A record that breaks a rule is skipped with its reason and the rest of the scan stored:
    // here the one entry (or its blob) of the report.
    // (what, body, the (scans, entries, artifacts, blobs) stored)
    type Record<'a> = (&'a str, Vec<u8>, (i64, i64, i64, i64));
    let records: Vec<Record> = vec![
        ("key with ..", with(&|v| v["entries"][0]["key"] = "..".into()), (1, 0, 0, 0)),
        ("key with /", with(&|v| v["entries"][0]["key"] = "a/b".into()), (1, 0, 0, 0)),
        ("dir absolute", with(&|v| v["entries"][0]["dir"] = "/etc/passwd".into()), (1, 0, 0, 0)),
        ("dir escaping", with(&|v| v["entries"][0]["dir"] = "x/../../y".into()), (1, 0, 0, 0)),
        ("NUL in dir", with(&|v| v["entries"][0]["dir"] = "a\0b".into()), (1, 0, 0, 0)),
        ("artifact name path", with(&|v| v["entries"][0]["artifacts"][0]["name"] = "../x.ttir".into()), (1, 0, 0, 0)),
        (
            "blob not matching sha",
            with(&|v| {
                let sha = v["entries"][0]["artifacts"][0]["sha256"].as_str().unwrap().to_string();
                v["blobs"][sha] = "forged".into();
            }),
            (1, 1, 1, 0),
        ),
    ];
    for (i, (what, body, want)) in records.into_iter().enumerate() {
        let fresh = server(Config { max_upload_bytes: max, ..Config::default() }).await;
        let t = cachelens::db::tokens::create(&fresh.db, "node-1").await.unwrap();
        let mut v: Value = serde_json::from_slice(&body).unwrap();
        v["client_id"] = json!(format!("rec-{i}"));
        let (status, resp) =
            post_raw(&fresh.url, "/api/v1/scans", Some(&t), serde_json::to_vec(&v).unwrap(), false).await;
        assert_eq!((status, resp["skipped"].as_i64()), (201, Some(1)), "{what}: {resp}");
        assert_eq!(counts(&fresh.pool).await, want, "{what}: the bad record left out");
    }
    // a body over the limit without Content-Length (chunked) is cut off as it streams
    assert_eq!(chunked_post(&srv.url, &token, max + 4096).await, 413);
    assert_eq!(counts(&srv.pool).await, (0, 0, 0, 0));
    // blobs/missing needs a token too, and checks its input
    let (s, _) = post_raw(&srv.url, "/api/v1/blobs/missing", None, br#"{"sha256":[]}"#.to_vec(), false).await;
    assert_eq!(s, 401);
    let (s, _) =
        post_raw(&srv.url, "/api/v1/blobs/missing", Some(&token), br#"{"sha256":["../x"]}"#.to_vec(), false).await;
    assert_eq!(s, 422);
    // and the control: the good report is accepted
    let (status, resp) = post_raw(&srv.url, "/api/v1/scans", Some(&token), good, false).await;
    assert_eq!(status, 201, "{resp}");
    assert_eq!(counts(&srv.pool).await, (1, 1, 1, 1));
}

/// POST `n` bytes with `Transfer-Encoding: chunked` over a raw socket; returns the status.
async fn chunked_post(url: &str, token: &str, n: usize) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/v1/scans HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 64 << 10];
    let mut sent = 0;
    while sent < n {
        let frame = [format!("{:x}\r\n", chunk.len()).into_bytes(), chunk.clone(), b"\r\n".to_vec()].concat();
        if s.write_all(&frame).await.is_err() {
            break; // the server may stop reading once over the limit
        }
        sent += chunk.len();
    }
    let _ = s.write_all(b"0\r\n\r\n").await;
    let mut resp = vec![];
    let _ = s.read_to_end(&mut resp).await;
    let resp = String::from_utf8_lossy(&resp);
    resp.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no status in {resp:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_retries_5xx_with_the_same_scan_and_not_4xx() {
    use axum::http::StatusCode;
    use std::sync::{Arc, Mutex};
    // A fake server: blobs/missing says "all missing"; /scans fails twice with 503, then 201.
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let s2 = seen.clone();
    let app = axum::Router::new()
        .route("/api/v1/blobs/missing", axum::routing::post(|| async { StatusCode::TOO_MANY_REQUESTS }))
        .route(
            "/api/v1/scans",
            axum::routing::post(move |body: axum::body::Bytes| {
                let seen = s2.clone();
                async move {
                    let n = {
                        let mut v = seen.lock().unwrap();
                        v.push(body.to_vec());
                        v.len()
                    };
                    if n < 3 {
                        (StatusCode::SERVICE_UNAVAILABLE, "busy".to_string())
                    } else {
                        (StatusCode::CREATED, json!({"scan_id": 7, "created": true, "summary": cachelens::model::ScanSummary { scan_id: 7, ..Default::default() }})
                            .to_string())
                    }
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let (_t, dir) = unpacked("mi300-upgrade-1-triton-3.6.0");
    // 429 on blobs/missing is retried until it gives up: clear message, exit 1
    let out = cli_upload(&url, "tok", "m1", &dir.join("triton-cache"), &["--retries", "3"]).await;
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("gave up after 3 tries") && stderr.contains("429"), "{stderr}");
    // nothing listening: connection errors are retried, then it gives up
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let out = cli_upload(&format!("http://{dead}"), "tok", "m1", &dir.join("triton-cache"), &["--retries", "2"]).await;
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("gave up after 2 tries"), "{stderr}");
    // 5xx is retried with the very same body (same client_id)
    let report = cachelens::collect::scan_report(&dir.join("triton-cache"), "m1").unwrap();
    let mut r = report.clone();
    r.blobs.clear();
    let up = cachelens::upload::upload_report(
        &url,
        "tok",
        r,
        cachelens::upload::Retry {
            tries: 4,
            base: std::time::Duration::from_millis(20),
            ..cachelens::upload::Retry::new(4)
        },
    )
    .await
    .unwrap();
    assert_eq!((up.tries, up.response.scan_id), (3, 7));
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 3);
    assert!(bodies.iter().all(|b| *b == bodies[0]), "every retry sends the same scan");
    // a 4xx is final: one try, the server's message, exit 1
    let srv = server(Config::default()).await;
    let t = cachelens::db::tokens::create(&srv.db, "other").await.unwrap();
    let out = cli_upload(&srv.url, &t, "m1", &dir.join("triton-cache"), &["--retries", "5"]).await;
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("403") && stderr.contains("\"other\"") && !stderr.contains("retrying"), "{stderr}");
}

/// `cachelens serve` as a child process on `port`, once it answers.
async fn spawn_serve(db: &Path, port: u16) -> tokio::process::Child {
    let child = tokio::process::Command::new(bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        .arg(db)
        .env_remove("CACHELENS_READ_TOKEN")
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return child;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("cachelens serve did not start on port {port}");
}

/// A TCP proxy in front of 127.0.0.1:`upstream` that tells `kill` when to kill the server:
/// during the staged upload's 1st part (PUT .../parts/0) once half its body went through, and
/// during its 1st commit right after the last byte went through (while the server stores the
/// scan). The 1st part's connection is then cut; later connections pass through untouched.
async fn killing_proxy(upstream: u16, kill: tokio::sync::mpsc::Sender<&'static str>) -> u16 {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (parts, commits) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    tokio::spawn(async move {
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            let (parts, commits, kill) = (parts.clone(), commits.clone(), kill.clone());
            tokio::spawn(async move {
                let Ok(mut server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else { return };
                let (mut cr, mut cw) = client.split();
                let (mut sr, mut sw) = server.split();
                let up = async {
                    let (mut seen, mut total, mut nth, mut buf) = (0usize, None::<usize>, 0, vec![0u8; 16 << 10]);
                    let mut head = vec![];
                    loop {
                        let n = cr.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        if total.is_none() {
                            head.extend_from_slice(&buf[..n]);
                            if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                                let h = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
                                let len = h
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .map(|v| v.trim().parse().unwrap())
                                    .unwrap_or(0);
                                total = Some(end + 4 + len);
                                let line = h.lines().next().unwrap_or("");
                                if line.starts_with("put /api/v1/uploads/") && line.contains("/parts/") {
                                    if parts.fetch_add(1, Ordering::SeqCst) == 0 {
                                        nth = 1;
                                    }
                                } else if line.starts_with("post /api/v1/uploads/")
                                    && line.contains("/commit")
                                    && commits.fetch_add(1, Ordering::SeqCst) == 0
                                {
                                    nth = 2;
                                }
                            }
                        }
                        let t = total.unwrap_or(usize::MAX);
                        if nth == 1 && seen + n >= t / 2 {
                            let half = t / 2 - seen.min(t / 2);
                            let _ = sw.write_all(&buf[..half]).await;
                            kill.send("mid-body").await.unwrap();
                            std::future::pending::<()>().await; // hold the connection until cut
                        }
                        if sw.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                        seen += n;
                        if seen >= t {
                            if nth == 2 {
                                kill.send("after-body").await.unwrap();
                            }
                            // keep-alive: the next request on this connection starts here (the
                            // client waits for each answer, so requests never share a read)
                            (seen, total, nth) = (0, None, 0);
                            head.clear();
                        }
                    }
                };
                let down = async {
                    let _ = tokio::io::copy(&mut sr, &mut cw).await;
                };
                // When either side ends, drop both (the client sees the cut).
                tokio::select! { _ = up => {}, _ = down => {} }
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_mid_upload_restarts_and_the_retry_stores_the_scan_once() {
    let (_dbdir, db) = fresh_db_at().await;
    let token = {
        let pool = cachelens::db::open(&db).await.unwrap();
        let store = cachelens::db::Db::from(pool.clone());
        let t = cachelens::db::tokens::create(&store, "h100-up").await.unwrap();
        pool.close().await;
        t
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = spawn_serve(&db, port).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let proxy = killing_proxy(port, tx).await;
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let url = format!("http://127.0.0.1:{proxy}");
    let cache = dir.join("triton-cache");
    let mut client =
        tokio::spawn(async move { cli_upload(&url, &token, "h100-up", &cache, &["--retries", "8"]).await });
    let mut kills = vec![];
    while kills.len() < 2 {
        let when = tokio::select! {
            w = rx.recv() => w.unwrap(),
            out = &mut client => panic!("client ended before the kills {kills:?}: {:?}", text(&out.unwrap())),
        };
        child.start_kill().unwrap(); // SIGKILL: no chance to clean up
        child.wait().await.unwrap();
        kills.push(when);
        child = spawn_serve(&db, port).await;
    }
    assert_eq!(kills, ["mid-body", "after-body"]);
    let out = client.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "client: {stdout}\n{stderr}");
    assert!(stderr.contains("retrying"), "{stderr}");
    println!("client stderr:\n{stderr}client stdout:\n{stdout}");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let pool = cachelens::db::open(&db).await.unwrap();
    if !on_postgres() {
        // SQLite's file whole, its foreign keys kept (PostgreSQL checks both itself, always)
        let ok: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&pool).await.unwrap();
        assert_eq!(ok, "ok");
        let fk: Vec<(String, i64, String, i64)> =
            sqlx::query_as("PRAGMA foreign_key_check").fetch_all(&pool).await.unwrap();
        assert!(fk.is_empty(), "{fk:?}");
    }
    let (scans, entries, arts, _) = counts(&pool).await;
    assert_eq!(scans, 1, "stored exactly once");
    let local = cachelens::collect::scan_report(&dir.join("triton-cache"), "h100-up").unwrap();
    assert_eq!(entries as usize, local.entries.len(), "the whole scan, not half of it");
    assert_eq!(arts as usize, local.entries.iter().map(|e| e.artifacts.len()).sum::<usize>());
    let stored: i64 = sqlx::query_scalar("SELECT entries FROM scans").fetch_one(&pool).await.unwrap();
    assert_eq!(stored, entries);
    let orphans: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM entry_rows WHERE first_scan_id NOT IN (SELECT id FROM scans)")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(orphans, 0);
}

/// A mistyped `--server` or a missing `--token` fails at once, before anything is scanned, and
/// says what is wrong (it used to fail after the scan, as six tries of a connection error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_server_or_a_missing_token_fails_before_the_scan() {
    let cache = corpus_read_only("h100-jit-3.6.0").join("triton-cache");
    let cases: [(&str, Option<&str>, &str); 6] = [
        ("htp://127.0.0.1:9", Some("t"), "the scheme \"htp\" is not http or https"),
        ("localhost:8600", Some("t"), "no scheme? write http://localhost:8600"),
        (
            "http://127.0.0.1:9/api/v1/scans",
            Some("t"),
            "has the path \"/api/v1/scans\"; uploads go to the base URL (http://127.0.0.1:9)",
        ),
        ("https://h.example/?token=x", Some("t"), "has a query or fragment"),
        ("http://", Some("t"), "is not a URL"),
        ("http://127.0.0.1:9", None, "--server needs --token"),
    ];
    for (url, token, says) in cases {
        let t0 = std::time::Instant::now();
        let mut cmd = tokio::process::Command::new(bin());
        cmd.arg("scan").arg(&cache).args(["--server", url, "--machine", "m"]).env_remove("CACHELENS_TOKEN");
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        let out = cmd.env("CACHELENS_UPLOAD_BACKOFF_MS", "100").output().await.unwrap();
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{url}: {stdout}");
        assert!(stderr.contains(says), "{url}: {stderr}");
        assert!(stdout.is_empty(), "{url}: nothing is scanned: {stdout}");
        println!("{url}: failed in {:?}", t0.elapsed());
    }
}
