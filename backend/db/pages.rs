//! SQL behind the HTML dashboard (`web::pages`): the summary tables of migration 0002 and the
//! queries of the overview, machine, kernel list, kernel and entry pages.
//!
//! The summary tables (`page_*`) are derived data: [`refresh_stats`] rebuilds them when a scan
//! or an entry has been added since the last rebuild, so pages read a few thousand rows instead
//! of aggregating every entry of the fleet on each request.

use super::read::{ArtifactRow, ENTRY_COLUMNS, EntryRow};
use serde::Serialize;
use sqlx::{FromRow, SqlitePool};

/// One rebuild at a time within this process; readers go on reading the previous tables.
static REFRESH: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a page waits for a rebuild before it shows the previous figures. A small database
/// rebuilds in milliseconds (always fresh); a fleet of a million entries takes seconds, and a
/// page should not hang on it after every upload.
const WAIT_FOR_REBUILD: std::time::Duration = std::time::Duration::from_secs(2);

/// A page waits for a rebuild only where the last one took at most this long. Under a stream of
/// uploads the tables are stale again as soon as they are rebuilt; pages that waited up to 2 s
/// each time answered in 2 s (upload load test) — now they show the figures of the last rebuild
/// while the next one runs.
const QUICK_REBUILD_MS: u64 = 300;
/// How long the last rebuild of each database (by file) took.
static LAST_REBUILD_MS: std::sync::Mutex<Vec<(std::path::PathBuf, u64)>> = std::sync::Mutex::new(Vec::new());

fn last_rebuild_ms(pool: &SqlitePool) -> u64 {
    let file = pool.connect_options().get_filename().to_path_buf();
    let known = LAST_REBUILD_MS.lock().unwrap_or_else(|e| e.into_inner());
    known.iter().find(|(f, _)| *f == file).map_or(0, |(_, ms)| *ms)
}

fn note_rebuild_ms(pool: &SqlitePool, ms: u64) {
    let file = pool.connect_options().get_filename().to_path_buf();
    let mut known = LAST_REBUILD_MS.lock().unwrap_or_else(|e| e.into_inner());
    match known.iter_mut().find(|(f, _)| *f == file) {
        Some(slot) => slot.1 = ms,
        None => known.push((file, ms)),
    }
}

/// The data the summary tables are derived from, as (last scan that changed anything, last entry
/// id). A re-scan that found nothing new, changed or removed does not make them stale.
async fn data_version(pool: &SqlitePool) -> sqlx::Result<(i64, i64)> {
    data_version_on(&mut *pool.acquire().await?).await
}

async fn data_version_on(conn: &mut sqlx::SqliteConnection) -> sqlx::Result<(i64, i64)> {
    sqlx::query_as(
        "SELECT COALESCE((SELECT MAX(id) FROM scans WHERE new_entries + changed_entries + removed_entries > 0), 0),
                COALESCE((SELECT MAX(id) FROM entries), 0)",
    )
    .fetch_one(conn)
    .await
}

async fn built_version(pool: &SqlitePool) -> sqlx::Result<Option<(i64, i64)>> {
    built_version_on(&mut *pool.acquire().await?).await
}

async fn built_version_on(conn: &mut sqlx::SqliteConnection) -> sqlx::Result<Option<(i64, i64)>> {
    sqlx::query_as("SELECT max_scan_id, max_entry_id FROM page_stats_version WHERE id = 1").fetch_optional(conn).await
}

/// Make the summary tables current before a page reads them. Cheap when nothing changed (two
/// index look-ups). When they are stale a rebuild starts in the background; the page waits for
/// it up to [`WAIT_FOR_REBUILD`] (fully when the tables were never built), then reads whatever
/// the tables hold — the previous figures until the rebuild commits.
pub async fn refresh_stats(pool: &SqlitePool) -> sqlx::Result<()> {
    let built = built_version(pool).await?;
    if built.is_some() && built == Some(data_version(pool).await?) {
        return Ok(());
    }
    if built.is_some() && REFRESH.try_lock().is_err() {
        return Ok(()); // the rebuild under way serves the next pages; this one shows the last figures
    }
    let quick = last_rebuild_ms(pool) <= QUICK_REBUILD_MS;
    let p = pool.clone();
    let task = tokio::spawn(async move { rebuild_if_stale(&p).await });
    let joined = match (built, quick) {
        (None, _) => Ok(task.await),
        (Some(_), true) => tokio::time::timeout(WAIT_FOR_REBUILD, task).await,
        (Some(_), false) => return Ok(()),
    };
    match joined {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(sqlx::Error::Protocol(format!("summary rebuild task failed: {e}"))),
        Err(_) => {
            tracing::info!("summary tables are being rebuilt: serving the previous figures");
            Ok(())
        }
    }
}

