//! Cache entries as stored (one row per machine and key, removed ones kept): single entries,
//! lists for the API, a kernel's live entries in variant order, and what points at an entry.

use super::Page;
use super::Store;
use super::artifacts::{ArtifactRow, with_artifacts};
use serde::Serialize;
use sqlx::FromRow;

/// An entry as `/api/v1/entries` returns it.
#[derive(Debug, Serialize, serde::Deserialize, Clone, FromRow)]
pub struct EntryRow {
    #[serde(skip_serializing)]
    pub id: i64,
    pub machine: String,
    pub key: String,
    pub kind: crate::model::EntryKind,
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
    #[serde(deserialize_with = "super::json_rows::int_bool")]
    #[sqlx(try_from = "crate::db::Flag")]
    pub relocated: bool,
    pub partial: Option<String>,
    pub binary_sha256: Option<String>,
    pub removed_at: Option<i64>,
    /// The cache dir (scan root) the entry sits in, and its dir below it.
    pub root: String,
    pub dir: String,
    /// For a vLLM cache: the `rank_<i>_<j>` dir the root is in.
    #[sqlx(skip)]
    #[serde(default)]
    pub rank: Option<String>,
    #[sqlx(skip)]
    #[serde(default)]
    pub artifacts: Vec<ArtifactRow>,
}

pub const ENTRY_COLUMNS: &str = "e.id, m.name AS machine, e.key, e.kind, e.kernel, e.backend, e.arch, e.warp_size,
    e.num_warps, e.num_stages, e.num_ctas, e.triton_version, e.signature, e.shapes, e.created_at, e.bytes,
    e.registers, e.spills, e.shared_bytes, e.relocated, e.partial, e.binary_sha256, e.removed_at, e.root, e.dir";

/// [`ENTRY_COLUMNS`] by name, in [`EntryRow`]'s order.
const ENTRY_FIELDS: &str = "id, machine, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas,
    triton_version, signature, shapes, created_at, bytes, registers, spills, shared_bytes, relocated, partial,
    binary_sha256, removed_at, root, dir";

/// The rows of `inner` (a query selecting [`ENTRY_COLUMNS`], its order kept) as one JSON text,
/// read by [`entry_rows`]: sqlx hands each row over from its SQLite thread on its own, a wake-up
/// each, and a page's 51 variants or 100 listed entries were most of its database time under
/// load (`db::json_rows::json_rows`).
fn as_entry_rows(inner: &str) -> String {
    format!("{}{inner})", entry_rows_head())
}

/// [`as_entry_rows`] up to where the inner query starts (its closing parenthesis follows it).
fn entry_rows_head() -> String {
    format!("SELECT {} FROM (", super::json_rows::rows_json(&format!("json_array({ENTRY_FIELDS})")))
}

/// The [`EntryRow`]s of an [`as_entry_rows`] query's text, in its order.
fn entry_rows(text: String) -> sqlx::Result<Vec<EntryRow>> {
    super::json_rows::json_rows(text)
}

pub async fn entries(
    pool: &Store,
    machine: Option<&str>,
    kernel: Option<&str>,
    include_removed: bool,
    page: Page,
) -> sqlx::Result<Vec<EntryRow>> {
    if include_removed || page.offset < SKIP_FROM {
        return entries_walked(pool, machine, kernel, include_removed, page).await;
    }
    entries_skipped(pool, machine, kernel, page, SKIP_FROM).await
}

/// From this `offset` on, a page of live entries skips whole machines and kernels by their
/// counts ([`entries_skipped`]); below it, walking the skipped index rows costs less than
/// reading the counts (~10,000 index rows a millisecond).
const SKIP_FROM: i64 = 2_000;

