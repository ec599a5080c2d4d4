//! Explainer answers for the API, pages and CLI: entries loaded through [`crate::db::explain`],
//! then the pure functions of this module ([`compare`], [`invalidations`], [`nearest`]) and the
//! view shapes of [`report`]. The one place the explainer touches the database.

use crate::db::Store;
use crate::db::explain::{LightRow, Loaded, ir_of, light_at, light_now, load, machine_exists, sides_of_ids};
use crate::db::keysets;
use crate::db::scans::{ScanRef, scans_of};
use crate::explain::report::{self, CompareReport, InvalidationsReport};
use crate::explain::{Budget, Side, compare_kept, finish, match_part, nearest_classes};
use std::collections::{BTreeMap, HashMap, HashSet};

mod ids;
mod pieces;

pub use ids::{Ambiguous, CANDIDATES, resolve};

/// Why an explain request cannot be answered.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// Malformed input (an id that is not `MACHINE:KEY`, an unknown IR kind, ...): 400.
    #[error("{0}")]
    Bad(String),
    /// An unknown entry, machine or scan: 404.
    #[error("{0}")]
    NotFound(String),
    /// The work would exceed a report's limits ([`LIMITS`]): 422, with what was over.
    #[error("this report is too big to compute: {0}")]
    OverBudget(String),
    /// A request that names things that exist but make no sense together (a report from a
    /// scan to itself or to an earlier one): 422.
    #[error("{0}")]
    Unprocessable(String),
    /// Too many reports waiting to be computed: 503, ask again later.
    #[error("{0}")]
    Busy(String),
    /// An id whose key start names several entries: 400, with the candidates.
    #[error("{0}")]
    Ambiguous(Ambiguous),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Splits `MACHINE:KEY`.
pub fn parse_id(id: &str) -> Result<(&str, &str), ExplainError> {
    let bad = || ExplainError::Bad(format!("malformed entry id {id:?}: expected MACHINE:KEY"));
    let (m, k) = id.rsplit_once(':').ok_or_else(bad)?;
    let key_ok =
        !k.is_empty() && k.len() <= 128 && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !crate::model::valid_machine_name(m) || !key_ok {
        return Err(bad());
    }
    Ok((m, k))
}

/// Loads an entry by `MACHINE:KEY` (or the start of a key: [`resolve`]), 404 when unknown.
pub async fn load_id(db: &crate::db::Db, id: &str) -> Result<Loaded, ExplainError> {
    let pool = db.pool();
    let (m, k) = parse_id(id)?;
    if let Some(l) = load(db, m, k).await? {
        return Ok(l);
    }
    let id = resolve(pool, id).await?;
    let (m, k) = parse_id(&id)?;
    load(db, m, k).await?.ok_or_else(|| ExplainError::NotFound(format!("no entry {m}:{k}")))
}

/// Comparisons (entry loads, analyses and IR diffs) run at once at most, and how long one more
/// waits for its turn before it is answered 503 (`ExplainError::Busy`). One per server
/// (`web::AppState`), one per CLI run. A comparison holds its turn from the loading of its
/// entries to the end of its diff, and the work runs on a blocking thread
/// (`spawn_blocking`), never on the async workers that answer every other request: two 16 MiB
/// texts took 2.7 s of CPU and +650 MB before the diff's bound (`explain::ir::DIFF_MAX_LINES`).
#[derive(Debug, Clone)]
pub struct DiffSlots {
    sem: std::sync::Arc<tokio::sync::Semaphore>,
    n: usize,
    wait: std::time::Duration,
}

/// Comparisons at once on a server ([`DiffSlots`]).
pub const DIFF_SLOTS: usize = 2;

/// How long a comparison waits for a [`DiffSlots`] turn before it is answered 503.
pub const DIFF_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl DiffSlots {
    /// `n` comparisons at once, others waiting at most `wait`.
    pub fn new(n: usize, wait: std::time::Duration) -> DiffSlots {
        DiffSlots { sem: std::sync::Arc::new(tokio::sync::Semaphore::new(n.max(1))), n: n.max(1), wait }
    }

    async fn turn(&self) -> Result<tokio::sync::OwnedSemaphorePermit, ExplainError> {
        match tokio::time::timeout(self.wait, self.sem.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(p),
            _ => Err(ExplainError::Busy(format!(
                "the server is busy comparing entries ({} comparisons at once, none finished within {} s): ask again in a few seconds",
                self.n,
                self.wait.as_secs()
            ))),
        }
    }
}

