//! The upload queue (issue 14 item 6): a body is read as it arrives, whatever is ingesting
//! ahead of it, and a full queue answers 503 with Retry-After, which the real client waits out.
//! Real servers on 127.0.0.1 (`app(state)` in this process, so the test can hold the ingest
//! slots the way a long ingest does), a raw TCP client, the real upload client.

use crate::common::*;
use cachelens::web::{AppState, Config};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `app(state)` on 127.0.0.1:0; its address.
async fn serve(state: AppState) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = cachelens::web::app(state);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Headers of a gzip upload of `len` bytes.
fn upload_head(token: &str, len: usize) -> String {
    format!(
        "POST /api/v1/scans HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Encoding: gzip\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    )
}

/// Send a whole upload of `len` junk bytes; fails if the server does not take it all within
/// `within` (a body left unread stalls the write once the socket buffers are full).
async fn send_body(addr: std::net::SocketAddr, token: &str, len: usize, within: Duration) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(upload_head(token, len).as_bytes()).await.unwrap();
    let junk = vec![b'x'; 1 << 20];
    let write = async {
        for _ in 0..len >> 20 {
            s.write_all(&junk).await.unwrap();
        }
    };
    tokio::time::timeout(within, write)
        .await
        .unwrap_or_else(|_| panic!("the server did not read a {} MiB body within {within:?}", len >> 20));
    s
}

/// The status line and body of the answer on `s`.
async fn answer(s: &mut tokio::net::TcpStream) -> String {
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_is_read_while_the_uploads_ahead_ingest() {
    let (_d, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let token = cachelens::db::tokens::create(&store, "node-1").await.unwrap();
    let state = AppState::new(pool, Config::default());
    // Every ingest slot taken, as by a long ingest of the uploads ahead.
    let n = state.upload_slots.available_permits() as u32;
    let busy = state.upload_slots.clone().acquire_many_owned(n).await.unwrap();
    let addr = serve(state).await;
    // 64 MiB: far more than loopback's socket buffers hold, so the write completes only if the
    // server reads the body now.
    let mut s = send_body(addr, &token, 64 << 20, Duration::from_secs(60)).await;
    // It is queued, not answered, while the slots are held...
    let mut peek = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), s.peek(&mut peek)).await;
    assert!(early.is_err(), "answered before its turn");
    // ...and decoded once its turn comes (junk: a clear 400).
    drop(busy);
    let a =
        tokio::time::timeout(Duration::from_secs(30), answer(&mut s)).await.expect("no answer after the slots freed");
    assert!(a.starts_with("HTTP/1.1 400"), "{a}");
    assert!(a.contains("not valid gzip"), "{a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_503_and_the_client_waits_its_turn() {
    let (_d, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let token = cachelens::db::tokens::create(&store, "node-1").await.unwrap();
    let t2 = cachelens::db::tokens::create(&store, "node-2").await.unwrap();
    let state = AppState::new(pool.clone(), Config { upload_queue: 1, ..Config::default() });
    let n = state.upload_slots.available_permits() as u32;
    let busy = state.upload_slots.clone().acquire_many_owned(n).await.unwrap();
    let queue = state.upload_queue.clone();
    let addr = serve(state).await;
    let url = format!("http://{addr}");
    // The one place in the queue: taken by a body waiting for its turn. Its bytes are in the
    // socket's buffers once written, but the place is the server's to take after it has looked
    // up the token: wait for that, or the next upload may take it first (on a loaded
    // PostgreSQL its token lookup can finish first) and wait for a slot this test holds.
    let mut first = send_body(addr, &token, 1 << 20, Duration::from_secs(30)).await;
    let taken = async {
        while queue.available_permits() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), taken)
        .await
        .expect("the first upload never took its place in the queue");
    // The next upload is turned away at once, before its body is read, with Retry-After.
    let resp = cachelens::upload::client()
        .unwrap()
        .post(format!("{url}/api/v1/scans"))
        .bearer_auth(&t2)
        .header("content-encoding", "gzip")
        .body(vec![0u8; 1 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers()["retry-after"], "10");
    let err: serde_json::Value = resp.json().await.unwrap();
    assert!(err["error"].as_str().unwrap().contains("receiving 1 uploads already"), "{err}");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM scans").await, 0);
    // The real client, turned away too, waits out Retry-After (not one of its tries) and is
    // stored once the queue has room: the first upload's turn comes a second from now.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(busy);
    });
    let (_t, dir) = unpacked("mi300-upgrade-1-triton-3.6.0");
    let root = dir.join("triton-cache");
    let report = tokio::task::spawn_blocking(move || {
        cachelens::collect::scan_report_from(&root, "node-2", &Default::default()).unwrap()
    })
    .await
    .unwrap();
    let entries = report.entries.len() as i64;
    let up = cachelens::upload::upload_report(&url, &t2, report, cachelens::upload::Retry::new(1)).await.unwrap();
    assert!(up.response.created);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM scans").await, 1);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM entry_rows").await, entries);
    assert!(answer(&mut first).await.starts_with("HTTP/1.1 400"));
}
