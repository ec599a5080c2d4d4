//! Per machine and kernel, the keys of the live kernel entries as one digest (migration 0023):
//! a machine-pair invalidation report skips the kernels whose key sets are equal on both
//! machines (all kept, whatever the entries hold) and reads only the others
//! (`answers::load::machine_sides`). Two machines that run the same jobs share most kernels'
//! key sets, so their report reads a few kernels instead of every entry of both.
//!
//! The rows of a machine are recomputed when its generation (`report_gens`, moved by triggers
//! on every change a report reads) differs from the one they were computed at: every writer is
//! covered without being told. The generation is read before the entries, so a change landing
//! meanwhile leaves the rows marked stale, never wrong.

use super::explain::{LightRow, light_now};
use crate::db::Store;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

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

/// The kernels of `new` all kept from `old` (the same kernel there, [`KeySet::all_kept_from`]).
pub fn all_kept<'a>(old: &HashMap<String, KeySet>, new: &'a HashMap<String, KeySet>) -> HashSet<&'a str> {
    new.iter().filter(|(k, s)| old.get(*k).is_some_and(|o| s.all_kept_from(o))).map(|(k, _)| k.as_str()).collect()
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

/// A machine's key sets by kernel, shared.
pub type Sets = Arc<HashMap<String, KeySet>>;

/// Key sets read lately, by machine id, with the generation they are of: a machine-pair
/// report reads both machines' sets, and a fleet's pairs read each machine's again and again
/// (4,000 rows a machine of the bench fleet). At most [`KEPT_SETS`] sets in all; a machine's
/// sets of another generation are not handed out (and replaced when read again).
#[derive(Debug)]
pub struct Kept(crate::bounded::Bounded<i64, (i64, Sets)>);

/// ~150 bytes a set (kernel name, digest, counts): ~30 MB at most, 50 bench machines.
pub const KEPT_SETS: usize = 200_000;

impl Default for Kept {
    fn default() -> Kept {
        // one shard: a machine's sets are kept unless they alone pass the bound
        Kept(crate::bounded::Bounded::weighed(KEPT_SETS as u64, 64, Some(1), |_, (_, s): &(i64, Sets)| s.len() as u64))
    }
}

impl Kept {
    fn get(&self, id: i64, generation: i64) -> Option<Sets> {
        self.0.get(&id).filter(|(g, _)| *g == generation).map(|(_, s)| s)
    }

    fn keep(&self, id: i64, generation: i64, sets: Sets) {
        self.0.insert(id, (generation, sets));
    }

    /// Machines whose sets are kept now.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The key sets of `machine` when they are kept in memory for its generation now; `None` when
/// they would have to be read or recomputed (nothing is read but the generation).
pub async fn kept_now(db: &super::Db, machine: &str) -> sqlx::Result<Option<Sets>> {
    let pool = db.pool();
    let stamp: Option<(i64, i64)> = sqlx::query_as(
        "SELECT m.id, COALESCE(g.gen, 0) FROM machines m LEFT JOIN report_gens g ON g.machine_id = m.id
         WHERE m.name = ?",
    )
    .bind(machine)
    .fetch_optional(pool)
    .await?;
    let Some((id, now)) = stamp else { return Ok(None) };
    Ok(db.keysets.get(id, now))
}

/// Live entries of `machine` without a kernel name of the kinds a report reads.
pub async fn unnamed_count(pool: &Store, machine: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) {}", unnamed_of_machine())))
        .bind(machine)
        .fetch_one(pool)
        .await
}

/// `FROM` and `WHERE` of `?1`'s live entries without a kernel name of the kinds a report reads
/// (`e`, their facts `f`): from the facts of those kinds without a name (`facts_unnamed`), each
/// probing the machine's presence. Read from the machine's entries instead, a machine's 10,000
/// named entries cost ~12 ms to find none (every pair report reads both sides).
fn unnamed_of_machine() -> String {
    format!(
        "FROM facts f INDEXED BY facts_unnamed
         CROSS JOIN entries e INDEXED BY entries_fact
           ON e.fact_id = f.id AND e.machine_id = (SELECT id FROM machines WHERE name = ?1) AND e.removed_at IS NULL
         WHERE f.kernel IS NULL AND f.kind IN {}",
        crate::model::EntryKind::sql_list(super::explain::KERNEL_KINDS)
    )
}

