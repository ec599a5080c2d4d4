//! The write half of JSON API v1: `POST /api/v1/scans` (a whole scan report, optionally
//! gzipped) and `POST /api/v1/blobs/missing` (which IR blobs the server lacks), both
//! authenticated by a machine's upload token (`Authorization: Bearer <token>`).
//!
//! The body is read with a cap on its compressed size, then decompressed with a cap on its
//! decompressed size (a gzip bomb stops at the cap), and parsed record by record: one that breaks
//! the scanner-server contract (`crate::rules`) is skipped with its reason, the rest is stored.
//! It is ingested in one transaction, in the server's turn to write (`db::write`): an upload
//! stores all of itself or nothing. A scan over [`MAX_REPORT_BYTES`] goes in parts through the
//! staged upload (`uploads.rs`), which today's client always uses.

use crate::db::staging;
use crate::db::tokens::{self, Check};
use crate::model::{MissingRequest, MissingResponse, ScanSummary, UploadResponse};
use crate::rules::{is_sha256, trunc};
use crate::web::AppState;
use crate::web::error::{ApiError, AppError};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use http_body_util::BodyExt;
use std::io::Read;
use std::time::Duration;

/// The largest whole report `POST /api/v1/scans` takes, decompressed: bigger scans are sent in
/// parts (`POST /api/v1/uploads`). Decoding one holds at most its largest JSON string and one
/// part in memory.
pub const MAX_REPORT_BYTES: usize = 64 << 20;

