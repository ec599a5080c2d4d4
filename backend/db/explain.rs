//! Queries behind the explainer: entries loaded as [`Side`] values (metadata, IR text, binary
//! hash, relocation), entry sets at a scan (for invalidations), and a kernel's entries on every
//! machine (for nearest neighbours).

use super::Store;
use super::entries::{self, EntryRow};
use super::json_rows::{int_bool, json_rows, json_rows_of_ids, rows_json};
use super::scans::ScanRef;
use crate::explain::Side;
use crate::model::EntryKind;
use sqlx::{Any, FromRow, QueryBuilder, Row};
use std::collections::HashMap;
use std::sync::Arc;

/// An entry with everything the explainer needs.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub side: Side,
    pub row: EntryRow,
    /// Where its group file points (the writer's directory), when it names one.
    pub group_at: Option<String>,
}

/// Kinds of entries that hold a compiled kernel.
pub(crate) const KERNEL_KINDS: &[EntryKind] = &[EntryKind::Kernel, EntryKind::BinaryOnly, EntryKind::Partial];

/// One entry as a [`Side`], by machine and key (removed entries included).
pub async fn load(db: &super::Db, machine: &str, key: &str) -> sqlx::Result<Option<Loaded>> {
    let pool = db.pool();
    let Some(row) = entries::entry(pool, machine, key).await? else {
        return Ok(None);
    };
    let group = entries::entry_detail(pool, row.id).await?.group_json;
    let group: Option<serde_json::Value> = group.and_then(|g| serde_json::from_str(&g).ok());
    let group_at = group.as_ref().and_then(|g| g.get("written_at")?.as_str().map(str::to_string));
    // The side as every other explainer read makes it (`side_rows`: the same columns, the same
    // `.source`/`.ttir` artifact when an entry holds more than one).
    let Some(r) = side_rows(pool, &[row.id]).await?.remove(&row.id) else {
        return Ok(None);
    };
    let texts = texts_by_sha(db, shas_of_rows(std::iter::once(&r))).await?;
    let parts = parts_of_keys(pool, &[row.key.as_str()]).await?.remove(&(row.machine.clone(), row.key.clone()));
    let side = r.into_side(&texts, parts);
    Ok(Some(Loaded { side, row, group_at }))
}

/// SQL for the hook's latest recorded key parts of the entry whose key and machine id are the
/// columns `key` and `machine_id`, as [`parts_of_keys`] reads them: the last by (ts, id) of the
/// events that carry them (ingest writes them from a parsed JSON value, so the last one always
/// parses). A column of a row read for other reasons, where [`parts_of_keys`] is one more query.
pub(crate) fn parts_column(key: &str, machine_id: &str) -> String {
    format!(
        "(SELECT ev.parts_json FROM events ev INDEXED BY events_key_parts
          WHERE ev.parts_json IS NOT NULL AND ev.key = {key} AND ev.machine_id = {machine_id}
          ORDER BY ev.ts DESC, ev.id DESC LIMIT 1)"
    )
}

/// Key parts as stored (`events.parts_json`), parsed.
pub(crate) fn parts_of_text(text: Option<&str>) -> Option<serde_json::Value> {
    serde_json::from_str(text?).ok()
}

/// The variant columns of an entry's row: signature, tile shapes, num_warps, num_stages.
pub(crate) type VariantColumns = (Option<String>, Option<String>, Option<i64>, Option<i64>);

/// One entry by machine and key (removed ones included) as the nearest-neighbour search reads
/// it: its [`Side`] as [`load`] makes it (the same row columns, IR texts and key parts), its id,
/// and its variant columns; one query (and one for IR texts not kept yet), where [`load`]
/// (which also reads the entry's page row, files and group) takes six.
pub(crate) async fn side_and_variant(
    db: &super::Db,
    machine: &str,
    key: &str,
) -> sqlx::Result<Option<(Side, i64, VariantColumns)>> {
    let pool = db.pool();
    let sql = format!(
        "SELECT json_array(json_array({SIDE_FIELDS}), signature, shapes, num_warps, num_stages, parts) FROM (
             SELECT {SIDE_COLUMNS}, e.signature, e.shapes, e.num_warps, e.num_stages, {} AS parts
             FROM entry_rows e JOIN machines m ON m.id = +e.machine_id WHERE m.name = ?1 AND e.key = ?2)",
        parts_column("e.key", "e.machine_id")
    );
    let text: Option<String> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(machine).bind(key).fetch_optional(pool).await?;
    let Some(text) = text else { return Ok(None) };
    type Row = (SideRow, Option<String>, Option<String>, Option<i64>, Option<i64>, Option<String>);
    let (r, s, t, w, n, parts): Row = serde_json::from_str(&text).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let texts = texts_by_sha(db, shas_of_rows(std::iter::once(&r))).await?;
    let parts = parts_of_text(parts.as_deref());
    let id = r.id;
    Ok(Some((r.into_side(&texts, parts), id, (s, t, w, n))))
}

