//! Scans as stored: one row per scan of one cache root, with its counts.

use super::Page;
use super::Store;
use serde::Serialize;
use sqlx::FromRow;

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

pub async fn scans(pool: &Store, machine: Option<&str>, page: Page) -> sqlx::Result<Vec<ScanRow>> {
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

/// A scan: its machine and root.
#[derive(Debug, Clone, FromRow)]
pub struct ScanRef {
    pub id: i64,
    pub machine: String,
    pub root: String,
    pub scanned_at: i64,
}

/// Every scan of a machine, oldest first.
pub async fn scans_of(pool: &Store, machine: &str) -> sqlx::Result<Vec<ScanRef>> {
    sqlx::query_as(
        "SELECT s.id, m.name AS machine, s.root, s.scanned_at FROM scans s JOIN machines m ON m.id = s.machine_id
         WHERE m.name = ? ORDER BY s.scanned_at, s.id",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
}

/// One scan by id.
pub async fn scan(pool: &Store, id: i64) -> sqlx::Result<Option<ScanRef>> {
    sqlx::query_as(
        "SELECT s.id, m.name AS machine, s.root, s.scanned_at FROM scans s JOIN machines m ON m.id = s.machine_id
         WHERE s.id = ?",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// Record what sits beside the scanned root (see [`crate::model::ToolSize`]).
pub async fn store_beside(
    tx: &mut crate::db::Tx<'static>,
    scan_id: i64,
    beside: &[crate::model::ToolSize],
) -> sqlx::Result<()> {
    let json = serde_json::to_string(beside).unwrap_or_else(|_| "[]".into());
    sqlx::query("UPDATE scans SET beside_json = ? WHERE id = ?").bind(json).bind(scan_id).execute(&mut **tx).await?;
    Ok(())
}

/// One root of a machine as its latest scan saw it: the Triton cache and what sits beside.
#[derive(Debug, Clone)]
pub struct RootSize {
    pub root: String,
    pub entries: i64,
    pub bytes: i64,
    pub scanned_at: i64,
    /// `None`: the scan did not count it (made before this was recorded).
    pub beside: Option<Vec<crate::model::ToolSize>>,
}

/// The latest scan of each root of `machine`, by root.
pub async fn root_sizes(pool: &Store, machine: &str) -> sqlx::Result<Vec<RootSize>> {
    let rows: Vec<(String, i64, i64, i64, Option<String>)> = sqlx::query_as(
        "SELECT s.root, s.entries, s.bytes, s.scanned_at, s.beside_json FROM scans s JOIN machines m ON m.id = s.machine_id
         WHERE m.name = ? AND s.id = (SELECT MAX(t.id) FROM scans t WHERE t.machine_id = s.machine_id AND t.root = s.root)
         ORDER BY s.root LIMIT 1000",
    )
    .bind(machine)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(root, entries, bytes, scanned_at, b)| RootSize {
            root,
            entries,
            bytes,
            scanned_at,
            beside: b.and_then(|j| serde_json::from_str(&j).ok()),
        })
        .collect())
}

/// Machines with at least one scan stored (a database that holds data to show).
pub async fn machines_scanned(pool: &Store) -> sqlx::Result<i64> {
    sqlx::query_scalar("SELECT COUNT(DISTINCT machine_id) FROM scans").fetch_one(pool).await
}

/// The roots `machine`'s scans have read.
pub async fn roots_of(pool: &Store, machine: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT DISTINCT s.root FROM scans s JOIN machines m ON m.id = s.machine_id WHERE m.name = ? ORDER BY s.root",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
}
