//! Candidates for an entry's nearest neighbours, read by kernel through the variant index
//! `entries_variant` (migration 0017: kernel, signature, tile shapes, num_warps, num_stages),
//! not a scan of the fleet: [`kernel_variants`] lists the live entries of the kernel from the
//! index alone, with their variant columns and stored classes (`db::classes`), and the explainer
//! analyses them tier by tier — the same variant first — only as far as a tier can still place a
//! neighbour (`answers::load::nearest_of`). [`classes_of_ids`] groups a tier into groups that
//! compare alike with the entry asked about and loads one side per group: entries of one stored
//! class, on the same side of "is its key the entry's", with the same recorded key parts (the
//! hook's). The same key on twenty machines is one group, and so are twenty keys of the same
//! stored inputs (a kernel compiled by other compiler builds or Pythons at one install path, or
//! after a ptxas upgrade: in the key, not on disk): the explainer analyses each group once and
//! loads its IR once.
//! An entry stored before classes were (not computed yet: `db::classes::fill_pending`) is
//! grouped by its row, key included, as before.

use super::classes::Class;
use super::explain::{SideRow, parts_of_keys, shas_of_rows, side_rows_where, texts_by_sha};
use super::memo;
use crate::bounded::Bounded;
use crate::db::Store;
use crate::explain::Side;
use crate::model::EntryKind;
use std::collections::HashMap;
use std::sync::Arc;

/// Kinds of entries that hold a compiled kernel (as `db::explain::kernel_sides`).
const KERNEL_KINDS: &[EntryKind] = &[EntryKind::Kernel, EntryKind::BinaryOnly, EntryKind::Partial];

/// One candidate: machine and key, in the order `kernel_sides` lists them (machine, key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub machine: String,
    pub key: String,
}

/// The candidates of `kernel` (all of them, in order) and their groups: (a member's side,
/// the indices of its members in the candidate list).
pub struct Classes {
    pub candidates: Vec<Candidate>,
    pub classes: Vec<(Arc<Side>, Vec<usize>)>,
    /// Groups past `max_classes` were left out.
    pub more: bool,
}

/// An entry's kernel as [`kernel_variants`] reads it.
pub struct KernelVariants {
    /// The entry's id.
    pub id: i64,
    /// The other live entries of its kernel on every machine by [`tier`], each by id. Tiers 1
    /// and 2 are empty until read ([`KernelVariants::whole`], [`KernelVariants::read_whole`]).
    pub tiers: [Vec<i64>; 3],
    /// The kernel's name (its stored classes are read by it: [`stored_of`]).
    kernel: String,
    /// The entry's variant columns.
    columns: super::explain::VariantColumns,
    /// Whether every tier is read; else only tier 0, the entry's own variant ([`variants_around`]).
    whole: bool,
}

impl KernelVariants {
    /// Whether tiers 1 and 2 are read.
    pub fn whole(&self) -> bool {
        self.whole
    }

    /// Reads tiers 1 and 2 too (the kernel's whole variant list; a no-op when read).
    pub async fn read_whole(&mut self, pool: &Store, cache: &Open<'_>) -> sqlx::Result<()> {
        if !self.whole {
            let all = variants_kept(pool, &self.kernel, cache).await?;
            self.tiers = tiers_of(self.id, &self.columns, &all);
            self.whole = true;
        }
        Ok(())
    }
}

/// `machine`'s entry `key` (its id) and the live entries of its kernel on every machine
/// (itself left out) in three tiers by the lower bound on their differing components
/// ([`tier`]), from the index alone: a kernel of thousands of entries costs its distinct
/// variants (their columns hashed) and the ids of each, read once per database stamp through
/// `cache`, not a row an entry. `None`: no such entry, or one without a kernel name.
pub async fn kernel_variants(
    db: &super::Db,
    machine: &str,
    key: &str,
    cache: &Open<'_>,
) -> sqlx::Result<Option<KernelVariants>> {
    let pool = db.pool();
    let Some((_, Some(mut kv))) = entry_and_variants(db, machine, key, cache).await? else { return Ok(None) };
    kv.read_whole(pool, cache).await?;
    Ok(Some(kv))
}

