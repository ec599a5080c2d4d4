//! Candidates for an entry's nearest neighbours, read through the kernel index of `entries` and
//! grouped by variant identity: the live kernel entries of one kernel on every machine, where
//! entries whose every compared input is equal (key — Triton's hash of source, signature,
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

/// Live kernel entries of `kernel` on every machine, grouped into classes that compare alike.
pub async fn kernel_classes(pool: &SqlitePool, kernel: &str) -> sqlx::Result<Classes> {
    let kinds = EntryKind::sql_list(KERNEL_KINDS);
    // The class of the stored inputs, ranked in SQL so that metadata and IR stay in the database.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT id, machine, key,
                DENSE_RANK() OVER (ORDER BY key, metadata_json, binary_sha256, code, relocated, irs) AS class
         FROM (SELECT e.id, m.name AS machine, e.key, e.metadata_json, e.binary_sha256,
                      json_extract(e.resources_json, '$.code_sha256') AS code, e.relocated,
                      (SELECT group_concat(a.ext || ':' || a.sha256) FROM artifacts a
                       WHERE a.entry_id = e.id AND a.ext IN ('source', 'ttir')) AS irs
               FROM entries e INDEXED BY entries_kernel JOIN machines m ON m.id = e.machine_id
               WHERE e.kernel = ?1 AND e.kind IN {kinds} AND e.removed_at IS NULL)
         ORDER BY machine, key"
    )))
    .bind(kernel)
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
