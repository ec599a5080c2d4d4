//! The upload client behind `cachelens scan PATH --server URL --token T`.
//!
//! It first asks the server how far it has read this machine's hook event files and scans
//! events from there on (an upload carries only new lines, and at most [`MAX_EVENT_BYTES`]).
//! Then it streams the scan as a staged upload (`/api/v1/uploads`, [`Stager`]): the server first
//! says what it holds of this root (`previous`: each entry's signature and dir stamp), so the
//! scanner skips what is unchanged as a local re-scan does; entries go out in parts of about
//! [`PART_TARGET`] as the scanner reads them: each part first asks which entries' facts the
//! server lacks (`facts`): those go whole, the others as `present` records (this machine's own
//! part of the entry: dir, signature, compile time, stamp); then its IR blobs that the server
//! lacks (`POST /api/v1/blobs/missing`), then the part; a commit makes them one scan.
//! Memory stays one part whatever the cache's size. A server without staged uploads (404) gets
//! the whole report in one POST to `/api/v1/scans`, as before. Connection errors, 5xx and 429
//! are retried with exponential backoff and jitter, each request on its own (a cut upload goes
//! on from the part it was sending; the server keeps what it acknowledged); other 4xx are
//! final. Every retry sends the very same bytes under the same `client_id`: the server stores
//! the scan once.

use crate::model::{
    Entry, FactsAnswer, FactsRequest, MissingRequest, MissingResponse, Present, PreviousAnswer, ProofsAnswer,
    ProofsRequest,
};
use crate::model::{ScanPart, UploadResponse};
use crate::model::{ScanReport, UPLOAD_FORMAT, UploadBegin, UploadCommit, UploadSession};
use anyhow::Context;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

/// How an upload went.
#[derive(Debug)]
pub struct Uploaded {
    pub response: UploadResponse,
    /// Gzipped bytes of the report as sent.
    pub body_bytes: usize,
    /// IR blobs sent / referenced by the report / not sent because the server held them and
    /// this node proved it holds them too (`proofs`).
    pub blobs_sent: usize,
    pub blobs_total: usize,
    pub blobs_proven: usize,
    /// Tries the POST of the report took.
    pub tries: u32,
    /// Hook event lines the report carried.
    pub events_sent: usize,
    /// Entries sent whole, and entries whose facts the server held (sent as `present`).
    pub entries_sent: usize,
    pub present_sent: usize,
}

/// Proofs per `proofs` request (the server takes up to 20,000).
const PROOFS_PER_REQUEST: usize = 5_000;

/// How patient the client is: `tries` attempts per request, waiting `base`·2ⁿ between them
/// (capped at 30 s, ±50% jitter); `connect` for a connection; `read` for the server's silence
/// (no byte sent or received for this long fails the try, however long the request as a whole
/// takes while bytes flow); and no new try, nor any wait, past `deadline` (the bound on an
/// upload as a whole: its requests, their tries and a busy server's waits together).
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub tries: u32,
    pub base: Duration,
    pub connect: Duration,
    pub read: Duration,
    pub deadline: Option<std::time::Instant>,
}

/// Default connect timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default read timeout: longer than the server is ever silent on purpose (a commit answers 202
/// after 10 s, a part waits 20 s at most for its turn), yet a hung server is told in minutes.
pub const READ_TIMEOUT: Duration = Duration::from_secs(120);

impl Retry {
    /// `tries` attempts; the base delay is 500 ms, or `$CACHELENS_UPLOAD_BACKOFF_MS`; the
    /// default timeouts; no deadline.
    pub fn new(tries: u32) -> Retry {
        let ms = std::env::var("CACHELENS_UPLOAD_BACKOFF_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(500);
        Retry {
            tries: tries.max(1),
            base: Duration::from_millis(ms),
            connect: CONNECT_TIMEOUT,
            read: READ_TIMEOUT,
            deadline: None,
        }
    }

    fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base.saturating_mul(1 << attempt.min(16)).min(Duration::from_secs(30));
        exp.mul_f64(0.5 + rand::random::<f64>())
    }

    /// Time left before the deadline (`None`: no deadline).
    fn left(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()))
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