/// Rebuild every summary table, unless another rebuild made them current.
///
/// Locking: at a million entries the aggregates take 25-33 s. Run in a write transaction they
/// held SQLite's write lock that long, and an upload waiting for it (busy timeout 30 s) could
/// fail. So the aggregates are computed inside a read transaction (WAL: writers go on) into
/// TEMP copies of the tables — the temp database is private to this connection, writing it
/// takes no lock on the main one — and only copying the results into the real tables takes the
/// write lock, in one short transaction (rows per kernel variant, not per entry), which an
/// upload then waits out well within its busy timeout. Pages read the old tables until it
/// commits. The version recorded is the read snapshot's: data that lands meanwhile makes the
/// tables stale again, so the next page rebuilds.
async fn rebuild_if_stale(pool: &SqlitePool) -> sqlx::Result<()> {
    let _guard = REFRESH.lock().await;
    let mut conn = pool.acquire().await?;
    let started = std::time::Instant::now();
    let result = stage_and_swap(&mut conn).await;
    // Drop the staging tables whatever happened: the connection goes back to the pool.
    for t in PAGE_TABLES {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS temp.{}", staged(t))))
            .execute(&mut *conn)
            .await;
    }
    if result? {
        let ms = started.elapsed().as_millis() as u64;
        note_rebuild_ms(pool, ms);
        tracing::info!(ms, "summary tables rebuilt");
    }
    Ok(())
}

/// The summary tables a rebuild writes.
const PAGE_TABLES: &[&str] = &[
    "page_kernel_stats",
    "page_kernel_totals",
    "page_machine_stats",
    "page_ext_stats",
    "page_variant_cells",
    "page_kernel_identical",
    "page_autotune_configs",
    "page_machine_kernels",
    "page_machine_versions",
    "page_machine_days",
    "page_choices",
];

/// Name of a summary table's staging copy (in `temp`).
fn staged(table: &str) -> String {
    format!("rebuild_{table}")
}

/// A [`REBUILD`] statement pointed at the staging copies (no table name is part of another:
/// see the test below).
fn on_staging(sql: &str) -> String {
    PAGE_TABLES.iter().fold(sql.to_string(), |s, t| s.replace(t, &format!("temp.{}", staged(t))))
}

/// Stage (read transaction) then swap (short write transaction). False when already current.
async fn stage_and_swap(conn: &mut sqlx::SqliteConnection) -> sqlx::Result<bool> {
    use sqlx::Connection;
    let mut read = conn.begin().await?;
    let now = data_version_on(&mut read).await?;
    if built_version_on(&mut read).await? == Some(now) {
        return Ok(false);
    }
    for t in PAGE_TABLES {
        let sql = format!("CREATE TEMP TABLE IF NOT EXISTS {} AS SELECT * FROM main.{t} WHERE 0", staged(t));
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *read).await?;
    }
    for sql in REBUILD {
        sqlx::query(sqlx::AssertSqlSafe(on_staging(sql))).execute(&mut *read).await?;
    }
    read.commit().await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    for t in PAGE_TABLES {
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM main.{t}"))).execute(&mut *tx).await?;
        let sql = format!("INSERT INTO main.{t} SELECT * FROM temp.{}", staged(t));
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
    }
    sqlx::query(
        "INSERT INTO page_stats_version(id, max_scan_id, max_entry_id, built_at) VALUES (1, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET max_scan_id = excluded.max_scan_id, max_entry_id = excluded.max_entry_id,
                                       built_at = excluded.built_at",
    )
    .bind(now.0)
    .bind(now.1)
    .bind(super::now_ms())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// The statements of a rebuild, in order (later tables read earlier ones).
