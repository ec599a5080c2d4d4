//! Invalidation reports read, not recomputed: a report (one machine between two scans, or
//! machine A against machine B) is computed once ([`super::load::report_of`], kernel by kernel
//! and bounded by [`super::load::LIMITS`]), stored with its rows (migration 0014), and read a
//! page at a time until either side changes (the machines' generations, kept by triggers,
//! moved). A computation runs in a task of its own, one per report and two at a time, so concurrent
//! first visits cannot multiply memory; a page waits for it briefly ([`lookup`]) and shows its
//! progress when it takes longer.
//!
//! The stored reports are a bounded store (`db::reports`): the latest landing reports of each
//! machine (computed by [`after_scan`]) stay, the others are evicted oldest first past
//! `db::reports::KEPT` reports or `db::reports::KEPT_ROWS` rows, and computed again when
//! visited. Meaningless scan pairs (`from` not before `to`, a scan of another machine, an unknown
//! scan) are refused before anything is computed (`load::pick_scans`: 422, 404).

use super::load::{ExplainError, Limits, machine_sides, report_of, scan_sides};
use crate::db::Store;
use crate::db::reports::{self, CauseStats, ReportHead, RowOut, Stored, ToStore};
use crate::db::scans::ScanRef;
use crate::explain::Cause;
use crate::explain::report::{CauseCount, Cost, InvalidatedRow, InvalidationsReport, KernelKey};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Which report.
#[derive(Debug, Clone)]
pub enum Spec {
    /// One machine, scan `from` (none: nothing) to scan `to`.
    Scans { from: Option<ScanRef>, to: ScanRef },
    /// Machine `a` (old) to machine `b` (new), as they are now.
    Machines { a: String, b: String },
}

impl Spec {
    fn name(&self) -> String {
        match self {
            Spec::Scans { from, to } => format!("scan:{}:{}", to.id, from.as_ref().map_or(0, |f| f.id)),
            Spec::Machines { a, b } => format!("pair:{a}\n{b}"),
        }
    }
    async fn gens(&self, pool: &Store) -> sqlx::Result<(i64, i64)> {
        Ok(match self {
            Spec::Scans { to, .. } => {
                let g = reports::gen_of(pool, &to.machine).await?;
                (g, g)
            }
            Spec::Machines { a, b } => (reports::gen_of(pool, a).await?, reports::gen_of(pool, b).await?),
        })
    }
}

/// At most two report computations at once (memory stays that of two reports: ~300 MB each for
/// a 50,000-entry pair across releases), so first visits of different reports on a 2-core server
/// do not all queue behind one.
static COMPUTING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// A machine pair whose kernels' key sets, kept in memory for both machines' generations now,
/// are all equal ("all kept": nothing to match, `answers::load::machine_sides`) and whose
/// entries without a kernel name are at most this many a side: its computation reads those
/// entries and stores the counts, a few milliseconds (4-5 ms for a bench pair of 50,000 entries
/// a side). It runs at once, outside the two computing slots and the pending bound: a team
/// opening many pairs of machines that run the same jobs (the bench's ~380 same-release pairs)
/// got 503s while the slots drained one 5 ms job after another behind the bound.
const LIGHT_UNNAMED: i64 = 2_000;

/// Whether `spec`'s computation is light (see [`LIGHT_UNNAMED`]). Only where it runs depends on
/// this, never what it computes.
async fn light(db: &crate::db::Db, spec: &Spec) -> sqlx::Result<bool> {
    let pool = db.pool();
    let Spec::Machines { a, b } = spec else { return Ok(false) };
    let (Some(ka), Some(kb)) = (crate::db::keysets::kept_now(db, a).await?, crate::db::keysets::kept_now(db, b).await?)
    else {
        return Ok(false);
    };
    let same = ka.len() == kb.len() && crate::db::keysets::all_kept(&ka, &kb).len() == kb.len();
    Ok(same
        && crate::db::keysets::unnamed_count(pool, a).await? <= LIGHT_UNNAMED
        && crate::db::keysets::unnamed_count(pool, b).await? <= LIGHT_UNNAMED)
}

