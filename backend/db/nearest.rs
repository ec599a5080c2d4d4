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

use super::explain::{SideRow, parts_of_keys, shas_of_rows, side_rows_where, texts_by_sha};
use super::memo;
use crate::explain::Side;
use crate::model::EntryKind;
use sqlx::SqlitePool;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

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
    pub classes: Vec<(Arc<Side>, Vec<usize>)>,
    /// Classes past `max_classes` were left out.
    pub more: bool,
}

/// `machine`'s entry `key` (its id; a live one before a removed one)
/// and the live entries of its kernel on every machine (itself left out) in three tiers by the
/// lower bound on their differing components ([`tier`]), from the index alone: a kernel of
/// thousands of entries costs its variant columns, read once per database stamp through
/// `cache` (hashed: a few integers a row), not its signatures and shapes.
pub async fn kernel_variants(
    pool: &SqlitePool,
    machine: &str,
    key: &str,
    cache: &Open<'_>,
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
    let me = Variant::of(id, signature.as_deref(), shapes.as_deref(), num_warps, num_stages);
    let all = match cache.variants(&kernel) {
        Some(v) => v,
        None => {
            let v = Arc::new(variants_of(pool, &kernel).await?);
            cache.keep_variants(&kernel, v.clone());
            v
        }
    };
    let mut tiers: [Vec<i64>; 3] = Default::default();
    for v in all.iter().filter(|v| v.id != id) {
        tiers[tier(&me, v)].push(v.id);
    }
    Ok(Some((id, tiers)))
}

/// One live entry's variant columns (signature and shapes hashed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub id: i64,
    signature: Option<u64>,
    shapes: Option<u64>,
    num_warps: Option<i64>,
    num_stages: Option<i64>,
}

impl Variant {
    pub fn of(
        id: i64,
        signature: Option<&str>,
        shapes: Option<&str>,
        num_warps: Option<i64>,
        num_stages: Option<i64>,
    ) -> Variant {
        use std::hash::BuildHasher;
        let h = |t: Option<&str>| t.map(|t| foldhash::fast::FixedState::with_seed(0x6e65_6172).hash_one(t));
        Variant { id, signature: h(signature), shapes: h(shapes), num_warps, num_stages }
    }
}