const REBUILD: &[&str] = &[
    "DELETE FROM page_kernel_stats",
    "INSERT INTO page_kernel_stats(kernel, machine_id, backend, arch, triton_version, entries, bytes, last_compiled)
     SELECT kernel, machine_id, backend, arch, triton_version, COUNT(*), SUM(bytes), MAX(created_at)
     FROM entries WHERE removed_at IS NULL AND kernel IS NOT NULL
     GROUP BY kernel, machine_id, backend, arch, triton_version",
    "DELETE FROM page_kernel_totals",
    "INSERT INTO page_kernel_totals(kernel, entries, machines, bytes, last_compiled)
     SELECT kernel, SUM(entries), COUNT(DISTINCT machine_id), SUM(bytes), MAX(last_compiled)
     FROM page_kernel_stats GROUP BY kernel",
    "DELETE FROM page_machine_stats",
    "INSERT INTO page_machine_stats(machine_id, entries, kernels, bytes, relocated, versions)
     SELECT e.machine_id, COUNT(*), COUNT(DISTINCT e.kernel), SUM(e.bytes), SUM(e.relocated),
            (SELECT GROUP_CONCAT(v, ',') FROM (SELECT DISTINCT triton_version AS v FROM page_kernel_stats k
                                              WHERE k.machine_id = e.machine_id AND v IS NOT NULL ORDER BY v))
     FROM entries e WHERE e.removed_at IS NULL GROUP BY e.machine_id",
    "DELETE FROM page_ext_stats",
    "INSERT INTO page_ext_stats(ext, files, bytes)
     SELECT a.ext, COUNT(*), SUM(a.bytes) FROM artifacts a JOIN entries e ON e.id = a.entry_id
     WHERE e.removed_at IS NULL GROUP BY a.ext",
    // binaries that two or more keys of a kernel share (pure key churn)
    "CREATE TEMP TABLE IF NOT EXISTS dup_binaries(kernel TEXT NOT NULL, sha TEXT NOT NULL, PRIMARY KEY (kernel, sha))
     WITHOUT ROWID",
    "DELETE FROM temp.dup_binaries",
    "INSERT INTO temp.dup_binaries(kernel, sha)
     SELECT kernel, binary_sha256 FROM entries
     WHERE removed_at IS NULL AND kernel IS NOT NULL AND binary_sha256 IS NOT NULL
     GROUP BY kernel, binary_sha256 HAVING COUNT(DISTINCT key) > 1",
    "DELETE FROM page_variant_cells",
    "INSERT INTO page_variant_cells(kernel, backend, arch, triton_version, signature, shapes, num_warps, num_stages, kind,
                                    entries, machines, reg_min, reg_max, spill_min, spill_max, shared_min, shared_max,
                                    shared_binary, best_config, sample_min, sample_max)
     SELECT e.kernel, e.backend, e.arch, e.triton_version, e.signature, e.shapes, e.num_warps, e.num_stages,
            CASE WHEN e.num_warps IS NULL AND e.num_stages IS NULL THEN e.kind ELSE '' END AS k,
            COUNT(*), GROUP_CONCAT(DISTINCT m.name), MIN(e.registers), MAX(e.registers), MIN(e.spills), MAX(e.spills),
            MIN(e.shared_bytes), MAX(e.shared_bytes),
            SUM(EXISTS(SELECT 1 FROM temp.dup_binaries d WHERE d.kernel = e.kernel AND d.sha = e.binary_sha256)),
            SUM(EXISTS(SELECT 1 FROM best_configs b WHERE b.triton_cache_hash = e.key AND b.machine_id = e.machine_id)),
            MIN(e.id), MAX(e.id)
     FROM entries e JOIN machines m ON m.id = e.machine_id
     WHERE e.removed_at IS NULL AND e.kernel IS NOT NULL
     GROUP BY e.kernel, e.backend, e.arch, e.triton_version, e.signature, e.shapes, e.num_warps, e.num_stages, k",
    "DELETE FROM page_kernel_identical",
    "INSERT INTO page_kernel_identical(kernel, identical)
     SELECT kernel, SUM(shared_binary) FROM page_variant_cells GROUP BY kernel HAVING SUM(shared_binary) > 0",
    "DELETE FROM page_autotune_configs",
    // An autotune run's file names no backend, arch or version: it belongs to the (backend, arch,
    // version) of the kernel's entries in the same cache (machine + root), whose compiles it
    // timed. A cache dir holding several versions of the kernel (an in-place upgrade) is narrowed
    // to those whose entries first appeared in the same scan as the autotune file; a run with no
    // compiled entries beside it keeps NULLs (listed below the grids, in none of them). One row
    // per machine: a cell shows the timings of the machines whose entries it holds. (The joins are
    // pinned: from the few autotune rows, then the kernel's entries on that machine — not every
    // entry of the cache dir per run, which a fleet of large caches could not afford.)
    "INSERT INTO page_autotune_configs(kernel, backend, arch, triton_version, config_json, num_warps, num_stages,
                                       runs, machines, best_ms, wins)
     WITH runs AS (
         SELECT DISTINCT e.id, e.machine_id, e.root, e.kernel, e.first_scan_id
         FROM autotune a CROSS JOIN entries e ON e.id = a.entry_id WHERE e.removed_at IS NULL AND e.kernel IS NOT NULL),
     cand AS (
         SELECT r.id, k.backend, k.arch, k.triton_version, MAX(k.first_scan_id = r.first_scan_id) AS same_scan
         FROM runs r CROSS JOIN entries k INDEXED BY entries_kernel
              ON k.kernel = r.kernel AND k.machine_id = r.machine_id AND k.root = r.root
         WHERE k.removed_at IS NULL AND k.backend IS NOT NULL
         GROUP BY r.id, k.backend, k.arch, k.triton_version),
     pick AS (
         SELECT c.id, c.backend, c.arch, c.triton_version FROM cand c
         WHERE c.same_scan = (SELECT MAX(c2.same_scan) FROM cand c2 WHERE c2.id = c.id)
         UNION ALL
         SELECT r.id, NULL, NULL, NULL FROM runs r WHERE NOT EXISTS (SELECT 1 FROM cand c WHERE c.id = r.id))
     SELECT e.kernel, p.backend, p.arch, p.triton_version, a.config_json, MIN(a.num_warps), MIN(a.num_stages),
            COUNT(*), MIN(m.name), MIN(a.best_ms), SUM(a.winner)
     FROM pick p JOIN entries e ON e.id = p.id JOIN autotune a ON a.entry_id = e.id JOIN machines m ON m.id = e.machine_id
     GROUP BY e.kernel, p.backend, p.arch, p.triton_version, e.machine_id, a.config_json",
    "DELETE FROM page_machine_kernels",
    "INSERT INTO page_machine_kernels(machine_id, kernel, entries, bytes, last_compiled)
     SELECT machine_id, kernel, SUM(entries), SUM(bytes), MAX(last_compiled) FROM page_kernel_stats GROUP BY machine_id, kernel",
    "DELETE FROM page_machine_versions",
    "INSERT INTO page_machine_versions(machine_id, triton_version, entries, bytes)
     SELECT machine_id, triton_version, SUM(entries), SUM(bytes) FROM page_kernel_stats GROUP BY machine_id, triton_version",
    // removed entries count too: they were compiled all the same
    "DELETE FROM page_machine_days",
    "INSERT INTO page_machine_days(machine_id, day, entries)
     SELECT machine_id, created_at / 86400000, COUNT(*) FROM entries WHERE created_at IS NOT NULL
     GROUP BY machine_id, created_at / 86400000",
    "DELETE FROM page_choices",
    "INSERT INTO page_choices(col, value)
     SELECT DISTINCT 'backend', backend FROM page_kernel_stats WHERE backend IS NOT NULL
     UNION SELECT DISTINCT 'arch', arch FROM page_kernel_stats WHERE arch IS NOT NULL
     UNION SELECT DISTINCT 'triton_version', triton_version FROM page_kernel_stats WHERE triton_version IS NOT NULL",
];

