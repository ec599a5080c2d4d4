//! Autotune decisions for `GET /api/v1/autotune`: Inductor's max-autotune choices as stored
//! (`inductor_autotune`, migration 0013, replaced per root by each scan), then Triton's own
//! `.autotune.json` results (read from their stored text).

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

/// Inductor's decisions (by machine, op and key), then Triton's (by machine, kernel, entry);
/// `kernel` filters on the op (`addmm`) or a choice name (`triton_mm_3`) for Inductor, on the
/// kernel for Triton.
pub async fn rows(
    pool: &SqlitePool,
    machine: Option<&str>,
    kernel: Option<&str>,
    page: Page,
) -> sqlx::Result<Vec<AutotuneRow>> {
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) {INDUCTOR_WHERE}")))
        .bind(machine)
        .bind(kernel)
        .fetch_one(pool)
        .await?;
    let mut out = inductor_rows(pool, machine, kernel, page).await?;
    let limit = if page.limit < 0 { -1 } else { page.limit - out.len() as i64 };
    if limit != 0 {
        let offset = (page.offset - n).max(0);
        out.extend(triton_rows(pool, machine, kernel, Page { limit, offset }).await?);
    }
    Ok(out)
}

const INDUCTOR_WHERE: &str = "FROM inductor_autotune a JOIN machines m ON m.id = a.machine_id
     WHERE (?1 IS NULL OR m.name = ?1)
       AND (?2 IS NULL OR a.op = ?2 OR EXISTS (SELECT 1 FROM json_each(a.choices_json) WHERE json_extract(value, '$.name') = ?2))";

/// Triton's `.autotune.json` results: one row per live autotune entry, its choices the configs
/// (named by their JSON, timed by their median), the key Triton's autotune key.
async fn triton_rows(
    pool: &SqlitePool,
    machine: Option<&str>,
    kernel: Option<&str>,
    page: Page,
) -> sqlx::Result<Vec<AutotuneRow>> {
    let rows: Vec<(String, Option<String>, String)> = sqlx::query_as(
        "SELECT m.name, e.kernel, b.content FROM entries e JOIN machines m ON m.id = e.machine_id
         JOIN artifacts a ON a.entry_id = e.id AND a.ext = 'autotune.json' JOIN blobs b ON b.sha256 = a.sha256
         WHERE e.kind = 'autotune' AND e.removed_at IS NULL AND (?1 IS NULL OR m.name = ?1) AND (?2 IS NULL OR e.kernel = ?2)
         ORDER BY m.name, e.kernel, e.key LIMIT ?3 OFFSET ?4",
    )
    .bind(machine)
    .bind(kernel)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(machine, kernel, text)| {
            let at = crate::scan::autotune::parse_autotune(&text).ok()?;
            let ms = |t: &[f64]| t.first().copied().filter(|m| m.is_finite());
            let winner = at.configs.iter().find(|c| c.winner).map(|c| c.config.to_string()).unwrap_or_default();
            let mut choices: Vec<AutotuneChoice> = at
                .configs
                .iter()
                .map(|c| AutotuneChoice { name: c.config.to_string(), ms: ms(&c.timings_ms) })
                .collect();
            let at_ms = |c: &AutotuneChoice| c.ms.unwrap_or(f64::INFINITY);
            choices.sort_by(|a, b| at_ms(a).total_cmp(&at_ms(b)).then_with(|| a.name.cmp(&b.name)));
            let key = at.key.to_string();
            Some(AutotuneRow {
                source: "triton",
                machine,
                op: kernel.unwrap_or_default(),
                key,
                precision: String::new(),
                choices,
                winner,
            })
        })
        .collect())
}

async fn inductor_rows(
    pool: &SqlitePool,
    machine: Option<&str>,
    kernel: Option<&str>,
    page: Page,
) -> sqlx::Result<Vec<AutotuneRow>> {
    let rows: Vec<(String, String, String, String, String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT m.name, a.op, a.key, a.precision, a.choices_json, a.winner {INDUCTOR_WHERE}
             ORDER BY m.name, a.op, a.key, a.precision, a.id LIMIT ?3 OFFSET ?4"
    )))
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
