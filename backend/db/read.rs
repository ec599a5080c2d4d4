//! Read queries behind JSON API v1 (and the pages), plus event insertion shared by ingest.

use crate::model::{EventFileMark, HookEvent};
use serde::Serialize;
use sqlx::{FromRow, QueryBuilder, Row, Sqlite, SqlitePool, Transaction};

/// Insert hook events, ignoring lines already stored; returns how many were new.
///
/// A line is identified by (host, pid, key, event, µs timestamp, the hook's line counter): the
/// same line read again (a re-scan, a re-upload, a rotated file read anew) is stored once, and
/// two lookups of one key in one process within a millisecond are two events. A line stored
/// before migration 0007 knows only its millisecond (`legacy`): read again, it claims that row.
pub async fn insert_events(
    tx: &mut Transaction<'static, Sqlite>,
    machine_id: i64,
    events: &[HookEvent],
) -> sqlx::Result<i64> {
    let legacy: bool = sqlx::query_scalar("SELECT EXISTS(SELECT 1 FROM events WHERE machine_id = ? AND legacy = 1)")
        .bind(machine_id)
        .fetch_one(&mut **tx)
        .await?;
    let mut fresh: Vec<&HookEvent> = Vec::with_capacity(events.len());
    for e in events {
        if !(legacy && claim_legacy(tx, machine_id, e).await?) {
            fresh.push(e);
        }
    }
    let mut n = 0;
    for part in fresh.chunks(500) {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "INSERT OR IGNORE INTO events(machine_id, ts, ts_us, seq, host, pid, key, kernel, event, compile_ms,
               stages_json) ",
        );
        qb.push_values(part, |mut b, e| {
            b.push_bind(machine_id)
                .push_bind(e.ts)
                .push_bind(ts_us(e))
                .push_bind(e.seq.unwrap_or(-1))
                .push_bind(e.host.clone())
                .push_bind(e.pid)
                .push_bind(e.key.clone())
                .push_bind(e.kernel.clone())
                .push_bind(e.event.clone())
                .push_bind(e.compile_ms)
                .push_bind(e.stages_ms.as_ref().map(|v| v.to_string()));
        });
        n += qb.build().execute(&mut **tx).await?.rows_affected() as i64;
    }
    Ok(n)
}

/// How far each hook event file of `machine` has been read (what an uploading client resumes from).
pub async fn event_marks(pool: &SqlitePool, machine: &str) -> sqlx::Result<Vec<EventFileMark>> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT f.path, f.inode_sig, f.offset FROM event_files f JOIN machines m ON m.id = f.machine_id
         WHERE m.name = ? ORDER BY f.path",
    )
    .bind(machine)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(path, inode_sig, offset)| EventFileMark { path, inode_sig, offset }).collect())
}

fn ts_us(e: &HookEvent) -> i64 {
    e.ts_us.unwrap_or(e.ts.saturating_mul(1000))
}

/// Give a legacy row (same line up to the millisecond) this line's full identity, unless the
/// line is stored already. True when a row was claimed (the event is not new).
async fn claim_legacy(tx: &mut Transaction<'static, Sqlite>, machine_id: i64, e: &HookEvent) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE events SET ts_us = ?1, seq = ?2, legacy = 0
         WHERE id = (SELECT id FROM events INDEXED BY events_legacy
                     WHERE machine_id = ?3 AND host = ?4 AND pid = ?5 AND key = ?6 AND event = ?7 AND ts = ?8
                       AND legacy = 1 LIMIT 1)
           AND NOT EXISTS (SELECT 1 FROM events WHERE machine_id = ?3 AND host = ?4 AND pid = ?5 AND key = ?6
                             AND event = ?7 AND ts_us = ?1 AND seq = ?2)",
    )
    .bind(ts_us(e))
    .bind(e.seq.unwrap_or(-1))
    .bind(machine_id)
    .bind(&e.host)
    .bind(e.pid)
    .bind(&e.key)
    .bind(&e.event)
    .bind(e.ts)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Paging for list endpoints: `limit` defaults to 100 and is capped at 10,000.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub limit: i64,
    pub offset: i64,
}

impl Page {
    pub fn new(limit: Option<i64>, offset: Option<i64>) -> Page {
        Page { limit: limit.unwrap_or(100).clamp(1, 10_000), offset: offset.unwrap_or(0).max(0) }
    }
}

