//! Invalidation reports read, not recomputed: a report (one machine between two scans, or
//! machine A against machine B) is computed once ([`super::load::report_of`], kernel by kernel
//! and bounded by [`super::load::LIMITS`]), stored with its rows (migration 0014), and read a
//! page at a time until either side changes (the machines' generations, kept by triggers,
//! moved). One computation runs at a time, so concurrent first visits cannot multiply memory.

use super::Cause;
use super::load::{ExplainError, Limits, machine_sides, report_of, scan_sides};
use super::report::{CauseCount, InvalidatedRow, InvalidationsReport, KernelKey};
use crate::db::reports::{self, CauseStats, ReportHead, RowOut, Stored, ToStore};
use crate::db::scans::ScanRef;
use serde::Serialize;
use sqlx::SqlitePool;
use std::collections::HashMap;

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
    async fn gens(&self, pool: &SqlitePool) -> sqlx::Result<(i64, i64)> {
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

/// The report computations under way or waited for, by report name: one computation per report,
/// however many visitors ask for it at once.
static IN_FLIGHT: std::sync::Mutex<Vec<(String, std::sync::Weak<tokio::sync::Mutex<()>>)>> =
    std::sync::Mutex::new(Vec::new());

fn report_lock(name: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
    let mut all = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(_, w)| w.strong_count() > 0);
    if let Some(l) = all.iter().find(|(n, _)| n == name).and_then(|(_, w)| w.upgrade()) {
        return l;
    }
    let l = std::sync::Arc::new(tokio::sync::Mutex::new(()));
    all.push((name.to_string(), std::sync::Arc::downgrade(&l)));
    l
}

/// The stored report of `spec`, computed and stored first when there is none for the sides as
/// they are now.
pub async fn stored(pool: &SqlitePool, spec: &Spec, limits: Limits) -> Result<Stored, ExplainError> {
    if let Some(s) = reports::find(pool, &spec.name(), spec.gens(pool).await?).await? {
        return Ok(s);
    }
    let this = report_lock(&spec.name());
    let _this = this.lock().await;
    let _slot = COMPUTING.acquire().await.map_err(|e| ExplainError::Db(sqlx::Error::Protocol(e.to_string())))?;
    // Generations first: a change that lands while computing leaves the report stale, not wrong.
    let gens = spec.gens(pool).await?;
    if let Some(s) = reports::find(pool, &spec.name(), gens).await? {
        return Ok(s);
    }
    let t = std::time::Instant::now();
    let mut r = fresh(pool, spec, limits).await?;
    let matched = t.elapsed();
    add_compile_times(pool, &mut r).await?;
    let timed = t.elapsed();
    let head = persist(pool, &spec.name(), gens, &r, t.elapsed().as_millis() as i64).await?;
    tracing::debug!(
        spec = spec.name(),
        matched_ms = matched.as_millis() as u64,
        compile_times_ms = (timed - matched).as_millis() as u64,
        stored_ms = (t.elapsed() - timed).as_millis() as u64,
        "report computed"
    );
    Ok(head)
}

/// The report of `spec` computed fresh, every row in memory (what stored reports equal).
pub async fn fresh(pool: &SqlitePool, spec: &Spec, limits: Limits) -> Result<InvalidationsReport, ExplainError> {
    Ok(match spec {
        Spec::Scans { from, to } => {
            let (old, new) = scan_sides(pool, from.as_ref(), to).await?;
            let mut r = report_of(pool, &old, &new, limits).await?;
            (r.from, r.to) = (from.as_ref().map(|f| f.id), Some(to.id));
            r
        }
        Spec::Machines { a, b } => {
            let (old, new) = machine_sides(pool, a, b).await?;
            report_of(pool, &old, &new, limits).await?
        }
    })
}

/// Fills each invalidated entry's `compile_ms` from the hook's compile events: the new key on
/// the new machine, else the old key on the old machine.
pub async fn add_compile_times(pool: &SqlitePool, r: &mut InvalidationsReport) -> sqlx::Result<()> {
    let new_keys: Vec<&str> = r.invalidated.iter().map(|i| i.new_key.as_str()).collect();
    let old_keys: Vec<&str> = r.invalidated.iter().map(|i| i.old_key.as_str()).collect();
    let new = crate::db::explain::compile_ms(pool, &r.new_machine, &new_keys).await?;
    let old = crate::db::explain::compile_ms(pool, &r.old_machine, &old_keys).await?;
    for i in &mut r.invalidated {
        i.compile_ms = new.get(&i.new_key).or_else(|| old.get(&i.old_key)).copied();
    }
    Ok(())
}

