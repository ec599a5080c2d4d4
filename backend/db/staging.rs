//! Staged uploads: a scan sent in bounded parts (`/api/v1/uploads`), held until its commit.
//!
//! A part is stored as the server screened it (gzipped JSON of a [`ScanPart`]), an IR blob as
//! the client gzipped it once its text matched its sha256. The commit reads them back one part
//! and one batch of blobs at a time, inside the scan's own transaction, which also deletes them
//! ([`drop_upload`]): a commit killed half way leaves the upload whole for its retry.
//!
//! Bounds: at most [`OPEN_PER_MACHINE`] open uploads per machine (beginning another drops the
//! least recently touched), and an upload untouched for [`EXPIRE_MS`] is dropped when any
//! upload begins. Disk: each open upload holds at most its scan, compressed.

use super::{Store, Tx};
use crate::model::ScanPart;

/// Open uploads one machine may have (a node uploads its roots one after the other).
pub const OPEN_PER_MACHINE: i64 = 4;
/// An upload untouched this long is dropped: 24 hours.
pub const EXPIRE_MS: i64 = 24 * 3600 * 1000;

/// An open upload.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Upload {
    pub id: i64,
    pub machine: String,
    pub client_id: String,
    pub root: String,
    pub scanned_at: i64,
    /// Random hex chosen when the upload was opened: the salt of its blob proofs.
    pub salt: Option<String>,
}

/// Find the open upload of (`machine`, `client_id`) or open one; drop expired uploads and the
/// machine's least recently touched past [`OPEN_PER_MACHINE`].
pub async fn open(db: &super::Db, machine: &str, client_id: &str, root: &str, scanned_at: i64) -> sqlx::Result<Upload> {
    let now = super::now_ms();
    let (_turn, mut tx) = super::write::begin(db).await?;
    let stale: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM uploads WHERE touched_at < ?
         UNION SELECT id FROM (SELECT id FROM uploads WHERE machine = ? AND client_id <> ?
                               ORDER BY touched_at DESC LIMIT ? OFFSET ?)",
    )
    .bind(now - EXPIRE_MS)
    .bind(machine)
    .bind(client_id)
    .bind(i64::MAX)
    .bind(OPEN_PER_MACHINE - 1)
    .fetch_all(&mut *tx)
    .await?;
    for id in stale {
        drop_upload(&mut tx, id).await?;
    }
    sqlx::query(
        "INSERT INTO uploads(machine, client_id, root, scanned_at, started_at, touched_at, salt) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(machine, client_id) DO UPDATE SET touched_at = excluded.touched_at",
    )
    .bind(machine)
    .bind(client_id)
    .bind(root)
    .bind(scanned_at)
    .bind(now)
    .bind(now)
    .bind(hex::encode(rand::random::<[u8; 16]>()))
    .execute(&mut *tx)
    .await?;
    let u = sqlx::query_as(
        "SELECT id, machine, client_id, root, scanned_at, salt FROM uploads WHERE machine = ? AND client_id = ?",
    )
    .bind(machine)
    .bind(client_id)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(u)
}

/// The scan a finished upload of (`machine`, `client_id`) was stored as.
pub async fn committed(pool: &Store, machine: &str, client_id: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar(
        "SELECT s.id FROM scans s JOIN machines m ON m.id = s.machine_id WHERE m.name = ? AND s.client_id = ?",
    )
    .bind(machine)
    .bind(client_id)
    .fetch_optional(pool)
    .await
}

/// Drop an upload whose scan was stored already (a repeated commit).
pub async fn discard(db: &super::Db, id: i64) -> sqlx::Result<()> {
    let (_turn, mut tx) = super::write::begin(db).await?;
    drop_upload(&mut tx, id).await?;
    tx.commit().await
}

/// The open upload `id` of `machine` (another machine's id reads as none).
pub async fn get(pool: &Store, machine: &str, id: i64) -> sqlx::Result<Option<Upload>> {
    sqlx::query_as("SELECT id, machine, client_id, root, scanned_at, salt FROM uploads WHERE id = ? AND machine = ?")
        .bind(id)
        .bind(machine)
        .fetch_optional(pool)
        .await
}