/// A page read in the listing's order, its `offset` rows walked and dropped.
async fn entries_walked(
    pool: &Store,
    machine: Option<&str>,
    kernel: Option<&str>,
    include_removed: bool,
    page: Page,
) -> sqlx::Result<Vec<EntryRow>> {
    // Each filter is written only when given: `(?1 IS NULL OR m.name = ?1)` kept SQLite from
    // using an index, and a page read and sorted every entry of the fleet (3 s at 1.25M).
    // Machines by name (their unique index), then the facts in the page's order
    // (`facts_kernel`: kernel, num_warps, num_stages, key), each probing the machine's presence
    // (`entries_fact`); `CROSS JOIN` keeps that nesting: a page's ids are read in order and stop
    // at its limit, then its rows are read by id. Joined the other way, SQLite sorted every entry
    // of a machine (or of the fleet, without `machine=`) for each page.
    let mut qb = sqlx::QueryBuilder::<sqlx::Any>::new(format!(
        "{}SELECT {ENTRY_COLUMNS} FROM (SELECT e.id AS pid, m.name AS pm, f.kernel AS pk, f.num_warps AS pw,
           f.num_stages AS ps, f.key AS pkey
         FROM machines m CROSS JOIN facts f INDEXED BY facts_kernel
           CROSS JOIN entries e INDEXED BY entries_fact ON e.fact_id = f.id AND e.machine_id = m.id WHERE true",
        entry_rows_head()
    ));
    if let Some(m) = machine {
        qb.push(" AND m.name = ").push_bind(m);
    }
    if let Some(k) = kernel {
        qb.push(" AND f.kernel = ").push_bind(k);
    }
    if !include_removed {
        qb.push(" AND e.removed_at IS NULL");
    }
    qb.push(" ORDER BY m.name, f.kernel, f.num_warps, f.num_stages, f.key LIMIT ").push_bind(page.limit);
    qb.push(" OFFSET ").push_bind(page.offset);
    qb.push(
        ") p CROSS JOIN entry_rows e ON e.id = p.pid JOIN machines m ON m.id = e.machine_id
         ORDER BY p.pm, p.pk, p.pw, p.ps, p.pkey)",
    );
    let mut rows = entry_rows(qb.build_query_scalar().fetch_one(pool).await?)?;
    with_artifacts(pool, &mut rows).await?;
    Ok(rows)
}