/// The live entries of `kernel` with their variant columns, ordered by id, from the variant
/// index alone (one JSON text: see `db::explain::json_rows`).
async fn variants_of(pool: &SqlitePool, kernel: &str) -> sqlx::Result<Vec<Variant>> {
    let sql = format!(
        "SELECT {} FROM entries INDEXED BY entries_variant WHERE kernel = ?1 AND removed_at IS NULL",
        super::explain::rows_json("json_array(id, signature, shapes, num_warps, num_stages)")
    );
    let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(kernel).fetch_one(pool).await?;
    type Row = (i64, Option<String>, Option<String>, Option<i64>, Option<i64>);
    let rows: Vec<Row> = super::explain::json_rows(text)?;
    let mut v: Vec<Variant> =
        rows.into_iter().map(|(id, s, t, w, n)| Variant::of(id, s.as_deref(), t.as_deref(), w, n)).collect();
    v.sort_unstable_by_key(|v| v.id);
    Ok(v)
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

/// The live kernel entries among `ids`, ordered by machine and key, grouped into classes that
/// compare alike.
/// At most `max_classes` classes are returned (with their sides loaded), the first in that
/// order; `Classes::more` says whether there were more.
///
/// What it reads of an entry (its class, its side) is kept in `cache` while the database's
/// stamp stays the one `cache` was opened with ([`Cache::open`]): the requests of a page ask
/// about the same kernels again, and the candidates of a kernel are the same for each of its
/// entries.
pub async fn classes_of_ids(
    pool: &SqlitePool,
    ids: &[i64],
    max_classes: usize,
    cache: &Open<'_>,
) -> sqlx::Result<Classes> {
    let t0 = std::time::Instant::now();
    let (mut known, missing) = cache.rows(ids);
    // A class's members share its key, so the first `max_classes` classes in the candidates'
    // order are all among the entries of its first `max_classes` keys: candidates not known yet
    // are placed by (machine, key) first (and kept so), and only those of these keys are read
    // in full (a tier of an autotuned kernel has hundreds of candidates, nearly one class each,
    // and all but the first 128 were read and digested for nothing).
    if !missing.is_empty() {
        let placed = place(pool, &missing).await?;
        let fresh: HashMap<i64, Option<Arc<Known>>> = missing
            .iter()
            .map(|id| (*id, placed.get(id).map(|(m, k)| Arc::new(Known::placed(m.clone(), k.clone())))))
            .collect();
        cache.keep_rows(&fresh);
        known.extend(fresh);
    }
    let wanted = first_keys(known.values().flatten().map(|k| (&k.machine, &k.key)), max_classes);
    let mut full = vec![];
    let mut beyond = false;
    for (id, k) in known.iter().filter_map(|(id, k)| Some((*id, k.as_ref()?))) {
        match (k.inputs.is_some(), wanted.contains(k.key.as_str())) {
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
    known.retain(|_, k| k.as_ref().is_some_and(|k| k.inputs.is_some()));
    let mut rows: Vec<(i64, Arc<Known>)> = known.into_iter().filter_map(|(id, k)| Some((id, k?))).collect();
    rows.sort_by(|a, b| (&a.1.machine, &a.1.key).cmp(&(&b.1.machine, &b.1.key)));
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, rows = rows.len(), read = read.len(), "nearest: class rows");
    // Classes: equal stored inputs, numbered in order of first appearance; then the hook's
    // parts, which are per machine and key.
    let mut class_of: HashMap<[u8; 16], usize> = HashMap::new();
    // (class, parts) -> (the first member's id, the members' candidate indices)
    type Members = (i64, Vec<usize>);
    let mut by_class: BTreeMap<(usize, Option<&str>), Members> = BTreeMap::new();
    let mut candidates = Vec::with_capacity(rows.len());
    for (i, (id, k)) in rows.iter().enumerate() {
        let n = class_of.len();
        let class = *class_of.entry(k.inputs.unwrap_or_default()).or_insert(n);
        by_class.entry((class, k.parts_text.as_deref())).or_insert_with(|| (*id, vec![])).1.push(i);
        candidates.push(Candidate { machine: k.machine.clone(), key: k.key.clone() });
    }
    let more = beyond || by_class.len() > max_classes;
    let by_class: Vec<(i64, Vec<usize>)> = by_class.into_values().take(max_classes).collect();
    let ids: Vec<i64> = by_class.iter().map(|(id, _)| *id).collect();
    let (mut sides, missing) = cache.sides(&ids);
    if !missing.is_empty() {
        // The rows read above are the sides' rows: only those kept from an earlier request
        // and whose side was not kept are read again.
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
        let texts = texts_by_sha(pool, shas_of_rows(side_rows.values())).await?;
        let parts_of: HashMap<i64, Option<serde_json::Value>> =
            rows.iter().filter(|(id, _)| side_rows.contains_key(id)).map(|(id, k)| (*id, k.parts.clone())).collect();
        for (id, r) in side_rows {
            let side = Arc::new(r.into_side(&texts, parts_of.get(&id).cloned().flatten()));
            cache.keep_side(id, side.clone());
            sides.insert(id, side);
        }
    }
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, sides_read = missing.len(), "nearest: sides");
    let classes = by_class.into_iter().filter_map(|(id, members)| Some((sides.remove(&id)?, members))).collect();
    Ok(Classes { candidates, classes, more })
}

/// (machine, key) of those of `ids` that are kernel entries: a few bytes a row, not its
/// metadata.
async fn place(pool: &SqlitePool, ids: &[i64]) -> sqlx::Result<HashMap<i64, (String, String)>> {
    let head = format!(
        "SELECT {} FROM entries e JOIN machines m ON m.id = e.machine_id WHERE e.id IN (",
        super::explain::rows_json("json_array(e.id, m.name, e.key)")
    );
    // Not `removed_at`: it sits past the row's JSON columns (overflow pages: 3-4x the time),
    // and the ids come from the live entries of the variant index; one removed since is left
    // out where its row is read in full (`read_known`).
    let tail = format!(") AND e.kind IN {}", EntryKind::sql_list(KERNEL_KINDS));
    let rows: Vec<(i64, String, String)> = super::explain::json_rows_of_ids(pool, ids, &head, &tail).await?;
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

/// Read the rows of `ids` (not known to the cache), keep what they say of their class, add it
/// to `known` (`None` for an id that is not a live kernel entry). Returns the rows read (their
/// sides are built from them).
async fn read_known(
    pool: &SqlitePool,
    ids: &[i64],
    cache: &Open<'_>,
    known: &mut HashMap<i64, Option<Arc<Known>>>,
) -> sqlx::Result<HashMap<i64, SideRow>> {
    let filter = format!(" AND e.kind IN {} AND e.removed_at IS NULL", EntryKind::sql_list(KERNEL_KINDS));
    // One JSON text per 500 entries, not a row each (see `json_rows`).
    let rows = side_rows_where(pool, ids, &filter).await?;
    let mut keys: Vec<&str> = rows.values().map(|r| r.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut parts = parts_of_keys(pool, &keys).await?;
    let mut fresh: HashMap<i64, Option<Arc<Known>>> = ids.iter().map(|&id| (id, None)).collect();
    for (id, r) in &rows {
        let parts = parts.remove(&(r.machine.clone(), r.key.clone()));
        let k = Known {
            inputs: Some(r.inputs_digest()),
            parts_text: parts.as_ref().map(|v| v.to_string()),
            parts,
            machine: r.machine.clone(),
            key: r.key.clone(),
        };
        fresh.insert(*id, Some(Arc::new(k)));
    }
    cache.keep_rows(&fresh);
    known.extend(fresh);
    Ok(rows)
}

/// What [`classes_of_ids`] knows of a live kernel entry: where it is, its class.
#[derive(Debug)]
pub struct Known {
    machine: String,
    key: String,
    /// [`SideRow::inputs_digest`] of its stored inputs; `None` while only placed ([`place`]).
    inputs: Option<[u8; 16]>,
    /// The hook's recorded key parts of (machine, key), and their text (part of the class).
    parts: Option<serde_json::Value>,
    parts_text: Option<String>,
}

impl Known {
    /// An entry placed by (machine, key), its row not read yet.
    fn placed(machine: String, key: String) -> Known {
        Known { machine, key, inputs: None, parts: None, parts_text: None }
    }
}

/// Entries' classes and class sides ([`classes_of_ids`]) kept across requests while the
/// database's [`memo::stamp`] (newest scan and hook event, report generations moved by
/// triggers on every change to entries, machine count) stays the same: every writer moves it,
/// this server's uploads or a local scan in another process. Bounded: at most [`KEPT_ROWS`]
/// entries and [`KEPT_SIDES`] sides, each map started over when full.
#[derive(Default)]
pub struct Cache {
    kept: std::sync::Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    stamp: Option<memo::Stamp>,
    rows: HashMap<i64, Option<Arc<Known>>>,
    sides: HashMap<i64, Arc<Side>>,
    /// By kernel name: its live entries' variant columns, and how many rows all kernels hold.
    variants: HashMap<String, Arc<Vec<Variant>>>,
    variant_rows: usize,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        write!(f, "nearest::Cache({} rows, {} sides)", k.rows.len(), k.sides.len())
    }
}

/// Entries kept at most by a [`Cache`] (~200 bytes each).
pub const KEPT_ROWS: usize = 250_000;
/// Variant rows (of all kernels) kept at most by a [`Cache`] (40 bytes each).
pub const KEPT_VARIANT_ROWS: usize = 1_000_000;

/// Class sides kept at most by a [`Cache`] (a side holds its parsed metadata, a few KB; its IR
/// texts are shared with `db::explain`'s text cache).
pub const KEPT_SIDES: usize = 16_384;

impl Cache {
    /// The cache as of the database's stamp now (what was kept under another stamp is
    /// dropped). Read the stamp before anything the answer reads.
    pub async fn open(&self, pool: &SqlitePool) -> sqlx::Result<Open<'_>> {
        let stamp = memo::stamp(pool).await?;
        let old = {
            let mut k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            (k.stamp != Some(stamp)).then(|| std::mem::replace(&mut *k, Kept { stamp: Some(stamp), ..Kept::default() }))
        };
        drop_apart(old);
        Ok(Open { cache: Some(self), stamp })
    }

    /// How many entries and sides are kept now.
    pub fn kept(&self) -> (usize, usize) {
        let k = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        (k.rows.len(), k.sides.len())
    }
}

/// A [`Cache`] opened at one stamp: what it hands out was read under that stamp, and what is
/// read is kept only while the cache still holds that stamp. [`Open::none`] keeps nothing.
pub struct Open<'a> {
    cache: Option<&'a Cache>,
    stamp: memo::Stamp,
}