/// The machine a bearer token may upload for (401 when missing, unknown or revoked).
pub async fn authenticate(s: &AppState, headers: &HeaderMap) -> Result<String, AppError> {
    let token = bearer(headers)
        .ok_or_else(|| AppError::Unauthorized("missing upload token (Authorization: Bearer <token>)".into()))?;
    match tokens::check(s.db.pool(), token).await? {
        Check::Machine(m) => Ok(m),
        Check::Revoked => Err(AppError::Unauthorized("this upload token was revoked".into())),
        Check::Unknown => Err(AppError::Unauthorized("unknown upload token".into())),
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// `POST /api/v1/scans`: 201 `{scan_id}` for a new scan, 200 with the same id for a repeat.
/// The body is decoded as it is read into a staged upload (`whole.rs`), then committed as
/// staged uploads are: one ingest path, memory bounded by one part whatever the body's size.
pub async fn post_scan(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<UploadResponse>), ApiError> {
    let machine = authenticate(&s, &headers).await?;
    let max = s.config.max_upload_bytes;
    let gzip = is_gzip(&headers)?;
    // The body is read as it arrives, spooled (`spool_capped`), whatever the queue ahead of it: a
    // body left in the client's socket stalls its TCP stream until the client's kernel drops
    // the connection. Bounded by the queue: past it, 503 before the body is read.
    let _queued = queue_permit(&s)?;
    let spooled =
        spool_capped(&headers, body, max, s.config.upload_read_timeout, s.config.spool_dir.as_deref()).await?;
    // Bounded: at most `upload_slots` bodies decoded and ingesting at once (see AppState).
    let _slot = s.upload_slots.acquire().await.map_err(|e| AppError::Internal(e.into()))?;
    let db = s.db.clone();
    let staged = staging::open(&db, &machine, &format!("whole-{}", crate::collect::new_client_id()), "", 0).await?;
    let (id, handle) = (staged.id, tokio::runtime::Handle::current());
    let decoded = tokio::task::spawn_blocking(move || -> Result<super::whole::Header, AppError> {
        let mut stage = DbStage { db, handle, id, n: 0 };
        super::whole::decode(spooled.reader()?, gzip, max.min(MAX_REPORT_BYTES), &mut stage)
    })
    .await
    .map_err(|e| AppError::Internal(e.into()));
    let named = match decoded.and_then(|r| r).and_then(|h| h.check(&machine)) {
        Ok(n) => n,
        Err(e) => {
            staging::discard(&s.db, id).await?;
            return Err(e.into());
        }
    };
    let up = staging::Upload { client_id: named.client_id, root: named.root, scanned_at: named.scanned_at, ..staged };
    let (mut summary, created) = crate::collect::ingest_staged(&s.db, &up, &named.commit, named.skipped).await?;
    if created {
        landed(&s, &headers, summary.scan_id).await;
    } else {
        staging::discard(&s.db, id).await?;
        stored_summary(&s, &mut summary).await?;
    }
    tracing::info!(machine = %machine, scan_id = summary.scan_id, created, "upload");
    Ok(answer(&s, summary, created).await)
}

/// A whole report's parts and blobs, staged as they are decoded (on a blocking thread).
struct DbStage {
    db: crate::db::Db,
    handle: tokio::runtime::Handle,
    id: i64,
    n: i64,
}

impl super::whole::Stage for DbStage {
    fn part(&mut self, p: crate::model::ScanPart) -> Result<(), AppError> {
        let (entries, skipped) = (p.entries.len() as i64, p.skipped.len() as i64);
        let gz = super::uploads::gzip_json(&p)?;
        self.handle.block_on(staging::put_part(&self.db, self.id, self.n, entries, skipped, &gz))?;
        self.n += 1;
        Ok(())
    }

    fn blob(&mut self, sha256: &str, text: &str) -> Result<(), AppError> {
        let gz = super::uploads::gzip_bytes(text.as_bytes())?;
        self.handle.block_on(staging::put_blob(&self.db, self.id, sha256, text.len() as i64, &gz))?;
        Ok(())
    }
}

/// What follows a scan's landing: its token's use noted, its invalidation report computed off
/// the request (so that its first visit reads it), the summary tables rebuilt soon.
pub(super) async fn landed(s: &AppState, headers: &HeaderMap, scan_id: i64) {
    // Only an upload that was stored counts as a use of its token. The scan is committed by
    // now: failing to note the use must not turn it into an error (the client would retry).
    if let Some(t) = bearer(headers)
        && let Err(e) = tokens::touch(&s.db, t).await
    {
        tracing::warn!("could not record the upload token's last use: {e}");
    }
    tokio::spawn(crate::answers::stored::after_scan(s.db.clone(), scan_id, Some(s.jobs.clone())));
    s.db.rebuild_soon();
}

/// A stored scan's answer: 201 when this request stored it, 200 when it was stored before; with
/// the machine's hit/miss line (left out, never an error, when it cannot be read).
pub(super) async fn answer(s: &AppState, summary: ScanSummary, created: bool) -> (StatusCode, Json<UploadResponse>) {
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    let skipped = summary.skipped.values().sum();
    let hit_miss = crate::db::headline::hit_miss(s.db.pool(), &summary.machine)
        .await
        .map_err(|e| tracing::warn!("hit/miss line of {}: {e}", summary.machine))
        .ok()
        .flatten();
    (status, Json(UploadResponse { scan_id: summary.scan_id, created, summary, skipped, hit_miss }))
}

/// A repeated upload stores nothing: answer with the counts of the scan stored the first time.
pub(super) async fn stored_summary(s: &AppState, summary: &mut ScanSummary) -> Result<(), AppError> {
    let page = crate::db::Page::new(Some(10_000), None);
    let rows = crate::db::scans::scans(s.db.pool(), Some(&summary.machine), page).await?;
    if let Some(r) = rows.into_iter().find(|r| r.id == summary.scan_id) {
        summary.root = r.root;
        summary.entries = r.entries;
        summary.new_entries = r.new_entries;
        summary.changed_entries = r.changed_entries;
        summary.removed_entries = r.removed_entries;
        summary.bytes = r.bytes;
        summary.relocated = r.relocated;
        summary.skipped = serde_json::from_str(&r.skipped_json).unwrap_or_default();
        summary.duration_ms = r.duration_ms.unwrap_or(0);
    }
    Ok(())
}

/// `POST /api/v1/blobs/missing`: of the given sha256s, those the server has no IR text for.
pub async fn blobs_missing(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<MissingResponse>, ApiError> {
    let machine = authenticate(&s, &headers).await?;
    let max = s.config.max_upload_bytes;
    let gzip = is_gzip(&headers)?;
    // Read as it arrives, like a scan's body (a node asks this before it uploads, so 50 nodes
    // ask it while scans ingest), but not behind the ingest queue: its answer is one lookup.
    let max = max.min(MAX_MISSING_BYTES);
    let _queued = queue_permit(&s)?;
    let spooled =
        spool_capped(&headers, body, max, s.config.upload_read_timeout, s.config.spool_dir.as_deref()).await?;
    let _decoding = MISSING_DECODES.acquire().await.map_err(|e| AppError::Internal(e.into()))?;
    let req: MissingRequest =
        tokio::task::spawn_blocking(move || parse_json(&inflate(&read_spooled(spooled)?, gzip, max)?))
            .await
            .map_err(|e| AppError::Internal(e.into()))??;
    if let Some(bad) = req.sha256.iter().find(|h| !is_sha256(h)) {
        return Err(AppError::Unprocessable(format!("not a sha256: {:?}", trunc(bad))).into());
    }
    Ok(Json(MissingResponse {
        // Only what this machine may know: a blob counts as present when this machine's own
        // entries reference it (the store still keeps one copy per sha256 for everyone).
        missing: crate::db::artifacts::missing_blobs(s.db.pool(), &machine, &req.sha256).await?,
        event_files: crate::db::events::event_marks(s.db.pool(), &machine).await?,
        max_upload_bytes: Some(max as u64),
    }))
}

pub(super) fn is_gzip(headers: &HeaderMap) -> Result<bool, AppError> {
    match headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase()) {
        None => Ok(false),
        Some(e) if e == "gzip" || e == "x-gzip" => Ok(true),
        Some(e) if e == "identity" => Ok(false),
        Some(e) => Err(AppError::BadRequest(format!("unsupported Content-Encoding {e:?} (use gzip)"))),
    }
}

/// Largest `blobs/missing` body (a list of sha256s: 64 MiB holds about a million).
const MAX_MISSING_BYTES: usize = 64 << 20;

/// `blobs/missing` bodies parsed at once (each up to [`MAX_MISSING_BYTES`] in memory).
static MISSING_DECODES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// A place in the upload queue, or 503 (with Retry-After) when it is full.
pub(super) fn queue_permit(s: &AppState) -> Result<tokio::sync::SemaphorePermit<'_>, AppError> {
    s.upload_queue.try_acquire().map_err(|_| {
        AppError::Unavailable(format!(
            "the server is receiving {} uploads already; try again shortly",
            s.config.upload_queue.max(1)
        ))
    })
}

/// Longest a part or blob waits for an upload slot; then 503 with Retry-After (the client waits
/// and sends it again). A wait without a byte on the wire would read as a dead server to a
/// client with a read timeout.
const SLOT_WAIT: Duration = Duration::from_secs(20);

/// An upload slot within [`SLOT_WAIT`], or 503.
pub(super) async fn slot(s: &AppState) -> Result<tokio::sync::SemaphorePermit<'_>, AppError> {
    match tokio::time::timeout(SLOT_WAIT, s.upload_slots.acquire()).await {
        Ok(p) => p.map_err(|e| AppError::Internal(e.into())),
        Err(_) => Err(AppError::Unavailable("the server is busy ingesting other uploads; try again shortly".into())),
    }
}

