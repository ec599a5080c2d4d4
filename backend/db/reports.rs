//! Stored invalidation reports (migration 0014): the generations that say whether a stored
//! report is still current, and the report's head, rows, reasons and kernels, written once per
//! computation and read a page at a time.
//!
//! A bounded store (migration 0031): the reports computed when a scan landed are kept, the
//! latest [`LANDING_KEPT`] per machine ([`mark_landing`]); every other report (those readers
//! asked for, and landing reports past that number) is evicted oldest computed first once there
//! are more than [`KEPT`] of them or they hold more than [`KEPT_ROWS`] rows ([`store`]). An
//! evicted report is computed again on its next visit. Stale reports (a side's generation
//! moved) stay until evicted or recomputed.

use super::Store;
use crate::explain::Cause;
use crate::explain::report::InvalidatedRow;
use serde::{Deserialize, Serialize};
use sqlx::{Any, FromRow, QueryBuilder};

/// The change counter of a machine's report inputs (0 when nothing was ever counted).
pub async fn gen_of(pool: &Store, machine: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "SELECT COALESCE((SELECT g.gen FROM report_gens g JOIN machines m ON m.id = g.machine_id WHERE m.name = ?), 0)",
    )
    .bind(machine)
    .fetch_one(pool)
    .await
}

/// Totals of one cause.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CauseStats {
    pub cause: Cause,
    pub count: usize,
    pub identical: usize,
    /// Other bytes but the same machine code.
    pub same_code: usize,
    pub kernels: usize,
    /// Summed compile time of the rows the hook timed, and how many it timed.
    pub ms: f64,
    pub timed: usize,
}

/// Everything of a report but its rows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportHead {
    pub old_machine: String,
    pub new_machine: String,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub old_entries: usize,
    pub new_entries: usize,
    pub kept: usize,
    pub invalidated: usize,
    pub new: usize,
    pub removed: usize,
    pub by_cause: Vec<CauseStats>,
    pub identical_code: usize,
    pub summary: String,
    pub relocated: usize,
    pub relocated_consequence: Option<String>,
    /// Summed compile time of every invalidated row the hook timed, and how many it timed.
    pub ms: f64,
    pub timed: usize,
}

/// A stored report that is current.
#[derive(Debug, Clone)]
pub struct Stored {
    pub id: i64,
    pub head: ReportHead,
}

/// The stored report named `spec`, if it was computed at these generations.
pub async fn find(pool: &Store, spec: &str, gens: (i64, i64)) -> sqlx::Result<Option<Stored>> {
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT id, head_json FROM inv_reports WHERE spec = ? AND old_gen = ? AND new_gen = ?")
            .bind(spec)
            .bind(gens.0)
            .bind(gens.1)
            .fetch_optional(pool)
            .await?;
    Ok(row.and_then(|(id, h)| Some(Stored { id, head: serde_json::from_str(&h).ok()? })))
}

/// The machine pairs (old, new) with `machine` on either side whose report was stored, the latest
/// computed first, at most `limit`.
pub async fn pairs_with(pool: &Store, machine: &str, limit: usize) -> sqlx::Result<Vec<(String, String)>> {
    // Every pair report's name (a few thousand on a fleet that visited many pairs), matched
    // here: a machine name may hold LIKE's wildcards.
    let specs: Vec<String> = sqlx::query_scalar(
        "SELECT spec FROM inv_reports WHERE spec >= 'pair:' AND spec < 'pair;' ORDER BY computed_at DESC",
    )
    .fetch_all(pool)
    .await?;
    Ok(specs
        .into_iter()
        .filter_map(|s| s.strip_prefix("pair:")?.split_once('\n').map(|(a, b)| (a.to_string(), b.to_string())))
        .filter(|(a, b)| a == machine || b == machine)
        .take(limit)
        .collect())
}