/// How far a report computation has come: kernels matched of those to match (0 of 0 while the
/// sides are read or it waits for a computing slot).
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicUsize,
    pub total: AtomicUsize,
}

impl Progress {
    /// (done, total) now.
    pub fn get(&self) -> (usize, usize) {
        (self.done.load(Ordering::Relaxed), self.total.load(Ordering::Relaxed))
    }
}

/// How a computation ended: stored, or why not (an [`ExplainError`] is not `Clone`: its kind
/// and text).
#[derive(Debug, Clone)]
enum Ended {
    Stored,
    OverBudget(String),
    Failed(String),
}

/// A report computation, under way or ended, shared by everyone who asks for the report while
/// its sides are at `gens`. It runs in a task of its own: a visitor who leaves does not stop it,
/// and the next one reads what it stored.
struct Job {
    gens: (i64, i64),
    /// What it ran under: a report over one server's limits may be within another's.
    limits: Limits,
    progress: Arc<Progress>,
    ended: tokio::sync::watch::Receiver<Option<Ended>>,
    at: std::time::Instant,
}

/// A server's report jobs, by report name (one database a server: `web::AppState` owns them).
/// An ended job is kept while its generations are current so that a report over the limits is
/// refused at once instead of computed again on every visit; at most [`MAX_JOBS`], the oldest
/// ended ones dropped first.
#[derive(Default)]
pub struct Jobs(std::sync::Mutex<HashMap<String, Job>>);
const MAX_JOBS: usize = 4096;

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Jobs({})", self.0.lock().map_or(0, |j| j.len()))
    }
}

/// Computations under way or waiting for a slot at most: one more report asked for is answered
/// 503 (`ExplainError::Busy`). Each waits for one of two slots and then takes up to seconds of a
/// core: without a bound, one reader asking for thousands of distinct reports (every pair of
/// scans of a machine) would queue hours of work with as many quick requests.
pub const MAX_PENDING: usize = 32;

/// What a lookup found.
pub enum Lookup {
    Ready(Box<Stored>),
    /// Still computing when the wait ran out: (kernels matched, kernels to match), and since
    /// when.
    Computing {
        done: usize,
        total: usize,
        secs: f64,
    },
}

/// The stored report of `spec`, computed and stored first when there is none for the sides as
/// they are now (waiting for it however long it takes, within `limits`).
pub async fn stored(db: &crate::db::Db, jobs: &Jobs, spec: &Spec, limits: Limits) -> Result<Stored, ExplainError> {
    match lookup(db, jobs, spec, limits, None).await? {
        Lookup::Ready(s) => Ok(*s),
        Lookup::Computing { .. } => unreachable!("no wait limit"),
    }
}

/// The stored report of `spec` when it is current; else its computation is started (or joined)
/// in the background and waited for at most `wait` (`None`: until it ends). A computation that
/// ended over the limits answers its error at once while the sides stay as they were.
pub async fn lookup(
    db: &crate::db::Db,
    jobs: &Jobs,
    spec: &Spec,
    limits: Limits,
    wait: Option<std::time::Duration>,
) -> Result<Lookup, ExplainError> {
    let pool = db.pool();
    let name = spec.name();
    let deadline = wait.map(|w| tokio::time::Instant::now() + w);
    // Whether the computation is light, asked only when there is none stored.
    let mut is_light = None;
    loop {
        let gens = spec.gens(pool).await?;
        if let Some(s) = reports::find(pool, &spec.name(), gens).await? {
            return Ok(Lookup::Ready(Box::new(s)));
        }
        let light = match is_light {
            Some(l) => l,
            None => *is_light.insert(light(db, spec).await?),
        };
        let Joined { mut ended, progress, at } = job(db, jobs, spec, &name, gens, limits, light)?;
        let seen = ended.borrow_and_update().clone();
        match seen {
            Some(Ended::OverBudget(e)) => return Err(ExplainError::OverBudget(e)),
            Some(Ended::Failed(e)) => {
                forget(jobs, &name, gens);
                return Err(ExplainError::Db(sqlx::Error::Protocol(e)));
            }
            // Stored at `gens`: read it (or, should the sides have moved meanwhile, start over).
            Some(Ended::Stored) => {
                if let Some(s) = reports::find(pool, &spec.name(), gens).await? {
                    return Ok(Lookup::Ready(Box::new(s)));
                }
                forget(jobs, &name, gens);
                continue;
            }
            None => {}
        }
        let changed = match deadline {
            None => ended.changed().await.is_ok(),
            Some(d) => match tokio::time::timeout_at(d, ended.changed()).await {
                Ok(r) => r.is_ok(),
                Err(_) => {
                    let (done, total) = progress.get();
                    return Ok(Lookup::Computing { done, total, secs: at.elapsed().as_secs_f64() });
                }
            },
        };
        if !changed {
            // The task is gone without a word (it panicked): let the next lookup start over.
            forget(jobs, &name, gens);
            return Err(ExplainError::Db(sqlx::Error::Protocol("the report computation failed".into())));
        }
    }
}

