//! The write half of JSON API v1: `POST /api/v1/scans` (a whole scan report, optionally
//! gzipped) and `POST /api/v1/blobs/missing` (which IR blobs the server lacks), both
//! authenticated by a machine's upload token (`Authorization: Bearer <token>`).
//!
//! The body is read with a cap on its compressed size, then decompressed with a cap on its
//! decompressed size (a gzip bomb stops at the cap), parsed and validated before anything is
//! written. Only then is it ingested, in one transaction, under the server's write lock: an
//! upload stores all of itself or nothing.

use crate::db::tokens::{self, Check};
use crate::model::{
    MissingRequest, MissingResponse, REPORT_FORMAT, ScanReport, ScanSummary, UploadResponse, valid_machine_name,
};
use crate::web::AppState;
use crate::web::error::{ApiError, AppError};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use std::io::Read;

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
pub async fn post_scan(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<UploadResponse>), ApiError> {
    let machine = authenticate(&s, &headers).await?;
    let max = s.config.max_upload_bytes;
    let raw = read_capped(&headers, body, max).await?;
    let gzip = is_gzip(&headers)?;
    // Bounded: at most `upload_slots` reports decoded in memory at once (see AppState).
    let _slot = s.upload_slots.acquire().await.map_err(|e| AppError::Internal(e.into()))?;
    // Decompressing, parsing and hashing are CPU work: off the async threads, and without the
    // write lock, so other uploads keep ingesting and pages keep answering meanwhile.
    let report = tokio::task::spawn_blocking(move || -> Result<ScanReport, AppError> {
        let r = decode(&raw, gzip, max)?;
        validate(&r, &machine)?;
        Ok(r)
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    let (mut summary, created) = {
        let _one_writer = s.write_lock.lock().await;
        let stored = crate::collect::ingest_report(s.db.pool(), &report, "upload").await?;
        // Only an upload that was stored counts as a use of its token. The scan is committed by
        // now: failing to note the use must not turn it into an error (the client would retry).
        if let Some(t) = bearer(&headers)
            && let Err(e) = tokens::touch(s.db.pool(), t).await
        {
            tracing::warn!("could not record the upload token's last use: {e}");
        }
        stored
    };
    if !created {
        stored_summary(&s, &mut summary).await?;
    }
    tracing::info!(machine = %report.machine, scan_id = summary.scan_id, created, entries = report.entries.len(), "upload");
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(UploadResponse { scan_id: summary.scan_id, created, summary })))
}

/// A repeated upload stores nothing: answer with the counts of the scan stored the first time.
async fn stored_summary(s: &AppState, summary: &mut ScanSummary) -> Result<(), AppError> {
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
    let raw = read_capped(&headers, body, max).await?;
    let gzip = is_gzip(&headers)?;
    let req: MissingRequest = tokio::task::spawn_blocking(move || parse_json(&inflate(&raw, gzip, max)?))
        .await
        .map_err(|e| AppError::Internal(e.into()))??;
    if let Some(bad) = req.sha256.iter().find(|h| !is_sha256(h)) {
        return Err(AppError::Unprocessable(format!("not a sha256: {:?}", trunc(bad))).into());
    }
    Ok(Json(MissingResponse {
        missing: crate::db::artifacts::missing_blobs(s.db.pool(), &req.sha256).await?,
        event_files: crate::db::events::event_marks(s.db.pool(), &machine).await?,
        max_upload_bytes: Some(max as u64),
    }))
}

fn is_gzip(headers: &HeaderMap) -> Result<bool, AppError> {
    match headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase()) {
        None => Ok(false),
        Some(e) if e == "gzip" || e == "x-gzip" => Ok(true),
        Some(e) if e == "identity" => Ok(false),
        Some(e) => Err(AppError::BadRequest(format!("unsupported Content-Encoding {e:?} (use gzip)"))),
    }
}

/// Read the body, refusing (413) more than `max` bytes as sent.
async fn read_capped(headers: &HeaderMap, body: Body, max: usize) -> Result<Bytes, AppError> {
    let too_large = || AppError::TooLarge(format!("upload larger than the server's limit of {} MiB", max >> 20));
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    match http_body_util::Limited::new(body, max).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(AppError::BadRequest(format!("could not read the request body: {e}"))),
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
            "upload larger than the server's limit of {} MiB once decompressed",
            max >> 20
        )));
    }
    Ok(out.into())
}

fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, AppError> {
    serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        // Well-formed JSON of the wrong shape: the request is understood but unusable.
        serde_json::error::Category::Data => AppError::Unprocessable(format!("not a scan report: {e}")),
        _ => AppError::BadRequest(format!("malformed JSON: {e}")),
    })
}

/// Body bytes → report: gunzip with the cap, then parse. Never panics on any input.
pub fn decode(raw: &[u8], gzip: bool, max: usize) -> Result<ScanReport, AppError> {
    parse_json(&inflate(raw, gzip, max)?)
}

/// Check a parsed report before anything is stored: 403 when it is for another machine than
/// the token's, 422 for anything that would store nonsense (unknown format, path-like names,
/// blobs whose content does not match their sha256).
pub fn validate(r: &ScanReport, token_machine: &str) -> Result<(), AppError> {
    let bad = |m: String| Err(AppError::Unprocessable(m));
    if r.format != REPORT_FORMAT {
        return bad(format!("report format {} is not supported (this server reads format {REPORT_FORMAT})", r.format));
    }
    if !valid_machine_name(&r.machine) {
        return bad(format!("invalid machine name {:?}", trunc(&r.machine)));
    }
    if r.machine != token_machine {
        return Err(AppError::Forbidden(format!(
            "this token uploads for machine {token_machine:?}, not {:?}",
            trunc(&r.machine)
        )));
    }
    if r.client_id.is_empty() || r.client_id.len() > 128 || !r.client_id.bytes().all(|b| b.is_ascii_graphic()) {
        return bad("client_id must be 1-128 printable ASCII characters".into());
    }
    if r.root.is_empty() || r.root.contains('\0') || r.root.len() > 4096 {
        return bad("root must be a non-empty path without NUL".into());
    }
    for e in &r.entries {
        if !is_name(&e.key) {
            return bad(format!("entry key {:?} is not a plain name", trunc(&e.key)));
        }
        if !is_rel_path(&e.dir) {
            return bad(format!("entry dir {:?} is not a relative path inside the cache", trunc(&e.dir)));
        }
        for a in &e.artifacts {
            if !is_name(&a.name) {
                return bad(format!("artifact name {:?} in entry {} is not a plain file name", trunc(&a.name), e.key));
            }
            if !is_sha256(&a.sha256) || a.bytes < 0 {
                return bad(format!("artifact {} in entry {} has a bad sha256 or size", a.name, e.key));
            }
        }
    }
    for p in r.unchanged.iter().chain(r.best_configs.iter().map(|b| &b.path)) {
        if !is_rel_path(p) {
            return bad(format!("path {:?} is not a relative path inside the cache", trunc(p)));
        }
    }
    for f in &r.event_files {
        if f.path.is_empty() || f.path.len() > 4096 || f.path.contains('\0') {
            return bad(format!("event file path {:?} is empty, too long or has a NUL", trunc(&f.path)));
        }
        if f.inode_sig.is_empty() || f.inode_sig.len() > 128 || f.offset < 0 {
            return bad(format!("event file {:?} has a bad inode signature or offset", trunc(&f.path)));
        }
    }
    let bad_event = crate::scan::events::problem;
    if let Some((i, why)) = r.events.iter().enumerate().find_map(|(i, e)| bad_event(e).map(|w| (i, w))) {
        return bad(format!("hook event {i}: {why}"));
    }
    for (sha, text) in &r.blobs {
        if !is_sha256(sha) || hex::encode(Sha256::digest(text.as_bytes())) != *sha {
            return bad(format!("blob {:?} does not match its sha256", trunc(sha)));
        }
    }
    Ok(())
}

/// One path component: no separators, no `..`, no NUL.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s != "." && s != ".." && !s.contains(['/', '\\', '\0'])
}

/// A relative path below the root: not absolute, no `..` component, no NUL.
fn is_rel_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 4096
        && !s.starts_with(['/', '\\'])
        && !s.contains(['\0', ':']) // ':' rejects drive-letter paths like C:x
        && s.split(['/', '\\']).all(|c| c != "..")
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Echo at most 80 characters of client input in an error.
fn trunc(s: &str) -> &str {
    match s.char_indices().nth(80) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_checks() {
        assert!(is_rel_path("triton/0/ABC"));
        assert!(is_rel_path("ABC"));
        for p in ["", "/etc", "../x", "a/../b", "a\0b", "..", "\\x", "C:x"] {
            assert!(!is_rel_path(p), "{p:?}");
        }
        for n in ["", ".", "..", "a/b", "a\\b", "a\0"] {
            assert!(!is_name(n), "{n:?}");
        }
    }
}
