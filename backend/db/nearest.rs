//! Candidates for an entry's nearest neighbours, read by kernel through the variant index
//! `entries_variant` (migration 0017: kernel, signature, tile shapes, num_warps, num_stages),
//! not a scan of the fleet: [`kernel_variants`] lists the live entries of the kernel from the
//! index alone, with their variant columns, and the explainer analyses them tier by tier —
//! the same variant first — only as far as a tier can still place a neighbour
//! (`explain::load::nearest_of`). [`classes_of_ids`] loads a tier grouped into classes: entries
//! whose every compared input is equal (key — Triton's hash of source, signature, constexprs,
//! options, backend and compiler —, metadata, `.source`/`.ttir`, binary, code digest,
//! relocation, the hook's recorded key parts). The same key on twenty machines is one class: the
//! explainer analyses it once and loads its IR once.

use super::explain::{json_rows, parts_of_keys, shas_of_rows, side_rows, texts_by_sha};
use crate::explain::Side;
use crate::model::EntryKind;
use sqlx::SqlitePool;
use std::collections::{BTreeMap, HashMap};

/// Kinds of entries that hold a compiled kernel (as `db::explain::kernel_sides`).
const KERNEL_KINDS: &[EntryKind] = &[EntryKind::Kernel, EntryKind::BinaryOnly, EntryKind::Partial];

/// One candidate: machine and key, in the order `kernel_sides` lists them (machine, key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub machine: String,
    pub key: String,
}

/// The candidates of `kernel` (all of them, in order) and their classes: (a member's side,
/// the indices of its members in the candidate list).
pub struct Classes {
    pub candidates: Vec<Candidate>,
    pub classes: Vec<(Side, Vec<usize>)>,
    /// Classes past `max_classes` were left out.
    pub more: bool,
}

/// `machine`'s entry `key` (its id; a live one before a removed one)
/// and the live entries of its kernel on every machine (itself left out) in three tiers by the
/// lower bound on their differing components ([`TIER_SQL`]), from the index alone: the
/// columns are compared inside SQLite, so a kernel of thousands of entries costs two integers
/// a row, not its signatures and shapes.
pub async fn kernel_variants(
    pool: &SqlitePool,
    machine: &str,
    key: &str,
) -> sqlx::Result<Option<(i64, [Vec<i64>; 3])>> {
    type Me = (String, i64, Option<String>, Option<String>, Option<i64>, Option<i64>);
    let me: Option<Me> = sqlx::query_as(
        "SELECT e.kernel, e.id, e.signature, e.shapes, e.num_warps, e.num_stages
         FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE m.name = ? AND e.key = ? AND e.kernel IS NOT NULL ORDER BY e.removed_at IS NOT NULL, e.id DESC LIMIT 1",
    )
    .bind(machine)
    .bind(key)
    .fetch_optional(pool)
    .await?;
    let Some((kernel, id, signature, shapes, num_warps, num_stages)) = me else { return Ok(None) };
    // One row a tier, its ids joined (a kernel has thousands of entries: see `json_rows`).
    let rows: Vec<(i64, String)> = sqlx::query_as(TIER_SQL)
        .bind(&kernel)
        .bind(&signature)
        .bind(&shapes)
        .bind(num_warps)
        .bind(num_stages)
        .fetch_all(pool)
        .await?;
    let mut tiers: [Vec<i64>; 3] = Default::default();
    for (b, ids) in rows {
        let tier = &mut tiers[b.clamp(0, 2) as usize];
        tier.extend(ids.split(',').filter_map(|i| i.parse::<i64>().ok()).filter(|other| *other != id));
        tier.sort_unstable();
    }
    Ok(Some((id, tiers)))
}

/// Each live entry of kernel ?1 with its lower bound against the variant (?2 signature, ?3
/// shapes, ?4 num_warps, ?5 num_stages): 1 for the source when its signature or tile shapes
/// differ, 1 for the options when num_warps or num_stages do; a column unknown on either side
/// counts as no difference.
const TIER_SQL: &str = "SELECT b, group_concat(id) FROM (SELECT id,
        (CASE WHEN (signature <> ?2) OR (shapes <> ?3) THEN 1 ELSE 0 END)
      + (CASE WHEN (num_warps <> ?4) OR (num_stages <> ?5) THEN 1 ELSE 0 END) AS b
     FROM entries INDEXED BY entries_variant WHERE kernel = ?1 AND removed_at IS NULL) GROUP BY b";