/// `machine`'s entry `key` as a nearest request reads it: its side (as `db::explain::load`
/// makes it) and, when it has a kernel name, its kernel's variants ([`kernel_variants`]), maybe
/// tier 0 alone ([`variants_around`]); one query for the entry, not two. `None`: no such entry.
pub async fn entry_and_variants(
    db: &super::Db,
    machine: &str,
    key: &str,
    cache: &Open<'_>,
) -> sqlx::Result<Option<(Side, Option<KernelVariants>)>> {
    let pool = db.pool();
    let Some((side, id, columns)) = super::explain::side_and_variant(db, machine, key).await? else {
        return Ok(None);
    };
    let kv = match side.kernel.clone() {
        Some(kernel) => Some(variants_around(pool, id, kernel, columns, cache).await?),
        None => None,
    };
    Ok(Some((side, kv)))
}

/// The tiers of entry `id` of `kernel`, whose variant columns are `columns`: every tier when
/// the kernel's variants are kept in `cache` or a column of the entry is unknown; else tier 0
/// alone, the entries whose every column is the entry's or unknown, by 16 seeks of the variant
/// index (one per choice of "the entry's value" or NULL for each column). Reading the whole
/// list groups every index row of the kernel: 3-7 ms for a kernel compiled 5,000 times across
/// the 1.25M-entry fleet, most of a first nearest request, whose ranking mostly ends in tier 0
/// (enough neighbours that differ in nothing). Tiers 1 and 2 are read when the ranking gets to
/// them ([`KernelVariants::read_whole`]).
async fn variants_around(
    pool: &Store,
    id: i64,
    kernel: String,
    columns: super::explain::VariantColumns,
    cache: &Open<'_>,
) -> sqlx::Result<KernelVariants> {
    let known = columns.0.is_some() && columns.1.is_some() && columns.2.is_some() && columns.3.is_some();
    let mut kv = KernelVariants { id, tiers: Default::default(), kernel, columns, whole: false };
    match cache.variants(&kv.kernel) {
        Some(all) => {
            kv.tiers = tiers_of(id, &kv.columns, &all);
            kv.whole = true;
        }
        None if known => kv.tiers[0] = same_variant(pool, id, &kv.kernel, &kv.columns).await?,
        None => kv.read_whole(pool, cache).await?,
    }
    Ok(kv)
}

/// The kernel's variants, from `cache` or read (and kept).
async fn variants_kept(pool: &Store, kernel: &str, cache: &Open<'_>) -> sqlx::Result<Arc<Variants>> {
    Ok(match cache.variants(kernel) {
        Some(v) => v,
        None => {
            let v = Arc::new(variants_of(pool, kernel).await?);
            cache.keep_variants(kernel, v.clone());
            v
        }
    })
}

/// The tiers of entry `id` whose variant columns are `columns` among a kernel's variants, each
/// sorted, the entry left out.
fn tiers_of(id: i64, columns: &super::explain::VariantColumns, all: &Variants) -> [Vec<i64>; 3] {
    let (signature, shapes, num_warps, num_stages) = columns;
    let me = Variant::of(signature.as_deref(), shapes.as_deref(), *num_warps, *num_stages);
    let mut tiers: [Vec<i64>; 3] = Default::default();
    for (v, ids) in all.iter() {
        tiers[tier(&me, v)].extend(ids.iter().copied().filter(|&i| i != id));
    }
    for t in &mut tiers {
        t.sort_unstable();
    }
    tiers
}

