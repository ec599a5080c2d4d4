//! Cache entries as stored (one row per machine and key, removed ones kept): single entries,
//! lists for the API, a kernel's live entries in variant order, and what points at an entry.

use super::Page;
use super::artifacts::{ArtifactRow, with_artifacts};
use serde::Serialize;
use sqlx::{FromRow, SqlitePool};

/// An entry as `/api/v1/entries` returns it.
#[derive(Debug, Serialize, serde::Deserialize, Clone, FromRow)]
pub struct EntryRow {
    #[serde(skip_serializing)]
    pub id: i64,
    pub machine: String,
    pub key: String,
    pub kind: crate::model::EntryKind,
    pub kernel: Option<String>,
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub warp_size: Option<i64>,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub num_ctas: Option<i64>,
    pub triton_version: Option<String>,
    pub signature: Option<String>,
    pub shapes: Option<String>,
    pub created_at: Option<i64>,
    pub bytes: i64,
    pub registers: Option<i64>,
    pub spills: Option<i64>,
    pub shared_bytes: Option<i64>,
    #[serde(deserialize_with = "super::explain::int_bool")]
    pub relocated: bool,
    pub partial: Option<String>,
    pub binary_sha256: Option<String>,
    pub removed_at: Option<i64>,
    /// The cache dir (scan root) the entry sits in, and its dir below it.
    pub root: String,
    pub dir: String,
    /// For a vLLM cache: the `rank_<i>_<j>` dir the root is in.
    #[sqlx(skip)]
    #[serde(default)]
    pub rank: Option<String>,
    #[sqlx(skip)]
    #[serde(default)]
    pub artifacts: Vec<ArtifactRow>,
}

pub const ENTRY_COLUMNS: &str = "e.id, m.name AS machine, e.key, e.kind, e.kernel, e.backend, e.arch, e.warp_size,
    e.num_warps, e.num_stages, e.num_ctas, e.triton_version, e.signature, e.shapes, e.created_at, e.bytes,
    e.registers, e.spills, e.shared_bytes, e.relocated, e.partial, e.binary_sha256, e.removed_at, e.root, e.dir";

/// [`ENTRY_COLUMNS`] by name, in [`EntryRow`]'s order.
const ENTRY_FIELDS: &str = "id, machine, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas,
    triton_version, signature, shapes, created_at, bytes, registers, spills, shared_bytes, relocated, partial,
    binary_sha256, removed_at, root, dir";

/// The rows of `inner` (a query selecting [`ENTRY_COLUMNS`], its order kept) as one JSON text,
/// read by [`entry_rows`]: sqlx hands each row over from its SQLite thread on its own, a wake-up
/// each, and a page's 51 variants or 100 listed entries were most of its database time under
/// load (`db::explain::json_rows`).
fn as_entry_rows(inner: &str) -> String {
    format!("{}{inner})", entry_rows_head())
}

/// [`as_entry_rows`] up to where the inner query starts (its closing parenthesis follows it).
fn entry_rows_head() -> String {
    format!("SELECT {} FROM (", super::explain::rows_json(&format!("json_array({ENTRY_FIELDS})")))
}

/// The [`EntryRow`]s of an [`as_entry_rows`] query's text, in its order.
fn entry_rows(text: String) -> sqlx::Result<Vec<EntryRow>> {
    super::explain::json_rows(text)
}

pub async fn entries(
    pool: &SqlitePool,
    machine: Option<&str>,
    kernel: Option<&str>,
    include_removed: bool,
    page: Page,
) -> sqlx::Result<Vec<EntryRow>> {
    // Each filter is written only when given: `(?1 IS NULL OR m.name = ?1)` kept SQLite from
    // using an index, and a page read and sorted every entry of the fleet (3 s at 1.25M).
    // Machines by name (their unique index), then each machine's entries through a listing
    // index in the page's order (`CROSS JOIN` keeps that nesting): a page is read in order and
    // stops at its limit. Joined the other way, SQLite sorted every live entry of the fleet for
    // a page without `machine=` (0.9-1.4 s on the 350,130-entry bench fleet, 15 s cold).
    // `entries_listing_live` (migration 0026) holds the live entries alone: skipping `offset`
    // of them reads no table row.
    let index = if include_removed { "entries_listing" } else { "entries_listing_live" };
    let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(format!(
        "{}SELECT {ENTRY_COLUMNS} FROM machines m CROSS JOIN entries e INDEXED BY {index} ON e.machine_id = m.id WHERE 1",
        entry_rows_head()
    ));
    if let Some(m) = machine {
        qb.push(" AND m.name = ").push_bind(m);
    }
    if let Some(k) = kernel {
        qb.push(" AND e.kernel = ").push_bind(k);
    }
    if !include_removed {
        qb.push(" AND e.removed_at IS NULL");
    }
    qb.push(" ORDER BY m.name, e.kernel, e.num_warps, e.num_stages, e.key LIMIT ").push_bind(page.limit);
    qb.push(" OFFSET ").push_bind(page.offset).push(")");
    let mut rows = entry_rows(qb.build_query_scalar().fetch_one(pool).await?)?;
    with_artifacts(pool, &mut rows).await?;
    Ok(rows)
}