/// A machine as the overview lists it.
#[derive(Debug, Serialize, FromRow)]
pub struct MachineSummary {
    pub id: i64,
    pub name: String,
    pub entries: i64,
    pub kernels: i64,
    pub bytes: i64,
    pub relocated: i64,
    pub last_scan_at: Option<i64>,
    pub versions_csv: Option<String>,
}

const MACHINE_SUMMARY: &str =
    "SELECT m.id, m.name, COALESCE(s.entries, 0) AS entries, COALESCE(s.kernels, 0) AS kernels,
        COALESCE(s.bytes, 0) AS bytes, COALESCE(s.relocated, 0) AS relocated,
        (SELECT MAX(scanned_at) FROM scans WHERE machine_id = m.id) AS last_scan_at, s.versions AS versions_csv
     FROM machines m LEFT JOIN page_machine_stats s ON s.machine_id = m.id";

/// Every machine with its live totals (from the summary tables).
pub async fn machine_summaries(pool: &SqlitePool) -> sqlx::Result<Vec<MachineSummary>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!("{MACHINE_SUMMARY} ORDER BY m.name"))).fetch_all(pool).await
}

/// One machine by name.
pub async fn machine_summary(pool: &SqlitePool, name: &str) -> sqlx::Result<Option<MachineSummary>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!("{MACHINE_SUMMARY} WHERE m.name = ?")))
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// Fleet-wide bytes of one artifact type.
#[derive(Debug, Serialize, FromRow)]
pub struct ExtStat {
    pub ext: String,
    pub files: i64,
    pub bytes: i64,
}