/// Drops the job of `name` at `gens` (ended with a transient error, or stored and since moved on).
fn forget(jobs: &Jobs, name: &str, gens: (i64, i64)) {
    let mut all = jobs.0.lock().unwrap_or_else(|e| e.into_inner());
    if all.get(name).is_some_and(|j| j.gens == gens) {
        all.remove(name);
    }
}

/// A job as a visitor sees it: how it ended (once it has), its progress, since when.
struct Joined {
    ended: tokio::sync::watch::Receiver<Option<Ended>>,
    progress: Arc<Progress>,
    at: std::time::Instant,
}

/// The job of `name` at `gens`: the one under way or ended, else a new one started (refused
/// past [`MAX_PENDING`]).
fn job(
    db: &crate::db::Db,
    jobs: &Jobs,
    spec: &Spec,
    name: &str,
    gens: (i64, i64),
    limits: Limits,
    light: bool,
) -> Result<Joined, ExplainError> {
    let mut all = jobs.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(j) = all.get(name)
        && ((j.gens, j.limits) == (gens, limits) || j.ended.borrow().is_none())
    {
        // The same sides, or a computation still under way for sides that moved since: join it
        // (one computation per report at a time; the next lookup starts the current one).
        return Ok(Joined { ended: j.ended.clone(), progress: j.progress.clone(), at: j.at });
    }
    if !light && all.values().filter(|j| j.ended.borrow().is_none()).count() >= MAX_PENDING {
        return Err(ExplainError::Busy(format!(
            "{MAX_PENDING} invalidation reports are being computed: ask again in a minute"
        )));
    }
    if all.len() >= MAX_JOBS {
        let mut ended: Vec<(std::time::Instant, String)> =
            all.iter().filter(|(_, j)| j.ended.borrow().is_some()).map(|(n, j)| (j.at, n.clone())).collect();
        ended.sort();
        for (_, n) in ended.into_iter().take(MAX_JOBS / 4) {
            all.remove(&n);
        }
    }
    let (tx, rx) = tokio::sync::watch::channel(None);
    let progress = Arc::new(Progress::default());
    let at = std::time::Instant::now();
    all.insert(name.to_string(), Job { gens, limits, progress: progress.clone(), ended: rx.clone(), at });
    let (db, spec, p) = (db.clone(), spec.clone(), progress.clone());
    tokio::spawn(async move {
        let ended = match compute(&db, &spec, gens, limits, &p, light).await {
            Ok(()) => Ended::Stored,
            Err(ExplainError::OverBudget(e)) => Ended::OverBudget(e),
            Err(e) => {
                tracing::error!(spec = spec.name(), error = %e, "report computation failed");
                Ended::Failed(e.to_string())
            }
        };
        tx.send_replace(Some(ended));
    });
    Ok(Joined { ended: rx, progress, at })
}