/// The `--server` URL checked before anything is scanned: an http or https URL of the server's
/// base (no path, query or fragment), returned without a trailing `/`. A mistyped one fails at
/// once with what is wrong, instead of as six failed tries after the scan.
pub fn server_base(s: &str) -> anyhow::Result<String> {
    let hint = "give the server's base URL, e.g. http://cachelens.example.org:8600";
    let u = reqwest::Url::parse(s).map_err(|e| anyhow::anyhow!("--server {s:?} is not a URL ({e}): {hint}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        let no_scheme = if s.contains("://") { String::new() } else { format!(" (no scheme? write http://{s})") };
        anyhow::bail!("--server {s:?}: the scheme {:?} is not http or https{no_scheme}", u.scheme());
    }
    if u.host_str().is_none_or(str::is_empty) {
        anyhow::bail!("--server {s:?} names no host: {hint}");
    }
    if !matches!(u.path(), "" | "/") || u.query().is_some() || u.fragment().is_some() {
        let base = u.origin().ascii_serialization();
        let what = if matches!(u.path(), "" | "/") {
            "a query or fragment".to_string()
        } else {
            format!("the path {:?}", u.path())
        };
        anyhow::bail!(
            "--server takes the server's base URL, not a page or an API path: {s:?} has {what}; \
             uploads go to the base URL ({base}) with a machine token"
        );
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// An HTTP client for talking to a cachelens server, with the default connect timeout.
pub fn client() -> anyhow::Result<reqwest::Client> {
    client_for(&Retry::new(1))
}

/// An HTTP client that connects within `retry.connect`. The read timeout is [`send_gzipped`]'s
/// own: it counts from the last byte either way, reqwest's from the request's start.
pub fn client_for(retry: &Retry) -> anyhow::Result<reqwest::Client> {
    install_crypto();
    Ok(reqwest::Client::builder()
        .user_agent(concat!("cachelens/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(retry.connect)
        .tcp_keepalive(Duration::from_secs(30))
        .build()?)
}

/// One failed try: whether trying again may help, and why it failed.
enum Failure {
    Retry(String),
    /// 503 with Retry-After: the server is busy, not failing.
    Busy(String, Duration),
    /// 202 with Retry-After: the server is at work on it (a commit ingesting); ask again.
    Pending(Duration),
    Final(String),
}

/// Longest a client keeps waiting, in all, on a server that answers 503 (busy: its upload
/// queue is full) with Retry-After. Those answers do not use up [`Retry`]'s tries: 50 nodes
/// uploading at once into a queue of fewer places is normal load, not a failure.
const BUSY_WAIT: Duration = Duration::from_secs(3600);

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
    send_gzipped(http, reqwest::Method::POST, url, token, body, retry).await
}

/// [`post_gzipped`] with another method (a staged upload PUTs its parts and blobs). Each
/// failed try says on stderr what failed and when the next one is; none starts, and no wait
/// goes, past the retry's deadline.
pub async fn send_gzipped(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: &str,
    body: &[u8],
    retry: Retry,
) -> anyhow::Result<(reqwest::StatusCode, String, u32)> {
    let body = hyper::body::Bytes::copy_from_slice(body);
    let mut last = String::new();
    let (mut attempt, mut tries, mut busy, mut told) = (0u32, 0u32, Duration::ZERO, false);
    while attempt < retry.tries {
        tries += 1;
        let sent = try_send(http, method.clone(), url, token, body.clone(), retry.read);
        let r = match retry.left() {
            Some(left) => tokio::time::timeout(left, sent)
                .await
                .unwrap_or_else(|_| Err(Failure::Final(format!("{url}: no answer before the upload's time limit")))),
            None => sent.await,
        };
        let wait = match r {
            Ok((status, text)) => return Ok((status, text, tries)),
            Err(Failure::Final(e)) => anyhow::bail!("{e}"),
            Err(Failure::Pending(after)) => {
                if !told {
                    eprintln!("upload: the server is storing the scan; asking again every {} s", after.as_secs());
                    told = true;
                }
                tries -= 1; // asking again is no new try
                after
            }
            Err(Failure::Busy(e, after)) if busy + after <= BUSY_WAIT => {
                // Retry-After, give or take a quarter (50 nodes turned away together do not
                // all come back in the same second).
                let d = after.mul_f64(0.75 + rand::random::<f64>() / 2.0);
                eprintln!("upload: {}; the server is busy, retrying {}", crate::fmt::term(&e), when(d));
                busy += d;
                d
            }
            Err(Failure::Retry(e) | Failure::Busy(e, _)) => {
                last = e;
                attempt += 1;
                if attempt >= retry.tries {
                    break;
                }
                let d = retry.delay(attempt - 1);
                let why = crate::fmt::term(&last);
                eprintln!("upload: {why}; retrying, try {}/{} {}", attempt + 1, retry.tries, when(d));
                d
            }
        };
        if retry.left().is_some_and(|left| left < wait) {
            anyhow::bail!("gave up: the upload's time limit comes before the next try (last: {last})");
        }
        tokio::time::sleep(wait).await;
    }
    anyhow::bail!("gave up after {} tries: {last}", retry.tries)
}

/// "in 2.5 s (at 14:03:07)": when the next try is.
fn when(d: Duration) -> String {
    let at = chrono::Local::now() + d;
    format!("in {:.1} s (at {})", d.as_secs_f64(), at.format("%H:%M:%S"))
}

/// When a request last moved a byte, either way: its body counts what it hands to the
/// connection, the answer what comes back.
#[derive(Clone)]
struct Moved(std::sync::Arc<std::sync::atomic::AtomicU64>, std::time::Instant);

impl Moved {
    fn new() -> Moved {
        Moved(Default::default(), std::time::Instant::now())
    }

    fn now(&self) {
        let ms = self.1.elapsed().as_millis() as u64;
        self.0.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    fn silent_for(&self) -> Duration {
        let last = Duration::from_millis(self.0.load(std::sync::atomic::Ordering::Relaxed));
        self.1.elapsed().saturating_sub(last)
    }

    /// `fut`, unless the connection stays silent for `read` first.
    async fn within<T>(&self, read: Duration, fut: impl std::future::Future<Output = T>) -> Result<T, Duration> {
        tokio::pin!(fut);
        loop {
            let left = read.saturating_sub(self.silent_for());
            if left.is_zero() {
                return Err(read);
            }
            if let Ok(v) = tokio::time::timeout(left, &mut fut).await {
                return Ok(v);
            }
        }
    }
}

/// A request body handed over in chunks, each one noting that bytes moved.
struct Sending {
    rest: hyper::body::Bytes,
    moved: Moved,
}

impl hyper::body::Body for Sending {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        if self.rest.is_empty() {
            return std::task::Poll::Ready(None);
        }
        self.moved.now();
        let n = self.rest.len().min(64 << 10);
        let chunk = self.rest.split_to(n);
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.rest.len() as u64)
    }
}

async fn try_send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: &str,
    body: hyper::body::Bytes,
    read: Duration,
) -> Result<(reqwest::StatusCode, String), Failure> {
    let moved = Moved::new();
    let silent = |what: &str, d: Duration| {
        Failure::Retry(format!("{url}: {what}: the server sent nothing for {} s (--read-timeout)", d.as_secs_f64()))
    };
    let sending = http
        .request(method, url)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::CONTENT_ENCODING, "gzip")
        // a commit answers 202 while it ingests, rather than keep the connection silent
        .header("prefer", format!("respond-async, wait={}", (read / 2).as_secs().max(1)))
        .body(reqwest::Body::wrap(Sending { rest: body, moved: moved.clone() }))
        .send();
    let mut resp = moved
        .within(read, sending)
        .await
        .map_err(|d| silent("waiting for the answer", d))?
        .map_err(|e| send_failed(url, &e))?;
    let status = resp.status();
    let after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s.clamp(1, 300)));
    let mut bytes = vec![];
    loop {
        moved.now();
        match moved.within(read, resp.chunk()).await {
            Err(d) => return Err(silent("reading the answer", d)),
            Ok(Err(e)) => return Err(Failure::Retry(format!("{url}: reading the answer: {}", error_chain(&e)))),
            Ok(Ok(Some(c))) => bytes.extend_from_slice(&c),
            Ok(Ok(None)) => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if status == reqwest::StatusCode::ACCEPTED
        && let Some(after) = after
    {
        return Err(Failure::Pending(after));
    }
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

/// A request that got no answer: a wrong scheme is final (no try would go otherwise), the
/// rest may pass.
fn send_failed(url: &str, e: &reqwest::Error) -> Failure {
    let chain = error_chain(e);
    match url.split_once("://") {
        Some(("https", rest)) if chain.contains("InvalidContentType") => {
            Failure::Final(format!("{url}: the server answers plain HTTP, not https: use http://{rest}"))
        }
        Some(("http", rest)) if chain.contains("invalid HTTP version") => {
            Failure::Final(format!("{url}: the server does not answer plain HTTP: https://{rest}?"))
        }
        _ => Failure::Retry(format!("{url}: {chain}")),
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

/// Gzip (fast level): every upload body, and what the server stages of one.
pub fn gzip(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::fast());
    enc.write_all(bytes)?;
    Ok(enc.finish()?)
}

/// What the server has of this machine's hook event files, as the scanner's marks, and the
/// most event bytes to put in one upload. Asked through `blobs/missing` with no blobs; a server
/// that does not say (an older one) gets every event line, which it dedupes.
pub async fn server_event_marks(server: &str, token: &str, retry: Retry) -> anyhow::Result<crate::scan::Previous> {
    let http = client_for(&retry)?;
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
    scan_and_upload_opts(server, token, root, machine, retry, Default::default()).await
}

/// [`scan_and_upload`] as `opts` say (whose hook events, a time budget, a progress count, and
/// what sits beside the root). The scan is streamed: the scanner's entries go out in parts
/// while it reads on.
pub async fn scan_and_upload_opts(
    server: &str,
    token: &str,
    root: &std::path::Path,
    machine: &str,
    retry: Retry,
    opts: crate::collect::Opts,
) -> anyhow::Result<Uploaded> {
    let mut prev = server_event_marks(server, token, retry).await?;
    prev.deadline = opts.deadline(std::time::Instant::now());
    prev.full = opts.full; // `--full`: the server's stamps are not trusted either
    prev.progress = opts.progress;
    prev.hosts = opts.hosts.clone();
    let beside = opts.beside;
    let root = crate::collect::resolve_root(root)?;
    let hazards = crate::collect::read_hazards(root.clone(), opts.hosts).await;
    let started = std::time::Instant::now();
    let scanned_at = crate::db::now_ms();
    let client_id = crate::collect::new_client_id();
    let root_s = root.display().to_string();
    let Some(mut st) = Stager::begin(server, token, retry, machine, &client_id, &root_s, scanned_at).await? else {
        // A server from before staged uploads: the whole report in one body.
        let (root, m) = (root.clone(), machine.to_string());
        let mut report =
            tokio::task::spawn_blocking(move || crate::collect::scan_report_from(&root, &m, &prev)).await??;
        report.beside = beside;
        report.hazards = hazards;
        return upload_whole(server, token, report, retry).await;
    };
    if let Some(held) = st.previous().await? {
        for (dir, sig, stamp) in held.entries {
            if let Some(stamp) = stamp {
                prev.stamps.insert(dir.clone(), stamp);
            }
            prev.sigs.insert(dir, sig);
        }
    }
    // The scanner's threads hand entries over a short channel: a slow server slows the scan
    // down rather than filling memory.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Entry>(32);
    let scanner = tokio::task::spawn_blocking(move || {
        crate::scan::scan(&root, &prev, crate::collect::threads(), |e| {
            let _ = tx.blocking_send(e);
        })
    });
    let mut sent = Ok(());
    while let Some(e) = rx.recv().await {
        if let Err(err) = st.entry(e).await {
            sent = Err(err);
            break;
        }
    }
    drop(rx); // a failed send stops the scanner at its next entry
    let tail = scanner.await?;
    sent?;
    st.records(tail.unchanged, tail.stamps, tail.skipped, tail.best_configs, tail.events, tail.inductor_autotune)
        .await?;
    st.commit(started.elapsed().as_millis() as i64, tail.event_files, beside, hazards).await
}

/// Upload one whole report to `server` (base URL, e.g. `https://cachelens.example.org`), as a
/// staged upload in parts (or in one body to a server without staged uploads).
pub async fn upload_report(server: &str, token: &str, report: ScanReport, retry: Retry) -> anyhow::Result<Uploaded> {
    let ScanReport { client_id, machine, root, scanned_at, .. } = &report;
    let Some(mut st) = Stager::begin(server, token, retry, machine, client_id, root, *scanned_at).await? else {
        return upload_whole(server, token, report, retry).await;
    };
    let ScanReport {
        entries, mut blobs, unchanged, skipped, best_configs, events, event_files, beside, hazards, ..
    } = report;
    for mut e in entries {
        for a in &mut e.artifacts {
            a.text = blobs.remove(&a.sha256);
        }
        st.entry(e).await?;
    }
    st.records(unchanged, vec![], skipped, best_configs, events, report.inductor_autotune).await?;
    st.commit(report.duration_ms, event_files, beside, hazards).await
}

/// A part is sent once its records and IR text reach about this many bytes.
pub const PART_TARGET: usize = 4 << 20;

/// IR text the client holds for a part before it settles it (asks which facts the server
/// lacks, sends the texts it lacks): each settling is a request, ~100 entries' text a request
/// at 4 MiB, ~400 at this.
pub const HELD_TEXT: usize = 16 << 20;

/// A staged upload in progress: records gathered into the next part, sent when it is full.
pub struct Stager {
    http: reqwest::Client,
    base: String,
    token: String,
    retry: Retry,
    id: i64,
    /// Parts the server holds already (a resumed upload), and the next part's number.
    held: std::collections::BTreeSet<i64>,
    next: i64,
    part: ScanPart,
    /// What closes the part: its entries' records counted whole, whether they go whole or as
    /// `present` (a function of the scan alone, so a resumed upload's parts are the first
    /// attempt's, whatever the server answered about facts), and its other records.
    part_bytes: usize,
    /// IR text held for the part (pending entries' and `texts`): past [`HELD_TEXT`] the pending
    /// entries are settled and the texts sent, without closing the part.
    held_bytes: usize,
    /// IR text of the part's entries not sent yet, by sha256 (each sha256 once per upload).
    texts: BTreeMap<String, String>,
    /// Entries of the next part that may go as `present` records (their facts are their
    /// files'), held whole until the server says which facts it lacks.
    pending: Vec<Entry>,
    /// The server takes `present` records and hands back what it holds (`previous`, `facts`).
    facts: bool,
    /// The first 128 bits of each IR sha256 this upload has carried (each text goes once).
    seen: std::collections::HashSet<[u8; 16]>,
    max_blob: usize,
    /// The salt of this upload's blob proofs (`None`: an older server, texts go whole).
    salt: Option<String>,
    /// Send a part once it holds this many bytes: [`PART_TARGET`], or half the server's part
    /// limit when that is lower.
    target: usize,
    done: Option<UploadResponse>,
    stats: Uploaded,
    machine: String,
    client_id: String,
    root: String,
    scanned_at: i64,
}

impl Stager {
    /// Begin (or resume) a staged upload. `None`: the server has no staged uploads (404).
    #[allow(clippy::too_many_arguments)]
    pub async fn begin(
        server: &str,
        token: &str,
        retry: Retry,
        machine: &str,
        client_id: &str,
        root: &str,
        scanned_at: i64,
    ) -> anyhow::Result<Option<Stager>> {
        let http = client_for(&retry)?;
        let base = server.trim_end_matches('/').to_string();
        let b = UploadBegin {
            format: UPLOAD_FORMAT,
            client_id: client_id.into(),
            machine: machine.into(),
            root: root.into(),
            scanned_at,
        };
        let url = format!("{base}/api/v1/uploads");
        let (status, text, _) = match post_gzipped(&http, &url, token, &gzip(&serde_json::to_vec(&b)?)?, retry).await {
            // an older server: no such route (404, or 405 for a path it routes otherwise)
            Err(e) if [" 404 ", " 405 "].iter().any(|c| e.to_string().contains(c)) => return Ok(None),
            r => r?,
        };
        debug_assert!(status.is_success());
        let s: UploadSession = serde_json::from_str(&text).context("server's answer to the upload's begin")?;
        let done = s.scan_id.map(|scan_id| UploadResponse {
            scan_id,
            created: false,
            summary: crate::model::ScanSummary { scan_id, machine: machine.into(), ..Default::default() },
            skipped: 0,
            hit_miss: None,
        });
        Ok(Some(Stager {
            http,
            base,
            token: token.into(),
            retry,
            id: s.upload_id,
            held: s.parts.into_iter().collect(),
            next: 0,
            part: ScanPart::default(),
            part_bytes: 0,
            held_bytes: 0,
            texts: BTreeMap::new(),
            pending: vec![],
            facts: false,
            seen: Default::default(),
            max_blob: usize::try_from(s.max_blob_bytes).unwrap_or(usize::MAX),
            salt: s.salt,
            target: PART_TARGET.min(usize::try_from(s.max_part_bytes / 2).unwrap_or(usize::MAX)).max(1),
            done,
            stats: Uploaded {
                response: empty_response(),
                body_bytes: 0,
                blobs_sent: 0,
                blobs_total: 0,
                blobs_proven: 0,
                tries: 0,
                events_sent: 0,
                entries_sent: 0,
                present_sent: 0,
            },
            machine: machine.into(),
            client_id: client_id.into(),
            root: root.into(),
            scanned_at,
        }))
    }

    /// What the server holds of this upload's root (each entry's dir, signature and stamp), for
    /// the scanner to skip what is unchanged. `None` from a server without it (404): it then
    /// takes whole entries only.
    pub async fn previous(&mut self) -> anyhow::Result<Option<PreviousAnswer>> {
        let url = format!("{}/api/v1/uploads/{}/previous", self.base, self.id);
        if self.done.is_some() {
            return Ok(None);
        }
        let text = match send_gzipped(&self.http, reqwest::Method::POST, &url, &self.token, &[], self.retry).await {
            Err(e) if [" 404 ", " 405 "].iter().any(|c| e.to_string().contains(c)) => return Ok(None),
            r => r?.1,
        };
        self.facts = true;
        Ok(Some(serde_json::from_str(&text).context("server's answer to previous")?))
    }

    /// Add one entry; send the part when it is full. An entry whose facts are its files' waits
    /// for the server to say whether it holds them ([`Stager::settle`]); any other goes whole.
    /// A twin of known entries sends a part per ~4 MB of records: before, its parts closed on
    /// the IR text they would have sent, ~100 entries a part.
    pub async fn entry(&mut self, e: Entry) -> anyhow::Result<()> {
        self.part_bytes += serde_json::to_vec(&e).map_or(0, |v| v.len());
        if self.facts && e.facts_are_content() {
            self.held_bytes += e.artifacts.iter().filter_map(|a| a.text.as_ref()).map(String::len).sum::<usize>();
            self.pending.push(e);
        } else {
            self.held_bytes += self.whole(e);
        }
        if self.held_bytes >= HELD_TEXT {
            self.settle().await?;
        }
        self.flush_if_full().await
    }

    /// Put an entry into the part whole (its IR text moves to `texts`); returns the bytes of
    /// text it added.
    fn whole(&mut self, mut e: Entry) -> usize {
        let mut added = 0;
        for a in &mut e.artifacts {
            let Some(t) = a.text.take() else { continue };
            if t.len() > self.max_blob {
                let why =
                    format!("IR text over the server's limit of {} bytes: hashed, its text not sent", self.max_blob);
                self.part.skipped.push(crate::model::Skip::new(
                    format!("{}/{}", e.dir, a.name),
                    crate::model::SkipKind::TooLarge,
                    why,
                ));
            } else if self.seen.insert(sha_prefix(&a.sha256)) {
                added += t.len();
                self.texts.insert(a.sha256.clone(), t);
            }
        }
        self.stats.entries_sent += 1;
        self.part.entries.push(e);
        added
    }

    /// The pending entries into the part (as `present` records where the server holds their
    /// facts, whole where it lacks them), then the texts the part's whole entries hold that the
    /// server lacks. Nothing is asked for a part the server holds already (a resumed upload).
    async fn settle(&mut self) -> anyhow::Result<()> {
        self.held_bytes = 0;
        if self.done.is_some() || self.held.contains(&self.next) {
            (self.texts, self.pending) = Default::default();
            return Ok(());
        }
        self.settle_pending().await?;
        self.send_texts().await
    }

    /// The pending entries into the part: as `present` records where the server holds their
    /// facts, whole where it lacks them.
    async fn settle_pending(&mut self) -> anyhow::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let facts: Vec<String> = pending.iter().map(Entry::fact).collect();
        let mut ask = FactsRequest { facts: vec![], relocated: vec![] };
        for (e, f) in pending.iter().zip(&facts) {
            if e.relocated() { &mut ask.relocated } else { &mut ask.facts }.push(f.clone());
        }
        let body = gzip(&serde_json::to_vec(&ask)?)?;
        let url = format!("{}/api/v1/uploads/{}/facts", self.base, self.id);
        let text = self.send(reqwest::Method::POST, &url, body).await?;
        let answer: FactsAnswer = serde_json::from_str(&text).context("server's answer to facts")?;
        let missing: std::collections::HashSet<String> = answer.missing.into_iter().collect();
        for (e, fact) in pending.into_iter().zip(facts) {
            if missing.contains(&fact) {
                self.whole(e);
            } else {
                self.stats.present_sent += 1;
                self.part.present.push(Present::of(&e, fact));
            }
        }
        Ok(())
    }

    /// Add the scan's other records, in parts of bounded size too.
    #[allow(clippy::too_many_arguments)]
    pub async fn records(
        &mut self,
        unchanged: Vec<String>,
        stamps: Vec<(String, String)>,
        skipped: Vec<crate::model::Skip>,
        best_configs: Vec<crate::model::BestConfig>,
        events: Vec<crate::model::HookEvent>,
        inductor_autotune: Vec<crate::model::InductorAutotune>,
    ) -> anyhow::Result<()> {
        self.stats.events_sent += events.len();
        macro_rules! add {
            ($list:expr, $field:ident) => {
                for r in $list {
                    self.part_bytes += serde_json::to_vec(&r).map_or(0, |v| v.len());
                    self.part.$field.push(r);
                    self.flush_if_full().await?;
                }
            };
        }
        add!(unchanged, unchanged);
        add!(stamps, stamps);
        add!(skipped, skipped);
        add!(best_configs, best_configs);
        add!(events, events);
        add!(inductor_autotune, inductor_autotune);
        Ok(())
    }

    async fn flush_if_full(&mut self) -> anyhow::Result<()> {
        if self.part_bytes >= self.target { self.flush().await } else { Ok(()) }
    }

    /// Send the part gathered so far: first its IR blobs the server lacks, then the part.
    async fn flush(&mut self) -> anyhow::Result<()> {
        if self.part.is_empty() && self.texts.is_empty() && self.pending.is_empty() {
            return Ok(());
        }
        self.settle().await?;
        let n = self.next;
        self.next += 1;
        self.part_bytes = 0;
        let part = std::mem::take(&mut self.part);
        if self.done.is_some() || self.held.contains(&n) {
            // the server has it (a resumed or finished upload)
            return Ok(());
        }
        let url = format!("{}/api/v1/uploads/{}/parts/{n}", self.base, self.id);
        let body = gzip(&serde_json::to_vec(&part)?)?;
        self.send(reqwest::Method::PUT, &url, body).await?;
        Ok(())
    }

    /// Send the texts gathered so far that the server lacks (those it proves it holds from
    /// elsewhere stay here, [`Stager::prove`]).
    async fn send_texts(&mut self) -> anyhow::Result<()> {
        let texts = std::mem::take(&mut self.texts);
        self.stats.blobs_total += texts.len();
        if texts.is_empty() {
            return Ok(());
        }
        let shas: Vec<String> = texts.keys().cloned().collect();
        let body = gzip(&serde_json::to_vec(&MissingRequest { sha256: shas })?)?;
        let url = format!("{}/api/v1/blobs/missing", self.base);
        let (_, text, _) = post_gzipped(&self.http, &url, &self.token, &body, self.retry).await?;
        let missing: MissingResponse = serde_json::from_str(&text).context("server's answer to blobs/missing")?;
        let held = self.prove(&missing.missing, &texts).await?;
        for sha in missing.missing {
            let Some(t) = texts.get(&sha).filter(|_| !held.contains(&sha)) else { continue };
            let url = format!("{}/api/v1/uploads/{}/blobs/{sha}", self.base, self.id);
            self.send(reqwest::Method::PUT, &url, gzip(t.as_bytes())?).await?;
            self.stats.blobs_sent += 1;
        }
        Ok(())
    }

    /// Of `shas` (texts this node holds that the server may not), those the server holds from
    /// elsewhere, proven by hashing each text with the upload's salt: they need not be sent.
    async fn prove(
        &mut self,
        shas: &[String],
        texts: &BTreeMap<String, String>,
    ) -> anyhow::Result<std::collections::HashSet<String>> {
        let Some(salt) = self.salt.clone().filter(|_| !shas.is_empty()) else { return Ok(Default::default()) };
        let mut held = std::collections::HashSet::new();
        let url = format!("{}/api/v1/uploads/{}/proofs", self.base, self.id);
        for part in shas.chunks(PROOFS_PER_REQUEST) {
            let proofs = part
                .iter()
                .filter_map(|sha| Some((sha.clone(), crate::model::blob_proof(&salt, texts.get(sha)?.as_bytes()))))
                .collect();
            let body = gzip(&serde_json::to_vec(&ProofsRequest { proofs })?)?;
            let text = match self.send(reqwest::Method::POST, &url, body).await {
                // a server without proofs: every text goes
                Err(e) if [" 404 ", " 405 "].iter().any(|c| e.to_string().contains(c)) => {
                    self.salt = None;
                    return Ok(held);
                }
                r => r?,
            };
            let answer: ProofsAnswer = serde_json::from_str(&text).context("server's answer to proofs")?;
            held.extend(answer.held.into_iter().filter(|sha| part.contains(sha)));
        }
        self.stats.blobs_proven += held.len();
        Ok(held)
    }

    async fn send(&mut self, method: reqwest::Method, url: &str, body: Vec<u8>) -> anyhow::Result<String> {
        let (_, text, tries) = send_gzipped(&self.http, method, url, &self.token, &body, self.retry).await?;
        self.stats.body_bytes += body.len();
        self.stats.tries = self.stats.tries.max(tries);
        Ok(text)
    }

    /// Send the last part, then commit: the server stores every part as one scan.
    pub async fn commit(
        mut self,
        duration_ms: i64,
        event_files: Vec<crate::model::EventFileMark>,
        beside: Vec<crate::model::ToolSize>,
        hazards: Option<crate::model::Hazards>,
    ) -> anyhow::Result<Uploaded> {
        self.flush().await?;
        if let Some(done) = self.done.take() {
            return Ok(Uploaded { response: done, ..self.stats });
        }
        let c = UploadCommit { parts: self.next, duration_ms, event_files, beside, hazards };
        let url = format!("{}/api/v1/uploads/{}/commit", self.base, self.id);
        let text = match self.send(reqwest::Method::POST, &url, gzip(&serde_json::to_vec(&c)?)?).await {
            // A commit that went through but whose answer was lost: the retry finds no open
            // upload, and the upload's begin says which scan it became.
            Err(e) if e.to_string().contains(" 404 ") => {
                let again = Stager::begin(
                    &self.base,
                    &self.token,
                    self.retry,
                    &self.machine,
                    &self.client_id,
                    &self.root,
                    self.scanned_at,
                )
                .await?;
                match again.and_then(|s| s.done) {
                    Some(done) => return Ok(Uploaded { response: done, ..self.stats }),
                    None => return Err(e),
                }
            }
            r => r?,
        };
        let response: UploadResponse = serde_json::from_str(&text).context("server's answer to the upload's commit")?;
        Ok(Uploaded { response, ..self.stats })
    }
}

fn sha_prefix(sha: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let _ = hex::decode_to_slice(sha.get(..32).unwrap_or(""), &mut out);
    out
}

fn empty_response() -> UploadResponse {
    UploadResponse { scan_id: 0, created: false, summary: Default::default(), skipped: 0, hit_miss: None }
}

/// Upload one report in one body (`POST /api/v1/scans`): for servers without staged uploads.
pub async fn upload_whole(server: &str, token: &str, mut report: ScanReport, retry: Retry) -> anyhow::Result<Uploaded> {
    let http = client_for(&retry)?;
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
    let entries_sent = report.entries.len();
    let body = tokio::task::spawn_blocking(move || gzip(&serde_json::to_vec(&report)?)).await??;
    let (_, text, tries) = post_gzipped(&http, &format!("{base}/api/v1/scans"), token, &body, retry).await?;
    let response: UploadResponse = serde_json::from_str(&text).context("server's answer to the upload")?;
    Ok(Uploaded {
        response,
        body_bytes: body.len(),
        blobs_sent,
        blobs_total,
        blobs_proven: 0,
        tries,
        events_sent,
        entries_sent,
        present_sent: 0,
    })
}