#[derive(Debug, Serialize, FromRow)]
pub struct MachineRow {
    pub name: String,
    pub entries: i64,
    pub kernels: i64,
    pub bytes: i64,
    pub last_scan_at: Option<i64>,
    #[sqlx(skip)]
    pub triton_versions: Vec<String>,
    #[serde(skip)]
    pub versions_csv: Option<String>,
}

pub async fn machines(pool: &SqlitePool, page: Page) -> sqlx::Result<Vec<MachineRow>> {
    let mut rows: Vec<MachineRow> = sqlx::query_as(
        "SELECT m.name,
                COUNT(e.id) AS entries,
                COUNT(DISTINCT e.kernel) AS kernels,
                COALESCE(SUM(e.bytes), 0) AS bytes,
                (SELECT MAX(scanned_at) FROM scans s WHERE s.machine_id = m.id) AS last_scan_at,
                GROUP_CONCAT(DISTINCT e.triton_version) AS versions_csv
         FROM machines m LEFT JOIN entries e ON e.machine_id = m.id AND e.removed_at IS NULL
         GROUP BY m.id ORDER BY m.name LIMIT ? OFFSET ?",
    )
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await?;
    for r in &mut rows {
        let mut v: Vec<String> =
            r.versions_csv.as_deref().unwrap_or("").split(',').filter(|s| !s.is_empty()).map(str::to_string).collect();
        v.sort();
        r.triton_versions = v;
    }
    Ok(rows)
}

#[derive(Debug, Serialize, FromRow)]
pub struct ScanRow {
    pub id: i64,
    pub machine: String,
    pub scanned_at: i64,
    pub root: String,
    pub entries: i64,
    pub new_entries: i64,
    pub changed_entries: i64,
    pub removed_entries: i64,
    pub bytes: i64,
    pub skipped: i64,
    pub skipped_json: String,
    pub relocated: i64,
    pub duration_ms: Option<i64>,
    pub source: String,
}

pub async fn scans(pool: &SqlitePool, machine: Option<&str>, page: Page) -> sqlx::Result<Vec<ScanRow>> {
    sqlx::query_as(
        "SELECT s.id, m.name AS machine, s.scanned_at, s.root, s.entries, s.new_entries, s.changed_entries,
                s.removed_entries, s.bytes, s.skipped, s.skipped_json, s.relocated, s.duration_ms, s.source
         FROM scans s JOIN machines m ON m.id = s.machine_id
         WHERE (?1 IS NULL OR m.name = ?1)
         ORDER BY s.scanned_at DESC, s.id DESC LIMIT ?2 OFFSET ?3",
    )
    .bind(machine)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await
}

/// Filters of the kernel list.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct KernelFilter {
    pub machine: Option<String>,
    pub q: Option<String>,
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub triton_version: Option<String>,
    /// `variants` (default), `size`, `name` or `last`.
    pub sort: Option<String>,
    pub limit: Option<i64>,
    pub offset: Option<i64>,
}

#[derive(Debug, Serialize, FromRow)]
pub struct KernelRow {
    pub name: String,
    pub entries: i64,
    pub machines: i64,
    pub bytes: i64,
    pub last_compiled: Option<i64>,
}

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

pub async fn kernels(pool: &SqlitePool, f: &KernelFilter, page: Page) -> sqlx::Result<Vec<KernelRow>> {
    let order = match f.sort.as_deref() {
        Some("size") => "bytes DESC",
        Some("name") => "name ASC",
        Some("last") => "last_compiled DESC",
        _ => "entries DESC",
    };
    let like = nonempty(&f.q).map(|q| format!("%{}%", q.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")));
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT e.kernel AS name, COUNT(*) AS entries, COUNT(DISTINCT e.machine_id) AS machines,
                SUM(e.bytes) AS bytes, MAX(e.created_at) AS last_compiled
         FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE e.removed_at IS NULL AND e.kernel IS NOT NULL
           AND (?1 IS NULL OR m.name = ?1)
           AND (?2 IS NULL OR e.kernel LIKE ?2 ESCAPE '\\')
           AND (?3 IS NULL OR e.backend = ?3)
           AND (?4 IS NULL OR e.arch = ?4)
           AND (?5 IS NULL OR e.triton_version = ?5)
         GROUP BY e.kernel ORDER BY {order}, name LIMIT ?6 OFFSET ?7"
    )))
    .bind(nonempty(&f.machine))
    .bind(like)
    .bind(nonempty(&f.backend))
    .bind(nonempty(&f.arch))
    .bind(nonempty(&f.triton_version))
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await
}