/// One entry by machine and key (removed ones included).
pub async fn entry(pool: &SqlitePool, machine: &str, key: &str) -> sqlx::Result<Option<EntryRow>> {
    let row: Option<EntryRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {ENTRY_COLUMNS} FROM entries e JOIN machines m ON m.id = e.machine_id WHERE m.name = ? AND e.key = ?"
    )))
    .bind(machine)
    .bind(key)
    .fetch_optional(pool)
    .await?;
    let Some(r) = row else { return Ok(None) };
    let mut v = [r];
    with_artifacts(pool, &mut v).await?;
    let [r] = v;
    Ok(Some(r))
}

/// Where an entry sits and its raw JSON columns.
#[derive(Debug, FromRow)]
pub struct EntryDetail {
    pub root: String,
    pub dir: String,
    pub metadata_json: Option<String>,
    pub group_json: Option<String>,
    pub resources_json: Option<String>,
}

pub async fn entry_detail(pool: &SqlitePool, id: i64) -> sqlx::Result<EntryDetail> {
    sqlx::query_as("SELECT root, dir, metadata_json, group_json, resources_json FROM entries WHERE id = ?")
        .bind(id)
        .fetch_one(pool)
        .await
}

/// Live entries of one kernel (every kind) in variant order, capped at `limit`: read in the order
/// of the `entries_kernel_variants` index, so the cap bounds the work too.
pub async fn kernel_entries(pool: &SqlitePool, kernel: &str, limit: i64) -> sqlx::Result<Vec<EntryRow>> {
    let sql = as_entry_rows(&format!(
        // the index gives this order: without INDEXED BY the bundled SQLite sorted all of a
        // kernel's rows for 51 of them (25 ms at 7,000 entries of one kernel)
        "SELECT {ENTRY_COLUMNS} FROM entries e INDEXED BY entries_kernel_variants
         JOIN machines m ON m.id = e.machine_id
         WHERE e.kernel = ? AND e.removed_at IS NULL
         ORDER BY e.backend, e.arch, e.triton_version, e.num_warps, e.num_stages, e.id LIMIT ?"
    ));
    entry_rows(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(kernel).bind(limit).fetch_one(pool).await?)
}

/// Entries with the same binary sha256 under another key (machine, key): the same key on another
/// machine is the same compile, not churn.
pub async fn same_binary(pool: &SqlitePool, sha: &str, key: &str, limit: i64) -> sqlx::Result<Vec<(String, String)>> {
    // one JSON text, not a row each (see `as_entry_rows`)
    let sql = format!(
        "SELECT {} FROM (SELECT m.name AS machine, e.key FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE e.binary_sha256 = ? AND e.key <> ? ORDER BY e.id LIMIT ?)",
        super::explain::rows_json("json_array(machine, key)")
    );
    let q = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(sha).bind(key).bind(limit);
    super::explain::json_rows(q.fetch_one(pool).await?)
}

/// (id, machine, key) of the given entry ids.
pub async fn entry_names(pool: &SqlitePool, ids: &[i64]) -> sqlx::Result<Vec<(i64, String, String)>> {
    sqlx::query_as(
        "SELECT e.id, m.name, e.key FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE e.id IN (SELECT value FROM json_each(?))",
    )
    .bind(serde_json::to_string(ids).unwrap_or_default())
    .fetch_all(pool)
    .await
}

/// One live relocated entry of a machine: (root it sits in, its dir, group_json).
pub async fn relocated_example(
    pool: &SqlitePool,
    machine_id: i64,
) -> sqlx::Result<Option<(String, String, Option<String>)>> {
    sqlx::query_as(
        "SELECT root, dir, group_json FROM entries WHERE machine_id = ? AND relocated = 1 AND removed_at IS NULL LIMIT 1",
    )
    .bind(machine_id)
    .fetch_optional(pool)
    .await
}

/// Does an Inductor `.best_config` name this entry?
pub async fn is_best_config(pool: &SqlitePool, machine: &str, key: &str) -> sqlx::Result<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS(SELECT 1 FROM best_configs b JOIN machines m ON m.id = b.machine_id
                       WHERE m.name = ? AND b.triton_cache_hash = ?)",
    )
    .bind(machine)
    .bind(key)
    .fetch_one(pool)
    .await
}
