//! Hostile or broken clients against a real server on 127.0.0.1 (issue 10): numbers out of
//! bounds, connections that never finish their headers, many big uploads at once, weak read
//! tokens, the blob oracle, response headers, the database file's mode.
//!
//! Tests about sockets, file limits and memory run the real `cachelens serve` binary
//! (`CACHELENS_SERVE_BIN` runs them against another build, e.g. an older one, to see the
//! attack work there).

use crate::common::*;
use crate::upload::{cli_upload, post_raw, server};
use cachelens::web::Config;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

fn serve_bin() -> PathBuf {
    std::env::var_os("CACHELENS_SERVE_BIN").map(PathBuf::from).unwrap_or_else(bin)
}

/// `cachelens serve --db DB --listen 127.0.0.1:0 ARGS`, under `prlimit --nofile=N:N` when
/// given; returns the child (killed on drop) and its URL once it listens.
async fn spawn_serve(db: &Path, args: &[&str], nofile: Option<u32>) -> (Child, String) {
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg(serve_bin());
            c
        }
        None => Command::new(serve_bin()),
    };
    cmd.arg("serve").arg("--db").arg(db).args(["--listen", "127.0.0.1:0"]).args(args);
    let mut child = cmd
        .env_remove("CACHELENS_DB")
        .env_remove("CACHELENS_READ_TOKEN")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn cachelens serve (is prlimit from util-linux installed?)");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            if let Some(i) = l.find("on http://") {
                return l[i + 3..].split_whitespace().next().unwrap().to_string();
            }
        }
        panic!("serve exited before listening");
    })
    .await
    .expect("serve did not start within 60 s");
    // keep draining stderr so that the server never blocks on a full pipe
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