#[derive(Debug, Serialize, Clone, FromRow)]
pub struct ArtifactRow {
    pub name: String,
    pub ext: String,
    pub bytes: i64,
    pub sha256: String,
}

/// An entry as `/api/v1/entries` returns it.
#[derive(Debug, Serialize, Clone, FromRow)]
pub struct EntryRow {
    #[serde(skip)]
    pub id: i64,
    pub machine: String,
    pub key: String,
    pub kind: String,
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
    pub relocated: bool,
    pub partial: Option<String>,
    pub binary_sha256: Option<String>,
    pub removed_at: Option<i64>,
    #[sqlx(skip)]
    pub artifacts: Vec<ArtifactRow>,
}

pub const ENTRY_COLUMNS: &str = "e.id, m.name AS machine, e.key, e.kind, e.kernel, e.backend, e.arch, e.warp_size,
    e.num_warps, e.num_stages, e.num_ctas, e.triton_version, e.signature, e.shapes, e.created_at, e.bytes,
    e.registers, e.spills, e.shared_bytes, e.relocated, e.partial, e.binary_sha256, e.removed_at";

/// Attach artifact lists to entry rows.
pub async fn with_artifacts(pool: &SqlitePool, rows: &mut [EntryRow]) -> sqlx::Result<()> {
    for r in rows.iter_mut() {
        r.artifacts = sqlx::query_as("SELECT name, ext, bytes, sha256 FROM artifacts WHERE entry_id = ? ORDER BY name")
            .bind(r.id)
            .fetch_all(pool)
            .await?;
    }
    Ok(())
}

pub async fn entries(
    pool: &SqlitePool,
    machine: Option<&str>,
    kernel: Option<&str>,
    include_removed: bool,
    page: Page,
) -> sqlx::Result<Vec<EntryRow>> {
    let mut rows: Vec<EntryRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {ENTRY_COLUMNS} FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE (?1 IS NULL OR m.name = ?1) AND (?2 IS NULL OR e.kernel = ?2) AND (?3 OR e.removed_at IS NULL)
         ORDER BY m.name, e.kernel, e.num_warps, e.num_stages, e.key LIMIT ?4 OFFSET ?5"
    )))
    .bind(machine)
    .bind(kernel)
    .bind(include_removed)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await?;
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

/// Raw JSON columns of one entry (metadata, group, resources).
pub async fn entry_json(pool: &SqlitePool, id: i64) -> sqlx::Result<(Option<String>, Option<String>, Option<String>)> {
    let r = sqlx::query("SELECT metadata_json, group_json, resources_json FROM entries WHERE id = ?")
        .bind(id)
        .fetch_one(pool)
        .await?;
    Ok((r.get(0), r.get(1), r.get(2)))
}

/// Text of a stored artifact (IR), by sha256.
pub async fn blob(pool: &SqlitePool, sha256: &str) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar("SELECT content FROM blobs WHERE sha256 = ?").bind(sha256).fetch_optional(pool).await
}

/// Of `shas`, those `machine` cannot be told the server has: a blob counts as present only
/// when it is stored and one of this machine's own entries references it. Asking never reveals
/// what other machines uploaded (the store still keeps one copy per sha256 for everyone).
pub async fn missing_blobs(pool: &SqlitePool, machine: &str, shas: &[String]) -> sqlx::Result<Vec<String>> {
    let mut missing = vec![];
    for part in shas.chunks(500) {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "SELECT DISTINCT a.sha256 FROM artifacts a JOIN entries e ON e.id = a.entry_id
             JOIN machines m ON m.id = e.machine_id JOIN blobs b ON b.sha256 = a.sha256
             WHERE m.name = ",
        );
        qb.push_bind(machine.to_string()).push(" AND a.sha256 IN (");
        let mut sep = qb.separated(", ");
        for s in part {
            sep.push_bind(s.clone());
        }
        qb.push(")");
        let have: std::collections::HashSet<String> =
            qb.build().fetch_all(pool).await?.into_iter().map(|r| r.get::<String, _>(0)).collect();
        missing.extend(part.iter().filter(|s| !have.contains(*s)).cloned());
    }
    Ok(missing)
}