/// Tier 0 of entry `id` (every column known): the kernel's live entries whose columns are each
/// the entry's or NULL, sorted, the entry left out; 16 seeks of the variant index, `IS` matching
/// a value or NULL.
async fn same_variant(
    pool: &Store,
    id: i64,
    kernel: &str,
    columns: &super::explain::VariantColumns,
) -> sqlx::Result<Vec<i64>> {
    let names = ["signature", "shapes", "num_warps", "num_stages"];
    let seeks: Vec<String> = (0..16)
        .map(|mask| {
            let each: Vec<String> = names
                .iter()
                .enumerate()
                .map(|(c, n)| if mask & (1 << c) == 0 { format!("{n} IS ?{}", c + 2) } else { format!("{n} IS NULL") })
                .collect();
            format!("SELECT id FROM entry_rows WHERE kernel = ?1 AND removed_at IS NULL AND {}", each.join(" AND "))
        })
        .collect();
    let sql = format!("SELECT '[' || coalesce(group_concat(id), '') || ']' FROM ({})", seeks.join(" UNION ALL "));
    let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(kernel)
        .bind(columns.0.as_deref())
        .bind(columns.1.as_deref())
        .bind(columns.2)
        .bind(columns.3)
        .fetch_one(pool)
        .await?;
    let mut ids: Vec<i64> = super::json_rows::json_rows(text)?;
    ids.retain(|&i| i != id);
    ids.sort_unstable();
    Ok(ids)
}

/// A kernel's distinct variants, each with the ids of its live entries.
pub type Variants = Vec<(Variant, Vec<i64>)>;

/// A variant's columns, signature and shapes hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    signature: Option<u64>,
    shapes: Option<u64>,
    num_warps: Option<i64>,
    num_stages: Option<i64>,
}

impl Variant {
    pub fn of(
        signature: Option<&str>,
        shapes: Option<&str>,
        num_warps: Option<i64>,
        num_stages: Option<i64>,
    ) -> Variant {
        use std::hash::BuildHasher;
        let h = |t: Option<&str>| t.map(|t| foldhash::fast::FixedState::with_seed(0x6e65_6172).hash_one(t));
        Variant { signature: h(signature), shapes: h(shapes), num_warps, num_stages }
    }
}

/// An entry's stored class (`entry_classes`), machine and key, whether it holds a compiled
/// kernel (a candidate at all), and its recorded key parts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    class: Class,
    machine: String,
    key: String,
    compiled: bool,
    /// The hook's recorded key parts of (machine, key).
    parts: Option<serde_json::Value>,
}

/// A class as SQLite's `hex()` writes it (`''` where there is none).
fn class_of_hex(text: &str) -> Option<Class> {
    hex::FromHex::from_hex(text).ok()
}

/// The distinct variants of `kernel`'s live entries, each with its entries' ids, from the
/// variant index: SQLite walks the kernel's index rows in the index's order and hands over one
/// row a variant (79 for a 1,476-entry kernel of the bench fleet). Handing over the rows one an
/// entry, with their texts, to be hashed here took 5-8 ms a large kernel under load, half the
/// request (20 KB of JSON now, 155 KB then).
async fn variants_of(pool: &Store, kernel: &str) -> sqlx::Result<Variants> {
    let sql = format!(
        "SELECT {} FROM (SELECT signature, shapes, num_warps, num_stages, '[' || group_concat(id) || ']' AS ids
             FROM entry_rows WHERE kernel = ?1 AND removed_at IS NULL
             GROUP BY signature, shapes, num_warps, num_stages)",
        super::json_rows::rows_json("json_array(signature, shapes, num_warps, num_stages, json(ids))")
    );
    let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(kernel).fetch_one(pool).await?;
    type Row = (Option<String>, Option<String>, Option<i64>, Option<i64>, Vec<i64>);
    let rows: Vec<Row> = super::json_rows::json_rows(text)?;
    Ok(rows.into_iter().map(|(s, t, w, n, ids)| (Variant::of(s.as_deref(), t.as_deref(), w, n), ids)).collect())
}