impl<'a> Open<'a> {
    /// No cache: everything is read.
    pub fn none() -> Open<'static> {
        Open { cache: None, stamp: Default::default() }
    }

    fn kept<T>(&self, f: impl FnOnce(&mut Kept) -> T) -> Option<T> {
        let mut k = self.cache?.kept.lock().unwrap_or_else(|e| e.into_inner());
        (k.stamp == Some(self.stamp)).then(|| f(&mut k))
    }

    /// What is kept of `ids` in the map `of` picks, and the ids of which nothing is kept.
    fn lookup<V: Clone>(&self, ids: &[i64], of: impl Fn(&Kept) -> &HashMap<i64, V>) -> (HashMap<i64, V>, Vec<i64>) {
        let mut kept = HashMap::with_capacity(ids.len());
        let mut missing = vec![];
        self.kept(|k| {
            for id in ids {
                match of(k).get(id) {
                    Some(v) => drop(kept.insert(*id, v.clone())),
                    None => missing.push(*id),
                }
            }
        })
        .unwrap_or_else(|| missing = ids.to_vec());
        (kept, missing)
    }

    /// The known rows of `ids`, and the ids not known.
    fn rows(&self, ids: &[i64]) -> (HashMap<i64, Option<Arc<Known>>>, Vec<i64>) {
        self.lookup(ids, |k| &k.rows)
    }

    fn keep_rows(&self, fresh: &HashMap<i64, Option<Arc<Known>>>) {
        let full = self.kept(|k| {
            let full = (k.rows.len() + fresh.len() > KEPT_ROWS).then(|| std::mem::take(&mut k.rows));
            k.rows.extend(fresh.iter().map(|(id, r)| (*id, r.clone())));
            full
        });
        drop_apart(full.flatten());
    }

    /// The kept variant rows of `kernel`.
    fn variants(&self, kernel: &str) -> Option<Arc<Vec<Variant>>> {
        self.kept(|k| k.variants.get(kernel).cloned()).flatten()
    }

    fn keep_variants(&self, kernel: &str, v: Arc<Vec<Variant>>) {
        let full = self.kept(|k| {
            let full = (k.variant_rows + v.len() > KEPT_VARIANT_ROWS).then(|| {
                k.variant_rows = 0;
                std::mem::take(&mut k.variants)
            });
            k.variant_rows += v.len();
            if let Some(old) = k.variants.insert(kernel.to_string(), v) {
                k.variant_rows -= old.len();
            }
            full
        });
        drop_apart(full.flatten());
    }

    /// The kept sides of `ids`, and the ids not kept.
    fn sides(&self, ids: &[i64]) -> (HashMap<i64, Arc<Side>>, Vec<i64>) {
        self.lookup(ids, |k| &k.sides)
    }

    fn keep_side(&self, id: i64, side: Arc<Side>) {
        let full = self.kept(|k| {
            let full = (k.sides.len() >= KEPT_SIDES).then(|| std::mem::take(&mut k.sides));
            k.sides.insert(id, side);
            full
        });
        drop_apart(full.flatten());
    }
}

/// Drops what a full or outdated cache held outside its lock and off the async workers: 16,384
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
        for (i, me) in all.iter().enumerate() {
            for (j, other) in all.iter().enumerate() {
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
                let v = |id: usize, c: &(Option<&str>, Option<&str>, Option<i64>, Option<i64>)| {
                    Variant::of(id as i64, c.0, c.1, c.2, c.3)
                };
                let got = tier(&v(i, me), &v(j, other));
                assert_eq!(got as i64, want, "{me:?} against {other:?}");
                checked[got] += 1;
            }
        }
        assert!(checked.iter().all(|n| *n > 0), "every tier met: {checked:?}");
    }
}
