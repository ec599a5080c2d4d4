//! The upload client against servers that misbehave, on loopback: one that accepts and never
//! answers, one that answers slowly but steadily, one whose commit ingests for longer than the
//! client's read timeout, and a plain-HTTP server named with https.

use crate::common::*;
use crate::upload::{counts, text};
use axum::body::Body;
use cachelens::web::{AppState, Config};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Longest a client run may take here before the test says it hung (the bounds under test are
/// a few seconds; this only turns a hang into a failure).
const HANG: Duration = Duration::from_secs(180);

/// `cachelens scan h100-jit --server URL --token T` with `flags`; (success, stdout, stderr).
async fn run(url: &str, token: &str, flags: &[&str]) -> (bool, String, String) {
    let cache = corpus_read_only("h100-jit-3.6.0").join("triton-cache");
    let mut cmd = tokio::process::Command::new(bin());
    cmd.arg("scan").arg(&cache).args(["--server", url, "--token", token, "--machine", "node-1"]).args(flags);
    cmd.env("CACHELENS_UPLOAD_BACKOFF_MS", "100").env_remove("CACHELENS_DB").kill_on_drop(true);
    let out = tokio::time::timeout(HANG, cmd.output()).await.expect("the client hung").unwrap();
    let (o, e) = text(&out);
    (out.status.success(), o, e)
}

/// A TCP listener that accepts every connection and never reads or writes a byte.
fn silent_listener() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = vec![];
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_fails_each_try_and_the_upload_gives_up() {
    let url = silent_listener();
    let t0 = std::time::Instant::now();
    let (ok, stdout, stderr) =
        run(&url, "t", &["--read-timeout", "1s", "--retries", "3", "--give-up-after", "10m"]).await;
    println!("3 tries against a silent server: {:?}\n{stderr}", t0.elapsed());
    assert!(!ok, "{stdout}");
    assert!(stderr.contains("the server sent nothing for 1 s (--read-timeout)"), "{stderr}");
    // one line per retry, saying when the next try is
    let retries: Vec<&str> = stderr.lines().filter(|l| l.starts_with("upload: ") && l.contains(" (at ")).collect();
    assert_eq!(retries.len(), 2, "{stderr}");
    assert!(retries[0].contains("retrying, try 2/3 in ") && retries[1].contains("retrying, try 3/3 in "), "{stderr}");
    assert!(stderr.contains("gave up after 3 tries"), "{stderr}");

    // The bound on the whole upload: however many tries are left.
    let (ok, _, stderr) = run(&url, "t", &["--read-timeout", "1s", "--retries", "1000", "--give-up-after", "4s"]).await;
    assert!(!ok);
    assert!(stderr.contains("time limit"), "{stderr}");
    assert!(stderr.lines().filter(|l| l.contains(" (at ")).count() < 10, "{stderr}");
}

/// A response body handed out a few bytes at a time, `gap` apart.
struct Trickle {
    rest: hyper::body::Bytes,
    piece: usize,
    gap: Duration,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl hyper::body::Body for Trickle {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        if self.rest.is_empty() {
            return Poll::Ready(None);
        }
        if let Some(s) = self.sleep.as_mut() {
            std::task::ready!(s.as_mut().poll(cx));
        }
        let gap = self.gap;
        self.sleep = Some(Box::pin(tokio::time::sleep(gap)));
        let n = self.piece.min(self.rest.len());
        let piece = self.rest.split_to(n);
        Poll::Ready(Some(Ok(hyper::body::Frame::data(piece))))
    }
}

/// The real app, on 127.0.0.1:0, the bodies of the answers to `blobs/missing` and the commit
/// trickled in 16 pieces 400 ms apart (6 s, for a client whose read timeout is 5 s); `on_commit`
/// runs at the first commit.
async fn slow_server(state: AppState, on_commit: impl Fn(AppState) + Send + Sync + 'static) -> String {
    let first = Arc::new(AtomicBool::new(true));
    let on_commit = Arc::new(on_commit);
    let st = state.clone();
    let app = cachelens::web::app(state).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let (first, on_commit, st) = (first.clone(), on_commit.clone(), st.clone());
            async move {
                let path = req.uri().path().to_string();
                if path.ends_with("/commit") && first.swap(false, Ordering::SeqCst) {
                    on_commit(st);
                }
                let resp = next.run(req).await;
                if !(path.ends_with("/commit") || path.ends_with("/blobs/missing")) {
                    return resp;
                }
                let (parts, body) = resp.into_parts();
                let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                let piece = bytes.len().div_ceil(16).max(1);
                let body = Trickle { rest: bytes, piece, gap: Duration::from_millis(400), sleep: None };
                axum::response::Response::from_parts(parts, Body::new(body))
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_but_steady_server_is_waited_for() {
    let (_d, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let token = cachelens::db::tokens::create(&store, "node-1").await.unwrap();
    let url = slow_server(AppState::new(pool.clone(), Config::default()), |_| {}).await;
    let (ok, stdout, stderr) = run(&url, &token, &["--read-timeout", "5s", "--retries", "1"]).await;
    assert!(ok, "{stdout}\n{stderr}");
    assert!(!stderr.contains("sent nothing"), "{stderr}");
    let (scans, entries, _, _) = counts(&pool).await;
    assert_eq!(scans, 1);
    let local = cachelens::collect::scan_report(&corpus_read_only("h100-jit-3.6.0").join("triton-cache"), "x").unwrap();
    assert_eq!(entries as usize, local.entries.len(), "the whole scan");
}

/// A commit whose ingest waits longer than the client's read timeout (every ingest slot taken
/// for 12 s, as by other machines' uploads): the server answers 202 meanwhile and the client asks
/// again until the scan is stored, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_commit_is_asked_again_not_timed_out() {
    let (_d, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let token = cachelens::db::tokens::create(&store, "node-1").await.unwrap();
    let hold = |st: AppState| {
        let n = st.upload_slots.available_permits() as u32;
        let busy = st.upload_slots.clone().try_acquire_many_owned(n).unwrap();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(12)).await;
            drop(busy);
        });
    };
    let url = slow_server(AppState::new(pool.clone(), Config::default()), hold).await;
    let (ok, stdout, stderr) = run(&url, &token, &["--read-timeout", "5s", "--retries", "1"]).await;
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stderr.contains("the server is storing the scan"), "{stderr}");
    assert_eq!(counts(&pool).await.0, 1, "stored once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_against_a_plain_http_server_fails_at_once() {
    let (_d, pool) = fresh_db().await;
    let srv_url = slow_server(AppState::new(pool, Config::default()), |_| {}).await;
    let url = srv_url.replace("http://", "https://");
    let (ok, stdout, stderr) = run(&url, "t", &["--retries", "6"]).await;
    assert!(!ok, "{stdout}");
    assert!(stderr.contains(&format!("answers plain HTTP, not https: use {srv_url}")), "{stderr}");
    assert!(!stderr.contains(" (at "), "no retry: {stderr}");
}

/// Two real processes on one root: while the first is at work (uploading to a server that never
/// answers), a second scan of that root to the same server stops at once with exit 3, saying who
/// holds it; with --wait-lock it waits that long first. Into another destination it goes on. The
/// lock file is in cachelens' data dir, not in the cache, and is free once the first is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_scan_of_a_root_stops_while_one_runs() {
    let data = tempfile::TempDir::new().unwrap();
    let cache = corpus_read_only("h100-jit-3.6.0").join("triton-cache");
    let url = silent_listener();
    let scan = |extra: &[&str]| {
        let mut cmd = tokio::process::Command::new(bin());
        cmd.arg("scan").arg(&cache).args(["--machine", "node-1", "--quiet"]).args(extra);
        cmd.env("XDG_DATA_HOME", data.path()).env_remove("CACHELENS_DB").env("CACHELENS_UPLOAD_BACKOFF_MS", "100");
        cmd.kill_on_drop(true);
        cmd
    };
    let upload = ["--server", &url, "--token", "t", "--retries", "1"];
    let mut first = scan(&[&upload[..], &["--read-timeout", "10m"]].concat()).spawn().unwrap();
    let pid = first.id().unwrap();
    let locks = data.path().join("cachelens/locks");
    let held = format!("pid {pid},");
    let t0 = std::time::Instant::now();
    while !std::fs::read_dir(&locks)
        .is_ok_and(|d| d.flatten().any(|f| std::fs::read_to_string(f.path()).is_ok_and(|s| s.starts_with(&held))))
    {
        assert!(t0.elapsed() < HANG, "the first scan never took its lock");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = |o: std::process::Output| (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned(), o.stdout);
    let (code, stderr, stdout) = out(scan(&upload).output().await.unwrap());
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("is being scanned by another cachelens scan (pid "), "{stderr}");
    assert!(stderr.contains(&held) && stderr.contains("--wait-lock"), "{stderr}");
    let stdout = String::from_utf8_lossy(&stdout);
    assert!(!stdout.contains(" entries"), "nothing scanned: {stdout}");
    let (code, stderr, _) = out(scan(&[&upload[..], &["--wait-lock", "1s"]].concat()).output().await.unwrap());
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("(waited 1 s)"), "{stderr}");
    // another destination: a local database
    let (_other, db) = fresh_db_at().await;
    let (code, stderr, _) = out(scan(&["--db", db.to_str().unwrap()]).output().await.unwrap());
    assert_eq!(code, Some(0), "{stderr}");
    // nothing of the lock in the cache
    let in_cache = std::process::Command::new("find").arg(&cache).args(["-name", "*.lock"]).output().unwrap();
    assert!(in_cache.stdout.is_empty(), "{}", String::from_utf8_lossy(&in_cache.stdout));
    // killed (as kill -9 would), the first scan's lock is free: the next one runs (and fails
    // on the silent server, exit 1, not 3)
    first.kill().await.unwrap();
    let (code, stderr, _) =
        out(scan(&[&upload[..], &["--read-timeout", "1s", "--wait-lock", "30s"]].concat()).output().await.unwrap());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("sent nothing"), "{stderr}");
}