impl Default for DiffSlots {
    fn default() -> Self {
        DiffSlots::new(DIFF_SLOTS, DIFF_WAIT)
    }
}

/// The comparison of two entries, with the IR diff of `ir` (default: `.source` when both have
/// one, else `.ttir`), in one of `slots`' turns, computed on a blocking thread.
pub async fn compare_ids(
    db: &crate::db::Db,
    slots: &DiffSlots,
    a: &str,
    b: &str,
    ir: Option<&str>,
    strip: bool,
) -> Result<CompareReport, ExplainError> {
    let pool = db.pool();
    if let Some(k) = ir.filter(|k| !report::IR_KINDS.contains(k)) {
        return Err(ExplainError::Bad(format!("unknown IR {k:?}: one of {}", report::IR_KINDS.join(", "))));
    }
    parse_id(a)?;
    parse_id(b)?;
    // The turn is taken before the entries are loaded: their texts (up to 16 MiB each) are
    // held only by the comparisons that run.
    let turn = slots.turn().await?;
    let (la, lb) = (load_id(db, a).await?, load_id(db, b).await?);
    let kind = ir.unwrap_or(if la.side.source.is_some() && lb.side.source.is_some() { "source" } else { "ttir" });
    // Shared with the sides, not copied (each up to 16 MiB).
    let text = |l: &Loaded| -> Option<std::sync::Arc<str>> {
        match kind {
            "source" => l.side.source.clone(),
            "ttir" => l.side.ttir.clone(),
            _ => None,
        }
    };
    let (ta, tb) = match kind {
        "source" | "ttir" => (text(&la), text(&lb)),
        _ => (
            ir_of(pool, la.row.id, kind).await?.map(std::sync::Arc::from),
            ir_of(pool, lb.row.id, kind).await?.map(std::sync::Arc::from),
        ),
    };
    let kind = kind.to_string();
    let kept = db.explained().clone();
    let work = move || {
        let _turn = turn;
        let (ir_stats, ir_rows) = report::ir_report(&kind, ta.as_deref(), tb.as_deref(), strip, 3);
        let relocated = [("a", &la), ("b", &lb)]
            .into_iter()
            .filter(|(_, l)| l.side.relocated)
            .map(|(s, l)| report::Relocated::new(s, format!("{}:{}", l.row.machine, l.row.key), l.group_at.clone()))
            .collect();
        CompareReport {
            cmp: compare_kept(&la.side, &lb.side, &kept),
            kernel_a: la.side.kernel_name().map(str::to_string),
            kernel_b: lb.side.kernel_name().map(str::to_string),
            relocated,
            ir: ir_stats,
            ir_rows,
        }
    };
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ExplainError::Db(sqlx::Error::Protocol(format!("the comparison failed: {e}"))))
}

/// A neighbour of an entry.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Neighbour {
    pub machine: String,
    pub key: String,
    /// `machine:key`.
    pub id: String,
    /// Components of the key with a differing input (the first ranking criterion).
    pub components: usize,
    /// Differing key inputs (fields; the tie-break).
    pub differing: usize,
    pub cause: crate::explain::Cause,
    pub summary: String,
    pub identical_binary: bool,
    pub identical_code: bool,
}

/// Classes a nearest-neighbour request loads and analyses at most (each ~1 ms: its metadata and
/// IR read, one analysis). Past it the answer is the nearest among those analysed
/// ([`nearest_ranked`] returns whether that happened, and it is logged). The real corpora's
/// kernels stay under it (`tests/e2e/nearest.rs` fails at 64: their largest kernel, autotuned
/// matmuls on four machines, has between 64 and 128 classes); a fleet's most compiled kernels
/// (thousands of autotuned matmuls across machines) do not, and their answers are then the
/// best of the first classes.
pub const NEAREST_MAX_CLASSES: usize = 128;

/// Candidates of one tier read at most (each a row with its metadata; the whole tier of a
/// kernel compiled 5,000 times across a fleet took 120 ms): past it, those whose ids are
/// nearest the entry's (the same scans, the same landing) are read, and the answer is marked
/// cut as for [`NEAREST_MAX_CLASSES`].
pub const NEAREST_MAX_CANDIDATES: usize = 1024;