/// The stored classes and places of those of `ids` that are `kernel`'s entries (primary key
/// lookups: the entry, its fact, its fact's class), by id. An entry without one (not computed
/// yet) is not among them.
async fn stored_of(pool: &Store, kernel: &str, ids: &[i64]) -> sqlx::Result<HashMap<i64, Stored>> {
    let sql = format!(
        "SELECT {} FROM entries e JOIN facts f ON f.id = e.fact_id
           JOIN fact_classes c ON c.fact_id = e.fact_id AND c.relocated = e.relocated
           JOIN machines m ON m.id = e.machine_id
         WHERE f.kernel = ?1 AND e.id IN (SELECT CAST(value AS BIGINT) FROM json_each(?2))",
        super::json_rows::rows_json(&format!(
            "json_array(e.id, hex(c.class), m.name, f.key, f.kind, {})",
            super::explain::parts_column("f.key", "e.machine_id")
        ))
    );
    let ids = super::json_rows::json_ids(ids);
    let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(kernel).bind(ids).fetch_one(pool).await?;
    let compiled: Vec<&str> = KERNEL_KINDS.iter().map(|k| k.as_str()).collect();
    type Row = (i64, String, String, String, String, Option<String>);
    Ok(super::json_rows::json_rows::<Row>(text)?
        .into_iter()
        .filter_map(|(id, class, machine, key, kind, parts)| {
            let compiled = compiled.contains(&kind.as_str());
            let parts = super::explain::parts_of_text(parts.as_deref());
            Some((id, Stored { class: class_of_hex(&class)?, machine, key, compiled, parts }))
        })
        .collect())
}

/// The lower bound on `other`'s differing components against `me`: 1 for the source when its
/// signature (types, divisibility) or tile shapes differ, 1 for the options when num_warps or
/// num_stages do; a column unknown on either side counts as no difference.
pub fn tier(me: &Variant, other: &Variant) -> usize {
    fn differ<T: PartialEq>(a: Option<T>, b: Option<T>) -> bool {
        matches!((a, b), (Some(a), Some(b)) if a != b)
    }
    let source = differ(me.signature, other.signature) || differ(me.shapes, other.shapes);
    let options = differ(me.num_warps, other.num_warps) || differ(me.num_stages, other.num_stages);
    usize::from(source) + usize::from(options)
}

