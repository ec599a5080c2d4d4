//! `GET /api/v1/history`: hits, misses, compiles and compile time per time bucket;
//! `GET /api/v1/history/kernels`: the same per kernel, the kernels that miss most first.

use super::ApiQuery;
use crate::db::Page;
use crate::db::history::{self, HistoryPoint, NamedCounts};
use crate::web::AppState;
use crate::web::error::{ApiError, AppError};
use crate::web::query::HistoryQuery;
use axum::Json;
use axum::extract::State;

/// `GET /api/v1/history?machine=&kernel=&bucket=hour|day&from=&to=&limit=&offset=`
///
/// One object per time bucket that saw any activity, oldest first (empty buckets are left out):
/// `{t, hits, misses, compiles, inferred_compiles, compile_ms, hook_events, saved_ms, saved_hits,
/// hit_rate}`.
/// - `t`: bucket start in unix **milliseconds**, UTC (`day` buckets start at 00:00 UTC).
/// - With the hook (`hook_events > 0`): `hits`, `misses` and `compiles` count its events (the
///   hook logs `miss` then `compile`, also for a found entry recompiled under
///   `TRITON_ALWAYS_COMPILE`); a `compile` with no `miss` before it counts as a miss too.
///   `compile_ms` sums the hook's compile times.
/// - Without it, compiles still show: every metadata mtime a scan saw for an entry is a compile
///   (recompiles in place and removed entries included). Those are `inferred_compiles`, counted
///   in `compiles` and `misses`, with no time (`compile_ms` is `null` when no compile in the
///   bucket had one). A compile that a hook `compile` event of the same key accounts for (the
///   mtime lies within that compile's duration before the event) is not counted again.
/// - `saved_ms`: the compile time the hits saved, each hit counted at its key's compile time as the
///   hook timed it on that machine (`null` when none was known); `saved_hits`: the hits that had one.
/// - `hit_rate` = hits / (hits + the hook's misses: `misses - inferred_compiles`), `null` without
///   hook events (hits are unknown then). Inferred compiles are not lookups the hook saw.
///
/// `machine` and `kernel` filter by exact name; `from`/`to` (unix ms) bound the time range;
/// `limit` (default 100, max 10000) and `offset` page through the buckets.
pub async fn history(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<Vec<HistoryPoint>>, ApiError> {
    let bucket = q.bucket()?;
    let page = Page::new(q.limit, q.offset);
    let f = q.filter();
    let rows = s.db.memo(format!("history series {f:?} {bucket:?}"), history::series(s.db.pool(), &f, bucket)).await?;
    Ok(Json(rows.into_iter().skip(page.offset as usize).take(page.limit as usize).collect()))
}

/// `GET /api/v1/history/kernels?machine=&kernel=&from=&to=&limit=&offset=`
///
/// Per kernel over the whole range (no buckets), those that miss most first, then the costliest
/// in compile time: `[{name, hits, misses, compiles, inferred_compiles, compile_ms, hook_events,
/// hit_rate}]`, the fields counted as in `/api/v1/history`. Kernels without a name (hook events
/// that carried none) are `(unknown)`.
pub async fn kernels(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<Vec<NamedCounts>>, ApiError> {
    q.bucket()?; // ignored here, but not silently wrong
    let page = Page::new(q.limit, q.offset);
    let f = q.filter();
    let key = format!("history kernels {f:?} {} {}", page.limit, page.offset);
    Ok(Json(s.db.memo(key, history::by_kernel_page(s.db.pool(), &f, false, page)).await?.0))
}

/// `GET /api/v1/headline?machine=`: what misses cost — the figures the overview (no `machine`)
/// and machine pages headline, as the hook saw them:
/// `{machine, now_hour, day, week, all, trend: [{t, hits, misses, hit_rate}], last_hook_hour,
/// machines: [{name, hook, day, week, all}]}`, each window
/// `{from, hits, misses, hit_rate, miss_ms, saved_ms, saved_hits, hook_events}`.
/// - `day`: the 24 hours from `from` (the start of the hour 23 hours before this one) to now;
///   `week`: 168 hours; `all`: all time (`from` null). `trend`: the last 14 UTC days.
/// - `misses` are the hook's (`/api/v1/history`'s `misses - inferred_compiles`): compiles inferred
///   from file times are no lookups. `miss_ms` is the compile time of the hook's compiles,
///   `saved_ms` the hits' as in `/api/v1/history`.
/// - `machines` (fleet only): every machine, `hook: false` for those the hook never reported
///   from (their figures are all 0 and no hit rate: unknown, not 0%).
/// - `artifacts`: the machines (or this machine) whose caches hold Inductor or vLLM artifacts,
///   whose warm starts may load kernels without a Triton cache lookup.
pub async fn headline(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<HeadlineQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let pool = s.db.pool();
    let m = q.machine.as_deref().filter(|m| !m.is_empty());
    let h = crate::db::headline::headline(pool, m, crate::db::now_ms())
        .await?
        .ok_or_else(|| ApiError(AppError::NotFound(format!("no machine named {:?}", m.unwrap_or_default()))))?;
    let artifacts = crate::db::headline::with_compiled_artifacts(pool, m).await?;
    let mut v = serde_json::to_value(h).map_err(|e| ApiError(AppError::Internal(e.into())))?;
    v["artifacts"] = serde_json::json!(artifacts);
    Ok(Json(v))
}

/// The query of `/api/v1/headline`.
#[derive(Debug, serde::Deserialize)]
pub struct HeadlineQuery {
    pub machine: Option<String>,
}