/// The closest entries of the same kernel on any machine: fewest differing components first,
/// then fewest differing key inputs, then fewest differing rows, then machine and key.
///
/// Not every entry of the kernel is analysed (a kernel of a fleet has thousands). The variant
/// columns of its entries come from the variant index ([`crate::db::nearest::kernel_variants`])
/// and give each a lower bound on its differing components: 1 for the source when its signature
/// (types, divisibility) or tile shapes differ, 1 for the options when num_warps or num_stages
/// do (a column unknown on either side counts as no difference). Tiers of equal bound are
/// analysed in order (the same variant first), one analysis per class of entries that compare
/// alike, and a tier is skipped once `limit` neighbours rank below its bound: the answer is the
/// plain ranking of every entry (`tests/e2e/nearest.rs` pins that), at the cost of the tiers that
/// can still place a neighbour; the index is read for tiers 1 and 2 only when the ranking gets
/// to them (`db::nearest::variants_around`). At most [`NEAREST_MAX_CLASSES`] classes are
/// analysed.
pub async fn nearest_of(db: &crate::db::Db, id: &str, limit: usize) -> Result<(Side, Vec<Neighbour>), ExplainError> {
    nearest_ranked(db, &crate::db::nearest::Open::none(), id, limit).await.map(|(of, n, _)| (of, n))
}

/// [`nearest_of`] for a server: what it reads of the candidates is kept in `cache` while the
/// database stays as it is ([`crate::db::nearest::Cache`]).
pub async fn nearest_cached(
    db: &crate::db::Db,
    cache: &crate::db::nearest::Cache,
    id: &str,
    limit: usize,
) -> Result<(Side, Vec<Neighbour>), ExplainError> {
    let pool = db.pool();
    let open = cache.open(pool).await?;
    nearest_ranked(db, &open, id, limit).await.map(|(of, n, _)| (of, n))
}

/// [`nearest_of`], and whether the class limit cut the analysis short; candidates' classes and
/// sides read through `cache`.
pub async fn nearest_ranked(
    db: &crate::db::Db,
    cache: &crate::db::nearest::Open<'_>,
    id: &str,
    limit: usize,
) -> Result<(Side, Vec<Neighbour>, bool), ExplainError> {
    let pool = db.pool();
    let t0 = std::time::Instant::now();
    let id = &resolve(pool, id).await?;
    let (m, k) = parse_id(id)?;
    let Some((of, kv)) = crate::db::nearest::entry_and_variants(db, m, k, cache).await? else {
        return Err(ExplainError::NotFound(format!("no entry {m}:{k}")));
    };
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "nearest: loaded");
    let Some(mut kv) = kv else {
        return Ok((of, vec![], false));
    };
    let me = kv.id;
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, tiers = ?kv.tiers.each_ref().map(Vec::len), whole = kv.whole(), "nearest: tiers read");
    // (rank key, machine, key, class side, near, class id)
    type Found = ((usize, usize, usize), String, String, std::sync::Arc<Side>, crate::explain::Near, (usize, usize));
    let mut found: Vec<Found> = Vec::new();
    let (mut analysed, mut truncated) = (0usize, false);
    for b in 0..kv.tiers.len() {
        found.sort_by(|x, y| (x.0, &x.1, &x.2).cmp(&(y.0, &y.1, &y.2)));
        if found.len() >= limit && found[limit - 1].0.0 < b {
            continue;
        }
        // tiers past the entry's own variant are read once the ranking gets to them
        if b > 0 {
            kv.read_whole(pool, cache).await?;
        }
        if kv.tiers[b].is_empty() {
            continue;
        }
        let mut ids = std::borrow::Cow::Borrowed(&kv.tiers[b]);
        if ids.len() > NEAREST_MAX_CANDIDATES {
            let cut = ids.to_mut();
            cut.sort_by_key(|&i| (i.abs_diff(me), i));
            cut.truncate(NEAREST_MAX_CANDIDATES);
            truncated = true;
        }
        let crate::db::nearest::Classes { candidates, mut classes, more } =
            crate::db::nearest::classes_of_ids(db, &ids, Some(&kv), &of.key, NEAREST_MAX_CLASSES - analysed + 1, cache)
                .await?;
        tracing::debug!(
            ms = t0.elapsed().as_secs_f64() * 1e3,
            tier = b,
            classes = classes.len(),
            "nearest: classes read"
        );
        for (_, members) in &mut classes {
            members.retain(|&i| !(candidates[i].machine == of.machine && candidates[i].key == of.key));
        }
        classes.retain(|(_, members)| !members.is_empty());
        if more || analysed + classes.len() > NEAREST_MAX_CLASSES {
            classes.truncate(NEAREST_MAX_CLASSES - analysed);
            truncated = true;
        }
        analysed += classes.len();
        let side_of: std::collections::HashMap<usize, usize> =
            classes.iter().enumerate().flat_map(|(c, (_, m))| m.iter().map(move |&i| (i, c))).collect();
        let ranked = nearest_classes(&of, &classes, usize::MAX, db.explained());
        let shared: Vec<std::sync::Arc<Side>> = classes.into_iter().map(|(s, _)| s).collect();
        for n in ranked {
            let at = &candidates[n.index];
            let c = side_of[&n.index];
            found.push((
                (n.components, n.differing, n.rows),
                at.machine.clone(),
                at.key.clone(),
                shared[c].clone(),
                n,
                (b, c),
            ));
        }
        if truncated {
            break;
        }
    }
    found.sort_by(|x, y| (x.0, &x.1, &x.2).cmp(&(y.0, &y.1, &y.2)));
    found.truncate(limit);
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, analysed, "nearest: ranked");
    // The members of a class compare alike: one comparison (with its IR diff) per class listed.
    let mut compared: std::collections::HashMap<(usize, usize), (String, bool, bool)> = Default::default();
    let out = found
        .into_iter()
        .map(|(_, machine, key, side, n, class)| {
            let (summary, identical_binary, identical_code) = compared
                .entry(class)
                .or_insert_with(|| {
                    let c = Side { machine: machine.clone(), key: key.clone(), ..(*side).clone() };
                    let cmp = compare_kept(&of, &c, db.explained());
                    (cmp.summary, cmp.identical_binary, cmp.identical_code)
                })
                .clone();
            Neighbour {
                id: format!("{machine}:{key}"),
                machine,
                key,
                components: n.components,
                differing: n.differing,
                cause: n.cause,
                summary,
                identical_binary,
                identical_code,
            }
        })
        .collect();
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "nearest: compared");
    if truncated {
        tracing::info!(id, analysed, "nearest: stopped at the class limit; the answer is the best of those analysed");
    }
    Ok((of, out, truncated))
}