/// Bodies up to this size are spooled in memory, larger ones into an unnamed file: a node's
/// parts, fact lists and commits are a few hundred KiB at most, and creating a file for each cost
/// ~4% of the server's CPU for a node of known keys (an ext4 inode per request). Bounded: a body
/// waits in memory only while it holds a place in the upload queue (`--upload-queue`, 64 × this
/// = 16 MiB), or, for begin and commit bodies, not at all (read back at once).
const SPOOL_IN_MEMORY: usize = 256 << 10;

/// A request body read off the socket, whole: in memory up to [`SPOOL_IN_MEMORY`], else in an
/// unnamed file.
pub(super) enum Spooled {
    Memory(Vec<u8>),
    File(std::fs::File),
}

impl Spooled {
    /// The body from its start (blocking for a file: call off the async threads).
    pub(super) fn reader(self) -> Result<Box<dyn Read + Send>, AppError> {
        Ok(match self {
            Spooled::Memory(v) => Box::new(std::io::Cursor::new(v)),
            Spooled::File(mut f) => {
                std::io::Seek::rewind(&mut f)
                    .map_err(|e| AppError::Internal(anyhow::anyhow!("reading a spooled upload back: {e}")))?;
                Box::new(f)
            }
        })
    }
}

/// Read the body as it arrives (in memory up to [`SPOOL_IN_MEMORY`], past it into an unnamed
/// file in `dir`, the system's temp dir when `None`), refusing (413) more than `max` bytes as
/// sent, and (408) a body that takes longer than `within` to arrive whole. Memory stays one
/// chunk past [`SPOOL_IN_MEMORY`] whatever the body's size.
pub(super) async fn spool_capped(
    headers: &HeaderMap,
    body: Body,
    max: usize,
    within: Duration,
    dir: Option<&std::path::Path>,
) -> Result<Spooled, AppError> {
    use tokio::io::AsyncWriteExt;
    let too_large = || AppError::TooLarge(format!("upload larger than the server's limit of {} MiB", max >> 20));
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let dir = dir.map_or_else(std::env::temp_dir, std::path::Path::to_path_buf);
    let open = || {
        tempfile::tempfile_in(&dir)
            .map(tokio::fs::File::from_std)
            .map_err(|e| AppError::Internal(anyhow::anyhow!("cannot spool an upload in {}: {e}", dir.display())))
    };
    // a body declared larger than memory takes goes to a file from its first byte
    let mut file = match declared {
        Some(n) if n > SPOOL_IN_MEMORY as u64 => Some(open()?),
        _ => None,
    };
    let mut memory: Vec<u8> = Vec::new();
    let read = async {
        let mut body = http_body_util::Limited::new(body, max);
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else { continue };
            if file.is_none() && memory.len() + data.len() > SPOOL_IN_MEMORY {
                let mut f = open()?;
                f.write_all(&std::mem::take(&mut memory)).await?;
                file = Some(f);
            }
            match &mut file {
                Some(f) => f.write_all(&data).await?,
                None => memory.extend_from_slice(&data),
            }
        }
        if let Some(f) = &mut file {
            f.flush().await?;
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    };
    let slow = || AppError::BadRequest(format!("the upload body did not arrive within {} s", within.as_secs()));
    match tokio::time::timeout(within, read).await.map_err(|_| slow())? {
        Ok(()) => Ok(match file {
            Some(f) => Spooled::File(f.into_std().await),
            None => Spooled::Memory(memory),
        }),
        Err(e) if e.is::<AppError>() => Err(*e.downcast::<AppError>().expect("checked")),
        Err(e)
            if std::iter::successors(Some(&*e as &dyn std::error::Error), |e| e.source())
                .any(|e| e.is::<tower_http::timeout::TimeoutError>()) =>
        {
            Err(slow())
        }
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) if e.is::<std::io::Error>() => Err(AppError::Internal(anyhow::anyhow!("spooling an upload: {e}"))),
        Err(e) => Err(AppError::BadRequest(format!("could not read the request body: {e}"))),
    }
}