pub async fn ext_stats(pool: &SqlitePool) -> sqlx::Result<Vec<ExtStat>> {
    sqlx::query_as("SELECT ext, files, bytes FROM page_ext_stats ORDER BY bytes DESC").fetch_all(pool).await
}

/// (version, entries, bytes) of one machine's live entries.
pub async fn machine_versions(pool: &SqlitePool, machine_id: i64) -> sqlx::Result<Vec<(Option<String>, i64, i64)>> {
    sqlx::query_as(
        "SELECT triton_version, entries, bytes FROM page_machine_versions WHERE machine_id = ? ORDER BY triton_version",
    )
    .bind(machine_id)
    .fetch_all(pool)
    .await
}

/// A kernel's live totals, on one machine or across the fleet.
#[derive(Debug, Serialize, FromRow)]
pub struct KernelStat {
    pub name: String,
    pub entries: i64,
    pub machines: i64,
    pub bytes: i64,
    pub last_compiled: Option<i64>,
}

/// The biggest kernels of one machine by bytes.
pub async fn biggest_kernels(pool: &SqlitePool, machine_id: i64, limit: i64) -> sqlx::Result<Vec<KernelStat>> {
    sqlx::query_as(
        "SELECT kernel AS name, entries, 1 AS machines, bytes, last_compiled
         FROM page_machine_kernels WHERE machine_id = ? ORDER BY bytes DESC, kernel LIMIT ?",
    )
    .bind(machine_id)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// (UTC day as unix days, entries compiled that day) for one machine, removed entries included:
/// they were compiled all the same.
pub async fn compiled_per_day(pool: &SqlitePool, machine_id: i64) -> sqlx::Result<Vec<(i64, i64)>> {
    sqlx::query_as("SELECT day, entries FROM page_machine_days WHERE machine_id = ? ORDER BY day")
        .bind(machine_id)
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

/// Filters of the kernel list page (the query string of `/kernels`).
#[derive(Debug, Default, Clone, serde::Deserialize, Serialize)]
pub struct KernelQuery {
    #[serde(default)]
    pub q: String,
    #[serde(default)]
    pub machine: String,
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub arch: String,
    #[serde(default)]
    pub triton_version: String,
    /// `variants` (default), `size`, `last` or `name`.
    #[serde(default)]
    pub sort: String,
    #[serde(default)]
    pub page: Option<i64>,
}

fn opt(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|s| !s.is_empty())
}

/// One page of the kernel list; returns `limit + 1` rows at most so the caller knows whether a
/// next page exists.
pub async fn search_kernels(
    pool: &SqlitePool,
    f: &KernelQuery,
    limit: i64,
    offset: i64,
) -> sqlx::Result<Vec<KernelStat>> {
    let order = match f.sort.as_str() {
        "size" => "bytes DESC",
        "last" => "last_compiled DESC",
        "name" => "name ASC",
        _ => "entries DESC",
    };
    let like = opt(&f.q).map(|q| format!("%{}%", q.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")));
    let filtered = [&f.machine, &f.backend, &f.arch, &f.triton_version].iter().any(|s| opt(s).is_some());
    let sql = if filtered {
        format!(
            "SELECT k.kernel AS name, SUM(k.entries) AS entries, COUNT(DISTINCT k.machine_id) AS machines,
                    SUM(k.bytes) AS bytes, MAX(k.last_compiled) AS last_compiled
             FROM page_kernel_stats k JOIN machines m ON m.id = k.machine_id
             WHERE (?1 IS NULL OR k.kernel LIKE ?1 ESCAPE '\\') AND (?2 IS NULL OR m.name = ?2)
               AND (?3 IS NULL OR k.backend = ?3) AND (?4 IS NULL OR k.arch = ?4) AND (?5 IS NULL OR k.triton_version = ?5)
             GROUP BY k.kernel ORDER BY {order}, name LIMIT ?6 OFFSET ?7"
        )
    } else {
        format!(
            "SELECT kernel AS name, entries, machines, bytes, last_compiled FROM page_kernel_totals
             WHERE (?1 IS NULL OR kernel LIKE ?1 ESCAPE '\\') AND ?2 IS NULL AND ?3 IS NULL AND ?4 IS NULL AND ?5 IS NULL
             ORDER BY {order}, name LIMIT ?6 OFFSET ?7"
        )
    };
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(like)
        .bind(opt(&f.machine))
        .bind(opt(&f.backend))
        .bind(opt(&f.arch))
        .bind(opt(&f.triton_version))
        .bind(limit + 1)
        .bind(offset)
        .fetch_all(pool)
        .await
}

/// The values offered by the kernel list's selects.
#[derive(Debug, Default, Serialize)]
pub struct FilterChoices {
    pub machines: Vec<String>,
    pub backends: Vec<String>,
    pub arches: Vec<String>,
    pub versions: Vec<String>,
}

pub async fn filter_choices(pool: &SqlitePool) -> sqlx::Result<FilterChoices> {
    let col = |c: &'static str| {
        sqlx::query_scalar::<_, String>("SELECT value FROM page_choices WHERE col = ? ORDER BY value")
            .bind(c)
            .fetch_all(pool)
    };
    Ok(FilterChoices {
        machines: sqlx::query_scalar("SELECT name FROM machines ORDER BY name").fetch_all(pool).await?,
        backends: col("backend").await?,
        arches: col("arch").await?,
        versions: col("triton_version").await?,
    })
}

/// Live entries of one kernel (every kind) in variant order, capped at `limit`: read in the order
/// of the `entries_kernel_variants` index, so the cap bounds the work too.
pub async fn kernel_entries(pool: &SqlitePool, kernel: &str, limit: i64) -> sqlx::Result<Vec<EntryRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        // the index gives this order: without INDEXED BY the bundled SQLite sorted all of a
        // kernel's rows for 51 of them (25 ms at 7,000 entries of one kernel)
        "SELECT {ENTRY_COLUMNS} FROM entries e INDEXED BY entries_kernel_variants
         JOIN machines m ON m.id = e.machine_id
         WHERE e.kernel = ? AND e.removed_at IS NULL
         ORDER BY e.backend, e.arch, e.triton_version, e.num_warps, e.num_stages, e.id LIMIT ?"
    )))
    .bind(kernel)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// How many live entries a kernel has (every kind), as of the last summary rebuild.