/// Which scans to compare: `to` defaults to the machine's latest scan, `from` to the scan of
/// the same root before `to` (none when `to` is the first).
pub async fn pick_scans(
    pool: &Store,
    machine: &str,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<(Option<ScanRef>, ScanRef, Vec<ScanRef>), ExplainError> {
    let all = scans_of(pool, machine).await?;
    if all.is_empty() {
        return Err(ExplainError::NotFound(format!("no scans of machine {machine:?}")));
    }
    let find = |id: i64| {
        all.iter()
            .find(|s| s.id == id)
            .cloned()
            .ok_or_else(|| ExplainError::NotFound(format!("no scan {id} of machine {machine}")))
    };
    let to = match to {
        Some(id) => find(id)?,
        None => all.last().cloned().unwrap_or_else(|| unreachable!()),
    };
    let from = match from {
        Some(id) => Some(find(id)?),
        None => all.iter().rev().find(|s| s.root == to.root && (s.scanned_at, s.id) < (to.scanned_at, to.id)).cloned(),
    };
    if let Some(f) = &from
        && (f.scanned_at, f.id) >= (to.scanned_at, to.id)
    {
        let what = if f.id == to.id { "the same scan as" } else { "a later scan than" };
        return Err(ExplainError::Unprocessable(format!(
            "from={} is {what} to={}: a report goes from an earlier scan of the machine to a later one",
            f.id, to.id
        )));
    }
    if let Some(f) = &from
        && f.root != to.root
    {
        return Err(ExplainError::Bad(format!(
            "scans {} and {} are of different cache dirs ({} vs {})",
            f.id, to.id, f.root, to.root
        )));
    }
    Ok((from, to, all))
}

/// Bounds on the work of one report computation. Memory is bounded by doing the work in pieces
/// (`group_entries`); `rows`, `pairs` and `time` end the computation with
/// [`ExplainError::OverBudget`] instead of growing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Entries of both sides listed (ids and keys only): the listing and the answer are held
    /// whole.
    pub rows: usize,
    /// Entries loaded in full (metadata and IR) at once: a kernel with more is paired in pieces
    /// of this size (`load/pieces.rs`), never refused. An entry with its `.source`/`.ttir` and
    /// their prepared forms holds ~150 KB in the corpus.
    pub group_entries: usize,
    /// Pairs of distinct entry contents analysed in one sub-group of a kernel (entries whose
    /// num_warps, num_stages and IR variant identity are the same): its verdicts are held at
    /// once.
    pub pairs: usize,
    /// Wall time, for a report computed in a request (`None`: a stored report, computed in the
    /// background however long it takes).
    pub time: Option<std::time::Duration>,
    /// The store a computed report joins (`db::reports`): reports kept at most beside the
    /// latest landing ones, and their rows at most ([`crate::db::reports::KEPT`],
    /// [`crate::db::reports::KEPT_ROWS`]); past either the oldest are evicted.
    pub kept: (i64, i64),
}