/// Store `sets` as `machine_id`'s key sets at generation `now`, unless sets of a later
/// generation were stored meanwhile (a background store that waited its turn).
async fn store(pool: &Store, _turn: super::write::Turn, id: i64, now: i64, sets: &Sets) -> sqlx::Result<()> {
    let mut tx = pool.begin_write().await?;
    let stored: Option<i64> = sqlx::query_scalar("SELECT gen FROM kernel_keysets_gen WHERE machine_id = ?")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    if stored.is_some_and(|g| g >= now) {
        return tx.commit().await;
    }
    sqlx::query("DELETE FROM kernel_keysets WHERE machine_id = ?").bind(id).execute(&mut *tx).await?;
    let mut sorted: Vec<&KeySet> = sets.values().collect();
    sorted.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    // 150 rows a statement (900 of SQLite's 32,766 variables): one statement a row was a
    // thousand round trips to SQLite's thread for a node of a thousand kernels
    for part in sorted.chunks(150) {
        let mut qb = sqlx::QueryBuilder::<sqlx::Any>::new(
            "INSERT INTO kernel_keysets(machine_id, kernel, entries, keys, relocated, digest) ",
        );
        qb.push_values(part, |mut b, s| {
            b.push_bind(id)
                .push_bind(&s.kernel)
                .push_bind(s.entries)
                .push_bind(s.keys)
                .push_bind(s.relocated)
                .push_bind(&s.digest);
        });
        qb.build().execute(&mut *tx).await?;
    }
    sqlx::query("INSERT INTO kernel_keysets_gen(machine_id, gen) VALUES (?, ?) ON CONFLICT(machine_id) DO UPDATE SET gen = excluded.gen")
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// The key sets of `machine` now, recomputed first when its generation moved since they were.
/// The generation is read first: sets kept or stored for it are the sets of the entries now,
/// and a change landing after the read leaves them marked with the older generation (read
/// again next time), never wrong for the generation they carry.
pub async fn current(db: &super::Db, machine: &str) -> sqlx::Result<Sets> {
    let pool = db.pool();
    let stamp: Option<(i64, i64, Option<i64>)> = sqlx::query_as(
        "SELECT m.id, COALESCE(g.gen, 0), k.gen FROM machines m
         LEFT JOIN report_gens g ON g.machine_id = m.id LEFT JOIN kernel_keysets_gen k ON k.machine_id = m.id
         WHERE m.name = ?",
    )
    .bind(machine)
    .fetch_optional(pool)
    .await?;
    let Some((id, now, stored)) = stamp else { return Ok(Arc::default()) };
    if let Some(sets) = db.keysets.get(id, now) {
        return Ok(sets);
    }
    if stored != Some(now) {
        let sets: Sets =
            Arc::new(of_rows(&light_now(pool, machine).await?).into_iter().map(|s| (s.kernel.clone(), s)).collect());
        // Stored in this process's turn to write when it is free now; else (a scan landing: up
        // to ~30 s at 50,000 entries) in the background, and this request goes on with the sets
        // kept in memory.
        match super::write::turn_now(db) {
            Some(turn) => store(pool, turn, id, now, &sets).await?,
            None => {
                let (db, sets) = (db.clone(), sets.clone());
                tokio::spawn(async move {
                    let turn = super::write::turn(&db).await;
                    if let Err(e) = store(db.pool(), turn, id, now, &sets).await {
                        tracing::warn!(machine = id, error = %e, "could not store key sets (computed again when asked)");
                    }
                });
            }
        }
        db.keysets.keep(id, now, sets.clone());
        return Ok(sets);
    }
    // One JSON text, digests in hex: sqlx hands each row over from its SQLite thread on its own,
    // and a bench machine's 4,000 rows took ~37 ms that way.
    let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM kernel_keysets WHERE machine_id = ?",
        super::json_rows::rows_json("json_array(kernel, entries, keys, relocated, hex(digest))")
    )))
    .bind(id)
    .fetch_one(pool)
    .await?;
    let rows: Vec<(String, i64, i64, i64, String)> = super::json_rows::json_rows(text)?;
    let mut sets = HashMap::with_capacity(rows.len());
    for (kernel, entries, keys, relocated, digest) in rows {
        let digest = hex::decode(digest).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        sets.insert(kernel.clone(), KeySet { kernel, entries, keys, relocated, digest });
    }
    let sets: Sets = Arc::new(sets);
    db.keysets.keep(id, now, sets.clone());
    Ok(sets)
}

/// Kernel entries of `machine` now (as [`light_now`]) of the kernels `only` and those without a
/// kernel name, ordered by kernel and key.
pub async fn light_now_of(pool: &Store, machine: &str, only: &[&str]) -> sqlx::Result<Vec<LightRow>> {
    let mut rows = light_now_unnamed(pool, machine).await?;
    for part in only.chunks(500) {
        let mut qb = sqlx::QueryBuilder::<sqlx::Any>::new(format!(
            "SELECT {} FROM entry_rows e
             WHERE e.machine_id = (SELECT id FROM machines WHERE name = ",
            super::json_rows::rows_json(super::explain::LIGHT_ROW)
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

async fn light_now_unnamed(pool: &Store, machine: &str) -> sqlx::Result<Vec<LightRow>> {
    // (`LIGHT_ROW` over `entry_rows`: the key and name are the fact's)
    let light = super::json_rows::rows_json("json_array(e.id, f.key, f.kernel, e.relocated)");
    let sql = format!("SELECT {light} {}", unnamed_of_machine());
    super::explain::light_rows(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(machine).fetch_one(pool).await?)
}

/// Bring every machine's key sets up to date (a server started on a database written by an
/// older build, or by local scans while no server ran), one machine at a time; a failure is
/// logged, and the pair reports recompute the rows on first use anyway.
pub async fn warm(db: super::Db) {
    let pool = db.pool();
    let names: Vec<String> = match sqlx::query_scalar("SELECT name FROM machines ORDER BY name").fetch_all(pool).await {
        Ok(n) => n,
        Err(e) => return tracing::warn!("kernel key sets not warmed: {e}"),
    };
    let t = std::time::Instant::now();
    for m in &names {
        if let Err(e) = current(&db, m).await {
            tracing::warn!(machine = %m, "kernel key sets not warmed: {e}");
        }
    }
    tracing::info!(machines = names.len(), ms = t.elapsed().as_millis() as u64, "kernel key sets up to date");
}