#[derive(Default)]
struct Tally {
    entries: usize,
    identical: usize,
    same_code: usize,
    ms: f64,
    timed: usize,
}

impl Tally {
    fn add(&mut self, i: &InvalidatedRow) {
        self.entries += 1;
        self.identical += i.identical_binary as usize;
        self.same_code += (i.identical_code && !i.identical_binary) as usize;
        if let Some(t) = i.compile_ms {
            self.ms += t;
            self.timed += 1;
        }
    }
}

/// Groups a report by cause (reasons, kernels, page order) and stores it.
async fn persist(
    pool: &SqlitePool,
    spec: &str,
    gens: (i64, i64),
    r: &InvalidationsReport,
    ms: i64,
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
            let w = *why_ix.entry(i.summary.as_str()).or_insert_with(|| {
                whys.push((c.cause, i.summary.as_str(), 0));
                next
            });
            whys[w].2 += 1;
        }
        // The kernels with most recompiles lead; the entries follow their kernel's order.
        let mut ks: Vec<(&str, Tally)> = per_kernel.into_iter().collect();
        ks.sort_by(|a, b| b.1.entries.cmp(&a.1.entries).then_with(|| a.0.cmp(b.0)));
        let rank: HashMap<&str, usize> = ks.iter().enumerate().map(|(i, k)| (k.0, i)).collect();
        let mut ordered = of.clone();
        ordered.sort_by_key(|(seq, i)| (rank[i.kernel.as_str()], *seq));
        for (pos, (seq, i)) in ordered.into_iter().enumerate() {
            rows.push((seq, pos, why_ix[i.summary.as_str()], i));
        }
        by_cause.push(CauseStats {
            cause: c.cause,
            count: tally.entries,
            identical: tally.identical,
            same_code: tally.same_code,
            kernels: ks.len(),
            ms: tally.ms,
            timed: tally.timed,
        });
        kernels.extend(ks.into_iter().map(|(k, t)| (c.cause, k, t.entries, t.identical, t.same_code, t.ms, t.timed)));
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
        ms: total.ms,
        timed: total.timed,
    };
    let to_store = ToStore { head: &head, invalidated: rows, whys, kernels, new: &r.new, removed: &r.removed };
    let id = reports::store(pool, spec, gens, &to_store, ms).await?;
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
        summary: r.why.unwrap_or_default(),
        identical_binary: r.flags & 1 != 0,
        identical_code: r.flags & 2 != 0,
        relocated: r.flags & 4 != 0,
        compile_ms: r.compile_ms,
        kernel: r.kernel,
        old_key,
        new_key: r.key,
    }
}

/// `/api/v1/invalidations`: the report with one page (`limit`, `offset`) of each list.
#[derive(Debug, Serialize)]
pub struct PagedReport {
    #[serde(flatten)]
    pub r: InvalidationsReport,
    pub invalidated_total: usize,
    pub new_total: usize,
    pub removed_total: usize,
    pub limit: i64,
    pub offset: i64,
}

/// One page of every list of a stored report (`cause`: invalidated rows of that cause only).
pub async fn paged(
    pool: &SqlitePool,
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
    Ok(PagedReport { r, invalidated_total, new_total: h.new, removed_total: h.removed, limit, offset })
}

/// Computes and stores the report of a scan that just landed (against the scan of its root
/// before it), so that its first visit reads it. Errors (a report over the limits included)
/// are logged: a scan never fails for its report.
pub async fn after_scan(pool: SqlitePool, scan_id: i64) {
    let run = async {
        let Some(to) = crate::db::scans::scan(&pool, scan_id).await? else {
            return Ok(());
        };
        let (from, to, _) = super::load::pick_scans(&pool, &to.machine, None, Some(to.id)).await?;
        let machine = to.machine.clone();
        stored(&pool, &Spec::Scans { from, to }, super::load::LIMITS).await?;
        // The machine's kernel key sets, so that the first visit of a pair with it reads them.
        crate::db::keysets::current(&pool, &machine).await.map(|_| ()).map_err(ExplainError::from)
    };
    if let Err(e) = run.await {
        tracing::warn!(scan_id, error = %e, "invalidation report of the scan not stored");
    }
}