/// The limits every report runs under.
pub const LIMITS: Limits = Limits {
    rows: 2_000_000,
    group_entries: 2_000,
    pairs: 250_000,
    time: Some(std::time::Duration::from_secs(60)),
    kept: (crate::db::reports::KEPT, crate::db::reports::KEPT_ROWS),
};

/// One side of a report: its machine and its entries (ids and keys).
pub struct SideSet {
    pub machine: String,
    pub rows: Vec<LightRow>,
    /// Entries not in `rows`: kernels whose key set is the same on the other side (all kept,
    /// counted from `db::keysets`), and how many of them are relocated.
    pub unlisted: usize,
    pub unlisted_relocated: usize,
}

impl SideSet {
    fn all(machine: &str, rows: Vec<LightRow>) -> SideSet {
        SideSet { machine: machine.into(), rows, unlisted: 0, unlisted_relocated: 0 }
    }
}

fn light(machine: &str, r: &LightRow) -> Side {
    Side {
        machine: machine.into(),
        key: r.key.clone(),
        kernel: r.kernel.clone(),
        relocated: r.relocated,
        ..Side::default()
    }
}

/// The match of two sides, kernel by kernel: only the kernels with new keys are read in full
/// (their old entries as candidates, their new keys), one kernel at a time, in pieces of at
/// most `limits.group_entries` entries (`load/pieces.rs`), and matched off the async workers.
/// Equal to [`invalidations`] of the two sides loaded whole.
pub async fn invalidations_grouped(
    db: &crate::db::Db,
    old: &SideSet,
    new: &SideSet,
    limits: Limits,
    progress: &crate::answers::stored::Progress,
) -> Result<crate::explain::Invalidations, ExplainError> {
    use std::sync::atomic::Ordering::Relaxed;
    let started = std::time::Instant::now();
    let over = |what: String| ExplainError::OverBudget(what);
    if old.rows.len() + new.rows.len() > limits.rows {
        return Err(over(format!(
            "{} + {} entries to compare: over the limit of {} a report may list",
            old.rows.len(),
            new.rows.len(),
            limits.rows
        )));
    }
    let old_keys: HashSet<&str> = old.rows.iter().map(|r| r.key.as_str()).collect();
    // An entry without a kernel name whose key the other side names (its metadata lost on one
    // machine: a partial entry) is grouped under that name, where its key is kept, as the whole
    // match keeps it; grouped apart, it read as one key removed and one new.
    let named: HashMap<&str, &str> =
        old.rows.iter().chain(&new.rows).filter_map(|r| Some((r.key.as_str(), r.kernel.as_deref()?))).collect();
    fn group_of<'a>(r: &'a LightRow, named: &HashMap<&'a str, &'a str>) -> Option<&'a str> {
        r.kernel.as_deref().or_else(|| named.get(r.key.as_str()).copied())
    }
    let mut groups: BTreeMap<Option<&str>, (Vec<&LightRow>, Vec<&LightRow>)> = BTreeMap::new();
    for r in &old.rows {
        groups.entry(group_of(r, &named)).or_default().0.push(r);
    }
    for r in &new.rows {
        groups.entry(group_of(r, &named)).or_default().1.push(r);
    }
    let mut budget = Budget { pairs_left: limits.pairs };
    let mut shared = crate::explain::Shared::new(db.explained().clone());
    let mut loading = std::time::Duration::ZERO;
    let mut parts = Vec::with_capacity(groups.len());
    progress.total.store(groups.len(), Relaxed);
    for (kernel, (o, n)) in groups {
        progress.done.fetch_add(1, Relaxed);
        let fresh: Vec<i64> = n.iter().filter(|r| !old_keys.contains(r.key.as_str())).map(|r| r.id).collect();
        // Kept keys only: pairing reads nothing but the keys (entries without a kernel name
        // too: with no new key there is nothing to pair, only kept and removed keys).
        // A named kernel with no old entry: nothing to pair its new keys with, so every one is
        // new whatever the entries hold (a machine's first scan, a kernel first compiled).
        if fresh.is_empty() || (o.is_empty() && kernel.is_some()) {
            let (os, ns): (Vec<Side>, Vec<Side>) = (
                o.iter().map(|r| light(&old.machine, r)).collect(),
                n.iter().map(|r| light(&new.machine, r)).collect(),
            );
            parts.push(match_part(&os, &ns, &mut budget, &mut shared).map_err(|_| over(pairs_over(limits)))?);
            continue;
        }
        if let Some(t) = limits.time
            && started.elapsed() > t
        {
            return Err(over(format!("the report took over {} s", t.as_secs())));
        }
        let t = std::time::Instant::now();
        // A named kernel: paired in pieces, whatever its size.
        if let Some(k) = kernel {
            let machines = (old.machine.as_str(), new.machine.as_str());
            parts.push(pieces::kernel_part(db, machines, k, &o, &n, limits, &mut shared).await?);
            loading += t.elapsed();
            continue;
        }
        // Entries without a kernel name (partial entries): loaded whole.
        let os = sides_of_ids(db, &old.machine, &o.iter().map(|r| r.id).collect::<Vec<_>>()).await?;
        let mut full: HashMap<String, Side> =
            sides_of_ids(db, &new.machine, &fresh).await?.into_iter().map(|s| (s.key.clone(), s)).collect();
        loading += t.elapsed();
        let ns: Vec<Side> = n.iter().map(|r| full.remove(&r.key).unwrap_or_else(|| light(&new.machine, r))).collect();
        let (part, left, kept) = tokio::task::spawn_blocking(move || {
            let (mut b, mut shared) = (budget, shared);
            (match_part(&os, &ns, &mut b, &mut shared), b, shared)
        })
        .await
        .map_err(|e| ExplainError::Db(sqlx::Error::Protocol(format!("report task failed: {e}"))))?;
        (budget, shared) = (left, kept);
        parts.push(part.map_err(|_| over(pairs_over(limits)))?);
    }
    if old.unlisted > 0 {
        parts.push(crate::explain::Part::all_kept(old.unlisted));
    }
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        loading_ms = loading.as_millis() as u64,
        groups = parts.len(),
        "report: kernels matched"
    );
    Ok(finish(parts))
}

