//! Staged uploads (docs/API.md "Uploads"): a scan of any size sent in bounded parts that the
//! server assembles into one all-or-nothing scan.
//!
//! - `POST /api/v1/uploads` `{format: 2, client_id, machine, root, scanned_at}` begins an upload,
//!   or resumes it (the same `client_id`): the answer lists the parts the server holds, or the
//!   scan it was committed as.
//! - `PUT /api/v1/uploads/{id}/parts/{n}`: records of the scan ([`crate::model::ScanPart`]), at
//!   most [`MAX_PART_BYTES`] decompressed, each record screened on arrival with the scanner's own
//!   rules (`crate::rules`): what breaks one is skipped with its reason, the rest kept.
//! - `PUT /api/v1/uploads/{id}/blobs/{sha256}`: one IR text, gzipped, at most the scanner's IR
//!   cap, checked against its sha256.
//! - `POST /api/v1/uploads/{id}/previous`: what the server holds of the upload's root on this
//!   machine (each live entry's dir, signature and dir stamp, gzipped), so the client's scanner
//!   skips the unchanged entries as a local re-scan does: an unchanged node re-reads nothing.
//! - `POST /api/v1/uploads/{id}/facts` `{facts: [digest, ...]}`: which entry facts
//!   (`model::fact_digest`) the server lacks; the client sends the others as `present` records
//!   (this machine's own part of the entry only) and the whole entry for these.
//! - `POST /api/v1/uploads/{id}/commit` `{parts, duration_ms, event_files, beside, hazards}`: every part
//!   stored in one transaction ([`crate::collect::ingest_staged`]); 201 with the scan, or 200
//!   when it was stored before.
//!
//! Every request costs a bounded amount of memory whatever the scan's size: one part (or one
//! blob) decoded at a time per upload slot, and a commit reads one part and one batch of IR back
//! at a time.

use super::upload::{answer, authenticate, inflate, is_gzip, parse_json, queue_permit, read_spooled, spool_capped};
use super::validate;
use crate::db::staging;
use crate::model::{
    FactsAnswer, FactsRequest, PartAnswer, ProofsAnswer, ProofsRequest, UPLOAD_FORMAT, UploadBegin, UploadResponse,
    UploadSession,
};
use crate::rules::is_sha256;
use crate::web::AppState;
use crate::web::error::{ApiError, AppError};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use std::time::Duration;

/// The largest part, decompressed (the client makes parts of ~4 MiB). Decoding one costs at
/// most ~3x this.
pub const MAX_PART_BYTES: usize = 16 << 20;
/// The largest IR blob: the scanner's own cap on IR text it keeps.
pub const MAX_BLOB_BYTES: usize = crate::scan::limits::MAX_TEXT_BYTES as usize;
/// Begin and commit bodies: a header and the scan's event file marks and `beside` counts.
const MAX_SMALL_BYTES: usize = 8 << 20;