/// The live kernel entries among `ids`, ordered by machine and key, grouped into classes that
/// compare alike.
/// At most `max_classes` classes are returned (with their sides loaded), the first in that
/// order; `Classes::more` says whether there were more.
pub async fn classes_of_ids(pool: &SqlitePool, ids: &[i64], max_classes: usize) -> sqlx::Result<Classes> {
    let t0 = std::time::Instant::now();
    let kinds = EntryKind::sql_list(KERNEL_KINDS);
    let mut rows: Vec<ClassRow> = Vec::with_capacity(ids.len());
    for part in ids.chunks(5000) {
        let list = part.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        // The class of the stored inputs, ranked in SQL so that metadata and IR stay in the
        // database; one JSON text for the tier, not a row a candidate (see `json_rows`).
        let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT json_group_array(json_array(id, machine, key, metadata_json, binary_sha256, code, relocated, irs))
             FROM (SELECT e.id, m.name AS machine, e.key, e.metadata_json, e.binary_sha256,
                          json_extract(e.resources_json, '$.code_sha256') AS code, e.relocated,
                          (SELECT group_concat(a.ext || ':' || a.sha256) FROM artifacts a
                           WHERE a.entry_id = e.id AND a.ext IN ('source', 'ttir')) AS irs
                   FROM entries e JOIN machines m ON m.id = e.machine_id
                   WHERE e.id IN ({list}) AND e.kind IN {kinds} AND e.removed_at IS NULL)"
        )))
        .fetch_one(pool)
        .await?;
        rows.extend(json_rows::<ClassRow>(text)?);
    }
    rows.sort_by(|a, b| (&a.machine, &a.key).cmp(&(&b.machine, &b.key)));
    // Classes: equal stored inputs (key, metadata, binary, code digest, relocation, IR blobs).
    type Inputs<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>, bool, Option<&'a str>);
    let mut class_of: HashMap<Inputs, i64> = HashMap::new();
    let classes: Vec<i64> = rows
        .iter()
        .map(|r| {
            let k: Inputs = (
                &r.key,
                r.metadata_json.as_deref(),
                r.binary_sha256.as_deref(),
                r.code.as_deref(),
                r.relocated,
                r.irs.as_deref(),
            );
            let n = class_of.len() as i64;
            *class_of.entry(k).or_insert(n)
        })
        .collect();
    let mut keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, rows = rows.len(), "nearest: class rows");
    let mut parts = parts_of_keys(pool, &keys).await?;
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "nearest: parts");
    // The hook's parts are per machine and key: part of the class.
    let mut by_class: BTreeMap<(i64, Option<String>), (i64, Vec<usize>)> = BTreeMap::new();
    let mut candidates = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let (machine, key) = (r.machine.clone(), r.key.clone());
        let p = parts.get(&(machine.clone(), key.clone())).map(|v| v.to_string());
        by_class.entry((classes[i], p)).or_insert_with(|| (r.id, vec![])).1.push(i);
        candidates.push(Candidate { machine, key });
    }
    let more = by_class.len() > max_classes;
    let by_class: Vec<(i64, Vec<usize>)> = by_class.into_values().take(max_classes).collect();
    let ids: Vec<i64> = by_class.iter().map(|(id, _)| *id).collect();
    let mut sides = sides_by_id(pool, &ids, &mut parts).await?;
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "nearest: sides");
    let classes = by_class.into_iter().filter_map(|(id, members)| Some((sides.remove(&id)?, members))).collect();
    Ok(Classes { candidates, classes, more })
}

/// A candidate's stored inputs, as [`classes_of_ids`] reads them (a JSON array, in this order).
#[derive(serde::Deserialize)]
struct ClassRow {
    id: i64,
    machine: String,
    key: String,
    metadata_json: Option<String>,
    binary_sha256: Option<String>,
    code: Option<String>,
    #[serde(deserialize_with = "super::explain::int_bool")]
    relocated: bool,
    irs: Option<String>,
}

/// Sides of the given entries (IR text and recorded parts attached).
async fn sides_by_id(
    pool: &SqlitePool,
    ids: &[i64],
    parts: &mut HashMap<(String, String), serde_json::Value>,
) -> sqlx::Result<HashMap<i64, Side>> {
    let mut rows = side_rows(pool, ids).await?;
    let texts = texts_by_sha(pool, shas_of_rows(rows.values())).await?;
    let mut out = HashMap::new();
    for (id, r) in rows.drain() {
        let parts = parts.remove(&(r.machine.clone(), r.key.clone()));
        out.insert(id, r.into_side(&texts, parts));
    }
    Ok(out)
}
