//! Inductor's max-autotune decisions as stored (`inductor_autotune`, migration 0011): replaced
//! per root by each scan, read by `GET /api/v1/autotune`.

use super::Page;
use crate::model::{AutotuneChoice, InductorAutotune};
use serde::Serialize;
use sqlx::SqlitePool;

/// Replace the decisions of the scan's root with `rows` (a scan of an Inductor dir finds them
/// all, so what a root no longer holds goes).
pub async fn replace(pool: &SqlitePool, scan_id: i64, rows: &[InductorAutotune]) -> sqlx::Result<()> {
    let mut tx = pool.begin().await?;
    let (machine_id, root): (i64, String) =
        sqlx::query_as("SELECT machine_id, root FROM scans WHERE id = ?").bind(scan_id).fetch_one(&mut *tx).await?;
    sqlx::query("DELETE FROM inductor_autotune WHERE machine_id = ? AND root = ?")
        .bind(machine_id)
        .bind(&root)
        .execute(&mut *tx)
        .await?;
    for r in rows {
        let winner = r.choices.first().map(|c| c.name.clone()).unwrap_or_default();
        sqlx::query(
            "INSERT INTO inductor_autotune (machine_id, root, path, op, key, precision, choices_json, winner, scan_id)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(machine_id)
        .bind(&root)
        .bind(&r.path)
        .bind(&r.op)
        .bind(&r.key)
        .bind(&r.precision)
        .bind(serde_json::to_string(&r.choices).unwrap_or_else(|_| "[]".into()))
        .bind(winner)
        .bind(scan_id)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// A decision as `GET /api/v1/autotune` returns it.
#[derive(Debug, Serialize)]
pub struct AutotuneRow {
    pub source: &'static str,
    pub machine: String,
    pub op: String,
    pub key: String,
    pub precision: String,
    pub choices: Vec<AutotuneChoice>,
    pub winner: String,
}

/// Inductor's decisions, by machine, op and key; `kernel` filters on the op (`addmm`, `mm`, ...)
/// or on a choice name (`triton_mm_3`).
pub async fn rows(
    pool: &SqlitePool,
    machine: Option<&str>,
    kernel: Option<&str>,
    page: Page,
) -> sqlx::Result<Vec<AutotuneRow>> {
    let rows: Vec<(String, String, String, String, String, String)> = sqlx::query_as(
        "SELECT m.name, a.op, a.key, a.precision, a.choices_json, a.winner FROM inductor_autotune a
         JOIN machines m ON m.id = a.machine_id
         WHERE (?1 IS NULL OR m.name = ?1)
           AND (?2 IS NULL OR a.op = ?2 OR EXISTS (SELECT 1 FROM json_each(a.choices_json) WHERE json_extract(value, '$.name') = ?2))
         ORDER BY m.name, a.op, a.key, a.precision, a.id LIMIT ?3 OFFSET ?4",
    )
    .bind(machine)
    .bind(kernel)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(machine, op, key, precision, choices, winner)| AutotuneRow {
            source: "inductor",
            machine,
            op,
            key,
            precision,
            choices: serde_json::from_str(&choices).unwrap_or_default(),
            winner,
        })
        .collect())
}