/// What makes candidates one group: they compare alike with the entry asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Group<'a> {
    /// A stored class, whether the key is the entry's (all the analysis asks of a key), and
    /// the recorded key parts' text.
    Stored(Class, bool, Option<&'a str>),
    /// No stored class: the row's digest, key included ([`SideRow::inputs_digest`]), and the
    /// parts' text.
    Read([u8; 16], Option<&'a str>),
}

/// The live kernel entries among `ids`, ordered by machine and key, in groups that compare
/// alike with the entry whose key is `me_key` ([`Group`]; with `kv`, the kernel, candidates are
/// placed from their stored classes and places, read by primary key: [`stored_of`]; without,
/// every candidate is grouped by its row).
/// At most `max_classes` groups are returned (with their sides loaded), the first in that
/// order; `Classes::more` says whether there were more.
///
/// What it reads of an entry (its place and parts, digest, side) is kept in `cache` while the
/// database's stamp stays the one `cache` was opened with ([`Cache::open`]): the requests of a
/// page ask about the same kernels again, and the candidates of a kernel are the same for each
/// of its entries.
pub async fn classes_of_ids(
    db: &super::Db,
    ids: &[i64],
    kv: Option<&KernelVariants>,
    me_key: &str,
    max_classes: usize,
    cache: &Open<'_>,
) -> sqlx::Result<Classes> {
    let pool = db.pool();
    let t0 = std::time::Instant::now();
    // (a candidate kept by a request that read no stored classes has none)
    let class = |k: &Known| kv.and(k.class);
    let (mut known, missing) = cache.rows(ids);
    // Candidates not known yet are placed by (machine, key), with their recorded key parts,
    // and kept so: from the kernel's stored rows (`entry_classes`), else a few bytes of each
    // row (not its metadata).
    if !missing.is_empty() {
        let mut stored = match kv {
            Some(kv) => stored_of(pool, &kv.kernel, &missing).await?,
            None => HashMap::new(),
        };
        let unplaced: Vec<i64> = missing.iter().copied().filter(|id| !stored.contains_key(id)).collect();
        // an entry of the kernel that holds no compiled kernel is no candidate
        stored.retain(|_, s| s.compiled);
        let mut fresh: HashMap<i64, Option<Arc<Known>>> = missing.iter().map(|&id| (id, None)).collect();
        for (id, s) in stored {
            fresh.insert(id, Some(Arc::new(Known::placed(s.machine, s.key, Some(s.class), s.parts))));
        }
        if !unplaced.is_empty() {
            // placed from a few bytes of each row, their parts read by key
            let placed = place(pool, &unplaced).await?;
            let mut keys: Vec<&str> = placed.values().map(|(_, k)| k.as_str()).collect();
            keys.sort_unstable();
            keys.dedup();
            let mut parts = parts_of_keys(pool, &keys).await?;
            for (id, (m, k)) in placed {
                let p = parts.remove(&(m.clone(), k.clone()));
                fresh.insert(id, Some(Arc::new(Known::placed(m, k, None, p))));
            }
        }
        cache.keep_rows(&fresh);
        known.extend(fresh);
    }
    // Candidates without a stored class are grouped by their row, read in full. Such a group
    // has one key, so the first `max_classes` groups hold only those of the first
    // `max_classes` of their keys: only these are read (a tier of an autotuned kernel has
    // hundreds of keys, and all but the first 128 were read and digested for nothing).
    let unclassed = known.values().filter_map(|k| k.as_ref()).filter(|k| class(k).is_none());
    let wanted = first_keys(unclassed.map(|k| (&k.machine, &k.key)), max_classes);
    let mut full = vec![];
    let mut beyond = false;
    for (id, k) in known.iter().filter_map(|(id, k)| Some((*id, k.as_ref()?))) {
        match (class(k).is_some() || k.inputs.is_some(), wanted.contains(k.key.as_str())) {
            (false, true) => full.push(id),
            (false, false) => beyond = true,
            (true, _) => {}
        }
    }
    let mut read = HashMap::new();
    if !full.is_empty() {
        full.sort_unstable();
        read = read_known(pool, &full, cache, &mut known).await?;
    }
    // rows placed but not read (past the first keys) are left out: `beyond` says so
    known.retain(|_, k| k.as_ref().is_some_and(|k| class(k).is_some() || k.inputs.is_some()));
    let mut rows: Vec<(i64, Arc<Known>)> = known.into_iter().filter_map(|(id, k)| Some((id, k?))).collect();
    rows.sort_by(|a, b| (&a.1.machine, &a.1.key).cmp(&(&b.1.machine, &b.1.key)));
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, rows = rows.len(), read = read.len(), "nearest: class rows");
    // Groups in order of first appearance: (the first member's id, the members' indices).
    let mut group_of: HashMap<Group, usize> = HashMap::new();
    let mut groups: Vec<(i64, Vec<usize>)> = vec![];
    let mut candidates = Vec::with_capacity(rows.len());
    for (i, (id, k)) in rows.iter().enumerate() {
        let parts = k.parts_text.as_deref();
        let group = match class(k) {
            Some(class) => Group::Stored(class, k.key == me_key, parts),
            None => Group::Read(k.inputs.unwrap_or_default(), parts),
        };
        let at = *group_of.entry(group).or_insert_with(|| {
            groups.push((*id, vec![]));
            groups.len() - 1
        });
        groups[at].1.push(i);
        candidates.push(Candidate { machine: k.machine.clone(), key: k.key.clone() });
    }
    let more = beyond || groups.len() > max_classes;
    groups.truncate(max_classes);
    let ids: Vec<i64> = groups.iter().map(|(id, _)| *id).collect();
    let (mut sides, missing) = cache.sides(&ids);
    if !missing.is_empty() {
        // Rows read above are sides' rows: only the others are read here (one a group).
        let mut side_rows: HashMap<i64, SideRow> = HashMap::new();
        let mut again = vec![];
        for id in &missing {
            match read.remove(id) {
                Some(r) => drop(side_rows.insert(*id, r)),
                None => again.push(*id),
            }
        }
        if !again.is_empty() {
            side_rows.extend(super::explain::side_rows(pool, &again).await?);
        }
        let texts = texts_by_sha(db, shas_of_rows(side_rows.values())).await?;
        let parts_of: HashMap<i64, Option<serde_json::Value>> =
            rows.iter().filter(|(id, _)| side_rows.contains_key(id)).map(|(id, k)| (*id, k.parts.clone())).collect();
        for (id, r) in side_rows {
            let side = Arc::new(r.into_side(&texts, parts_of.get(&id).cloned().flatten()));
            cache.keep_side(id, side.clone());
            sides.insert(id, side);
        }
    }
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, sides_read = missing.len(), "nearest: sides");
    let classes = groups.into_iter().filter_map(|(id, members)| Some((sides.remove(&id)?, members))).collect();
    Ok(Classes { candidates, classes, more })
}