/// Computes the report of `spec` for its sides at `gens` and stores it, in a computing slot.
async fn compute(
    db: &crate::db::Db,
    spec: &Spec,
    gens: (i64, i64),
    limits: Limits,
    progress: &Progress,
    light: bool,
) -> Result<(), ExplainError> {
    // one process at a time computes a report (several servers on one database)
    let Some(_lease) = claim_or_wait(db, spec, gens).await? else { return Ok(()) };
    let _slot = match light {
        true => None,
        false => Some(COMPUTING.acquire().await.map_err(|e| ExplainError::Db(sqlx::Error::Protocol(e.to_string())))?),
    };
    let t = std::time::Instant::now();
    crate::failpoint::hit("report-claimed");
    crate::failpoint::pause("report-claimed-slow", std::time::Duration::from_secs(3)).await;
    // In the background, stored: however long it takes (the wait is the reader's, bounded by
    // `lookup`); memory stays bounded by the pieces it is computed in.
    let r = fresh_with(db, spec, Limits { time: None, ..limits }, progress).await?;
    let matched = t.elapsed();
    persist(db, &spec.name(), gens, &r, t.elapsed().as_millis() as i64, limits.kept).await?;
    tracing::debug!(
        spec = spec.name(),
        matched_ms = matched.as_millis() as u64,
        stored_ms = (t.elapsed() - matched).as_millis() as u64,
        "report computed"
    );
    Ok(())
}

