//! The upload client behind `cachelens scan PATH --server URL --token T`.
//!
//! It first asks the server how far it has read this machine's hook event files and scans
//! events from there on (an upload carries only new lines, and at most [`MAX_EVENT_BYTES`]).
//! It asks the server which IR blobs it lacks (`POST /api/v1/blobs/missing`), keeps only those
//! in the report, gzips the report once and POSTs it to `/api/v1/scans`. Connection errors, 5xx
//! and 429 are retried with exponential backoff and jitter; other 4xx are final. Every retry
//! sends the very same bytes, hence the same `client_id`: the server stores the scan once.

use crate::model::ScanReport;
use crate::model::{MissingRequest, MissingResponse, UploadResponse};
use anyhow::Context;
use std::io::Write;
use std::time::Duration;

/// How an upload went.
#[derive(Debug)]
pub struct Uploaded {
    pub response: UploadResponse,
    /// Gzipped bytes of the report as sent.
    pub body_bytes: usize,
    /// IR blobs sent / referenced by the report.
    pub blobs_sent: usize,
    pub blobs_total: usize,
    /// Tries the POST of the report took.
    pub tries: u32,
    /// Hook event lines the report carried.
    pub events_sent: usize,
}

/// Retry policy: `tries` attempts in all, waiting `base`·2ⁿ (capped at 30 s, ±50% jitter).
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub tries: u32,
    pub base: Duration,
}

impl Retry {
    /// `tries` attempts; the base delay is 500 ms, or `$CACHELENS_UPLOAD_BACKOFF_MS`.
    pub fn new(tries: u32) -> Retry {
        let ms = std::env::var("CACHELENS_UPLOAD_BACKOFF_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
        Retry { tries: tries.max(1), base: Duration::from_millis(ms) }
    }

    fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base.saturating_mul(1 << attempt.min(16)).min(Duration::from_secs(30));
        exp.mul_f64(0.5 + rand::random::<f64>())
    }
}

/// Install rustls' ring crypto provider (once per process), so https URLs work.
pub fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means some provider is already installed: fine too.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An HTTP client for talking to a cachelens server.
pub fn client() -> anyhow::Result<reqwest::Client> {
    install_crypto();
    Ok(reqwest::Client::builder()
        .user_agent(concat!("cachelens/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(15))
        .timeout(Duration::from_secs(900))
        // A POST may wait long for its answer (POST_TIMEOUT): keepalive probes tell a dead
        // server from a busy one meanwhile.
        .tcp_keepalive(Duration::from_secs(30))
        .build()?)
}

/// One failed try: whether trying again may help, and why it failed.
enum Failure {
    Retry(String),
    /// 503 with Retry-After: the server is busy, not failing.
    Busy(String, Duration),
    Final(String),
}

/// Longest a client keeps waiting, in all, on a server that answers 503 (busy: its upload
/// queue is full) with Retry-After. Those answers do not use up [`Retry`]'s tries: 50 nodes
/// uploading at once into a queue of fewer places is normal load, not a failure.
const BUSY_WAIT: Duration = Duration::from_secs(3600);

/// Longest one POST may take, the server's queue included: it answers once the scan is
/// ingested, after every upload queued ahead of it (tens of seconds each for 50,000 entries).
const POST_TIMEOUT: Duration = Duration::from_secs(7200);

/// POST an already gzipped body (a scan report, a `blobs/missing` request) to `url` with the
/// token, as [`upload_report`] does: retries as [`Retry`] says, waits on a busy server.
/// Returns (status, answer, tries).
pub async fn post_gzipped(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    body: &[u8],
    retry: Retry,
) -> anyhow::Result<(reqwest::StatusCode, String, u32)> {
    let mut last = String::new();
    let (mut attempt, mut tries, mut busy) = (0u32, 0u32, Duration::ZERO);
    while attempt < retry.tries {
        tries += 1;
        match try_post(http, url, token, body).await {
            Ok((status, text)) => return Ok((status, text, tries)),
            Err(Failure::Final(e)) => anyhow::bail!("{e}"),
            Err(Failure::Busy(e, after)) if busy + after <= BUSY_WAIT => {
                // Retry-After, give or take a quarter (50 nodes turned away together do not
                // all come back in the same second).
                let d = after.mul_f64(0.75 + rand::random::<f64>() / 2.0);
                eprintln!("upload: {}; the server is busy, retrying in {:.0} s", crate::fmt::term(&e), d.as_secs_f64());
                busy += d;
                tokio::time::sleep(d).await;
            }
            Err(Failure::Retry(e) | Failure::Busy(e, _)) => {
                last = e;
                attempt += 1;
                if attempt < retry.tries {
                    let d = retry.delay(attempt - 1);
                    let why = crate::fmt::term(&last);
                    eprintln!("upload: {why}; retrying in {:.1} s ({}/{})", d.as_secs_f64(), attempt + 1, retry.tries);
                    tokio::time::sleep(d).await;
                }
            }
        }
    }
    anyhow::bail!("gave up after {} tries: {last}", retry.tries)
}

async fn try_post(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    body: &[u8],
) -> Result<(reqwest::StatusCode, String), Failure> {
    let resp = http
        .post(url)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::CONTENT_ENCODING, "gzip")
        .timeout(POST_TIMEOUT)
        .body(body.to_vec())
        .send()
        .await
        .map_err(|e| Failure::Retry(format!("{url}: {}", error_chain(&e))))?;
    let status = resp.status();
    let after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s.clamp(1, 300)));
    let text =
        resp.text().await.map_err(|e| Failure::Retry(format!("{url}: reading the answer: {}", error_chain(&e))))?;
    if status.is_success() {
        return Ok((status, text));
    }
    let msg = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| text.chars().take(200).collect());
    let msg = format!("server answered {status}: {msg}");
    match after {
        Some(after) if status == reqwest::StatusCode::SERVICE_UNAVAILABLE => Err(Failure::Busy(msg, after)),
        _ if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS => Err(Failure::Retry(msg)),
        _ => Err(Failure::Final(msg)),
    }
}