/// The key parts the hook recorded for entries of `machines`: (machine, key) → the parts of
/// the key's latest recorded compile.
async fn parts_for(pool: &Store, machines: &[&str]) -> sqlx::Result<HashMap<(String, String), serde_json::Value>> {
    let mut out = HashMap::new();
    if machines.is_empty() {
        return Ok(out);
    }
    let mut qb = QueryBuilder::<Any>::new(
        "SELECT m.name, e.key, e.parts_json FROM events e JOIN machines m ON m.id = e.machine_id
         WHERE e.parts_json IS NOT NULL AND m.name IN (",
    );
    let mut sep = qb.separated(", ");
    for m in machines {
        sep.push_bind(*m);
    }
    qb.push(") ORDER BY e.ts, e.id");
    for r in qb.build().fetch_all(pool).await? {
        let parts: Option<serde_json::Value> = serde_json::from_str(&r.get::<String, _>(2)).ok();
        if let Some(p) = parts {
            out.insert((r.get(0), r.get(1)), p);
        }
    }
    Ok(out)
}

/// The key parts the hook recorded for the given keys, on any machine: (machine, key) → the
/// parts of the key's latest recorded compile (as [`parts_for`], read by key).
pub(crate) async fn parts_of_keys(
    pool: &Store,
    keys: &[&str],
) -> sqlx::Result<HashMap<(String, String), serde_json::Value>> {
    let mut out = HashMap::new();
    if keys.is_empty() {
        return Ok(out);
    }
    // the keys bound as one JSON array: one statement text for any count (see `json_rows_of_ids`)
    let keys = serde_json::to_string(keys).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let rows = sqlx::query(
        "SELECT m.name, e.key, e.parts_json FROM events e INDEXED BY events_key_parts
         JOIN machines m ON m.id = e.machine_id
         WHERE e.parts_json IS NOT NULL AND e.key IN (SELECT value FROM json_each(?)) ORDER BY e.ts, e.id",
    )
    .bind(keys)
    .fetch_all(pool)
    .await?;
    for r in rows {
        if let Ok(p) = serde_json::from_str::<serde_json::Value>(&r.get::<String, _>(2)) {
            out.insert((r.get(0), r.get(1)), p);
        }
    }
    Ok(out)
}

/// Text of one entry's IR artifact of the given extension (`source`, `ttir`, `ttgir`, `llir`,
/// `ptx`, `amdgcn`), when stored.
pub async fn ir_of(pool: &Store, entry_id: i64, ext: &str) -> sqlx::Result<Option<String>> {
    let sql = format!(
        "SELECT {} FROM entry_files a JOIN blobs b ON b.sha256 = a.sha256
         WHERE a.entry_id = ? AND a.ext = ? ORDER BY a.name LIMIT 1",
        super::blobs::COLUMNS
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(entry_id).bind(ext).fetch_optional(pool).await?;
    row.map(|r| super::blobs::Stored::from_row(&r)?.text()).transpose()
}

/// IR texts read by sha256, shared: blobs are content-addressed, so a text read once stays
/// right for as long as it is kept. Entries of one kernel on a fleet point at few distinct
/// texts (a pair of 50,000-entry machines on two releases: 68 distinct `.source`/`.ttir` texts,
/// 2.5 GB if read once per entry), so each distinct text is read from the database and held in
/// memory once. At most [`TEXTS_MAX_BYTES`] are kept, a text of more than a quarter of it not
/// at all (what is in use stays alive in its `Arc`s).
#[derive(Debug)]
pub struct Texts(crate::bounded::Bounded<String, Arc<str>>);

/// Bytes of IR text [`Texts`] keeps.
pub const TEXTS_MAX_BYTES: usize = 128 << 20;

impl Default for Texts {
    fn default() -> Texts {
        // four shards: a text of up to a quarter of the bound is kept
        Texts(crate::bounded::Bounded::weighed(TEXTS_MAX_BYTES as u64, 4096, Some(4), |_, t: &Arc<str>| t.len() as u64))
    }
}

impl Texts {
    /// Texts kept now.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The distinct sha256s among `shas`.
fn distinct<'a>(shas: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut shas: Vec<&str> = shas.collect();
    shas.sort_unstable();
    shas.dedup();
    shas.into_iter().map(str::to_string).collect()
}

/// The texts of the blobs `shas` (distinct), each read once and shared (see [`Texts`]).
pub(crate) async fn texts_by_sha(db: &super::Db, shas: Vec<String>) -> sqlx::Result<HashMap<String, Arc<str>>> {
    let pool = db.pool();
    let mut texts = HashMap::new();
    let mut missing = Vec::new();
    for s in &shas {
        match db.texts.0.get(s.as_str()) {
            Some(t) => drop(texts.insert(s.clone(), t)),
            None => missing.push(s.as_str()),
        }
    }
    let mut read = HashMap::new();
    for part in missing.chunks(100) {
        let mut qb = QueryBuilder::<Any>::new(format!(
            "SELECT b.sha256, {} FROM blobs b WHERE b.sha256 IN (",
            super::blobs::COLUMNS
        ));
        let mut sep = qb.separated(", ");
        for s in part {
            sep.push_bind(*s);
        }
        qb.push(")");
        for r in qb.build().fetch_all(pool).await? {
            let text = super::blobs::Stored::from_row(&r)?.text()?;
            read.insert(r.get::<String, _>(0), Arc::<str>::from(text));
        }
    }
    for (sha, t) in &read {
        db.texts.0.insert(sha.clone(), t.clone());
    }
    texts.extend(read);
    Ok(texts)
}

/// An entry's row as the explainer reads it ([`SIDE_COLUMNS`]), before its IR text and key parts.
/// Read as a row, or as a JSON array of [`SIDE_FIELDS`] (fields in this order).
#[derive(FromRow, serde::Deserialize)]
pub(crate) struct SideRow {
    pub id: i64,
    pub machine: String,
    pub key: String,
    kernel: Option<String>,
    metadata_json: Option<String>,
    binary_sha256: Option<String>,
    code_sha256: Option<String>,
    #[serde(deserialize_with = "int_bool")]
    #[sqlx(try_from = "crate::db::Flag")]
    relocated: bool,
    /// sha256 of its `.source` and `.ttir` blobs (read with the row: one row an entry, not
    /// three).
    source_sha: Option<String>,
    ttir_sha: Option<String>,
}

impl SideRow {
    /// A digest of what the analysis reads of the entry but its machine (key, kernel,
    /// metadata, binary, code digest, relocation, `.source`/`.ttir` blobs): two entries whose
    /// digests are equal compare alike with anything (sha256, 128 bits kept). Without the key:
    /// its class (`db::classes`).
    pub(crate) fn inputs_digest(&self) -> [u8; 16] {
        super::classes::digest(Some(&self.key), &self.inputs())
    }

    /// The kernel's name.
    pub(crate) fn kernel(&self) -> Option<&str> {
        self.kernel.as_deref()
    }

    /// The compared inputs of the row (all but its id, machine and key).
    pub(crate) fn inputs(&self) -> super::classes::Inputs<'_> {
        super::classes::Inputs {
            kernel: self.kernel.as_deref(),
            metadata_json: self.metadata_json.as_deref(),
            binary_sha256: self.binary_sha256.as_deref(),
            code_sha256: self.code_sha256.as_deref(),
            relocated: self.relocated,
            source_sha: self.source_sha.as_deref(),
            ttir_sha: self.ttir_sha.as_deref(),
        }
    }

    /// The [`Side`], with its IR texts (from `texts`, by the row's sha256s) and recorded key
    /// parts.
    pub(crate) fn into_side(self, texts: &HashMap<String, Arc<str>>, parts: Option<serde_json::Value>) -> Side {
        let text = |sha: &Option<String>| texts.get(sha.as_deref()?).cloned();
        Side {
            parts,
            source: text(&self.source_sha),
            ttir: text(&self.ttir_sha),
            machine: self.machine,
            key: self.key,
            kernel: self.kernel,
            metadata: self.metadata_json.and_then(|m| serde_json::from_str(&m).ok()),
            binary_sha256: self.binary_sha256,
            code_sha256: self.code_sha256,
            relocated: self.relocated,
        }
    }
}

/// The distinct sha256s of the IR texts the rows name (for [`texts_by_sha`]).
pub(crate) fn shas_of_rows<'a>(rows: impl Iterator<Item = &'a SideRow>) -> Vec<String> {
    distinct(rows.flat_map(|r| [r.source_sha.as_deref(), r.ttir_sha.as_deref()]).flatten())
}