/// A page of live entries deep in the listing, found by the live counts the triggers of
/// migration 0027 keep instead of by walking the `offset` rows before it (a 900,000 offset into
/// a 1M-entry fleet walked 900,000 index rows):
/// - the machine the page starts in, from the machines' counts in name order (the listing's
///   order; with `kernel=`, that kernel's count on each machine);
/// - without `kernel=`, when the page starts `group_from` rows or more into that machine, the
///   kernel group it starts in, from the machine's per-kernel counts in the listing's order
///   (the unnamed first, then by name), summed here (a machine has a kernel name per ~12
///   entries: SQLite's window sum over 4,000 groups took 4-7 ms, their counts as one text 1 ms);
/// - then that machine's rows from the group on, the rest of the offset walked (at most one
///   kernel group), and the machines after it.
///
/// All in one read transaction: the counts and the rows are of the same commit whatever ingest
/// writes meanwhile.
async fn entries_skipped(
    pool: &Store,
    machine: Option<&str>,
    kernel: Option<&str>,
    page: Page,
    group_from: i64,
) -> sqlx::Result<Vec<EntryRow>> {
    let mut tx = pool.begin().await?;
    let count = if kernel.is_some() {
        "(SELECT live FROM entry_counts WHERE machine_id = m.id AND named = 1 AND kernel = ?2)"
    } else {
        "(SELECT live FROM machine_counts WHERE machine_id = m.id)"
    };
    let only = if machine.is_some() { " AND m.name = ?1" } else { "" };
    let start: Option<(i64, String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH mc AS (SELECT m.id, m.name, COALESCE({count}, 0) AS live FROM machines m WHERE true{only}),
              mu AS (SELECT id, name, live, SUM(live) OVER (ORDER BY name ROWS UNBOUNDED PRECEDING) AS upto FROM mc)
         SELECT id, name, ?3 - (upto - live) FROM mu WHERE upto > ?3 ORDER BY name LIMIT 1"
    )))
    .bind(machine)
    .bind(kernel)
    .bind(page.offset)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((id, name, mut skip)) = start else {
        return Ok(vec![]);
    };
    // (named, kernel) of the group the page starts in; None: the machine's first row
    let mut group: Option<(bool, String)> = None;
    if kernel.is_none() && skip >= group_from {
        let lives: Option<String> = sqlx::query_scalar(
            "SELECT group_concat(live, ',' ORDER BY named, kernel) FROM entry_counts WHERE machine_id = ? AND live > 0",
        )
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        let (mut before, mut at) = (0i64, None);
        for (i, live) in lives.iter().flat_map(|l| l.split(',')).enumerate() {
            let live: i64 = live.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            if before + live > skip {
                at = Some(i as i64);
                break;
            }
            before += live;
        }
        if let Some(i) = at {
            let (crate::db::Flag(named), k): (crate::db::Flag, String) = sqlx::query_as(
                "SELECT named, kernel FROM entry_counts WHERE machine_id = ? AND live > 0
                 ORDER BY named, kernel LIMIT 1 OFFSET ?",
            )
            .bind(id)
            .bind(i)
            .fetch_one(&mut *tx)
            .await?;
            group = Some((named, k));
            skip -= before;
        }
    }
    // ?1 machine id, ?2 its name, ?3 kernel filter, ?4 the group's kernel, ?5 limit, ?6 skip.
    // As [`entries_walked`]: the facts in the listing's order (`facts_kernel`), each probing the
    // machine's presence (`entries_fact`), the page's ids first and its rows by id after; through
    // `entry_rows` SQLite read and sorted every entry of the machine (and of the machines after
    // it) for each page.
    let walk = "CROSS JOIN facts f INDEXED BY facts_kernel
                CROSS JOIN entries e INDEXED BY entries_fact ON e.fact_id = f.id AND e.machine_id = m.id";
    let rows = "p CROSS JOIN entry_rows e ON e.id = p.pid JOIN machines m ON m.id = e.machine_id";
    let only_kernel = if kernel.is_some() { " AND f.kernel = ?3" } else { "" };
    let from_group = match &group {
        Some((true, _)) => " AND f.kernel >= ?4",
        _ => "",
    };
    let mut sql = format!(
        "{head}SELECT * FROM (SELECT {ENTRY_COLUMNS} FROM (
             SELECT e.id AS pid, f.kernel AS pk, f.num_warps AS pw, f.num_stages AS ps, f.key AS pkey
             FROM machines m {walk} WHERE m.id = ?1 AND e.removed_at IS NULL{only_kernel}{from_group}
             ORDER BY f.kernel, f.num_warps, f.num_stages, f.key LIMIT ?5 OFFSET ?6
           ) {rows} ORDER BY p.pk, p.pw, p.ps, p.pkey)",
        head = entry_rows_head()
    );
    if machine.is_none() {
        sql.push_str(&format!(
            " UNION ALL SELECT * FROM (SELECT {ENTRY_COLUMNS} FROM (
                  SELECT e.id AS pid, m.name AS pm, f.kernel AS pk, f.num_warps AS pw, f.num_stages AS ps, f.key AS pkey
                  FROM machines m {walk} WHERE m.name > ?2 AND e.removed_at IS NULL{only_kernel}
                  ORDER BY m.name, f.kernel, f.num_warps, f.num_stages, f.key LIMIT ?5
                ) {rows} ORDER BY p.pm, p.pk, p.pw, p.ps, p.pkey)"
        ));
    }
    sql.push_str(" LIMIT ?5)");
    let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(&name)
        .bind(kernel)
        .bind(group.map(|g| g.1))
        .bind(page.limit)
        .bind(skip)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    let mut rows = entry_rows(text)?;
    with_artifacts(pool, &mut rows).await?;
    Ok(rows)
}