/// What to store: the head, the invalidated rows in page order (`rank`) with their reason's
/// index, the new and removed (kernel, key) lists.
pub struct ToStore<'a> {
    pub head: &'a ReportHead,
    /// (seq, rank, why index, row).
    pub invalidated: Vec<(usize, usize, usize, &'a InvalidatedRow)>,
    pub whys: Vec<(Cause, &'a str, usize)>,
    /// (cause, kernel, entries, identical, same_code, ms, timed), in page order per cause.
    pub kernels: Vec<(Cause, &'a str, usize, usize, usize, f64, usize)>,
    pub new: &'a [crate::explain::report::KernelKey],
    pub removed: &'a [crate::explain::report::KernelKey],
}

const CHUNK: usize = 400;

/// Reports other than the latest landing ones kept at most (evicted oldest computed first).
pub const KEPT: i64 = 256;

/// Rows (invalidated, new and removed entries, ~150 bytes each) of the reports other than the
/// latest landing ones kept at most: ~300 MB. The report just stored is kept whatever its size.
pub const KEPT_ROWS: i64 = 2_000_000;

/// Landing reports (computed when a scan landed) kept per machine, the latest first.
pub const LANDING_KEPT: i64 = 4;

/// Marks the report named `spec` as the landing report of `machine`'s latest scan; its landing
/// reports past the latest [`LANDING_KEPT`] join the evicted ones.
pub async fn mark_landing(db: &super::Db, spec: &str, machine: &str, kept: (i64, i64)) -> sqlx::Result<()> {
    let (_turn, mut tx) = super::write::begin(db).await?;
    sqlx::query("UPDATE inv_reports SET landing = 1, machine = ?, computed_at = MAX(computed_at, ?) WHERE spec = ?")
        .bind(machine)
        .bind(super::now_ms())
        .bind(spec)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE inv_reports SET landing = 0 WHERE landing = 1 AND machine = ?1 AND id NOT IN
           (SELECT id FROM inv_reports WHERE landing = 1 AND machine = ?1 ORDER BY computed_at DESC, id DESC LIMIT ?2)",
    )
    .bind(machine)
    .bind(LANDING_KEPT)
    .execute(&mut *tx)
    .await?;
    evict(&mut tx, None, kept).await?;
    tx.commit().await
}

/// Deletes the reports past `kept` (count, rows: [`KEPT`] and [`KEPT_ROWS`] on a server;
/// landing ones aside), oldest computed first, never `keep`.
async fn evict(tx: &mut crate::db::Conn<'_>, keep: Option<i64>, kept: (i64, i64)) -> sqlx::Result<u64> {
    let gone = sqlx::query(
        "DELETE FROM inv_reports WHERE id IN (
           SELECT id FROM (
             SELECT id, ROW_NUMBER() OVER w AS n, SUM(n_rows) OVER w AS rows FROM inv_reports
             WHERE landing = 0 WINDOW w AS (ORDER BY computed_at DESC, id DESC))
           WHERE (n > ?1 OR rows > ?2) AND id IS NOT ?3)",
    )
    .bind(kept.0)
    .bind(kept.1)
    .bind(keep)
    .execute(tx)
    .await?
    .rows_affected();
    if gone > 0 {
        tracing::debug!(reports = gone, "stored invalidation reports evicted");
    }
    Ok(gone)
}

/// Stored reports: (all, landing ones).
pub async fn count(pool: &Store) -> sqlx::Result<(i64, i64)> {
    sqlx::query_as("SELECT COUNT(*), COALESCE(SUM(landing), 0) FROM inv_reports").fetch_one(pool).await
}

/// Replaces the report named `spec` by `r` (a landing report stays one), then evicts past the
/// store's bounds (see the module docs); returns its id.
pub async fn store(
    db: &super::Db,
    spec: &str,
    gens: (i64, i64),
    r: &ToStore<'_>,
    compute_ms: i64,
    kept: (i64, i64),
) -> sqlx::Result<i64> {
    let (_turn, mut tx) = super::write::begin(db).await?;
    let was: Option<(i64, Option<String>)> =
        sqlx::query_as("DELETE FROM inv_reports WHERE spec = ? RETURNING landing, machine")
            .bind(spec)
            .fetch_optional(&mut *tx)
            .await?;
    let (landing, machine) = was.unwrap_or((0, None));
    let n_rows = (r.invalidated.len() + r.new.len() + r.removed.len()) as i64;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO inv_reports(spec, old_gen, new_gen, head_json, computed_at, compute_ms, landing, machine, n_rows)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(spec)
    .bind(gens.0)
    .bind(gens.1)
    .bind(serde_json::to_string(r.head).map_err(|e| sqlx::Error::Encode(e.into()))?)
    .bind(super::now_ms())
    .bind(compute_ms)
    .bind(landing)
    .bind(machine)
    .bind(n_rows)
    .fetch_one(&mut *tx)
    .await?;
    let rows_sql =
        "INSERT INTO inv_rows(report_id, list, seq, rank, cause, kernel, key, old_key, why, flags, compile_ms) ";
    for part in r.invalidated.chunks(CHUNK) {
        let mut qb = QueryBuilder::<Any>::new(rows_sql);
        qb.push_values(part, |mut b, (seq, rank, why, i)| {
            let flags = i.identical_binary as i64 | (i.identical_code as i64) << 1 | (i.relocated as i64) << 2;
            b.push_bind(id).push_bind(0_i64).push_bind(*seq as i64).push_bind(*rank as i64);
            b.push_bind(i.cause.as_str()).push_bind(&i.kernel).push_bind(&i.new_key).push_bind(&i.old_key);
            b.push_bind(*why as i64).push_bind(flags).push_bind(i.compile_ms);
        });
        qb.build().execute(&mut *tx).await?;
    }
    // every value an i64 where the first list's are: PostgreSQL prepares one statement text once,
    // with the types of its first parameters
    for (list, v) in [(1_i64, r.new), (2_i64, r.removed)] {
        for (c, part) in v.chunks(CHUNK).enumerate() {
            let mut qb = QueryBuilder::<Any>::new(rows_sql);
            qb.push_values(part.iter().enumerate(), |mut b, (i, k)| {
                let seq = (c * CHUNK + i) as i64;
                b.push_bind(id).push_bind(list).push_bind(seq).push_bind(seq).push_bind(None::<String>);
                b.push_bind(&k.kernel).push_bind(&k.key).push_bind(None::<String>).push_bind(None::<i64>);
                b.push_bind(0_i64).push_bind(None::<f64>);
            });
            qb.build().execute(&mut *tx).await?;
        }
    }
    for (c, part) in r.whys.chunks(CHUNK).enumerate() {
        let mut qb = QueryBuilder::<Any>::new("INSERT INTO inv_whys(report_id, id, cause, text, n) ");
        qb.push_values(part.iter().enumerate(), |mut b, (i, (cause, text, n))| {
            b.push_bind(id).push_bind((c * CHUNK + i) as i64).push_bind(cause.as_str()).push_bind(*text);
            b.push_bind(*n as i64);
        });
        qb.build().execute(&mut *tx).await?;
    }
    for (c, part) in r.kernels.chunks(CHUNK).enumerate() {
        let mut qb = QueryBuilder::<Any>::new(
            "INSERT INTO inv_kernels(report_id, cause, rank, kernel, entries, identical, same_code, ms, timed) ",
        );
        qb.push_values(part.iter().enumerate(), |mut b, (i, k)| {
            b.push_bind(id).push_bind(k.0.as_str()).push_bind((c * CHUNK + i) as i64).push_bind(k.1);
            b.push_bind(k.2 as i64).push_bind(k.3 as i64).push_bind(k.4 as i64).push_bind(k.5).push_bind(k.6 as i64);
        });
        qb.build().execute(&mut *tx).await?;
    }
    evict(&mut tx, Some(id), kept).await?;
    tx.commit().await?;
    Ok(id)
}

