//! `/invalidations`: which entries a change made Triton recompile, and why, read at a glance.
//!
//! Rows are grouped by cause (the reasons given once, what recompiling costs: the hook's measured
//! compile times), then summed up per kernel; the rows themselves sit behind a disclosure,
//! [`ENTRIES_PER_PAGE`] of a cause at a time (`?cause=compiler&page=2`).

use super::compare::{compare_url, enc};
use super::{HtmlTemplate, Hx, PageResult};
use crate::db::scans::ScanRef;
use crate::explain::report::{InvalidatedRow, InvalidationsReport};
use crate::fmt;
use crate::web::AppState;
use crate::web::query::{InvalidationsQuery, ScanContext};
use askama::Template;
use axum::extract::{Query, State};
use axum::response::IntoResponse;

/// Entries of one cause listed per page.
pub const ENTRIES_PER_PAGE: usize = 20;

#[derive(Template)]
#[template(path = "invalidations.html", blocks = ["fragment"])]
struct Page {
    v: InvalidationsView,
}

/// What the invalidations page shows.
pub struct InvalidationsView {
    pub r: InvalidationsReport,
    pub scans: Option<ScanContext>,
    pub causes: Vec<CauseView>,
    /// Compile time of every invalidated entry the hook timed, and how many it timed.
    pub cost: Cost,
}

/// Compile time of a set of invalidated entries.
pub struct Cost {
    pub text: String,
    pub timed: usize,
    pub of: usize,
}

impl Cost {
    fn of<'a>(rows: impl IntoIterator<Item = &'a InvalidatedRow>) -> Cost {
        let (mut ms, mut timed, mut of) = (0.0, 0, 0);
        for r in rows {
            of += 1;
            if let Some(t) = r.compile_ms {
                ms += t;
                timed += 1;
            }
        }
        let text = if timed == 0 { "unknown".into() } else { fmt::duration_ms(ms) };
        Cost { text, timed, of }
    }
}

/// One cause: its counts, the reasons given, its kernels, and one page of its entries.
pub struct CauseView {
    pub cause: &'static str,
    pub entries: usize,
    pub identical: usize,
    /// Other bytes but the same machine code (only debug info differs).
    pub same_code: usize,
    /// Distinct reasons (`summary`) with how many entries give each, most first.
    pub whys: Vec<(String, usize)>,
    pub cost: Cost,
    /// Every kernel of the cause, most recompiled entries first.
    pub kernels: Vec<KernelView>,
    /// This page's entries, with their compare URL.
    pub rows: Vec<(InvalidatedRow, String)>,
    /// The disclosure starts open (the cause being paged).
    pub open: bool,
    /// `entries first–last of entries` on this page (1-based).
    pub first: usize,
    pub last: usize,
    pub prev: Option<String>,
    pub next: Option<String>,
}

/// The invalidated entries of one kernel under one cause.
pub struct KernelView {
    pub kernel: String,
    pub entries: usize,
    pub identical: usize,
    /// Other bytes but the same machine code (only debug info differs).
    pub same_code: usize,
    pub cost: Cost,
}

impl InvalidationsView {
    /// The picker link that makes `s` the `to` scan (with the scan before it as `from`).
    pub fn to_url(&self, s: &ScanRef) -> String {
        format!("/invalidations?machine={}&to={}", enc(&s.machine), s.id)
    }
    pub fn is_to(&self, s: &ScanRef) -> bool {
        self.scans.as_ref().is_some_and(|c| c.to.id == s.id)
    }
    pub fn is_from(&self, s: &ScanRef) -> bool {
        self.scans.as_ref().and_then(|c| c.from.as_ref()).is_some_and(|f| f.id == s.id)
    }
    pub fn when(ms: &i64) -> String {
        fmt::time(Some(*ms))
    }
}

#[derive(Template)]
#[template(path = "invalidations_pick.html")]
struct Pick {
    machines: Vec<String>,
}

