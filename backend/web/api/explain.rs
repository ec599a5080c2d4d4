//! JSON API v1 of the explainer: `/compare`, `/nearest`, `/invalidations`.

use super::ApiQuery;
use crate::explain::load::{self as dbx, Neighbour};
use crate::explain::report::CompareReport;
use crate::explain::stored::{PagedReport, paged};
use crate::web::AppState;
use crate::web::error::{ApiError, AppError};
use crate::web::query::{CompareQuery, InvalidationsQuery, NearestQuery};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/compare", get(compare))
        .route("/nearest", get(nearest))
        .route("/invalidations", get(invalidations))
}

type ApiResult<T> = Result<Json<T>, ApiError>;

/// `GET /api/v1/compare?a=M:KEY&b=M:KEY[&ir=ttgir][&strip=0]`.
async fn compare(State(s): State<AppState>, ApiQuery(q): ApiQuery<CompareQuery>) -> ApiResult<CompareReport> {
    let (a, b) = q.ids()?;
    Ok(Json(dbx::compare_ids(s.db.pool(), a, b, q.ir.as_deref(), q.strip()).await.map_err(AppError::from)?))
}

/// The answer of `/api/v1/nearest`.
#[derive(serde::Serialize)]
struct NearestAnswer {
    entry: String,
    kernel: Option<String>,
    neighbours: Vec<Neighbour>,
}

/// `GET /api/v1/nearest?entry=M:KEY[&limit=N]`.
async fn nearest(State(s): State<AppState>, ApiQuery(q): ApiQuery<NearestQuery>) -> ApiResult<NearestAnswer> {
    let id = q.entry.as_deref().ok_or_else(|| AppError::BadRequest("missing entry=MACHINE:KEY".into()))?;
    let (of, neighbours) = dbx::nearest_of(s.db.pool(), id, q.limit()).await.map_err(AppError::from)?;
    let kernel = of.side.kernel_name().map(str::to_string);
    Ok(Json(NearestAnswer { entry: format!("{}:{}", of.row.machine, of.row.key), kernel, neighbours }))
}

/// `GET /api/v1/invalidations?machine=M[&from=SCAN][&to=SCAN]` or `?a=M1&b=M2`, paged with
/// `limit` (default 100, at most 1000) and `offset`, `cause=C` for one cause's rows.
async fn invalidations(State(s): State<AppState>, ApiQuery(q): ApiQuery<InvalidationsQuery>) -> ApiResult<PagedReport> {
    let cause = q.cause()?;
    let (r, _) = q.run(s.db.pool(), s.config.report_limits).await?;
    let page = paged(s.db.pool(), &r, cause, q.limit.unwrap_or(100), q.offset.unwrap_or(0)).await?;
    Ok(Json(page))
}