/// The spooled body, read back whole (blocking for a file: call off the async threads).
pub(super) fn read_spooled(spooled: Spooled) -> Result<Vec<u8>, AppError> {
    match spooled {
        Spooled::Memory(v) => Ok(v),
        file => {
            let mut raw = Vec::new();
            file.reader()?
                .read_to_end(&mut raw)
                .map_err(|e| AppError::Internal(anyhow::anyhow!("reading a spooled upload back: {e}")))?;
            Ok(raw)
        }
    }
}

/// Gunzip (when `gzip`) with a cap on the decompressed size: 413 past `max`.
pub fn inflate(raw: &[u8], gzip: bool, max: usize) -> Result<std::borrow::Cow<'_, [u8]>, AppError> {
    if !gzip {
        return Ok(raw.into());
    }
    let mut out = Vec::with_capacity((raw.len() * 4).min(max));
    // MultiGzDecoder: `cat a.gz b.gz` is valid gzip too.
    let mut dec = flate2::read::MultiGzDecoder::new(raw).take(max as u64 + 1);
    dec.read_to_end(&mut out).map_err(|e| AppError::BadRequest(format!("body is not valid gzip: {e}")))?;
    if out.len() > max {
        return Err(AppError::TooLarge(format!(
            "upload larger than the server's limit of {} MiB once decompressed (a scan of any size goes in parts: POST /api/v1/uploads, which `cachelens scan --server` of 0.2 and later uses)",
            max >> 20
        )));
    }
    Ok(out.into())
}

pub(super) fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, AppError> {
    serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        // Well-formed JSON of the wrong shape: the request is understood but unusable.
        serde_json::error::Category::Data => AppError::Unprocessable(format!("not a scan report: {e}")),
        _ => AppError::BadRequest(format!("malformed JSON: {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `spool_capped` of `body` sent in 64 KiB frames, with its length declared or not.
    async fn spool(body: &[u8], declared: bool) -> Result<Spooled, AppError> {
        let mut headers = HeaderMap::new();
        if declared {
            headers.insert(header::CONTENT_LENGTH, body.len().to_string().parse().unwrap());
        }
        let frames: Vec<Result<Vec<u8>, std::io::Error>> = body.chunks(64 << 10).map(|c| Ok(c.to_vec())).collect();
        let body = Body::from_stream(futures_util::stream::iter(frames));
        spool_capped(&headers, body, 4 << 20, Duration::from_secs(10), None).await
    }

    #[tokio::test]
    async fn a_small_body_stays_in_memory_and_a_large_one_goes_to_a_file_whole() {
        let bytes: Vec<u8> = (0..(1usize << 20)).map(|i| (i * 7 % 251) as u8).collect();
        for (len, declared, in_memory) in [
            (0, false, true),
            (1000, true, true),
            (SPOOL_IN_MEMORY, false, true),
            // past the bound: spilled mid-body, or a file from the first byte when declared
            (SPOOL_IN_MEMORY + 1, false, false),
            (SPOOL_IN_MEMORY + 1, true, false),
            (1 << 20, false, false),
        ] {
            let s = spool(&bytes[..len], declared).await.unwrap();
            assert_eq!(matches!(s, Spooled::Memory(_)), in_memory, "{len} bytes, declared {declared}");
            assert_eq!(read_spooled(s).unwrap(), &bytes[..len], "{len} bytes, declared {declared}");
        }
        // a spilled body read through `reader` (the whole-report path) from its first byte
        let mut back = vec![];
        spool(&bytes, false).await.unwrap().reader().unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back, bytes);
        // over the cap: 413, declared or not
        let big = vec![0u8; (4 << 20) + 1];
        for declared in [true, false] {
            assert!(matches!(spool(&big, declared).await, Err(AppError::TooLarge(_))), "declared {declared}");
        }
    }
}