fn token_create(db: &Path, machine: &str) -> String {
    let out = std::process::Command::new(serve_bin())
        .args(["token", "create", "--machine", machine, "--db"])
        .arg(db)
        .env_remove("CACHELENS_DB")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_numbers_are_skipped_and_pages_stay_up() {
    let srv = server(Config::default()).await;
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let cache = dir.join("triton-cache");
    let token = cachelens::db::tokens::create(&srv.db, "m1").await.unwrap();
    assert!(cli_upload(&srv.url, &token, "m1", &cache, &[]).await.status.success());
    // two entries of i64::MAX bytes: their sum overflowed the summary tables (500 everywhere)
    let mut r = cachelens::collect::scan_report(&cache, "m1").unwrap();
    r.client_id = "huge".into();
    for e in r.entries.iter_mut().take(2) {
        e.bytes = i64::MAX;
    }
    let (status, body) =
        post_raw(&srv.url, "/api/v1/scans", Some(&token), serde_json::to_vec(&r).unwrap(), false).await;
    // each is skipped with its reason (their rows kept as they were), the rest stored
    assert_eq!((status, body["skipped"].as_i64()), (201, Some(2)), "{body}");
    let reasons = body["summary"]["skipped"].to_string();
    assert!(reasons.contains(": bytes = 9223372036854775807 is out of range"), "{reasons}");
    // what names the scan is refused whole; a record's number skips that record
    type Patch = Box<dyn Fn(&mut cachelens::model::ScanReport)>;
    let cases: [(&str, u16, Patch); 4] = [
        ("scanned_at", 422, Box::new(|r| r.scanned_at = -5)),
        ("duration_ms", 422, Box::new(|r| r.duration_ms = i64::MAX)),
        ("registers", 201, Box::new(|r| r.entries[0].registers = Some(i64::MIN))),
        ("artifact", 201, Box::new(|r| r.entries[0].artifacts[0].bytes = i64::MAX)),
    ];
    for (field, want, patch) in cases {
        let mut r = cachelens::collect::scan_report(&cache, "m1").unwrap();
        patch(&mut r);
        let (status, body) =
            post_raw(&srv.url, "/api/v1/scans", Some(&token), serde_json::to_vec(&r).unwrap(), false).await;
        assert_eq!(status, want, "{field}: {body}");
        assert!(body.to_string().contains(field), "{field}: {body}");
    }
    let http = cachelens::upload::client().unwrap();
    for path in ["/", "/kernels", "/machines/m1", "/api/v1/machines", "/api/v1/kernels"] {
        let resp = http.get(format!("{}{path}", srv.url)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    let machines: Value = http.get(format!("{}/api/v1/machines", srv.url)).send().await.unwrap().json().await.unwrap();
    let local = cachelens::collect::scan_report(&cache, "m1").unwrap();
    assert_eq!(machines[0]["bytes"].as_i64().unwrap(), local.entries.iter().map(|e| e.bytes).sum::<i64>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_their_headers_do_not_starve_the_server() {
    let (_dir, db) = fresh_db_at().await;
    let (child, url) = spawn_serve(&db, &[], Some(512)).await;
    let addr = url.trim_start_matches("http://").to_string();
    // 600 clients connect at once, send half a request and hold their socket until told to go
    let (go, gone) = tokio::sync::watch::channel(false);
    let connected = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flood: Vec<_> = (0..600)
        .map(|_| {
            let (addr, mut gone, connected) = (addr.clone(), gone.clone(), connected.clone());
            tokio::spawn(async move {
                let connect = tokio::net::TcpStream::connect(&addr);
                let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(120), connect).await else { return };
                connected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n").await;
                let _ = gone.wait_for(|g| *g).await;
            })
        })
        .collect();
    // the flood is in place once most of it got through the kernel's handshake
    let n = || connected.load(std::sync::atomic::Ordering::Relaxed);
    let t = Instant::now();
    while n() < 450 && t.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fds = std::fs::read_dir(format!("/proc/{}/fd", child.id().unwrap())).unwrap().count();
    println!("{} connected, server holds {fds} files", connected.load(std::sync::atomic::Ordering::Relaxed));
    // (a client that waits in the listen backlog as long as the test does: the node's own 10 s
    // connect timeout would make it retry instead)
    let patient = cachelens::upload::Retry { connect: Duration::from_secs(45), ..cachelens::upload::Retry::new(1) };
    let http = cachelens::upload::client_for(&patient).unwrap();
    let t = Instant::now();
    let resp = tokio::time::timeout(Duration::from_secs(45), http.get(format!("{url}/api/v1/machines")).send()).await;
    let waited = t.elapsed();
    println!("with 600 slow connections held (server at 512 open files): answered in {:.1} s", waited.as_secs_f64());
    assert_eq!(resp.expect("a normal request is answered within 45 s").unwrap().status(), 200);
    go.send(true).unwrap();
    for f in flood {
        f.abort();
    }
    let t = Instant::now();
    let resp = tokio::time::timeout(Duration::from_secs(20), http.get(format!("{url}/kernels")).send())
        .await
        .expect("still serving once they went")
        .unwrap();
    assert_eq!(resp.status(), 200);
    println!("after they went: answered in {:.2} s", t.elapsed().as_secs_f64());
}

/// VmHWM (peak resident set) of a process, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 =
        status.lines().find(|l| l.starts_with("VmHWM:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    kb / 1024.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_big_uploads_at_once_stay_bounded_in_memory() {
    let (_dir, db) = fresh_db_at().await;
    let token = token_create(&db, "big");
    let (child, url) = spawn_serve(&db, &[], None).await;
    let pid = child.id().unwrap();
    let before = peak_rss_mib(pid);
    // ~60 MiB of one IR blob whose sha256 does not match: read, decoded, the blob skipped
    // (the same scan each time: stored once, the others answered 200)
    let blob = "x".repeat(60 << 20);
    let body = format!(
        r#"{{"format":1,"client_id":"c","machine":"big","root":"/r","scanned_at":1700000000000,"duration_ms":1,"entries":[],"blobs":{{"{}":"{blob}"}}}}"#,
        "0".repeat(64)
    );
    let body = axum::body::Bytes::from(body);
    let http = cachelens::upload::client().unwrap();
    let sends = (0..12).map(|_| {
        let req = http.post(format!("{url}/api/v1/scans")).bearer_auth(&token).body(body.clone());
        async move { req.send().await.unwrap().status().as_u16() }
    });
    let statuses = futures_join(sends).await;
    let after = peak_rss_mib(pid);
    println!("server peak RSS: {before:.0} MiB before, {after:.0} MiB after 12 concurrent 60 MiB uploads");
    let created = statuses.iter().filter(|s| **s == 201).count();
    assert!(created == 1 && statuses.iter().all(|s| [200, 201].contains(s)), "{statuses:?}");
    let blobs: i64 = {
        let pool = cachelens::db::open(&db).await.unwrap();
        sqlx::query_scalar("SELECT COUNT(*) FROM blobs").fetch_one(&pool).await.unwrap()
    };
    assert_eq!(blobs, 0, "the forged blob is not stored");
    assert!(after < 400.0, "peak RSS {after:.0} MiB");
}

async fn futures_join<F: std::future::Future<Output = u16> + Send + 'static>(fs: impl Iterator<Item = F>) -> Vec<u16> {
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = vec![];
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weak_read_tokens_are_refused_at_start() {
    let (_dir, db) = fresh_db_at().await;
    for (flag, env) in [(Some(""), None), (Some("x"), None), (None, Some("")), (None, Some("fifteen-chars-x"))] {
        let mut cmd = Command::new(serve_bin());
        cmd.arg("serve").arg("--db").arg(&db).args(["--listen", "127.0.0.1:0"]);
        if let Some(f) = flag {
            cmd.arg(format!("--read-token={f}"));
        }
        cmd.env_remove("CACHELENS_READ_TOKEN");
        if let Some(e) = env {
            cmd.env("CACHELENS_READ_TOKEN", e);
        }
        let out = tokio::time::timeout(Duration::from_secs(30), cmd.kill_on_drop(true).output())
            .await
            .unwrap_or_else(|_| panic!("serve started with read token {flag:?}/{env:?}"))
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("at least 16 characters"), "{flag:?}/{env:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blobs_missing_tells_a_machine_only_about_its_own_blobs() {
    let srv = server(Config::default()).await;
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let cache = dir.join("triton-cache");
    let a = cachelens::db::tokens::create(&srv.db, "owner").await.unwrap();
    let b = cachelens::db::tokens::create(&srv.db, "snoop").await.unwrap();
    assert!(cli_upload(&srv.url, &a, "owner", &cache, &[]).await.status.success());
    let shas: Vec<String> = cachelens::collect::scan_report(&cache, "owner").unwrap().blobs.into_keys().collect();
    assert!(shas.len() > 10);
    let ask = serde_json::to_vec(&serde_json::json!({ "sha256": shas })).unwrap();
    let (s, owner) = post_raw(&srv.url, "/api/v1/blobs/missing", Some(&a), ask.clone(), false).await;
    assert_eq!((s, owner["missing"].as_array().unwrap().len()), (200, 0), "the owner has them all");
    let (s, snoop) = post_raw(&srv.url, "/api/v1/blobs/missing", Some(&b), ask, false).await;
    assert_eq!((s, snoop["missing"].as_array().unwrap().len()), (200, shas.len()), "another machine learns nothing");
    // the other machine uploads the same cache: it sends the blobs, the store keeps one copy
    let blobs =
        || async { sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM blobs").fetch_one(&srv.pool).await.unwrap() };
    let n = blobs().await;
    assert!(cli_upload(&srv.url, &b, "snoop", &cache, &[]).await.status.success());
    assert_eq!(blobs().await, n);
    let page: Value =
        crate::upload::get_json_at(&format!("{}/api/v1/entries?machine=snoop&limit=10000", srv.url)).await;
    assert!(!page.as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_has_the_security_headers_and_the_db_is_private() {
    // a file whatever the tests' store: its mode is checked
    let dir = tempfile::TempDir::new().unwrap();
    let db = dir.path().join("fresh.db");
    let token = token_create(&db, "m");
    let mode = |p: &Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions()) & 0o777;
    assert_eq!(mode(&db), 0o600, "a fresh database file is private");
    let read = "a-read-token-of-24-chars";
    let (_child, url) = spawn_serve(&db, &["--read-token", read], None).await;
    let http = cachelens::upload::client().unwrap();
    for (path, auth) in [
        ("/", true),
        ("/", false),
        ("/static/style.css", true),
        ("/api/v1/machines", true),
        ("/no-such-page", true),
        ("/login?token=wrong", false),
    ] {
        let mut req = http.get(format!("{url}{path}"));
        if auth {
            req = req.bearer_auth(read);
        }
        let r = req.send().await.unwrap();
        let h = r.headers();
        let csp = h.get("content-security-policy").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        assert_eq!(h.get("x-content-type-options").map(|v| v.to_str().unwrap()), Some("nosniff"), "{path}");
        assert_eq!(h.get("x-frame-options").map(|v| v.to_str().unwrap()), Some("DENY"), "{path}");
        assert!(csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-eval") && !csp.contains("unsafe-inline"), "{csp}");
    }
    let (s, _) = post_raw(&url, "/api/v1/blobs/missing", Some(&token), br#"{"sha256":[]}"#.to_vec(), false).await;
    assert_eq!(s, 200, "uploads need no read token");
    for p in ["fresh.db-wal", "fresh.db-shm"] {
        if dir.path().join(p).exists() {
            assert_eq!(mode(&dir.path().join(p)), 0o600, "{p}");
        }
    }
}