/// `POST /api/v1/uploads`: begin or resume a staged upload.
pub async fn begin(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Result<Json<UploadSession>, ApiError> {
    let machine = authenticate(&s, &headers).await?;
    let b: UploadBegin = small_body(&s, &headers, body).await?;
    validate::header(b.format, UPLOAD_FORMAT, &b.client_id, &b.machine, &b.root, &machine)?;
    crate::rules::within("scanned_at", b.scanned_at, &crate::rules::TIME_MS).map_err(AppError::Unprocessable)?;
    let session = |upload_id, scan_id, parts, salt| UploadSession {
        upload_id,
        scan_id,
        parts,
        max_part_bytes: part_cap(&s) as u64,
        max_blob_bytes: blob_cap(&s) as u64,
        salt,
    };
    if let Some(id) = staging::committed(s.db.pool(), &machine, &b.client_id).await? {
        return Ok(Json(session(0, Some(id), vec![], None)));
    }
    let up = staging::open(&s.db, &machine, &b.client_id, &b.root, b.scanned_at).await?;
    crate::failpoint::hit("upload-begun");
    Ok(Json(session(up.id, None, staging::parts(s.db.pool(), up.id).await?, up.salt)))
}

/// `PUT /api/v1/uploads/{id}/parts/{n}`: one part, screened record by record, then staged.
pub async fn put_part(
    State(s): State<AppState>,
    Path((id, n)): Path<(i64, i64)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<PartAnswer>, ApiError> {
    let machine = authenticate(&s, &headers).await?;
    let up = open_upload(&s, &machine, id).await?;
    if !(0..crate::rules::MAX_ITEMS as i64).contains(&n) {
        return Err(AppError::Unprocessable(format!("part number {n} is out of range")).into());
    }
    let gzip = is_gzip(&headers)?;
    let _queued = queue_permit(&s)?;
    let cap = part_cap(&s);
    let spooled =
        spool_capped(&headers, body, cap, s.config.upload_read_timeout, s.config.spool_dir.as_deref()).await?;
    let _slot = super::upload::slot(&s).await?;
    let (gz, entries, skipped) = tokio::task::spawn_blocking(move || -> Result<_, AppError> {
        let raw = read_spooled(spooled)?;
        let part = validate::part(parse_json(&inflate(&raw, gzip, cap)?)?)?;
        let (entries, skipped) = (part.entries.len() as i64, part.skipped.len() as i64);
        Ok((gzip_json(&part)?, entries, skipped))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    staging::put_part(&s.db, up.id, n, entries, skipped, &gz).await?;
    crate::failpoint::hit("part-stored");
    Ok(Json(PartAnswer { n, entries, skipped }))
}

/// `PUT /api/v1/uploads/{id}/blobs/{sha256}`: one IR text, checked against its sha256.
pub async fn put_blob(
    State(s): State<AppState>,
    Path((id, sha)): Path<(i64, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let machine = authenticate(&s, &headers).await?;
    let up = open_upload(&s, &machine, id).await?;
    if !is_sha256(&sha) {
        return Err(AppError::Unprocessable(format!("not a sha256: {:?}", crate::rules::trunc(&sha))).into());
    }
    let gzip = is_gzip(&headers)?;
    let _queued = queue_permit(&s)?;
    // gzip of incompressible text is a little larger than the text
    let max = blob_cap(&s);
    let spooled = spool_capped(
        &headers,
        body,
        max + (max >> 6) + 1024,
        s.config.upload_read_timeout,
        s.config.spool_dir.as_deref(),
    )
    .await?;
    let _slot = super::upload::slot(&s).await?;
    let want = sha.clone();
    let (gz, len) = tokio::task::spawn_blocking(move || -> Result<_, AppError> {
        let raw = read_spooled(spooled)?;
        let (len, plain) = {
            let text = inflate(&raw, gzip, max)?;
            crate::rules::blob(&want, &text, max).map_err(AppError::Unprocessable)?;
            // kept as the client gzipped it; a plain body is gzipped here
            (text.len() as i64, if gzip { None } else { Some(gzip_bytes(&text)?) })
        };
        Ok((plain.unwrap_or(raw), len))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    staging::put_blob(&s.db, up.id, &sha, len, &gz).await?;
    crate::failpoint::hit("blob-stored");
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/uploads/{id}/commit`: every part into one scan, in one transaction.
///
/// The ingest runs on its own task, so a client that goes away does not cancel it halfway. A
/// client that sends `Prefer: respond-async` (RFC 7240) waits at most [`COMMIT_WAIT`]: while the
/// ingest goes on (behind others in the queue, or a large scan) the answer is 202 with
/// Retry-After, and the same commit asked again waits on the same ingest. The client thus never
/// meets a server silent for longer than that, and can treat a silent one as failed.
pub async fn commit(
    State(s): State<AppState>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    body: Body,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let machine = authenticate(&s, &headers).await?;
    let mut job = match s.commits.take(id, &machine) {
        Some(job) => job,
        None => {
            let up = open_upload(&s, &machine, id).await?;
            let w: validate::CommitWire = small_body(&s, &headers, body).await?;
            let mut skipped = vec![];
            let c = validate::commit(w, &mut skipped)?;
            let held = staging::parts(s.db.pool(), up.id).await?;
            if held.len() as i64 != c.parts || held.iter().enumerate().any(|(i, n)| i as i64 != *n) {
                let missing: Vec<i64> = (0..c.parts).filter(|n| held.binary_search(n).is_err()).take(20).collect();
                return Err(AppError::Unprocessable(format!(
                    "the upload holds {} parts, not parts 0..{}: missing {missing:?} (send them, then commit again)",
                    held.len(),
                    c.parts
                ))
                .into());
            }
            let (s, headers, machine) = (s.clone(), headers.clone(), machine.clone());
            tokio::spawn(async move {
                let _slot = s.upload_slots.acquire().await.map_err(|e| AppError::Internal(e.into()))?;
                let (mut summary, created) = crate::collect::ingest_staged(&s.db, &up, &c, skipped).await?;
                if created {
                    super::upload::landed(&s, &headers, summary.scan_id).await;
                } else {
                    staging::discard(&s.db, up.id).await?;
                    super::upload::stored_summary(&s, &mut summary).await?;
                }
                tracing::info!(machine = %machine, scan_id = summary.scan_id, created, parts = c.parts, "staged upload");
                Ok(answer(&s, summary, created).await)
            })
        }
    };
    let wait = prefers_async(&headers).unwrap_or(Duration::MAX);
    match tokio::time::timeout(wait, &mut job).await {
        Ok(done) => Ok(done.map_err(|e| AppError::Internal(e.into()))??.into_response()),
        Err(_) => {
            s.commits.put(id, &machine, job);
            let retry = [(axum::http::header::RETRY_AFTER, "2")];
            Ok((StatusCode::ACCEPTED, retry, Json(serde_json::json!({"state": "ingesting"}))).into_response())
        }
    }
}

/// Longest a `Prefer: respond-async` commit waits for its ingest before answering 202 (less
/// when the client asks with `wait=SECONDS`).
pub const COMMIT_WAIT: Duration = Duration::from_secs(10);

/// How long to wait before answering 202, when the request prefers `respond-async` (RFC 7240:
/// `Prefer: respond-async, wait=5`).
fn prefers_async(headers: &HeaderMap) -> Option<Duration> {
    let prefs: Vec<&str> = headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    prefs.iter().any(|p| p.eq_ignore_ascii_case("respond-async")).then(|| {
        let wait = prefs.iter().find_map(|p| p.strip_prefix("wait=")?.trim().parse::<u64>().ok());
        wait.map_or(COMMIT_WAIT, |w| Duration::from_secs(w).min(COMMIT_WAIT))
    })
}

type CommitJob = tokio::task::JoinHandle<Result<(StatusCode, Json<UploadResponse>), AppError>>;

/// Commits still ingesting (or done and not yet asked for again) when their client was answered
/// 202, by upload id. Bounded by the uploads in flight: an entry is taken by the next ask, and a
/// finished one nobody asked for is dropped after [`COMMIT_KEEP`].
#[derive(Default)]
pub struct Commits(std::sync::Mutex<std::collections::HashMap<i64, (String, std::time::Instant, CommitJob)>>);

/// How long a finished commit's answer waits for its client to ask again.
const COMMIT_KEEP: Duration = Duration::from_secs(3600);

impl Commits {
    fn take(&self, id: i64, machine: &str) -> Option<CommitJob> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&id) {
            Some((m, ..)) if m == machine => map.remove(&id).map(|(_, _, job)| job),
            _ => None,
        }
    }

    fn put(&self, id: i64, machine: &str, job: CommitJob) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, at, job)| !(job.is_finished() && at.elapsed() > COMMIT_KEEP));
        map.insert(id, (machine.to_string(), std::time::Instant::now(), job));
    }
}

/// `POST /api/v1/uploads/{id}/previous`: the live entries of the upload's root on the token's
/// machine (`PreviousAnswer`), gzipped. Its size is the root's entries (~120 bytes each before
/// gzip), which the commit reads anyway.
pub async fn previous(
    State(s): State<AppState>,
    Path(id): Path<i64>,
    headers: HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    let machine = authenticate(&s, &headers).await?;
    let up = open_upload(&s, &machine, id).await?;
    let text = crate::db::entries::previous_json(s.db.pool(), &machine, &up.root).await?;
    let gz = tokio::task::spawn_blocking(move || gzip_bytes(text.as_bytes()))
        .await
        .map_err(|e| AppError::Internal(e.into()))??;
    Ok(axum::response::Response::builder()
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .header(axum::http::header::CONTENT_ENCODING, "gzip")
        .body(Body::from(gz))
        .map_err(|e| AppError::Internal(e.into()))?)
}

/// The most fact digests one `facts` request may ask about (a part holds fewer).
pub const MAX_FACTS: usize = 50_000;

/// `POST /api/v1/uploads/{id}/facts`: which of the facts the server lacks. It answers only
/// for facts the client proves it read: a digest covers every file's sha256 of an entry, so
/// it cannot be made without the entry's bytes (docs/THREAT-MODEL.md).
pub async fn facts(
    State(s): State<AppState>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<FactsAnswer>, ApiError> {
    let machine = authenticate(&s, &headers).await?;
    open_upload(&s, &machine, id).await?;
    let r: FactsRequest = small_body(&s, &headers, body).await?;
    let n = r.facts.len() + r.relocated.len();
    if n > MAX_FACTS {
        return Err(AppError::Unprocessable(format!("{n} facts asked about, more than the {MAX_FACTS} allowed")).into());
    }
    if let Some(bad) = r.facts.iter().chain(&r.relocated).find(|f| !crate::rules::is_fact(f)) {
        return Err(AppError::Unprocessable(format!("not a fact digest: {:?}", crate::rules::trunc(bad))).into());
    }
    let mut missing = vec![];
    for (facts, relocated) in [(r.facts, false), (r.relocated, true)] {
        let held = crate::db::entries::facts_held(s.db.pool(), &facts, relocated).await?;
        missing.extend(facts.into_iter().filter(|f| !held.contains(f)));
    }
    Ok(Json(FactsAnswer { missing }))
}

/// The most proofs one `proofs` request may carry (a part's texts are fewer).
pub const MAX_PROOFS: usize = 20_000;

/// Stored text one `proofs` request decodes and hashes at most: past it the remaining proofs
/// are answered as not held (the client sends those texts), so a request's CPU is bounded.
const MAX_PROVEN_BYTES: i64 = 256 << 20;

/// `POST /api/v1/uploads/{id}/proofs`: of the IR texts the client proves it holds, those the
/// server holds too (it need not send them). A proof is the text hashed with the upload's salt,
/// so only a client holding a text learns whether the server has it.
pub async fn proofs(
    State(s): State<AppState>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<ProofsAnswer>, ApiError> {
    let machine = authenticate(&s, &headers).await?;
    let up = open_upload(&s, &machine, id).await?;
    let r: ProofsRequest = small_body(&s, &headers, body).await?;
    if r.proofs.len() > MAX_PROOFS {
        let n = r.proofs.len();
        return Err(AppError::Unprocessable(format!("{n} proofs, more than the {MAX_PROOFS} allowed")).into());
    }
    if let Some((bad, _)) = r.proofs.iter().find(|(sha, proof)| !is_sha256(sha) || !is_sha256(proof)) {
        let bad = crate::rules::trunc(bad);
        return Err(AppError::Unprocessable(format!("not a sha256 and its proof (64 hex digits each): {bad:?}")).into());
    }
    let Some(salt) = up.salt else { return Ok(Json(ProofsAnswer { held: vec![] })) };
    let _queued = queue_permit(&s)?;
    let _slot = s.upload_slots.acquire().await.map_err(|e| AppError::Internal(e.into()))?;
    let mut held = vec![];
    let mut budget = MAX_PROVEN_BYTES;
    for part in r.proofs.chunks(64) {
        let stored = crate::db::blobs::stored(s.db.pool(), part.iter().map(|(sha, _)| sha.as_str())).await?;
        let salt = salt.clone();
        let part = part.to_vec();
        let (ok, spent) = tokio::task::spawn_blocking(move || {
            let mut stored = stored;
            let mut ok = vec![];
            let mut spent = 0;
            for (sha, proof) in part {
                let Some(text) = stored.remove(&sha) else { continue };
                if spent >= budget {
                    break;
                }
                spent += text.bytes;
                let text = text.text().map_err(AppError::from)?;
                if crate::model::blob_proof(&salt, text.as_bytes()) == proof {
                    ok.push(sha);
                }
            }
            Ok::<_, AppError>((ok, spent))
        })
        .await
        .map_err(|e| AppError::Internal(e.into()))??;
        held.extend(ok);
        budget -= spent;
        if budget <= 0 {
            break;
        }
    }
    Ok(Json(ProofsAnswer { held }))
}

/// The largest part this server takes: [`MAX_PART_BYTES`], or `--max-upload-mb` when lower.
fn part_cap(s: &AppState) -> usize {
    MAX_PART_BYTES.min(s.config.max_upload_bytes)
}

/// The largest IR blob this server takes: [`MAX_BLOB_BYTES`], or `--max-upload-mb` when lower.
fn blob_cap(s: &AppState) -> usize {
    MAX_BLOB_BYTES.min(s.config.max_upload_bytes)
}

/// The open upload `id` of the token's machine, or 404.
async fn open_upload(s: &AppState, machine: &str, id: i64) -> Result<staging::Upload, AppError> {
    staging::get(s.db.pool(), machine, id).await?.ok_or_else(|| {
        AppError::NotFound(format!("no open upload {id} for machine {machine:?} (committed, expired or never begun)"))
    })
}

/// A begin or commit body: small JSON, gzipped or not.
async fn small_body<T: serde::de::DeserializeOwned + Send + 'static>(
    s: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<T, AppError> {
    let gzip = is_gzip(headers)?;
    let spooled =
        spool_capped(headers, body, MAX_SMALL_BYTES, s.config.upload_read_timeout, s.config.spool_dir.as_deref())
            .await?;
    tokio::task::spawn_blocking(move || parse_json(&inflate(&read_spooled(spooled)?, gzip, MAX_SMALL_BYTES)?))
        .await
        .map_err(|e| AppError::Internal(e.into()))?
}

/// Gzip as the client does ([`crate::upload::gzip`]), for a body stored as staged.
pub(super) fn gzip_bytes(b: &[u8]) -> Result<Vec<u8>, AppError> {
    crate::upload::gzip(b).map_err(AppError::Internal)
}

pub(super) fn gzip_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, AppError> {
    gzip_bytes(&serde_json::to_vec(v).map_err(|e| AppError::Internal(e.into()))?)
}