pub async fn kernel_live_entries(pool: &SqlitePool, kernel: &str) -> sqlx::Result<i64> {
    // from the summary table: counting a kernel's rows per request costs ~100 ms at 25,000
    // entries of one kernel (load bench)
    let n: Option<i64> = sqlx::query_scalar("SELECT entries FROM page_kernel_totals WHERE kernel = ?")
        .bind(kernel)
        .fetch_optional(pool)
        .await?;
    Ok(n.unwrap_or(0))
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

/// An artifact with the sha256 of its text (IR is stored in `blobs`; binaries are not).
pub async fn artifact(pool: &SqlitePool, entry_id: i64, name: &str) -> sqlx::Result<Option<ArtifactRow>> {
    sqlx::query_as("SELECT name, ext, bytes, sha256 FROM artifacts WHERE entry_id = ? AND name = ?")
        .bind(entry_id)
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// Entries with the same binary sha256 under another key (machine, key): the same key on another
/// machine is the same compile, not churn.
pub async fn same_binary(pool: &SqlitePool, sha: &str, key: &str, limit: i64) -> sqlx::Result<Vec<(String, String)>> {
    sqlx::query_as(
        "SELECT m.name, e.key FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE e.binary_sha256 = ? AND e.key <> ? ORDER BY e.id LIMIT ?",
    )
    .bind(sha)
    .bind(key)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// One cell of a kernel's variants grid (from `page_variant_cells`).
#[derive(Debug, Serialize, FromRow)]
pub struct VariantCell {
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub triton_version: Option<String>,
    pub signature: Option<String>,
    pub shapes: Option<String>,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub kind: String,
    pub entries: i64,
    pub machines: String,
    pub reg_min: Option<i64>,
    pub reg_max: Option<i64>,
    pub spill_min: Option<i64>,
    pub spill_max: Option<i64>,
    pub shared_min: Option<i64>,
    pub shared_max: Option<i64>,
    pub shared_binary: i64,
    pub best_config: i64,
    pub sample_min: i64,
    pub sample_max: i64,
}

/// Every cell of a kernel's variants grid (call [`refresh_stats`] first).
pub async fn kernel_cells(pool: &SqlitePool, kernel: &str) -> sqlx::Result<Vec<VariantCell>> {
    sqlx::query_as(
        "SELECT backend, arch, triton_version, signature, shapes, num_warps, num_stages, kind, entries, machines,
                reg_min, reg_max, spill_min, spill_max, shared_min, shared_max, shared_binary, best_config,
                sample_min, sample_max
         FROM page_variant_cells WHERE kernel = ?",
    )
    .bind(kernel)
    .fetch_all(pool)
    .await
}

/// One autotune config of a kernel, summed over the runs that measured it.
#[derive(Debug, Serialize, FromRow)]
pub struct AutotuneConfig {
    /// The (backend, arch, version) of the cache the run sat in; `None` when no compiled entry
    /// of the kernel sits beside it. `machines`: the machines the runs were on, comma-separated.
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub triton_version: Option<String>,
    pub config_json: String,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub runs: i64,
    pub machines: String,
    pub best_ms: Option<f64>,
    pub wins: i64,
}

pub async fn kernel_autotune_configs(pool: &SqlitePool, kernel: &str) -> sqlx::Result<Vec<AutotuneConfig>> {
    sqlx::query_as(
        // one row per (grid, config), its machines joined: the table holds a row per machine,
        // and fetching 3,000 of them made a 20-machine kernel page 40 ms
        "SELECT backend, arch, triton_version, config_json, MIN(num_warps) AS num_warps,
                MIN(num_stages) AS num_stages, SUM(runs) AS runs, GROUP_CONCAT(machines, ',') AS machines,
                MIN(best_ms) AS best_ms, SUM(wins) AS wins
         FROM page_autotune_configs
         WHERE kernel = ? GROUP BY backend, arch, triton_version, config_json
         ORDER BY MIN(best_ms) IS NULL, MIN(best_ms)",
    )
    .bind(kernel)
    .fetch_all(pool)
    .await
}

/// Live entries of a kernel whose binary another live entry of it shares.
pub async fn kernel_identical(pool: &SqlitePool, kernel: &str) -> sqlx::Result<i64> {
    Ok(sqlx::query_scalar("SELECT identical FROM page_kernel_identical WHERE kernel = ?")
        .bind(kernel)
        .fetch_optional(pool)
        .await?
        .unwrap_or(0))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rebuild_statement_writes_staging_tables_only() {
        for a in PAGE_TABLES {
            for b in PAGE_TABLES {
                assert!(a == b || !a.contains(b), "{a} contains {b}");
            }
        }
        for sql in REBUILD {
            let s = on_staging(sql);
            let bare = s.replace("temp.rebuild_page_", "");
            assert!(!bare.contains("page_"), "{s}");
        }
    }
}