/// The rows of the entries `ids` (any order; unknown ids are left out).
pub(crate) async fn side_rows(pool: &Store, ids: &[i64]) -> sqlx::Result<HashMap<i64, SideRow>> {
    side_rows_where(pool, ids, "").await
}

/// [`side_rows`] of those `ids` that also meet `filter` (an SQL condition on `e`, starting
/// with `AND`; written in code, never from input).
pub(crate) async fn side_rows_where(pool: &Store, ids: &[i64], filter: &str) -> sqlx::Result<HashMap<i64, SideRow>> {
    let rows = side_rows_on(&mut *pool.acquire().await?, ids, filter).await?;
    Ok(rows.into_iter().map(|r| (r.id, r)).collect())
}

/// [`side_rows_where`] on one connection, in any order (a writer's transaction reads them so:
/// `db::classes::fill_pending`).
pub(crate) async fn side_rows_on(
    conn: &mut crate::db::Conn<'_>,
    ids: &[i64],
    filter: &str,
) -> sqlx::Result<Vec<SideRow>> {
    let head = format!(
        "SELECT {} FROM (SELECT {SIDE_COLUMNS} FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE e.id IN (",
        rows_json(&format!("json_array({SIDE_FIELDS})"))
    );
    json_rows_of_ids::<SideRow>(conn, ids, &head, &format!("){filter})")).await
}