/// (machine, key) of those of `ids` that are kernel entries: a few bytes a row, not its
/// metadata.
async fn place(pool: &Store, ids: &[i64]) -> sqlx::Result<HashMap<i64, (String, String)>> {
    let head = format!(
        "SELECT {} FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE e.id IN (",
        super::json_rows::rows_json("json_array(e.id, m.name, e.key)")
    );
    // Not `removed_at`: it sits past the row's JSON columns (overflow pages: 3-4x the time),
    // and the ids come from the live entries of the variant index, read under the same stamp.
    let tail = format!(") AND e.kind IN {}", EntryKind::sql_list(KERNEL_KINDS));
    let rows: Vec<(i64, String, String)> =
        super::json_rows::json_rows_of_ids(&mut *pool.acquire().await?, ids, &head, &tail).await?;
    Ok(rows.into_iter().map(|(id, m, k)| (id, (m, k))).collect())
}

/// The first `n` distinct keys of these (machine, key) pairs in their order.
fn first_keys<'a>(
    pairs: impl Iterator<Item = (&'a String, &'a String)>,
    n: usize,
) -> std::collections::HashSet<&'a str> {
    let mut pairs: Vec<(&String, &String)> = pairs.collect();
    pairs.sort_unstable();
    let mut keys = std::collections::HashSet::new();
    for (_, key) in pairs {
        if keys.len() == n {
            break;
        }
        keys.insert(key.as_str());
    }
    keys
}

/// Read the rows of `ids` (placed in `known`, not read yet), keep their digests, update
/// `known` (`None` for an id that is not a live kernel entry). Returns the rows read (their
/// sides are built from them).
async fn read_known(
    pool: &Store,
    ids: &[i64],
    cache: &Open<'_>,
    known: &mut HashMap<i64, Option<Arc<Known>>>,
) -> sqlx::Result<HashMap<i64, SideRow>> {
    let filter = format!(" AND e.kind IN {} AND e.removed_at IS NULL", EntryKind::sql_list(KERNEL_KINDS));
    // One JSON text per 500 entries, not a row each (see `json_rows`).
    let rows = side_rows_where(pool, ids, &filter).await?;
    let mut fresh: HashMap<i64, Option<Arc<Known>>> = ids.iter().map(|&id| (id, None)).collect();
    for (id, r) in &rows {
        let parts = known.get(id).cloned().flatten().and_then(|k| k.parts.clone());
        fresh.insert(*id, Some(Arc::new(Known::read(r, parts))));
    }
    cache.keep_rows(&fresh);
    known.extend(fresh);
    Ok(rows)
}

/// What [`classes_of_ids`] knows of a live kernel entry: where it is, its recorded key parts,
/// and, for one without a stored class, its row's digest.
#[derive(Debug)]
pub struct Known {
    machine: String,
    key: String,
    /// Its stored class (`entry_classes`), where placed from it.
    class: Option<Class>,
    /// [`SideRow::inputs_digest`] of its stored inputs; `None` while only placed.
    inputs: Option<[u8; 16]>,
    /// The hook's recorded key parts of (machine, key), and their text (part of a group).
    parts: Option<serde_json::Value>,
    parts_text: Option<String>,
}

impl Known {
    /// An entry placed by (machine, key), with its stored class if any and its parts; its row
    /// not read.
    fn placed(machine: String, key: String, class: Option<Class>, parts: Option<serde_json::Value>) -> Known {
        Known { machine, key, class, inputs: None, parts_text: parts.as_ref().map(|v| v.to_string()), parts }
    }