/// One entry by machine and key (removed ones included).
pub async fn entry(pool: &Store, machine: &str, key: &str) -> sqlx::Result<Option<EntryRow>> {
    // `+e.machine_id`: the key picks the row (`facts_key`, then the fact's presence); with the
    // machine's index SQLite read all of the machine's entries to find the key (the view's key
    // is its fact's)
    let row: Option<EntryRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {ENTRY_COLUMNS} FROM entry_rows e JOIN machines m ON m.id = +e.machine_id WHERE m.name = ? AND e.key = ?"
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

/// Where an entry sits and its raw JSON columns.
#[derive(Debug, FromRow)]
pub struct EntryDetail {
    pub root: String,
    pub dir: String,
    pub metadata_json: Option<String>,
    pub group_json: Option<String>,
    pub resources_json: Option<String>,
}

/// An entry's texts; its group with this machine's own paths (a fact's group stored by its
/// children's names gets the entry's dir back: `model::group_json_at`).
pub async fn entry_detail(pool: &Store, id: i64) -> sqlx::Result<EntryDetail> {
    let (mut d, at): (EntryDetail, Option<String>) =
        sqlx::query_as::<_, (String, String, Option<String>, Option<String>, Option<String>, Option<String>)>(
            "SELECT e.root, e.dir, COALESCE(e.metadata_json, t.metadata_json), COALESCE(e.group_json, t.group_json),
                COALESCE(e.resources_json, t.resources_json), e.group_at
         FROM entry_rows e LEFT JOIN fact_texts t ON t.fact = e.fact AND t.relocated = e.relocated WHERE e.id = ?",
        )
        .bind(id)
        .fetch_one(pool)
        .await
        .map(|(root, dir, metadata_json, group_json, resources_json, at)| {
            (EntryDetail { root, dir, metadata_json, group_json, resources_json }, at)
        })?;
    let at = at.unwrap_or_else(|| crate::model::entry_path(&d.root, &d.dir));
    d.group_json = d.group_json.map(|g| crate::model::group_json_at(g, &at));
    Ok(d)
}

/// Live entries of one kernel (every kind) in variant order, capped at `limit`: read in the order
/// of the `entries_kernel_variants` index, so the cap bounds the work too.
pub async fn kernel_entries(pool: &Store, kernel: &str, limit: i64) -> sqlx::Result<Vec<EntryRow>> {
    let sql = as_entry_rows(&format!(
        // the index gives this order: without INDEXED BY the bundled SQLite sorted all of a
        // kernel's rows for 51 of them (25 ms at 7,000 entries of one kernel)
        "SELECT {ENTRY_COLUMNS} FROM entry_rows e
         JOIN machines m ON m.id = e.machine_id
         WHERE e.kernel = ? AND e.removed_at IS NULL
         ORDER BY e.backend, e.arch, e.triton_version, e.num_warps, e.num_stages, e.id LIMIT ?"
    ));
    entry_rows(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(kernel).bind(limit).fetch_one(pool).await?)
}

/// Entries with the same binary sha256 under another key (machine, key): the same key on another
/// machine is the same compile, not churn.
pub async fn same_binary(pool: &Store, sha: &str, key: &str, limit: i64) -> sqlx::Result<Vec<(String, String)>> {
    // one JSON text, not a row each (see `as_entry_rows`)
    let sql = format!(
        "SELECT {} FROM (SELECT m.name AS machine, e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id
         WHERE e.binary_sha256 = ? AND e.key <> ? ORDER BY e.id LIMIT ?)",
        super::json_rows::rows_json("json_array(machine, key)")
    );
    let q = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(sha).bind(key).bind(limit);
    super::json_rows::json_rows(q.fetch_one(pool).await?)
}