/// Run an entry query (selecting [`SideRow`] columns) and attach IR text.
async fn sides(db: &super::Db, sql: &str, binds: &[&str]) -> sqlx::Result<Vec<Side>> {
    let pool = db.pool();
    let mut q = sqlx::query_as::<_, SideRow>(sqlx::AssertSqlSafe(sql.to_string()));
    for b in binds {
        q = q.bind(*b);
    }
    let rows = q.fetch_all(pool).await?;
    let texts = texts_by_sha(db, shas_of_rows(rows.iter())).await?;
    let mut machines: Vec<&str> = rows.iter().map(|r| r.machine.as_str()).collect();
    machines.sort_unstable();
    machines.dedup();
    let mut parts = parts_for(pool, &machines).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let parts = parts.remove(&(r.machine.clone(), r.key.clone()));
            r.into_side(&texts, parts)
        })
        .collect())
}

/// [`SIDE_COLUMNS`] by name, in [`SideRow`]'s order.
const SIDE_FIELDS: &str =
    "id, machine, key, kernel, metadata_json, binary_sha256, code_sha256, relocated, source_sha, ttir_sha";

const SIDE_COLUMNS: &str = "e.id, m.name AS machine, e.key, e.kernel,
     COALESCE(e.metadata_json, (SELECT t.metadata_json FROM fact_texts t WHERE t.fact = e.fact AND t.relocated = e.relocated))
       AS metadata_json,
     e.binary_sha256,
     json_extract(COALESCE(e.resources_json, (SELECT t.resources_json FROM fact_texts t
                                              WHERE t.fact = e.fact AND t.relocated = e.relocated)),
                  '$.code_sha256') AS code_sha256,
     e.relocated,
     COALESCE((SELECT f.sha256 FROM fact_files f WHERE f.fact = e.fact AND f.ext = 'source' ORDER BY f.name LIMIT 1),
              (SELECT a.sha256 FROM artifacts a WHERE a.entry_id = e.id AND a.ext = 'source' ORDER BY a.name LIMIT 1))
       AS source_sha,
     COALESCE((SELECT f.sha256 FROM fact_files f WHERE f.fact = e.fact AND f.ext = 'ttir' ORDER BY f.name LIMIT 1),
              (SELECT a.sha256 FROM artifacts a WHERE a.entry_id = e.id AND a.ext = 'ttir' ORDER BY a.name LIMIT 1))
       AS ttir_sha";

