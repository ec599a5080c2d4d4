//! JSON API v1 (see DESIGN.md): stable, scripted against by users and tests.

pub mod explain;
pub mod history;
pub mod upload;

use super::AppState;
use super::error::{ApiError, AppError};
use crate::db::read::{self, KernelFilter, Page};
use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/machines", get(machines))
        .route("/scans", get(scans).post(upload::post_scan))
        .route("/blobs/missing", post(upload::blobs_missing))
        .route("/kernels", get(kernels))
        .route("/entries", get(entries))
        .merge(explain::router())
        .route("/history", get(history::history))
        .fallback(|| async { ApiError(AppError::NotFound("no such API endpoint".into())) })
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

async fn machines(State(s): State<AppState>, Query(p): Query<Paging>) -> ApiResult<Vec<read::MachineRow>> {
    Ok(Json(read::machines(&s.pool, p.page()).await?))
}

#[derive(Deserialize)]
struct ScansQuery {
    machine: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
}

async fn scans(State(s): State<AppState>, Query(q): Query<ScansQuery>) -> ApiResult<Vec<read::ScanRow>> {
    Ok(Json(read::scans(&s.pool, q.machine.as_deref(), Page::new(q.limit, q.offset)).await?))
}

async fn kernels(State(s): State<AppState>, Query(f): Query<KernelFilter>) -> ApiResult<Vec<read::KernelRow>> {
    Ok(Json(read::kernels(&s.pool, &f, Page::new(f.limit, f.offset)).await?))
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

async fn entries(State(s): State<AppState>, Query(q): Query<EntriesQuery>) -> ApiResult<Vec<read::EntryRow>> {
    let page = Page::new(q.limit, q.offset);
    Ok(Json(read::entries(&s.pool, q.machine.as_deref(), q.kernel.as_deref(), q.include_removed, page).await?))
}