/// A stored invalidated row.
#[derive(Debug, Clone, FromRow)]
pub struct RowOut {
    pub cause: Option<String>,
    pub kernel: String,
    pub key: String,
    pub old_key: Option<String>,
    pub why: Option<String>,
    pub flags: i64,
    pub compile_ms: Option<f64>,
}

/// One page of a list (0 invalidated, 1 new, 2 removed): of one cause in page order, or every
/// row in the order of the fresh computation.
pub async fn rows(
    pool: &Store,
    report: i64,
    list: i64,
    cause: Option<Cause>,
    (limit, offset): (i64, i64),
) -> sqlx::Result<Vec<RowOut>> {
    let (filter, order) = if cause.is_some() { ("AND r.cause = ?4", "r.rank") } else { ("AND ?4 IS NULL", "r.seq") };
    let sql = format!(
        "SELECT r.cause, r.kernel, r.key, r.old_key, w.text AS why, r.flags, r.compile_ms FROM inv_rows r
         LEFT JOIN inv_whys w ON w.report_id = r.report_id AND w.id = r.why
         WHERE r.report_id = ?1 AND r.list = ?2 {filter} ORDER BY {order} LIMIT ?3 OFFSET ?5"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(report)
        .bind(list)
        .bind(limit)
        .bind(cause.map(Cause::as_str))
        .bind(offset)
        .fetch_all(pool)
        .await
}

/// The most given reasons of a cause (text, rows), at most `limit`.
pub async fn whys(pool: &Store, report: i64, cause: Cause, limit: i64) -> sqlx::Result<Vec<(String, i64)>> {
    sqlx::query_as("SELECT text, n FROM inv_whys WHERE report_id = ? AND cause = ? ORDER BY n DESC, id LIMIT ?")
        .bind(report)
        .bind(cause.as_str())
        .bind(limit)
        .fetch_all(pool)
        .await
}

/// A kernel's totals under one cause.
#[derive(Debug, Clone, FromRow)]
pub struct KernelOut {
    pub kernel: String,
    pub entries: i64,
    pub identical: i64,
    pub same_code: i64,
    pub ms: f64,
    pub timed: i64,
}

/// The kernels of a cause, most recompiled first, at most `limit`.
pub async fn kernels(pool: &Store, report: i64, cause: Cause, limit: i64) -> sqlx::Result<Vec<KernelOut>> {
    sqlx::query_as(
        "SELECT kernel, entries, identical, same_code, ms, timed FROM inv_kernels
         WHERE report_id = ? AND cause = ? ORDER BY rank LIMIT ?",
    )
    .bind(report)
    .bind(cause.as_str())
    .bind(limit)
    .fetch_all(pool)
    .await
}