    /// An entry whose row was read.
    fn read(r: &SideRow, parts: Option<serde_json::Value>) -> Known {
        Known { inputs: Some(r.inputs_digest()), ..Known::placed(r.machine.clone(), r.key.clone(), None, parts) }
    }
}

/// Entries' classes and class sides ([`classes_of_ids`]) kept across requests while the
/// database's [`memo::stamp`] (newest scan and hook event, report generations moved by
/// triggers on every change to entries, machine count) stays the same: every writer moves it,
/// this server's uploads or a local scan in another process. Bounded: at most [`KEPT_ROWS`]
/// entries, [`KEPT_SIDES`] sides and [`KEPT_VARIANT_ROWS`] variant rows
/// ([`crate::bounded::Bounded`]); all dropped when the stamp moves.
#[derive(Default)]
pub struct Cache {
    kept: std::sync::Mutex<Arc<Kept>>,
}

/// What a [`Cache`] keeps under one stamp.
struct Kept {
    stamp: Option<memo::Stamp>,
    rows: Bounded<i64, Option<Arc<Known>>>,
    sides: Bounded<i64, Arc<Side>>,
    /// By kernel name: its live entries' variant columns, weighed by their rows.
    variants: Bounded<String, Arc<Variants>>,
}

impl Default for Kept {
    fn default() -> Kept {
        let rows = |_: &String, v: &Arc<Variants>| v.iter().map(|(_, ids)| 1 + ids.len() as u64).sum::<u64>();
        Kept {
            stamp: None,
            rows: Bounded::entries(KEPT_ROWS),
            sides: Bounded::entries(KEPT_SIDES),
            // one shard: a kernel's variants are kept unless they alone pass the bound
            variants: Bounded::weighed(KEPT_VARIANT_ROWS as u64, 1024, Some(1), rows),
        }
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, sides) = self.kept();
        write!(f, "nearest::Cache({rows} rows, {sides} sides)")
    }
}

/// Entries kept at most by a [`Cache`] (~200 bytes each).
pub const KEPT_ROWS: usize = 250_000;
/// Entries of kernels' variants kept at most by a [`Cache`] (an id each, 8 bytes, and a
/// variant's columns hashed, ~60 bytes, for each distinct variant; a variant counts as one).
pub const KEPT_VARIANT_ROWS: usize = 1_000_000;

/// Class sides kept at most by a [`Cache`] (a side holds its parsed metadata, a few KB; its IR
/// texts are shared with `db::explain`'s text cache).
pub const KEPT_SIDES: usize = 16_384;

impl Cache {
    /// The cache as of the database's stamp now (what was kept under another stamp is
    /// dropped). Read the stamp before anything the answer reads.
    pub async fn open(&self, pool: &Store) -> sqlx::Result<Open<'_>> {
        let stamp = memo::stamp(pool).await?;
        let (kept, old) = {
            let mut k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            let old = (k.stamp != Some(stamp))
                .then(|| std::mem::replace(&mut *k, Arc::new(Kept { stamp: Some(stamp), ..Kept::default() })));
            (k.clone(), old)
        };
        drop_apart(old);
        Ok(Open { kept: Some(kept), cache: std::marker::PhantomData })
    }

    /// Drop everything kept (the next request reads afresh).
    pub fn clear(&self) {
        let old = std::mem::take(&mut *self.kept.lock().unwrap_or_else(|e| e.into_inner()));
        drop_apart(Some(old));
    }

    /// How many entries and sides are kept now.
    pub fn kept(&self) -> (usize, usize) {
        let k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        (k.rows.len(), k.sides.len())
    }
}

/// A [`Cache`] opened at one stamp: what it hands out was read under that stamp, and what is
/// read is kept under that stamp only (dropped with it). [`Open::none`] keeps nothing.
pub struct Open<'a> {
    kept: Option<Arc<Kept>>,
    cache: std::marker::PhantomData<&'a Cache>,
}