/// (id, machine, key) of the given entry ids.
pub async fn entry_names(pool: &Store, ids: &[i64]) -> sqlx::Result<Vec<(i64, String, String)>> {
    sqlx::query_as(
        "SELECT e.id, m.name, e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id
         WHERE e.id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))",
    )
    .bind(serde_json::to_string(ids).unwrap_or_default())
    .fetch_all(pool)
    .await
}

/// One live relocated entry of a machine: (root it sits in, its dir, group_json).
pub async fn relocated_example(
    pool: &Store,
    machine_id: i64,
) -> sqlx::Result<Option<(String, String, Option<String>)>> {
    sqlx::query_as(
        "SELECT e.root, e.dir, COALESCE(e.group_json, t.group_json) FROM entry_rows e
           LEFT JOIN fact_texts t ON t.fact = e.fact AND t.relocated = e.relocated
         WHERE e.machine_id = ? AND e.relocated = 1 AND e.removed_at IS NULL LIMIT 1",
    )
    .bind(machine_id)
    .fetch_optional(pool)
    .await
}

/// Does an Inductor `.best_config` name this entry?
pub async fn is_best_config(pool: &Store, machine: &str, key: &str) -> sqlx::Result<bool> {
    sqlx::query_scalar(
        "SELECT EXISTS(SELECT 1 FROM best_configs b JOIN machines m ON m.id = b.machine_id
                       WHERE m.name = ? AND b.triton_cache_hash = ?)",
    )
    .bind(machine)
    .bind(key)
    .fetch_one(pool)
    .await
    .map(|crate::db::Flag(b)| b)
}

/// What the server holds of a machine's root for an upload's scanner (`PreviousAnswer`): the
/// live entries as one JSON text `[[dir, sig, stamp], ...]` (the stamp `null` when none was
/// trusted), read from the machine's presence rows, as an ingest reads them. `[]` for a machine or root the server has not seen.
pub async fn previous_json(pool: &Store, machine: &str, root: &str) -> sqlx::Result<String> {
    let rows = super::json_rows::rows_json("json_array(e.dir, e.sig, e.stamp)");
    let text: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {rows} FROM entry_rows e
         WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?) AND e.root = ? AND e.removed_at IS NULL"
    )))
    .bind(machine)
    .bind(root)
    .fetch_one(pool)
    .await?;
    Ok(format!("{{\"entries\":{}}}", text.as_deref().unwrap_or("[]")))
}

/// Which of these facts (`model::fact_digest`) the server holds in a row it may copy them
/// from: one relocated or not as `relocated` says (`Ingest::present`).
pub async fn facts_held(
    pool: &Store,
    facts: &[String],
    relocated: bool,
) -> sqlx::Result<std::collections::HashSet<String>> {
    let mut held = std::collections::HashSet::new();
    for chunk in facts.chunks(5000) {
        // a fact's first holder answers (a fact on 1,000 machines is not read 1,000 times); the
        // facts come back as one JSON text (`json_rows`: one by one, their hand-over cost twice
        // the probe)
        let text: String = sqlx::query_scalar(
            "SELECT json_group_array(f.fact) FROM facts f
             WHERE f.fact IN (SELECT value FROM json_each(?))
               AND EXISTS (SELECT 1 FROM entries e WHERE e.fact_id = f.id AND e.relocated = ?)",
        )
        .bind(serde_json::to_string(chunk).unwrap_or_default())
        .bind(i64::from(relocated))
        .fetch_one(pool)
        .await?;
        held.extend(super::json_rows::json_rows::<String>(text)?);
    }
    Ok(held)
}

/// The file types (`ttir`, `ptx`, `amdgcn`, …) an entry `machine`:`key` holds: a seek for the
/// entry, then its files (at most a few dozen). Empty when there is no such entry.
pub async fn file_types(pool: &Store, machine: &str, key: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT DISTINCT ext FROM entry_files
         WHERE entry_id = (SELECT e.id FROM entry_rows e JOIN machines m ON m.id = +e.machine_id
                           WHERE m.name = ?1 AND e.key = ?2 LIMIT 1)
         ORDER BY ext LIMIT 64",
    )
    .bind(machine)
    .bind(key)
    .fetch_all(pool)
    .await
}

