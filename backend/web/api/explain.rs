//! JSON API v1 of the explainer: `/compare`, `/nearest`, `/invalidations`.

use super::ApiQuery;
use crate::answers::load::{self as dbx, Neighbour};
use crate::answers::stored::{Lookup, paged};
use crate::explain::report::CompareReport;
use crate::web::AppState;
use crate::web::error::{ApiError, AppError};
use crate::web::query::{CompareQuery, InvalidationsQuery, NearestQuery};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
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
    Ok(Json(dbx::compare_ids(&s.db, &s.diff_slots, a, b, q.ir.as_deref(), q.strip()).await.map_err(AppError::from)?))
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
    let (of, neighbours) =
        dbx::nearest_cached(&s.db, s.db.nearest_cache(), id, q.limit()).await.map_err(AppError::from)?;
    let kernel = of.kernel_name().map(str::to_string);
    Ok(Json(NearestAnswer { entry: format!("{}:{}", of.machine, of.key), kernel, neighbours }))
}

/// `GET /api/v1/invalidations?machine=M[&from=SCAN][&to=SCAN]` or `?a=M1&b=M2`, paged with
/// `limit` (default 100, at most 1000) and `offset`, `cause=C` for one cause's rows.
/// `wait=S`: at most S seconds for a report being computed, then `202 {computing: true, done,
/// total, seconds}` with `Retry-After` (its progress: kernels matched of those to match).
async fn invalidations(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<InvalidationsQuery>,
) -> Result<axum::response::Response, ApiError> {
    let cause = q.cause()?;
    let wait = match q.wait {
        Some(w) if !(0.0..=3600.0).contains(&w) => {
            return Err(AppError::BadRequest(format!("wait={w}: seconds from 0 to 3600")).into());
        }
        w => w.map(std::time::Duration::from_secs_f64),
    };
    let r = match q.lookup(&s, s.config.report_limits, wait).await? {
        (Lookup::Ready(r), _) => *r,
        (Lookup::Computing { done, total, secs }, _) => {
            let body = serde_json::json!({"computing": true, "done": done, "total": total, "seconds": secs});
            return Ok((StatusCode::ACCEPTED, [(header::RETRY_AFTER, "1")], Json(body)).into_response());
        }
    };
    let page = paged(s.db.pool(), &r, cause, q.limit.unwrap_or(100), q.offset.unwrap_or(0)).await?;
    Ok(Json(page).into_response())
}