impl<'a> Open<'a> {
    /// No cache: everything is read.
    pub fn none() -> Open<'static> {
        Open { kept: None, cache: std::marker::PhantomData }
    }

    /// What is kept of `ids` in the map `of` picks, and the ids of which nothing is kept.
    fn lookup<V: Clone>(&self, ids: &[i64], of: impl Fn(&Kept) -> &Bounded<i64, V>) -> (HashMap<i64, V>, Vec<i64>) {
        let Some(k) = &self.kept else { return (HashMap::new(), ids.to_vec()) };
        let mut kept = HashMap::with_capacity(ids.len());
        let mut missing = vec![];
        for id in ids {
            match of(k).get(id) {
                Some(v) => drop(kept.insert(*id, v)),
                None => missing.push(*id),
            }
        }
        (kept, missing)
    }

    /// The known rows of `ids`, and the ids not known.
    fn rows(&self, ids: &[i64]) -> (HashMap<i64, Option<Arc<Known>>>, Vec<i64>) {
        self.lookup(ids, |k| &k.rows)
    }

    fn keep_rows(&self, fresh: &HashMap<i64, Option<Arc<Known>>>) {
        if let Some(k) = &self.kept {
            for (id, r) in fresh {
                k.rows.insert(*id, r.clone());
            }
        }
    }

    /// The kept variants of `kernel`.
    fn variants(&self, kernel: &str) -> Option<Arc<Variants>> {
        self.kept.as_ref()?.variants.get(kernel)
    }

    fn keep_variants(&self, kernel: &str, v: Arc<Variants>) {
        if let Some(k) = &self.kept {
            k.variants.insert(kernel.to_string(), v);
        }
    }

    /// The kept sides of `ids`, and the ids not kept.
    fn sides(&self, ids: &[i64]) -> (HashMap<i64, Arc<Side>>, Vec<i64>) {
        self.lookup(ids, |k| &k.sides)
    }

    fn keep_side(&self, id: i64, side: Arc<Side>) {
        if let Some(k) = &self.kept {
            k.sides.insert(id, side);
        }
    }
}

/// Drops what an outdated cache held outside its lock and off the async workers: 16,384
/// sides' parsed metadata took tens of milliseconds to free, while every other nearest request
/// waited on the lock.
fn drop_apart<T: Send + 'static>(old: Option<T>) {
    if let Some(old) = old {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(move || drop(old))),
            Err(_) => drop(old),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Variant, tier};

    /// [`tier`] is SQLite's reading of its rule (`<>` is NULL where a side is NULL, and a NULL
    /// condition is no difference), on every combination of equal, differing and unknown
    /// columns: the bound the index's columns gave when the tiers were an SQL query.
    #[tokio::test]
    async fn a_tier_is_the_rule_as_sqlite_reads_it() {
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        let sigs = [None, Some("*fp16 {tt.divisibility = 16}, i32"), Some("*fp32, i32")];
        let shapes = [None, Some("128x64 64"), Some("64x32")];
        let ints = [None, Some(4), Some(8)];
        let mut all = vec![];
        for s in sigs {
            for t in shapes {
                for w in ints {
                    for n in ints {
                        all.push((s, t, w, n));
                    }
                }
            }
        }
        let mut checked = [0usize; 3];
        for me in &all {
            for other in &all {
                let want: i64 = sqlx::query_scalar(
                    "SELECT (CASE WHEN (?1 <> ?5) OR (?2 <> ?6) THEN 1 ELSE 0 END)
                          + (CASE WHEN (?3 <> ?7) OR (?4 <> ?8) THEN 1 ELSE 0 END)",
                )
                .bind(other.0)
                .bind(other.1)
                .bind(other.2)
                .bind(other.3)
                .bind(me.0)
                .bind(me.1)
                .bind(me.2)
                .bind(me.3)
                .fetch_one(&pool)
                .await
                .unwrap();
                let v = |c: &(Option<&str>, Option<&str>, Option<i64>, Option<i64>)| Variant::of(c.0, c.1, c.2, c.3);
                let got = tier(&v(me), &v(other));
                assert_eq!(got as i64, want, "{me:?} against {other:?}");
                checked[got] += 1;
            }
        }
        assert!(checked.iter().all(|n| *n > 0), "every tier met: {checked:?}");
    }
}
