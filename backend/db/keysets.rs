//! Per machine and kernel, the keys of the live kernel entries as one digest (migration 0023):
//! a machine-pair invalidation report skips the kernels whose key sets are equal on both
//! machines (all kept, whatever the entries hold) and reads only the others
//! (`explain::load::machine_sides`). Two machines that run the same jobs share most kernels'
//! key sets, so their report reads a few kernels instead of every entry of both.
//!
//! The rows of a machine are recomputed when its generation (`report_gens`, moved by triggers
//! on every change a report reads) differs from the one they were computed at: every writer is
//! covered without being told. The generation is read before the entries, so a change landing
//! meanwhile leaves the rows marked stale, never wrong.

use super::explain::{LightRow, light_now};
use sha2::{Digest, Sha256};
use sqlx::SqlitePool;
use std::collections::HashMap;

/// One kernel's key set on one machine.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeySet {
    pub kernel: String,
    /// Live kernel entries (every root of the machine).
    pub entries: i64,
    /// Distinct keys among them.
    pub keys: i64,
    /// Entries whose group file points elsewhere.
    pub relocated: i64,
    /// sha256 of the distinct keys, sorted, one per line.
    pub digest: Vec<u8>,
}

impl KeySet {
    /// Whether this kernel is all kept from `old` to `self`: the same keys, each entry once on
    /// both sides (a key held twice, under two roots, goes the long way).
    pub fn all_kept_from(&self, old: &KeySet) -> bool {
        self.digest == old.digest && self.keys == old.keys && self.entries == self.keys && old.entries == old.keys
    }
}

/// The key sets of `rows` (ordered by kernel and key, as [`light_now`] reads them), by kernel;
/// entries without a kernel name are not summed up.
pub fn of_rows(rows: &[LightRow]) -> Vec<KeySet> {
    let mut out: Vec<KeySet> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let Some(kernel) = rows[i].kernel.as_deref() else {
            i += 1;
            continue;
        };
        let mut j = i;
        let (mut h, mut keys, mut relocated, mut last) = (Sha256::new(), 0, 0, None::<&str>);
        while j < rows.len() && rows[j].kernel.as_deref() == Some(kernel) {
            let k = rows[j].key.as_str();
            if last != Some(k) {
                h.update(k.as_bytes());
                h.update(b"\n");
                keys += 1;
                last = Some(k);
            }
            relocated += rows[j].relocated as i64;
            j += 1;
        }
        out.push(KeySet {
            kernel: kernel.to_string(),
            entries: (j - i) as i64,
            keys,
            relocated,
            digest: h.finalize().to_vec(),
        });
        i = j;
    }
    out
}

/// The key sets of `machine` now, recomputed first when its generation moved since they were.
pub async fn current(pool: &SqlitePool, machine: &str) -> sqlx::Result<HashMap<String, KeySet>> {
    let stamp: Option<(i64, i64, Option<i64>)> = sqlx::query_as(
        "SELECT m.id, COALESCE(g.gen, 0), k.gen FROM machines m
         LEFT JOIN report_gens g ON g.machine_id = m.id LEFT JOIN kernel_keysets_gen k ON k.machine_id = m.id
         WHERE m.name = ?",
    )
    .bind(machine)
    .fetch_optional(pool)
    .await?;
    let Some((id, now, stored)) = stamp else { return Ok(HashMap::new()) };
    if stored != Some(now) {
        let sets = of_rows(&light_now(pool, machine).await?);
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("DELETE FROM kernel_keysets WHERE machine_id = ?").bind(id).execute(&mut *tx).await?;
        for s in &sets {
            sqlx::query(
                "INSERT INTO kernel_keysets(machine_id, kernel, entries, keys, relocated, digest) VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(&s.kernel)
            .bind(s.entries)
            .bind(s.keys)
            .bind(s.relocated)
            .bind(&s.digest)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("INSERT INTO kernel_keysets_gen(machine_id, gen) VALUES (?, ?) ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen")
            .bind(id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        return Ok(sets.into_iter().map(|s| (s.kernel.clone(), s)).collect());
    }
    let rows: Vec<KeySet> =
        sqlx::query_as("SELECT kernel, entries, keys, relocated, digest FROM kernel_keysets WHERE machine_id = ?")
            .bind(id)
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().map(|s| (s.kernel.clone(), s)).collect())
}

/// Kernel entries of `machine` now (as [`light_now`]) of the kernels `only` and those without a
/// kernel name, ordered by kernel and key.
pub async fn light_now_of(pool: &SqlitePool, machine: &str, only: &[&str]) -> sqlx::Result<Vec<LightRow>> {
    let mut rows = light_now_unnamed(pool, machine).await?;
    for part in only.chunks(500) {
        let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(format!(
            "SELECT {} FROM entries e INDEXED BY entries_listing
             WHERE e.machine_id = (SELECT id FROM machines WHERE name = ",
            super::explain::rows_json(super::explain::LIGHT_ROW)
        ));
        qb.push_bind(machine);
        qb.push(format!(
            ") AND e.kind IN {} AND e.removed_at IS NULL AND e.kernel IN (",
            crate::model::EntryKind::sql_list(super::explain::KERNEL_KINDS)
        ));
        let mut sep = qb.separated(", ");
        for k in part {
            sep.push_bind(*k);
        }
        qb.push(")");
        rows.extend(super::explain::light_rows(qb.build_query_scalar().fetch_one(pool).await?)?);
    }
    rows.sort_by(|a, b| (&a.kernel, &a.key).cmp(&(&b.kernel, &b.key)));
    Ok(rows)
}

async fn light_now_unnamed(pool: &SqlitePool, machine: &str) -> sqlx::Result<Vec<LightRow>> {
    let sql = format!(
        "SELECT {} FROM entries e INDEXED BY entries_listing
         WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?1) AND e.kernel IS NULL AND e.kind IN {}
           AND e.removed_at IS NULL",
        super::explain::rows_json(super::explain::LIGHT_ROW),
        crate::model::EntryKind::sql_list(super::explain::KERNEL_KINDS)
    );
    super::explain::light_rows(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(machine).fetch_one(pool).await?)
}

/// Bring every machine's key sets up to date (a server started on a database written by an
/// older build, or by local scans while no server ran), one machine at a time; a failure is
/// logged, and the pair reports recompute the rows on first use anyway.
pub async fn warm(pool: SqlitePool) {
    let names: Vec<String> = match sqlx::query_scalar("SELECT name FROM machines ORDER BY name").fetch_all(&pool).await
    {
        Ok(n) => n,
        Err(e) => return tracing::warn!("kernel key sets not warmed: {e}"),
    };
    let t = std::time::Instant::now();
    for m in &names {
        if let Err(e) = current(&pool, m).await {
            tracing::warn!(machine = %m, "kernel key sets not warmed: {e}");
        }
    }
    tracing::info!(machines = names.len(), ms = t.elapsed().as_millis() as u64, "kernel key sets up to date");
}