fn pairs_over(limits: Limits) -> String {
    format!(
        "over {} entry pairs to analyse: too many distinct compiles of one kernel share a variant identity",
        limits.pairs
    )
}

fn inv_report(inv: crate::explain::Invalidations, old: &SideSet, new: &SideSet) -> InvalidationsReport {
    let moved: HashSet<&str> = new.rows.iter().filter(|s| s.relocated).map(|s| s.key.as_str()).collect();
    let machines = (old.machine.as_str(), new.machine.as_str());
    let counts = (old.rows.len() + old.unlisted, new.rows.len() + new.unlisted);
    report::invalidations_report(inv, machines, counts, |k| moved.contains(k), moved.len() + new.unlisted_relocated)
}

/// The two sides of a one-machine report.
pub async fn scan_sides(
    pool: &Store,
    from: Option<&ScanRef>,
    to: &ScanRef,
) -> Result<(SideSet, SideSet), ExplainError> {
    // A re-scan that changed nothing: both sides are the same entries, all kept (what matching
    // them gives, counted instead of listed: `tests/e2e/reports.rs` pins it equal).
    if let Some(f) = from
        && let Some((n, relocated)) = crate::db::explain::light_same(pool, f, to).await?
    {
        let side = || SideSet { machine: to.machine.clone(), rows: vec![], unlisted: n, unlisted_relocated: relocated };
        return Ok((side(), side()));
    }
    let old = match from {
        Some(f) => light_at(pool, f).await?,
        None => vec![],
    };
    let new = light_at(pool, to).await?;
    Ok((SideSet::all(&to.machine, old), SideSet::all(&to.machine, new)))
}