/// Kernel entries of the scan's machine and root that were present right after that scan:
/// `first_scan_id <= S` and not removed by S.
pub async fn sides_at(db: &super::Db, s: &ScanRef) -> sqlx::Result<Vec<Side>> {
    let id = s.id.to_string();
    let kinds = EntryKind::sql_list(KERNEL_KINDS);
    let sql = format!(
        "SELECT {SIDE_COLUMNS} FROM entry_rows e JOIN machines m ON m.id = e.machine_id
         WHERE m.name = ?1 AND e.root = ?2 AND e.kind IN {kinds}
           AND e.first_scan_id <= CAST(?3 AS INTEGER)
           AND (e.removed_scan_id IS NULL OR e.removed_scan_id > CAST(?3 AS INTEGER))
         ORDER BY e.kernel, e.key"
    );
    sides(db, &sql, &[&s.machine, &s.root, &id]).await
}

/// Kernel entries a machine holds now (every root).
pub async fn sides_now(db: &super::Db, machine: &str) -> sqlx::Result<Vec<Side>> {
    let kinds = EntryKind::sql_list(KERNEL_KINDS);
    let sql = format!(
        "SELECT {SIDE_COLUMNS} FROM entry_rows e JOIN machines m ON m.id = e.machine_id
         WHERE m.name = ?1 AND e.kind IN {kinds} AND e.removed_at IS NULL ORDER BY e.kernel, e.key"
    );
    sides(db, &sql, &[machine]).await
}

/// Entries of one kernel on every machine, present now.
pub async fn kernel_sides(db: &super::Db, kernel: &str) -> sqlx::Result<Vec<Side>> {
    let kinds = EntryKind::sql_list(KERNEL_KINDS);
    let sql = format!(
        "SELECT {SIDE_COLUMNS} FROM entry_rows e JOIN machines m ON m.id = e.machine_id
         WHERE e.kernel = ?1 AND e.kind IN {kinds} AND e.removed_at IS NULL ORDER BY m.name, e.key"
    );
    sides(db, &sql, &[kernel]).await
}

/// Whether a machine exists.
pub async fn machine_exists(pool: &Store, machine: &str) -> sqlx::Result<bool> {
    let n: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM machines WHERE name = ?").bind(machine).fetch_one(pool).await?;
    Ok(n > 0)
}

/// The hook's latest measured compile time (ms) of each of `keys` on `machine`: what compiling
/// that entry cost. Keys the hook never saw compile are left out.
pub async fn compile_ms(pool: &Store, machine: &str, keys: &[&str]) -> sqlx::Result<HashMap<String, f64>> {
    let mut out = HashMap::new();
    for part in keys.chunks(500) {
        // each key's latest compile (the later id of two at the same ts)
        let mut qb = QueryBuilder::<Any>::new(
            "SELECT key, compile_ms FROM (SELECT e.key, e.compile_ms,
                    ROW_NUMBER() OVER (PARTITION BY e.key ORDER BY e.ts DESC, e.id DESC) AS nth
             FROM events e JOIN machines m ON m.id = e.machine_id
             WHERE m.name = ",
        );
        qb.push_bind(machine);
        qb.push(" AND e.event = 'compile' AND e.compile_ms IS NOT NULL AND e.key IN (");
        let mut sep = qb.separated(", ");
        for k in part {
            sep.push_bind(*k);
        }
        qb.push(")) WHERE nth = 1");
        for r in qb.build().fetch_all(pool).await? {
            out.insert(r.get::<String, _>(0), r.get::<f64, _>(1));
        }
    }
    Ok(out)
}

/// An entry of a report's side, without its texts: what pairing needs to decide which entries
/// to load in full (a kernel with new keys) and which not (kept keys only).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LightRow {
    pub id: i64,
    pub key: String,
    pub kernel: Option<String>,
    #[serde(deserialize_with = "int_bool")]
    pub relocated: bool,
}

/// The columns of a [`LightRow`] of `entries e`, as one JSON array a row (joined by
/// [`rows_json`]).
pub(crate) const LIGHT_ROW: &str = "json_array(e.id, e.key, e.kernel, e.relocated)";

