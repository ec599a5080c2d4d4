//! JSON API v1 (see docs/API.md): stable, scripted against by users and tests.

pub mod explain;
pub mod history;
pub mod upload;
pub mod uploads;
pub mod validate;
pub mod whole;

use super::AppState;
use super::error::{ApiError, AppError};
use crate::db::summaries::{self, KernelFilter};
use crate::db::{Page, entries, scans};
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// The read API: behind the read token (when one is set) like the pages.
pub fn read_router() -> Router<AppState> {
    Router::new()
        .route("/machines", get(machines))
        .route("/machines/{name}/advice", get(advice))
        .route("/scans", get(scans))
        .route("/timeline", get(timeline))
        .route("/kernels", get(kernels))
        .route("/entries", get(entries))
        .route("/autotune", get(autotune))
        .merge(explain::router())
        .route("/history", get(history::history))
        .route("/history/kernels", get(history::kernels))
        .route("/headline", get(history::headline))
        .route("/search", get(crate::web::pages::search::api))
        .fallback(|| async { ApiError(AppError::NotFound("no such API endpoint".into())) })
}

/// The write API, at its full paths: authenticated by machine upload tokens, never the read token.
pub fn upload_router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/scans", post(upload::post_scan))
        .route("/api/v1/blobs/missing", post(upload::blobs_missing))
        .route("/api/v1/uploads", post(uploads::begin))
        .route("/api/v1/uploads/{id}/parts/{n}", put(uploads::put_part))
        .route("/api/v1/uploads/{id}/blobs/{sha256}", put(uploads::put_blob))
        .route("/api/v1/uploads/{id}/commit", post(uploads::commit))
        .route("/api/v1/uploads/{id}/previous", post(uploads::previous))
        .route("/api/v1/uploads/{id}/facts", post(uploads::facts))
        .route("/api/v1/uploads/{id}/proofs", post(uploads::proofs))
}

/// The most rows one page of a list endpoint returns (docs/API.md; `Page::new` caps at it too).
pub const MAX_LIMIT: i64 = 10_000;

/// The query string of every /api/v1 endpoint. Unlike axum's `Query`, a bad query (`limit=abc`,
/// a missing or malformed parameter) is a JSON `{error}` 400, as every API error is. `limit`
/// must be 1..=10000 and `offset` ≥ 0 wherever they are given: a `limit=0` or `limit=20000`
/// is refused rather than silently changed, so a script never takes a clamped page for the
/// whole list.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let bad = |msg: String| ApiError(AppError::BadRequest(msg));
        let Query(p) = Query::<Paging>::from_request_parts(parts, state).await.map_err(|e| bad(e.body_text()))?;
        if p.limit.is_some_and(|l| !(1..=MAX_LIMIT).contains(&l)) {
            return Err(bad(format!("limit must be between 1 and {}", MAX_LIMIT)));
        }
        if p.offset.is_some_and(|o| o < 0) {
            return Err(bad("offset must be 0 or more".into()));
        }
        let Query(v) = Query::<T>::from_request_parts(parts, state).await.map_err(|e| bad(e.body_text()))?;
        Ok(ApiQuery(v))
    }
}

/// `limit` and `offset` of every list endpoint.
#[derive(Debug, Deserialize, Default)]
pub struct Paging {
    pub limit: Option<i64>,
    pub offset: Option<i64>,
}

impl Paging {
    pub fn page(&self) -> Page {
        Page::new(self.limit, self.offset)
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

async fn machines(State(s): State<AppState>, ApiQuery(p): ApiQuery<Paging>) -> ApiResult<Vec<summaries::MachineRow>> {
    s.db.fresh_summaries().await?;
    let rows = summaries::machine_summaries(s.db.pool(), p.page()).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

#[derive(Deserialize)]
struct ScansQuery {
    machine: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
}

async fn scans(State(s): State<AppState>, ApiQuery(q): ApiQuery<ScansQuery>) -> ApiResult<Vec<scans::ScanRow>> {
    Ok(Json(scans::scans(s.db.pool(), q.machine.as_deref(), Page::new(q.limit, q.offset)).await?))
}

/// The fleet timeline, newest first (default and most per page: those of [`Page::new`]).
async fn timeline(
    State(s): State<AppState>,
    ApiQuery(p): ApiQuery<Paging>,
) -> ApiResult<Vec<crate::web::pages::timeline::EventView>> {
    let rows = crate::db::timeline::latest(s.db.pool(), p.page()).await?;
    Ok(Json(rows.into_iter().map(crate::web::pages::timeline::view).collect()))
}

async fn kernels(
    State(s): State<AppState>,
    ApiQuery(f): ApiQuery<KernelFilter>,
) -> ApiResult<Vec<summaries::KernelStat>> {
    s.db.fresh_summaries().await?;
    Ok(Json(summaries::kernels(s.db.pool(), &f, Page::new(f.limit, f.offset)).await?))
}

#[derive(Deserialize)]
struct EntriesQuery {
    machine: Option<String>,
    kernel: Option<String>,
    #[serde(default)]
    include_removed: bool,
    limit: Option<i64>,
    offset: Option<i64>,
}

#[derive(serde::Deserialize)]
struct AutotuneQuery {
    machine: Option<String>,
    kernel: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
}

/// Inductor's max-autotune decisions (`source: "inductor"`), each with every choice's time and
/// the winner (the fastest).
async fn autotune(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<AutotuneQuery>,
) -> ApiResult<Vec<crate::db::inductor::AutotuneRow>> {
    let page = Page::new(q.limit, q.offset);
    Ok(Json(crate::db::inductor::rows(&s.db, q.machine.as_deref(), q.kernel.as_deref(), page).await?))
}

async fn entries(State(s): State<AppState>, ApiQuery(q): ApiQuery<EntriesQuery>) -> ApiResult<Vec<entries::EntryRow>> {
    let page = Page::new(q.limit, q.offset);
    Ok(Json(entries::entries(s.db.pool(), q.machine.as_deref(), q.kernel.as_deref(), q.include_removed, page).await?))
}

/// What `cachelens prune` would free on the machine (its default rules), per cache dir and
/// class, and the command to run there: as computed at its last landing that changed it, while
/// under an hour old, else now (`computed_at` says when; `prune::advice::current`).
async fn advice(
    State(s): State<AppState>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> ApiResult<crate::prune::advice::Advice> {
    crate::prune::advice::current(&s.db, &name)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError(AppError::NotFound(format!("no machine named {name:?}"))))
}