/// `GET /invalidations?machine=M[&from=SCAN][&to=SCAN]` or `?a=M1&b=M2`, plus
/// `&cause=C&page=N` to page through one cause's kernels; no machine: the machine picker.
pub async fn page(State(s): State<AppState>, hx: Hx, Query(q): Query<InvalidationsQuery>) -> PageResult {
    if q.is_empty() {
        let page = crate::db::Page::new(Some(10_000), None);
        let machines =
            crate::db::summaries::machine_summaries(s.db.pool(), page).await?.into_iter().map(|m| m.name).collect();
        return Ok(HtmlTemplate(Pick { machines }).into_response());
    }
    let (r, scans) = q.run(s.db.pool()).await?;
    let causes = r.by_cause.iter().map(|c| cause_view(&r, c.cause.as_str(), &q)).collect();
    let cost = Cost::of(&r.invalidated);
    hx.render(&Page { v: InvalidationsView { r, scans, causes, cost } }, |p| p.as_fragment().render())
}

/// The URL of this report showing page `page` of `cause`.
fn page_url(q: &InvalidationsQuery, cause: &str, page: usize) -> String {
    let mut parts = vec![];
    for (k, v) in [("machine", &q.machine), ("a", &q.a), ("b", &q.b)] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            parts.push(format!("{k}={}", enc(v)));
        }
    }
    for (k, v) in [("from", q.from), ("to", q.to)] {
        if let Some(v) = v {
            parts.push(format!("{k}={v}"));
        }
    }
    format!("/invalidations?{}&cause={cause}&page={page}", parts.join("&"))
}

fn cause_view(r: &InvalidationsReport, cause: &'static str, q: &InvalidationsQuery) -> CauseView {
    let mut rows: Vec<&InvalidatedRow> = r.invalidated.iter().filter(|i| i.cause.as_str() == cause).collect();
    let mut whys: Vec<(String, usize)> = vec![];
    for i in &rows {
        match whys.iter_mut().find(|(w, _)| *w == i.summary) {
            Some((_, n)) => *n += 1,
            None => whys.push((i.summary.clone(), 1)),
        }
    }
    whys.sort_by_key(|w| std::cmp::Reverse(w.1));
    let mut names: Vec<&str> = rows.iter().map(|i| i.kernel.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut kernels: Vec<KernelView> = names
        .into_iter()
        .map(|k| {
            let of: Vec<&InvalidatedRow> = rows.iter().copied().filter(|i| i.kernel == k).collect();
            KernelView {
                kernel: k.to_string(),
                entries: of.len(),
                identical: of.iter().filter(|i| i.identical_binary).count(),
                same_code: of.iter().filter(|i| i.identical_code && !i.identical_binary).count(),
                cost: Cost::of(of.iter().copied()),
            }
        })
        .collect();
    // The kernels with most recompiles lead; the entries follow their kernel's order.
    kernels.sort_by(|a, b| b.entries.cmp(&a.entries).then_with(|| a.kernel.cmp(&b.kernel)));
    let rank = |k: &str| kernels.iter().position(|v| v.kernel == k).unwrap_or(usize::MAX);
    rows.sort_by_key(|i| rank(&i.kernel));
    let open = q.cause.as_deref() == Some(cause);
    let pages = rows.len().div_ceil(ENTRIES_PER_PAGE).max(1);
    let page = if open { q.page.unwrap_or(1).clamp(1, pages) } else { 1 };
    let first = (page - 1) * ENTRIES_PER_PAGE;
    let shown: Vec<(InvalidatedRow, String)> =
        rows.iter().skip(first).take(ENTRIES_PER_PAGE).map(|i| ((*i).clone(), compare_url(&i.a, &i.b))).collect();
    CauseView {
        cause,
        entries: rows.len(),
        identical: rows.iter().filter(|i| i.identical_binary).count(),
        same_code: rows.iter().filter(|i| i.identical_code && !i.identical_binary).count(),
        whys,
        cost: Cost::of(rows.iter().copied()),
        kernels,
        first: first + 1,
        last: first + shown.len(),
        rows: shown,
        open,
        prev: (page > 1).then(|| page_url(q, cause, page - 1)),
        next: (page < pages).then(|| page_url(q, cause, page + 1)),
    }
}