/// The two sides of a machine-pair report (404 for an unknown machine). Kernels whose key
/// sets are equal on both machines ([`crate::db::keysets`]) are counted, not read: all their
/// entries are kept, which is what matching them would give (`tests/e2e/reports.rs` pins the
/// report equal to the whole sets matched at once).
pub async fn machine_sides(db: &crate::db::Db, a: &str, b: &str) -> Result<(SideSet, SideSet), ExplainError> {
    let pool = db.pool();
    for m in [a, b] {
        if !machine_exists(pool, m).await? {
            return Err(ExplainError::NotFound(format!("no machine {m:?}")));
        }
    }
    let (ka, kb) = (keysets::current(db, a).await?, keysets::current(db, b).await?);
    let same = keysets::all_kept(&ka, &kb);
    if same.is_empty() {
        return Ok((SideSet::all(a, light_now(pool, a).await?), SideSet::all(b, light_now(pool, b).await?)));
    }
    fn differ<'a>(sets: &'a HashMap<String, keysets::KeySet>, same: &HashSet<&str>) -> Vec<&'a str> {
        sets.keys().filter(|k| !same.contains(k.as_str())).map(String::as_str).collect()
    }
    let side = |m: &str, sets: &HashMap<String, keysets::KeySet>, rows| {
        let kept = sets.values().filter(|s| same.contains(s.kernel.as_str()));
        let (n, moved) = kept.fold((0, 0), |(n, r), s| (n + s.entries as usize, r + s.relocated as usize));
        SideSet { machine: m.into(), rows, unlisted: n, unlisted_relocated: moved }
    };
    let (ra, rb) = (
        keysets::light_now_of(pool, a, &differ(&ka, &same)).await?,
        keysets::light_now_of(pool, b, &differ(&kb, &same)).await?,
    );
    Ok((side(a, &ka, ra), side(b, &kb, rb)))
}

/// A report computed fresh from two sides, under `limits`.
pub async fn report_of(
    db: &crate::db::Db,
    old: &SideSet,
    new: &SideSet,
    limits: Limits,
    progress: &crate::answers::stored::Progress,
) -> Result<InvalidationsReport, ExplainError> {
    let pool = db.pool();
    let inv = invalidations_grouped(db, old, new, limits, progress).await?;
    let mut r = inv_report(inv, old, new);
    add_compile_times(pool, &mut r).await?;
    Ok(r)
}

/// Fills each invalidated entry's `compile_ms` from the hook's compile events: the new key on
/// the new machine, else the old key on the old machine. Every report has them, whoever asks
/// (the pages, the API, `gate`).
async fn add_compile_times(pool: &Store, r: &mut InvalidationsReport) -> sqlx::Result<()> {
    let new_keys: Vec<&str> = r.invalidated.iter().map(|i| i.new_key.as_str()).collect();
    let old_keys: Vec<&str> = r.invalidated.iter().map(|i| i.old_key.as_str()).collect();
    let new = crate::db::explain::compile_ms(pool, &r.new_machine, &new_keys).await?;
    let old = crate::db::explain::compile_ms(pool, &r.old_machine, &old_keys).await?;
    for i in &mut r.invalidated {
        i.compile_ms = new.get(&i.new_key).or_else(|| old.get(&i.old_key)).copied();
    }
    Ok(())
}

/// Invalidations on one machine between two scans, computed fresh (the stored reports of
/// [`crate::answers::stored`] are equal to it).
pub async fn invalidations_scans(
    db: &crate::db::Db,
    from: Option<&ScanRef>,
    to: &ScanRef,
) -> Result<InvalidationsReport, ExplainError> {
    let pool = db.pool();
    let (old, new) = scan_sides(pool, from, to).await?;
    let mut r = report_of(db, &old, &new, LIMITS, &Default::default()).await?;
    r.from = from.map(|f| f.id);
    r.to = Some(to.id);
    Ok(r)
}

/// Invalidations from machine `a` to machine `b`, as they are now, computed fresh.
pub async fn invalidations_machines(db: &crate::db::Db, a: &str, b: &str) -> Result<InvalidationsReport, ExplainError> {
    let (old, new) = machine_sides(db, a, b).await?;
    report_of(db, &old, &new, LIMITS, &Default::default()).await
}