/// [`LightRow`]s from a query selecting [`LIGHT_ROW`]s ([`rows_json`]) (one JSON text, not a row an entry: a
/// side of a report lists 100,000 entries, and sqlx's hand-over of each row from its SQLite
/// thread made listing them ~0.5 s: see [`json_rows`]), ordered by kernel and key (SQLite's
/// `ORDER BY` of these columns: NULL first, then bytes).
pub(crate) fn light_rows(text: String) -> sqlx::Result<Vec<LightRow>> {
    let mut rows = json_rows::<LightRow>(text)?;
    rows.sort_unstable_by(|a, b| (&a.kernel, &a.key, a.id).cmp(&(&b.kernel, &b.key, b.id)));
    Ok(rows)
}

/// Kernel entries of a scan (as [`sides_at`]) without texts, ordered by kernel and key.
pub async fn light_at(pool: &Store, s: &ScanRef) -> sqlx::Result<Vec<LightRow>> {
    let (kinds, light) = (EntryKind::sql_list(KERNEL_KINDS), rows_json(LIGHT_ROW));
    let sql = format!(
        "SELECT {light} FROM entry_rows e
         WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?1) AND e.root = ?2 AND e.kind IN {kinds}
           AND e.first_scan_id <= ?3 AND (e.removed_scan_id IS NULL OR e.removed_scan_id > ?3)"
    );
    let q = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&s.machine).bind(&s.root).bind(s.id);
    light_rows(q.fetch_one(pool).await?)
}

/// Whether the kernel entries of `from` and `to` (two scans of one machine and root, as
/// [`light_at`] lists them) are the same entries, and then how many and how many relocated.
/// By [`light_at`]'s own condition, an entry is in one set and not the other exactly when it
/// was first seen or marked removed by a scan after `from` up to `to`: when no entry of the
/// root was, the sets are equal, whatever the scans' own counts say. One pass over the
/// `entries_light` index instead of listing both sets (a no-change re-scan of 100,000
/// entries listed 200,000 rows to find that nothing changed).
pub async fn light_same(pool: &Store, from: &ScanRef, to: &ScanRef) -> sqlx::Result<Option<(usize, usize)>> {
    if from.machine != to.machine || from.root != to.root || from.id > to.id {
        return Ok(None);
    }
    let kinds = EntryKind::sql_list(KERNEL_KINDS);
    let sql = format!(
        "SELECT coalesce(sum(CASE WHEN (e.first_scan_id > ?3 AND e.first_scan_id <= ?4)
                                   OR (e.removed_scan_id > ?3 AND e.removed_scan_id <= ?4) THEN 1 ELSE 0 END), 0),
                coalesce(sum(CASE WHEN e.first_scan_id <= ?4 AND (e.removed_scan_id IS NULL OR e.removed_scan_id > ?4)
                                  THEN 1 ELSE 0 END), 0),
                coalesce(sum(CASE WHEN e.first_scan_id <= ?4 AND (e.removed_scan_id IS NULL OR e.removed_scan_id > ?4)
                                       AND e.relocated <> 0 THEN 1 ELSE 0 END), 0)
         FROM entry_rows e
         WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?1) AND e.root = ?2 AND e.kind IN {kinds}"
    );
    let (moved, n, relocated): (i64, i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&to.machine)
        .bind(&to.root)
        .bind(from.id)
        .bind(to.id)
        .fetch_one(pool)
        .await?;
    Ok((moved == 0).then_some((n as usize, relocated as usize)))
}

/// Kernel entries a machine holds now (as [`sides_now`]) without texts, ordered by kernel and key.
pub async fn light_now(pool: &Store, machine: &str) -> sqlx::Result<Vec<LightRow>> {
    let (kinds, light) = (EntryKind::sql_list(KERNEL_KINDS), rows_json(LIGHT_ROW));
    let sql = format!(
        "SELECT {light} FROM entry_rows e
         WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?1) AND e.kind IN {kinds} AND e.removed_at IS NULL"
    );
    light_rows(sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(machine).fetch_one(pool).await?)
}

/// Entries of `machine` by id, in full (metadata, IR, recorded key parts), in the order of `ids`.
pub async fn sides_of_ids(db: &super::Db, machine: &str, ids: &[i64]) -> sqlx::Result<Vec<Side>> {
    let pool = db.pool();
    let mut rows = side_rows(pool, ids).await?;
    let texts = texts_by_sha(db, shas_of_rows(rows.values())).await?;
    let keys: Vec<&str> = rows.values().map(|r| r.key.as_str()).collect();
    let mut parts = parts_of_machine_keys(pool, machine, &keys).await?;
    Ok(ids
        .iter()
        .filter_map(|id| rows.remove(id))
        .map(|r| {
            let parts = parts.remove(&r.key);
            r.into_side(&texts, parts)
        })
        .collect())
}

