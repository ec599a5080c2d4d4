//! Scans as stored: one row per scan of one cache root, with its counts.

use super::Page;
use serde::Serialize;
use sqlx::{FromRow, SqlitePool};

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

/// A scan: its machine and root.
#[derive(Debug, Clone, FromRow)]
pub struct ScanRef {
    pub id: i64,
    pub machine: String,
    pub root: String,
    pub scanned_at: i64,
}

/// Every scan of a machine, oldest first.
pub async fn scans_of(pool: &SqlitePool, machine: &str) -> sqlx::Result<Vec<ScanRef>> {
    sqlx::query_as(
        "SELECT s.id, m.name AS machine, s.root, s.scanned_at FROM scans s JOIN machines m ON m.id = s.machine_id
         WHERE m.name = ? ORDER BY s.scanned_at, s.id",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
}

/// One scan by id.
pub async fn scan(pool: &SqlitePool, id: i64) -> sqlx::Result<Option<ScanRef>> {
    sqlx::query_as(
        "SELECT s.id, m.name AS machine, s.root, s.scanned_at FROM scans s JOIN machines m ON m.id = s.machine_id
         WHERE s.id = ?",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
}