#[cfg(test)]
mod tests {
    use super::{Page, entries_skipped, entries_walked};
    use crate::db::Store;

    async fn exec(pool: &Store, sql: &str) {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string())).execute(pool).await.unwrap();
    }

    /// (machine, key) of a page.
    fn keys(rows: Vec<super::EntryRow>) -> Vec<(String, String)> {
        rows.into_iter().map(|r| (r.machine, r.key)).collect()
    }

    /// `machine_counts` holds what counting the live entries holds, and a page found by skipping
    /// machines is the page a walk of the listing reads, at every offset and for several limits.
    async fn agree(pool: &Store, what: &str) {
        let kept: Vec<(i64, i64)> =
            sqlx::query_as("SELECT machine_id, live FROM machine_counts WHERE live != 0 ORDER BY machine_id")
                .fetch_all(pool)
                .await
                .unwrap();
        let counted: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT machine_id, COUNT(*) FROM entry_rows WHERE removed_at IS NULL GROUP BY machine_id ORDER BY machine_id",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(kept, counted, "machine counts after {what}");
        let kept: Vec<(i64, crate::db::Flag, String, i64)> = sqlx::query_as(
            "SELECT machine_id, named, kernel, live FROM entry_counts WHERE live != 0 ORDER BY machine_id, named, kernel",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        let by_kernel: Vec<(i64, crate::db::Flag, String, i64)> = sqlx::query_as(
            "SELECT machine_id, kernel IS NOT NULL, COALESCE(kernel, ''), COUNT(*) FROM entry_rows WHERE removed_at IS NULL
             GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(kept, by_kernel, "kernel counts after {what}");
        let live = counted.iter().map(|c| c.1).sum::<i64>();
        let filters = [(None, None), (Some("a"), None), (Some("c"), None), (None, Some("k1")), (Some("b"), Some("k2"))];
        for (machine, kernel) in filters.into_iter().chain([(Some("none"), None), (None, Some("none"))]) {
            for limit in [1, 2, 5, 100] {
                for offset in 0..=live + 1 {
                    let page = Page { limit, offset };
                    let walked = keys(entries_walked(pool, machine, kernel, false, page).await.unwrap());
                    // group_from 0: every page that can start in a kernel group does; 3: the
                    // first rows of a machine walked, then groups
                    for group_from in [0, 3] {
                        let skipped = keys(entries_skipped(pool, machine, kernel, page, group_from).await.unwrap());
                        assert_eq!(
                            skipped, walked,
                            "after {what}: machine {machine:?} kernel {kernel:?} limit {limit} offset {offset} from {group_from}"
                        );
                    }
                }
            }
        }
    }

    /// A deep page of entries skips whole machines and kernel groups by the live counts the
    /// triggers of migration 0027 keep; after every kind of change to the entries (added live or
    /// removed, removed, re-added by a re-scan's upsert with a new kernel name, renamed, deleted, moved
    /// to another machine) the counts equal a fresh count and every page, with and without
    /// machine and kernel filters, equals the walked page. Machines are named out of id order,
    /// one has no entries, and kernels without a name sort first.
    #[tokio::test]
    async fn a_deep_page_skips_machines_and_kernels_to_the_page_a_walk_reads() {
        let dir = tempfile::TempDir::new().unwrap();
        let pool = crate::db::open(&dir.path().join("t.db")).await.unwrap();
        exec(
            &pool,
            "INSERT INTO machines(id, name, created_at) VALUES (1, 'c', 0), (2, 'a', 0), (3, 'd', 0), (4, 'b', 0)",
        )
        .await;
        // each entry its own fact (id = the entry's); a rename points the entry at a new fact
        let fact = |id: i64, key: &str, kernel: Option<&str>, warps: i64| {
            format!(
                "INSERT INTO facts(id, fact, key, kind, kernel, num_warps) VALUES ({id}, 'f{id}', '{key}', 'kernel', {}, {warps})",
                kernel.map(|k| format!("'{k}'")).unwrap_or("NULL".into()),
            )
        };
        let insert = |id: i64, machine: i64, key: &str, removed: bool| {
            format!(
                "INSERT INTO keys(key) VALUES ('{key}') ON CONFLICT(key) DO NOTHING;
                 INSERT INTO entries(id, machine_id, root_id, key_id, fact_id, bytes, sig, first_scan_id,
                   last_scan_id, first_seen_at, last_seen_at, removed_at)
                 VALUES ({id}, {machine}, 1, (SELECT id FROM keys WHERE key = '{key}'), {id}, 1, 's', 1, 1, 0, 0, {})",
                if removed { "5" } else { "NULL" }
            )
        };
        exec(&pool, "INSERT INTO roots(id, path) VALUES (1, '/r')").await;
        let mut id = 0;
        for (machine, n) in [(1, 6), (2, 7), (4, 5)] {
            for i in 0..n {
                id += 1;
                let kernel = [None, Some("k1"), Some("k2"), Some("k1")][i % 4];
                let key = format!("key{:02}", 40 - id);
                exec(&pool, &fact(id, &key, kernel, (i % 3) as i64)).await;
                exec(&pool, &insert(id, machine, &key, i == 4)).await;
            }
        }
        agree(&pool, "inserts").await;
        exec(&pool, "UPDATE entries SET removed_at = 9 WHERE id IN (1, 8, 9)").await;
        agree(&pool, "removals").await;
        exec(&pool, "UPDATE entries SET removed_at = 10 WHERE id = 1").await; // removed again: no change
        agree(&pool, "a removed entry's removal time moved").await;
        // a new fact of an entry's key (fact id = 100 + entry id)
        let refact = |id: i64, kernel: &str| {
            format!(
                "INSERT INTO facts(id, fact, key, kind, kernel) SELECT 100 + e.id, 'f' || (100 + e.id), k.key, 'kernel', {kernel}
                 FROM entries e JOIN keys k ON k.id = e.key_id WHERE e.id = {id}"
            )
        };
        exec(&pool, &refact(1, "'k0'")).await;
        exec(&pool, &refact(5, "'k0'")).await;
        exec(
            &pool,
            "INSERT INTO entries(machine_id, root_id, key_id, fact_id, bytes, sig, first_scan_id, last_scan_id,
               first_seen_at, last_seen_at)
             SELECT machine_id, root_id, key_id, fact_id, bytes, sig, 2, 2, 0, 0 FROM entries WHERE id IN (1, 5)
             ON CONFLICT(machine_id, key_id) DO UPDATE SET fact_id = 100 + entries.id, removed_at = NULL,
               removed_scan_id = NULL",
        )
        .await;
        agree(&pool, "a re-scan's upsert re-adding entries").await;
        for (id, kernel) in [(6, "'k3'"), (7, "NULL"), (14, "'k2'")] {
            exec(&pool, &refact(id, kernel)).await;
            exec(&pool, &format!("UPDATE entries SET fact_id = 100 + id WHERE id = {id}")).await;
        }
        agree(&pool, "live entries renamed, one to no name, one from none").await;
        exec(&pool, "DELETE FROM entries WHERE id IN (2, 9, 12)").await;
        agree(&pool, "deletes of live and removed entries").await;
        exec(&pool, "UPDATE entries SET machine_id = 3 WHERE id IN (3, 13)").await;
        agree(&pool, "entries moved to the machine that had none").await;
        exec(&pool, "UPDATE entries SET machine_id = 2, removed_at = NULL WHERE id = 18").await;
        agree(&pool, "a removed entry moved and re-added at once").await;
    }
}