/// The key parts the hook recorded for some keys of one machine (the latest compile's), as
/// [`parts_for`] but through the machine+key index.
async fn parts_of_machine_keys(
    pool: &Store,
    machine: &str,
    keys: &[&str],
) -> sqlx::Result<HashMap<String, serde_json::Value>> {
    let mut out = HashMap::new();
    for part in keys.chunks(500) {
        let mut qb = QueryBuilder::<Any>::new(
            "SELECT e.key, e.parts_json FROM events e
             WHERE e.parts_json IS NOT NULL AND e.machine_id = (SELECT id FROM machines WHERE name = ",
        );
        qb.push_bind(machine);
        qb.push(") AND e.key IN (");
        let mut sep = qb.separated(", ");
        for k in part {
            sep.push_bind(*k);
        }
        qb.push(") ORDER BY e.ts, e.id");
        for r in qb.build().fetch_all(pool).await? {
            if let Ok(p) = serde_json::from_str::<serde_json::Value>(&r.get::<String, _>(1)) {
                out.insert(r.get(0), p);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{parts_column, parts_of_keys, parts_of_text};

    /// [`parts_column`] (a column of the rows nearest requests read) reads what
    /// [`parts_of_keys`] reads: the parts of the key's last event on its own machine by (ts, id)
    /// that carries them, none where no event does; events without parts are not counted.
    #[tokio::test]
    async fn the_parts_column_reads_what_parts_of_keys_reads() {
        let dir = tempfile::TempDir::new().unwrap();
        let pool = crate::db::open(&dir.path().join("t.db")).await.unwrap();
        sqlx::query("INSERT INTO machines(id, name, created_at) VALUES (1, 'a', 0), (2, 'b', 0)")
            .execute(&pool)
            .await
            .unwrap();
        // (machine, key, ts, parts), inserted in this order (ids ascending)
        let events: &[(i64, &str, i64, Option<&str>)] = &[
            (1, "k1", 10, Some(r#"{"x":1}"#)),
            (1, "k1", 20, Some(r#"{"x":2}"#)),
            (1, "k1", 20, Some(r#"{"x":3}"#)), // same ts: the later id
            (1, "k1", 30, None),               // a later hit without parts
            (2, "k1", 5, Some(r#"{"y":1}"#)),  // the same key on another machine
            (2, "k3", 1, Some(r#"{"z":1}"#)),
            (2, "k3", 0, Some(r#"{"z":0}"#)), // inserted later, recorded earlier
            (1, "k2", 3, None),
        ];
        for (i, (m, k, ts, parts)) in events.iter().enumerate() {
            sqlx::query(
                "INSERT INTO events(machine_id, ts, ts_us, seq, host, pid, key, event, parts_json)
                 VALUES (?, ?, ?, ?, 'h', 1, ?, ?, ?)",
            )
            .bind(m)
            .bind(ts)
            .bind(ts * 1000)
            .bind(i as i64)
            .bind(k)
            .bind(if parts.is_some() { "compile" } else { "hit" })
            .bind(parts)
            .execute(&pool)
            .await
            .unwrap();
        }
        let sql = format!("SELECT {}", parts_column("?2", "(SELECT id FROM machines WHERE name = ?1)"));
        let mut seen = vec![];
        for m in ["a", "b"] {
            for k in ["k1", "k2", "k3", "k4"] {
                let want = parts_of_keys(&pool, &[k]).await.unwrap().remove(&(m.to_string(), k.to_string()));
                let text: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.as_str()))
                    .bind(m)
                    .bind(k)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                let got = parts_of_text(text.as_deref());
                assert_eq!(got, want, "{m}:{k}");
                seen.push((m, k, got.map(|v| v.to_string())));
            }
        }
        let some: Vec<_> = seen.iter().filter_map(|(m, k, v)| Some((*m, *k, v.clone()?))).collect();
        assert_eq!(
            some,
            [
                ("a", "k1", r#"{"x":3}"#.to_string()),
                ("b", "k1", r#"{"y":1}"#.to_string()),
                ("b", "k3", r#"{"z":1}"#.to_string())
            ]
        );
    }
}
