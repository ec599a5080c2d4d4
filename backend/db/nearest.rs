//! Candidates for an entry's nearest neighbours: the other compiles of its **variant** — the
//! same kernel, signature (argument types and divisibility), tile shapes (constexpr-derived
//! `make_range`/tensor shapes), num_warps and num_stages — on every machine, read through the
//! variant index `entries_variant` (migration 0017), not a scan of the kernel's or the fleet's
//! entries. A recompile of a kernel (new Triton or Python, another GPU, an env var, a source
//! edit) keeps its variant and changes its key; an entry of another variant is another
//! specialisation, not a recompile, and a kernel at fleet scale has thousands of them (20
//! machines × 50,000 entries: 5,000 entries of one kernel, 1,266 classes to analyse, 12 s).
//!
//! The candidates are grouped into classes: entries whose every compared input is equal (key — Triton's hash of source, signature,
//! constexprs, options, backend and compiler —, metadata, `.source`/`.ttir`, binary, code
//! digest, relocation, the hook's recorded key parts) form one class. The same key on twenty
//! machines is one class: the explainer analyses it once and loads its IR once.
//!
//! Nothing here reads more than the one kernel's entries and the recorded parts of their keys.

use super::explain::{ir_texts, parts_of_keys};
use crate::explain::Side;
use crate::model::EntryKind;
use sqlx::{FromRow, Row, SqlitePool};
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
}

#[derive(FromRow)]
struct SideRow {
    id: i64,
    machine: String,
    key: String,
    kernel: Option<String>,
    metadata_json: Option<String>,
    binary_sha256: Option<String>,
    code_sha256: Option<String>,
    relocated: bool,
}

/// Live kernel entries of the variant of `machine`'s entry `key` on every machine (itself
/// included), grouped into classes that compare alike. No candidates when the entry is unknown.
pub async fn variant_classes(pool: &SqlitePool, machine: &str, key: &str) -> sqlx::Result<Classes> {
    let kinds = EntryKind::sql_list(KERNEL_KINDS);
    // The class of the stored inputs, ranked in SQL so that metadata and IR stay in the database.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "WITH me AS (SELECT e.kernel, e.signature, e.shapes, e.num_warps, e.num_stages
                     FROM entries e JOIN machines m ON m.id = e.machine_id WHERE m.name = ?1 AND e.key = ?2
                     ORDER BY e.removed_at IS NOT NULL, e.id DESC LIMIT 1)
         SELECT id, machine, key,
                DENSE_RANK() OVER (ORDER BY key, metadata_json, binary_sha256, code, relocated, irs) AS class
         FROM (SELECT e.id, m.name AS machine, e.key, e.metadata_json, e.binary_sha256,
                      json_extract(e.resources_json, '$.code_sha256') AS code, e.relocated,
                      (SELECT group_concat(a.ext || ':' || a.sha256) FROM artifacts a
                       WHERE a.entry_id = e.id AND a.ext IN ('source', 'ttir')) AS irs
               FROM me CROSS JOIN entries e INDEXED BY entries_variant JOIN machines m ON m.id = e.machine_id
               WHERE e.kernel = me.kernel AND e.signature IS me.signature AND e.shapes IS me.shapes
                 AND e.num_warps IS me.num_warps AND e.num_stages IS me.num_stages
                 AND e.kind IN {kinds} AND e.removed_at IS NULL)
         ORDER BY machine, key"
    )))
    .bind(machine)
    .bind(key)
    .fetch_all(pool)
    .await?;
    let mut keys: Vec<&str> = rows.iter().map(|r| r.get::<&str, _>("key")).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut parts = parts_of_keys(pool, &keys).await?;
    // The hook's parts are per machine and key: part of the class.
    let mut by_class: BTreeMap<(i64, Option<String>), (i64, Vec<usize>)> = BTreeMap::new();
    let mut candidates = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let (machine, key): (String, String) = (r.get("machine"), r.get("key"));
        let p = parts.get(&(machine.clone(), key.clone())).map(|v| v.to_string());
        by_class.entry((r.get("class"), p)).or_insert_with(|| (r.get("id"), vec![])).1.push(i);
        candidates.push(Candidate { machine, key });
    }
    let ids: Vec<i64> = by_class.values().map(|(id, _)| *id).collect();
    let mut sides = sides_by_id(pool, &ids, &mut parts).await?;
    let classes = by_class.into_values().filter_map(|(id, members)| Some((sides.remove(&id)?, members))).collect();
    Ok(Classes { candidates, classes })
}

/// Sides of the given entries (IR text and recorded parts attached).
async fn sides_by_id(
    pool: &SqlitePool,
    ids: &[i64],
    parts: &mut HashMap<(String, String), serde_json::Value>,
) -> sqlx::Result<HashMap<i64, Side>> {
    let mut out = HashMap::new();
    for part in ids.chunks(500) {
        let list = part.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        let rows: Vec<SideRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT e.id, m.name AS machine, e.key, e.kernel, e.metadata_json, e.binary_sha256,
                    json_extract(e.resources_json, '$.code_sha256') AS code_sha256, e.relocated
             FROM entries e JOIN machines m ON m.id = e.machine_id WHERE e.id IN ({list})"
        )))
        .fetch_all(pool)
        .await?;
        let mut ir = ir_texts(pool, part).await?;
        for r in rows {
            let (source, ttir) = ir.remove(&r.id).unwrap_or_default();
            let side = Side {
                parts: parts.remove(&(r.machine.clone(), r.key.clone())),
                machine: r.machine,
                key: r.key,
                kernel: r.kernel,
                metadata: r.metadata_json.and_then(|m| serde_json::from_str(&m).ok()),
                source,
                ttir,
                binary_sha256: r.binary_sha256,
                code_sha256: r.code_sha256,
                relocated: r.relocated,
            };
            out.insert(r.id, side);
        }
    }
    Ok(out)
}