/// `reqwest` errors say little at the top level: join the causes.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

fn gzip(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::fast());
    enc.write_all(bytes)?;
    Ok(enc.finish()?)
}

/// What the server has of this machine's hook event files, as the scanner's marks, and the
/// most event bytes to put in one upload. Asked through `blobs/missing` with no blobs; a server
/// that does not say (an older one) gets every event line, which it dedupes.
pub async fn server_event_marks(server: &str, token: &str, retry: Retry) -> anyhow::Result<crate::scan::Previous> {
    let http = client()?;
    let base = server.trim_end_matches('/');
    let body = gzip(&serde_json::to_vec(&MissingRequest { sha256: vec![] })?)?;
    let (_, text, _) = post_gzipped(&http, &format!("{base}/api/v1/blobs/missing"), token, &body, retry).await?;
    let r: MissingResponse = serde_json::from_str(&text).context("server's answer to blobs/missing")?;
    // Event lines become JSON a little larger than themselves, next to the entries: a quarter
    // of the server's limit leaves room; the rest goes with the next upload.
    let max = r.max_upload_bytes.map_or(MAX_EVENT_BYTES, |m| (m / 4).clamp(64 << 10, MAX_EVENT_BYTES));
    Ok(crate::scan::Previous {
        event_marks: r.event_files.into_iter().map(|m| (m.path, (m.inode_sig, m.offset))).collect(),
        max_event_bytes: Some(max),
        ..Default::default()
    })
}

/// Most hook event bytes one upload carries (two full 64 MiB event files would not fit the
/// server's limit and would be refused on every try).
pub const MAX_EVENT_BYTES: u64 = 32 << 20;

/// Scan `root` and upload it: hook events only from where the server got to.
pub async fn scan_and_upload(
    server: &str,
    token: &str,
    root: &std::path::Path,
    machine: &str,
    retry: Retry,
) -> anyhow::Result<Uploaded> {
    scan_and_upload_beside(server, token, root, machine, retry, &[]).await
}

/// [`scan_and_upload`], the report carrying what sits beside the root ([`crate::model::ToolSize`]).
pub async fn scan_and_upload_beside(
    server: &str,
    token: &str,
    root: &std::path::Path,
    machine: &str,
    retry: Retry,
    beside: &[crate::model::ToolSize],
) -> anyhow::Result<Uploaded> {
    let prev = server_event_marks(server, token, retry).await?;
    let (root, m) = (root.to_path_buf(), machine.to_string());
    let mut report = tokio::task::spawn_blocking(move || crate::collect::scan_report_from(&root, &m, &prev)).await??;
    report.beside = beside.to_vec();
    upload_report(server, token, report, retry).await
}

/// Upload one report to `server` (base URL, e.g. `https://cachelens.example.org`).
pub async fn upload_report(
    server: &str,
    token: &str,
    mut report: ScanReport,
    retry: Retry,
) -> anyhow::Result<Uploaded> {
    let http = client()?;
    let base = server.trim_end_matches('/');
    let blobs_total = report.blobs.len();
    if blobs_total > 0 {
        let shas: Vec<String> = report.blobs.keys().cloned().collect();
        let body = gzip(&serde_json::to_vec(&MissingRequest { sha256: shas })?)?;
        let (_, text, _) = post_gzipped(&http, &format!("{base}/api/v1/blobs/missing"), token, &body, retry).await?;
        let missing: MissingResponse = serde_json::from_str(&text).context("server's answer to blobs/missing")?;
        let missing: std::collections::HashSet<String> = missing.missing.into_iter().collect();
        report.blobs.retain(|sha, _| missing.contains(sha));
    }
    let blobs_sent = report.blobs.len();
    let events_sent = report.events.len();
    let body = tokio::task::spawn_blocking(move || gzip(&serde_json::to_vec(&report)?)).await??;
    let (_, text, tries) = post_gzipped(&http, &format!("{base}/api/v1/scans"), token, &body, retry).await?;
    let response: UploadResponse = serde_json::from_str(&text).context("server's answer to the upload")?;
    Ok(Uploaded { response, body_bytes: body.len(), blobs_sent, blobs_total, tries, events_sent })
}