/// The claim on computing `spec` at `gens` for this process ([`crate::db::leases`]), once no
/// other process holds it; `None` when there is nothing left to compute: the holder stored it,
/// or the sides moved on (the caller's lookup then starts over with them). Waits while another
/// process computes, polling every 250 ms, and takes over when that process's claim lapses.
async fn claim_or_wait(
    db: &crate::db::Db,
    spec: &Spec,
    gens: (i64, i64),
) -> Result<Option<crate::db::leases::Lease>, ExplainError> {
    let name = spec.name();
    loop {
        if let Some(lease) = crate::db::leases::claim(db, &name, gens).await? {
            return Ok(Some(lease));
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        if reports::find(db.pool(), &name, gens).await?.is_some() || spec.gens(db.pool()).await? != gens {
            return Ok(None);
        }
    }
}

/// The report of `spec` computed fresh, every row in memory (what stored reports equal).
pub async fn fresh(db: &crate::db::Db, spec: &Spec, limits: Limits) -> Result<InvalidationsReport, ExplainError> {
    fresh_with(db, spec, limits, &Progress::default()).await
}

async fn fresh_with(
    db: &crate::db::Db,
    spec: &Spec,
    limits: Limits,
    progress: &Progress,
) -> Result<InvalidationsReport, ExplainError> {
    let pool = db.pool();
    Ok(match spec {
        Spec::Scans { from, to } => {
            let (old, new) = scan_sides(pool, from.as_ref(), to).await?;
            let mut r = report_of(db, &old, &new, limits, progress).await?;
            (r.from, r.to) = (from.as_ref().map(|f| f.id), Some(to.id));
            r
        }
        Spec::Machines { a, b } => {
            let (old, new) = machine_sides(db, a, b).await?;
            report_of(db, &old, &new, limits, progress).await?
        }
    })
}

#[derive(Default)]
struct Tally {
    identical: usize,
    same_code: usize,
    /// Entries counted, and their compile time.
    cost: Cost,
}

impl Tally {
    fn add(&mut self, i: &InvalidatedRow) {
        self.identical += i.identical_binary as usize;
        self.same_code += (i.identical_code && !i.identical_binary) as usize;
        self.cost.add(i.compile_ms);
    }
}

/// Groups a report by cause (reasons, kernels, page order) and stores it.
async fn persist(
    db: &crate::db::Db,
    spec: &str,
    gens: (i64, i64),
    r: &InvalidationsReport,
    ms: i64,
    kept: (i64, i64),
) -> sqlx::Result<Stored> {
    let mut by_cause = Vec::new();
    let (mut rows, mut whys, mut kernels) = (Vec::new(), Vec::new(), Vec::new());
    let mut total = Tally::default();
    for c in &r.by_cause {
        let of: Vec<(usize, &InvalidatedRow)> =
            r.invalidated.iter().enumerate().filter(|(_, i)| i.cause == c.cause).collect();
        let mut tally = Tally::default();
        let mut per_kernel: HashMap<&str, Tally> = HashMap::new();
        let mut why_ix: HashMap<&str, usize> = HashMap::new();
        for (_, i) in &of {
            tally.add(i);
            total.add(i);
            per_kernel.entry(i.kernel.as_str()).or_default().add(i);
            let next = whys.len();
            // One change, one reason: entries that compiled to the same bytes share it.
            let why = crate::explain::reason(&i.summary);
            let w = *why_ix.entry(why).or_insert_with(|| {
                whys.push((c.cause, why, 0));
                next
            });
            whys[w].2 += 1;
        }
        // The kernels with most recompiles lead; the entries follow their kernel's order.
        let mut ks: Vec<(&str, Tally)> = per_kernel.into_iter().collect();
        ks.sort_by(|a, b| b.1.cost.of.cmp(&a.1.cost.of).then_with(|| a.0.cmp(b.0)));
        let rank: HashMap<&str, usize> = ks.iter().enumerate().map(|(i, k)| (k.0, i)).collect();
        let mut ordered = of.clone();
        ordered.sort_by_key(|(seq, i)| (rank[i.kernel.as_str()], *seq));
        for (pos, (seq, i)) in ordered.into_iter().enumerate() {
            rows.push((seq, pos, why_ix[crate::explain::reason(&i.summary)], i));
        }
        by_cause.push(CauseStats {
            cause: c.cause,
            count: tally.cost.of,
            identical: tally.identical,
            same_code: tally.same_code,
            kernels: ks.len(),
            ms: tally.cost.ms,
            timed: tally.cost.timed,
        });
        kernels.extend(
            ks.into_iter().map(|(k, t)| (c.cause, k, t.cost.of, t.identical, t.same_code, t.cost.ms, t.cost.timed)),
        );
    }
    let head = ReportHead {
        old_machine: r.old_machine.clone(),
        new_machine: r.new_machine.clone(),
        from: r.from,
        to: r.to,
        old_entries: r.old_entries,
        new_entries: r.new_entries,
        kept: r.kept,
        invalidated: r.invalidated.len(),
        new: r.new.len(),
        removed: r.removed.len(),
        by_cause,
        identical_code: r.identical_code,
        summary: r.summary.clone(),
        relocated: r.relocated,
        relocated_consequence: r.relocated_consequence.clone(),
        ms: total.cost.ms,
        timed: total.cost.timed,
    };
    let to_store = ToStore { head: &head, invalidated: rows, whys, kernels, new: &r.new, removed: &r.removed };
    let id = reports::store(db, spec, gens, &to_store, ms, kept).await?;
    Ok(Stored { id, head })
}

/// Rows of a page or an API answer: at most this many.
pub const MAX_LIMIT: i64 = 1000;

/// A stored invalidated row as the views show it.
pub fn invalidated_row(h: &ReportHead, r: RowOut) -> InvalidatedRow {
    let old_key = r.old_key.unwrap_or_default();
    InvalidatedRow {
        a: format!("{}:{old_key}", h.old_machine),
        b: format!("{}:{}", h.new_machine, r.key),
        cause: r.cause.as_deref().and_then(Cause::parse).unwrap_or(Cause::Unknown),
        summary: {
            // The stored reason, with the row's own churn note (a report stored before the
            // reasons were shared has it already).
            let why = r.why.unwrap_or_default();
            let note = crate::explain::churn_note(r.flags & 1 != 0, r.flags & 2 != 0);
            if why.ends_with(note) { why } else { why + note }
        },
        identical_binary: r.flags & 1 != 0,
        identical_code: r.flags & 2 != 0,
        relocated: r.flags & 4 != 0,
        compile_ms: r.compile_ms,
        kernel: r.kernel,
        old_key,
        new_key: r.key,
    }
}

/// `/api/v1/invalidations`: the report with one page (`limit`, `offset`) of each list, and its
/// causes grouped as the invalidations page shows them.
#[derive(Debug, Serialize)]
pub struct PagedReport {
    #[serde(flatten)]
    pub r: InvalidationsReport,
    pub invalidated_total: usize,
    pub new_total: usize,
    pub removed_total: usize,
    pub limit: i64,
    pub offset: i64,
    /// What recompiling every invalidated entry costs (the hook's compile times).
    pub cost: Cost,
    /// Each cause (the one asked for with `cause=`), most recompiles first.
    pub groups: Vec<CauseGroup>,
}

/// Distinct reasons of a cause a group lists (the rest are counted as `reasons_more`).
pub const REASONS_SHOWN: i64 = 20;
/// Kernels of a cause a group lists (most recompiled first; `kernels_total` counts them all).
pub const KERNELS_SHOWN: i64 = 50;

/// One cause of a report as the invalidations page groups it: its counts, what recompiling its
/// entries costs, the reasons given (once each, with how many entries give it) and its kernels.
#[derive(Debug, Clone, Serialize)]
pub struct CauseGroup {
    pub cause: Cause,
    pub entries: usize,
    /// Identical binaries recompiled.
    pub identical: usize,
    /// Other bytes but the same machine code (only debug info differs).
    pub same_code: usize,
    pub cost: Cost,
    /// The most given reasons, most first (at most [`REASONS_SHOWN`]).
    pub reasons: Vec<Reason>,
    /// More reasons than listed.
    pub reasons_more: bool,
    /// The kernels with most recompiled entries (at most [`KERNELS_SHOWN`]).
    pub kernels: Vec<KernelGroup>,
    pub kernels_total: usize,
}

/// A reason given for a cause's recompiles, and how many entries give it.
#[derive(Debug, Clone, Serialize)]
pub struct Reason {
    pub reason: String,
    pub entries: i64,
}

/// The recompiled entries of one kernel under one cause.
#[derive(Debug, Clone, Serialize)]
pub struct KernelGroup {
    pub kernel: String,
    pub entries: i64,
    pub identical: i64,
    pub same_code: i64,
    pub cost: Cost,
}

/// The report's causes grouped (`cause`: that one only), read from its stored tables: at most
/// [`REASONS_SHOWN`] reasons and [`KERNELS_SHOWN`] kernels a cause.
pub async fn groups(pool: &Store, s: &Stored, cause: Option<Cause>) -> sqlx::Result<Vec<CauseGroup>> {
    let mut out = vec![];
    for c in s.head.by_cause.iter().filter(|c| cause.is_none_or(|w| w == c.cause)) {
        let mut whys = reports::whys(pool, s.id, c.cause, REASONS_SHOWN + 1).await?;
        let reasons_more = whys.len() as i64 > REASONS_SHOWN;
        whys.truncate(REASONS_SHOWN as usize);
        let kernels = reports::kernels(pool, s.id, c.cause, KERNELS_SHOWN).await?;
        out.push(CauseGroup {
            cause: c.cause,
            entries: c.count,
            identical: c.identical,
            same_code: c.same_code,
            cost: Cost { ms: c.ms, timed: c.timed, of: c.count },
            reasons: whys.into_iter().map(|(reason, entries)| Reason { reason, entries }).collect(),
            reasons_more,
            kernels: kernels
                .into_iter()
                .map(|k| KernelGroup {
                    cost: Cost { ms: k.ms, timed: k.timed as usize, of: k.entries as usize },
                    kernel: k.kernel,
                    entries: k.entries,
                    identical: k.identical,
                    same_code: k.same_code,
                })
                .collect(),
            kernels_total: c.kernels,
        });
    }
    Ok(out)
}

/// One page of every list of a stored report (`cause`: invalidated rows of that cause only).
pub async fn paged(
    pool: &Store,
    s: &Stored,
    cause: Option<Cause>,
    limit: i64,
    offset: i64,
) -> sqlx::Result<PagedReport> {
    let (limit, offset) = (limit.clamp(0, MAX_LIMIT), offset.max(0));
    let h = &s.head;
    let kk = |v: Vec<RowOut>| v.into_iter().map(|r| KernelKey { kernel: r.kernel, key: r.key }).collect();
    let invalidated = reports::rows(pool, s.id, 0, cause, (limit, offset)).await?;
    let r = InvalidationsReport {
        old_machine: h.old_machine.clone(),
        new_machine: h.new_machine.clone(),
        from: h.from,
        to: h.to,
        old_entries: h.old_entries,
        new_entries: h.new_entries,
        kept: h.kept,
        invalidated: invalidated.into_iter().map(|r| invalidated_row(h, r)).collect(),
        new: kk(reports::rows(pool, s.id, 1, None, (limit, offset)).await?),
        removed: kk(reports::rows(pool, s.id, 2, None, (limit, offset)).await?),
        by_cause: h.by_cause.iter().map(|c| CauseCount { cause: c.cause, count: c.count }).collect(),
        identical_code: h.identical_code,
        summary: h.summary.clone(),
        relocated: h.relocated,
        relocated_consequence: h.relocated_consequence.clone(),
    };
    let invalidated_total =
        cause.map_or(h.invalidated, |c| h.by_cause.iter().find(|x| x.cause == c).map_or(0, |x| x.count));
    let cost = Cost { ms: h.ms, timed: h.timed, of: h.invalidated };
    let groups = groups(pool, s, cause).await?;
    Ok(PagedReport { r, invalidated_total, new_total: h.new, removed_total: h.removed, limit, offset, cost, groups })
}

/// Computes and stores the report of a scan that just landed (against the scan of its root
/// before it), so that its first visit reads it. On a server (with its `jobs`), the machine-pair
/// reports with this machine that were visited before ([`REFRESHED_PAIRS`] at most, the latest
/// first) are then computed again in the background, so that they are current when visited again.
/// Errors (a report over the limits included) are logged: a scan never fails for its report.
pub async fn after_scan(db: crate::db::Db, scan_id: i64, jobs: Option<Arc<Jobs>>) {
    let pool = db.pool();
    let run = async {
        let Some(to) = crate::db::scans::scan(pool, scan_id).await? else {
            return Ok(());
        };
        let (from, to, _) = super::load::pick_scans(pool, &to.machine, None, Some(to.id)).await?;
        let machine = to.machine.clone();
        let ids = (to.id, from.as_ref().map(|f| f.id));
        let spec = Spec::Scans { from, to };
        let name = spec.name();
        if let Some(jobs) = &jobs {
            stored(&db, jobs, &spec, super::load::LIMITS).await?;
        } else {
            // A local scan: the process is the only one to ask for this report, and computing it
            // here rather than in a task of its own keeps the scan's peak memory that of one
            // thread's allocations (a re-scan of 100,000 entries: 185 MB here, 256 MB in a task).
            let gens = spec.gens(pool).await?;
            if reports::find(pool, &spec.name(), gens).await?.is_none() {
                compute(&db, &spec, gens, super::load::LIMITS, &Progress::default(), false).await?;
            }
        }
        // Kept beside the machine's latest landing reports, out of the evicted ones.
        reports::mark_landing(&db, &name, &machine, super::load::LIMITS.kept).await?;
        // A mass invalidation is a fleet timeline event.
        if let Some(r) = reports::find(pool, &name, spec.gens(pool).await?).await? {
            crate::db::timeline::on_report(&db, ids.0, ids.1, &r.head).await?;
        }
        // The machine's kernel key sets, so that the first visit of a pair with it reads them.
        crate::db::keysets::current(&db, &machine).await?;
        if let Some(jobs) = &jobs {
            for (a, b) in reports::pairs_with(pool, &machine, REFRESHED_PAIRS).await? {
                let spec = Spec::Machines { a, b };
                // Started, not waited for; past the pending bound the rest wait for a visit.
                match lookup(&db, jobs, &spec, super::load::LIMITS, Some(std::time::Duration::ZERO)).await {
                    Err(e @ ExplainError::Busy(_)) => {
                        tracing::info!(error = %e, "pair reports not recomputed at landing");
                        break;
                    }
                    Err(e) => tracing::info!(spec = spec.name(), error = %e, "pair report not recomputed at landing"),
                    Ok(_) => {}
                }
            }
        }
        Ok::<_, ExplainError>(())
    };
    if let Err(e) = run.await {
        tracing::warn!(scan_id, error = %e, "invalidation report of the scan not stored");
    }
}

/// Pair reports with a machine whose scan landed that are computed again at once (the rest on
/// their next visit): bounds the background work one landing starts.
pub const REFRESHED_PAIRS: usize = 8;