/// The numbers of the parts an upload holds, in order.
pub async fn parts(pool: &Store, id: i64) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar("SELECT n FROM upload_parts WHERE upload_id = ? ORDER BY n").bind(id).fetch_all(pool).await
}

/// Store part `n` (gzipped JSON of a screened [`ScanPart`]), replacing a part sent before.
pub async fn put_part(db: &super::Db, id: i64, n: i64, entries: i64, skipped: i64, gz: &[u8]) -> sqlx::Result<()> {
    let (_turn, mut tx) = super::write::begin(db).await?;
    sqlx::query(
        "INSERT INTO upload_parts(upload_id, n, entries, skipped, body) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT(upload_id, n) DO UPDATE SET entries = excluded.entries, skipped = excluded.skipped,
           body = excluded.body",
    )
    .bind(id)
    .bind(n)
    .bind(entries)
    .bind(skipped)
    .bind(gz)
    .execute(&mut *tx)
    .await?;
    touch(&mut tx, id).await?;
    tx.commit().await
}

/// Store a blob's text as the client gzipped it (its sha256 checked by the caller).
pub async fn put_blob(db: &super::Db, id: i64, sha256: &str, text_bytes: i64, gz: &[u8]) -> sqlx::Result<()> {
    let (_turn, mut tx) = super::write::begin(db).await?;
    sqlx::query(
        "INSERT INTO upload_blobs(upload_id, sha256, text_bytes, gz) VALUES (?, ?, ?, ?)
         ON CONFLICT(upload_id, sha256) DO UPDATE SET text_bytes = excluded.text_bytes, gz = excluded.gz",
    )
    .bind(id)
    .bind(sha256)
    .bind(text_bytes)
    .bind(gz)
    .execute(&mut *tx)
    .await?;
    touch(&mut tx, id).await?;
    tx.commit().await
}

async fn touch(tx: &mut Tx<'static>, id: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE uploads SET touched_at = ? WHERE id = ?")
        .bind(super::now_ms())
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Part `n` of an upload, as stored (read inside the commit's transaction).
pub async fn read_part(tx: &mut Tx<'static>, id: i64, n: i64) -> anyhow::Result<ScanPart> {
    let gz: Vec<u8> = sqlx::query_scalar("SELECT body FROM upload_parts WHERE upload_id = ? AND n = ?")
        .bind(id)
        .bind(n)
        .fetch_one(&mut **tx)
        .await?;
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text)?;
    Ok(serde_json::from_slice(&text)?)
}

/// The texts of the given blobs that the upload holds (`sha256 -> text`).
pub async fn read_blobs(
    tx: &mut Tx<'static>,
    id: i64,
    shas: &[&str],
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let rows: Vec<(String, Vec<u8>)> = sqlx::query_as(
        "SELECT sha256, gz FROM upload_blobs WHERE upload_id = ? AND sha256 IN (SELECT value FROM json_each(?))",
    )
    .bind(id)
    .bind(serde_json::to_string(shas)?)
    .fetch_all(&mut **tx)
    .await?;
    let mut out = std::collections::BTreeMap::new();
    for (sha, gz) in rows {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text)?;
        out.insert(sha, text);
    }
    Ok(out)
}

/// Text bytes of each of the given blobs that the upload holds: a commit sizes its batches by them.
pub async fn blob_sizes(
    tx: &mut Tx<'static>,
    id: i64,
    shas: &[&str],
) -> sqlx::Result<std::collections::HashMap<String, i64>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT sha256, text_bytes FROM upload_blobs
         WHERE upload_id = ? AND sha256 IN (SELECT value FROM json_each(?))",
    )
    .bind(id)
    .bind(serde_json::to_string(shas).unwrap_or_default())
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Delete an upload and everything staged for it.
pub async fn drop_upload(tx: &mut Tx<'static>, id: i64) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM upload_parts WHERE upload_id = ?").bind(id).execute(&mut **tx).await?;
    sqlx::query("DELETE FROM upload_blobs WHERE upload_id = ?").bind(id).execute(&mut **tx).await?;
    sqlx::query("DELETE FROM uploads WHERE id = ?").bind(id).execute(&mut **tx).await?;
    Ok(())
}
