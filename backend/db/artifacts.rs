//! An entry's files (`artifacts`) and the IR texts stored once by sha256 (`blobs`).

use super::entries::EntryRow;
use serde::Serialize;
use sqlx::{FromRow, QueryBuilder, Row, Sqlite, SqlitePool};

#[derive(Debug, Serialize, Clone, FromRow)]
pub struct ArtifactRow {
    pub name: String,
    pub ext: String,
    pub bytes: i64,
    pub sha256: String,
}

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

/// An artifact with the sha256 of its text (IR is stored in `blobs`; binaries are not).
pub async fn artifact(pool: &SqlitePool, entry_id: i64, name: &str) -> sqlx::Result<Option<ArtifactRow>> {
    sqlx::query_as("SELECT name, ext, bytes, sha256 FROM artifacts WHERE entry_id = ? AND name = ?")
        .bind(entry_id)
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// Text of a stored artifact (IR), by sha256.
pub async fn blob(pool: &SqlitePool, sha256: &str) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar("SELECT content FROM blobs WHERE sha256 = ?").bind(sha256).fetch_optional(pool).await
}

/// Of the given sha256s, those the server has no blob for.
pub async fn missing_blobs(pool: &SqlitePool, shas: &[String]) -> sqlx::Result<Vec<String>> {
    let mut missing = vec![];
    for part in shas.chunks(500) {
        let mut qb = QueryBuilder::<Sqlite>::new("SELECT sha256 FROM blobs WHERE sha256 IN (");
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
