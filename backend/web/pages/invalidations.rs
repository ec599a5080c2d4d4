//! `/invalidations`: which entries a change made Triton recompile, and why, read at a glance.
//!
//! Rows are grouped by cause (the reasons given once, what recompiling costs: the hook's measured
//! compile times), then summed up per kernel; the rows themselves sit behind a disclosure,
//! [`ENTRIES_PER_PAGE`] of a cause at a time (`?cause=compiler&page=2`), as do the New and
//! Removed lists. Everything is read from the stored report ([`crate::answers::stored`]).

use super::compare::{compare_url, enc};
use super::{HtmlTemplate, Hx, PageResult};
use crate::answers::stored::{self, CauseGroup, KernelGroup, Lookup, invalidated_row};
use crate::db::Store;
use crate::db::reports::{self, ReportHead, Stored};
use crate::db::scans::ScanRef;
use crate::explain::report::{Cost, InvalidatedRow, KernelKey};
use crate::fmt;
use crate::web::AppState;
use crate::web::query::{InvalidationsQuery, ScanContext};
use askama::Template;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

/// Entries of one cause (and of New, of Removed) listed per page.
pub const ENTRIES_PER_PAGE: usize = 20;

#[derive(Template)]
#[template(path = "invalidations.html", blocks = ["fragment"])]
struct Page {
    v: InvalidationsView,
}

/// What the invalidations page shows.
pub struct InvalidationsView {
    pub h: ReportHead,
    pub scans: Option<ScanContext>,
    pub causes: Vec<CauseView>,
    /// Compile time of every invalidated entry the hook timed, and how many it timed.
    pub cost: Cost,
    pub new: ListView,
    pub removed: ListView,
    /// The forms that start another report.
    pub pick: Picker,
}

/// A pager over a list: `entries first–last of total` (1-based) and the links.
pub struct Pager {
    pub total: usize,
    pub first: usize,
    pub last: usize,
    pub prev: Option<String>,
    pub next: Option<String>,
}

impl Pager {
    /// Page `page` (1-based, clamped) of `total` rows: the pager and the row offset.
    fn new(total: usize, page: usize, shown: usize, url: impl Fn(usize) -> String) -> (Pager, usize) {
        let pages = total.div_ceil(ENTRIES_PER_PAGE).max(1);
        let page = page.clamp(1, pages);
        let first = (page - 1) * ENTRIES_PER_PAGE;
        let p = Pager {
            total,
            first: first + 1,
            last: first + shown.min(total.saturating_sub(first)),
            prev: (page > 1).then(|| url(page - 1)),
            next: (page < pages).then(|| url(page + 1)),
        };
        (p, first)
    }
    pub fn paged(&self) -> bool {
        self.prev.is_some() || self.next.is_some()
    }
}

/// New or Removed: one page of (kernel, key).
pub struct ListView {
    pub rows: Vec<KernelKey>,
    pub pager: Pager,
    pub open: bool,
}

/// One cause: its counts, the reasons given, its kernels, and one page of its entries.
pub struct CauseView {
    pub cause: &'static str,
    pub entries: usize,
    pub identical: usize,
    /// Other bytes but the same machine code (only debug info differs).
    pub same_code: usize,
    /// The most given reasons (`summary`) with how many entries give each, most first.
    pub whys: Vec<(String, i64)>,
    /// More reasons than shown.
    pub whys_more: bool,
    pub cost: Cost,
    /// The kernels of the cause with most recompiled entries (at most
    /// [`crate::answers::stored::KERNELS_SHOWN`]).
    pub kernels: Vec<KernelGroup>,
    /// Kernels of the cause in all.
    pub kernels_total: usize,
    /// This page's entries, with their compare URL.
    pub rows: Vec<(InvalidatedRow, String)>,
    /// The disclosure starts open (the cause being paged).
    pub open: bool,
    pub pager: Pager,
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

/// A report still being computed: its progress, and the URL that asks again.
#[derive(Template)]
#[template(path = "invalidations_computing.html", blocks = ["fragment"])]
struct Computing {
    old_machine: String,
    new_machine: String,
    scans: Option<ScanContext>,
    url: String,
    done: usize,
    total: usize,
    secs: String,
}

#[derive(Template)]
#[template(path = "invalidations_pick.html")]
struct Pick {
    machines: Vec<String>,
    pick: Picker,
}

/// The forms that start another report: two machines, or two scans of the report's machine
/// (with the report's sides chosen).
pub struct Picker {
    pub machines: Vec<String>,
    pub a: Option<String>,
    pub b: Option<String>,
    /// The machine of a scan report and its scans.
    pub scans: Option<(String, Vec<ScanRef>)>,
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl Picker {
    pub fn is_from(&self, id: &i64) -> bool {
        self.from == Some(*id)
    }
    pub fn is_to(&self, id: &i64) -> bool {
        self.to == Some(*id)
    }
}

/// Machines a picker offers at most.
const PICKER_MACHINES: usize = 10_000;

/// Every machine's name, for the pickers.
async fn machine_names(pool: &Store) -> sqlx::Result<Vec<String>> {
    let page = crate::db::Page::new(Some(PICKER_MACHINES as i64), None);
    Ok(crate::db::summaries::machine_summaries(pool, page).await?.into_iter().map(|m| m.name).collect())
}

/// `GET /invalidations?machine=M[&from=SCAN][&to=SCAN]` or `?a=M1&b=M2`, plus
/// `&cause=C&page=N` to page through one cause's entries (`new_page=N`, `removed_page=N`: the
/// New and Removed lists); no machine: the machine picker. The report is read from its stored
/// copy, computed first when either side changed.
pub async fn page(State(s): State<AppState>, hx: Hx, Query(q): Query<InvalidationsQuery>) -> PageResult {
    if q.is_empty() {
        let machines = machine_names(s.db.pool()).await?;
        let (a, b) = (machines.first().cloned(), machines.get(1).cloned());
        let pick = Picker { machines: machines.clone(), a, b, scans: None, from: None, to: None };
        return Ok(HtmlTemplate(Pick { machines, pick }).into_response());
    }
    let pool = s.db.pool();
    let (r, scans) = match q.lookup(&s, s.config.report_limits, Some(s.config.report_wait)).await? {
        (Lookup::Ready(r), scans) => (*r, scans),
        (Lookup::Computing { done, total, secs }, scans) => {
            let (old_machine, new_machine) = match &scans {
                Some(c) => (c.to.machine.clone(), c.to.machine.clone()),
                None => (q.a.clone().unwrap_or_default(), q.b.clone().unwrap_or_default()),
            };
            let url = report_url(&q);
            let secs = format!("{secs:.1} s");
            let c = Computing { old_machine, new_machine, scans, url, done, total, secs };
            let page = hx.render(&c, |p| p.as_fragment().render())?;
            return Ok((StatusCode::ACCEPTED, [(header::RETRY_AFTER, "1")], page).into_response());
        }
    };
    let mut causes = Vec::new();
    for g in stored::groups(pool, &r, None).await? {
        causes.push(cause_view(pool, &r, g, &q).await?);
    }
    let cost = Cost { ms: r.head.ms, timed: r.head.timed, of: r.head.invalidated };
    let new = list_view(pool, &r, 1, "new_page", q.new_page, &q).await?;
    let removed = list_view(pool, &r, 2, "removed_page", q.removed_page, &q).await?;
    let pick = Picker {
        machines: if hx.0 { vec![] } else { machine_names(pool).await? },
        a: Some(r.head.old_machine.clone()),
        b: Some(r.head.new_machine.clone()),
        scans: scans.as_ref().map(|c| (c.to.machine.clone(), c.scans.clone())),
        from: scans.as_ref().and_then(|c| c.from.as_ref().map(|f| f.id)),
        to: scans.as_ref().map(|c| c.to.id),
    };
    hx.render(&Page { v: InvalidationsView { h: r.head, scans, causes, cost, new, removed, pick } }, |p| {
        p.as_fragment().render()
    })
}

/// The URL of this report with one extra parameter (a page of a list).
fn page_url(q: &InvalidationsQuery, extra: &str) -> String {
    format!("{}&{extra}", report_url(q))
}

/// The URL of this report (its sides, not the lists' pages).
fn report_url(q: &InvalidationsQuery) -> String {
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
    format!("/invalidations?{}", parts.join("&"))
}

async fn list_view(
    pool: &Store,
    r: &Stored,
    list: i64,
    param: &str,
    page: Option<usize>,
    q: &InvalidationsQuery,
) -> sqlx::Result<ListView> {
    let total = if list == 1 { r.head.new } else { r.head.removed };
    let (pager, first) =
        Pager::new(total, page.unwrap_or(1), ENTRIES_PER_PAGE, |p| page_url(q, &format!("{param}={p}")));
    let rows = reports::rows(pool, r.id, list, None, (ENTRIES_PER_PAGE as i64, first as i64)).await?;
    let rows = rows.into_iter().map(|r| KernelKey { kernel: r.kernel, key: r.key }).collect();
    Ok(ListView { rows, pager, open: page.is_some() })
}

/// One cause's group (as `/api/v1/invalidations` answers it) with one page of its entries.
async fn cause_view(pool: &Store, r: &Stored, g: CauseGroup, q: &InvalidationsQuery) -> sqlx::Result<CauseView> {
    let cause = g.cause.as_str();
    let open = q.cause.as_deref() == Some(cause);
    let page = if open { q.page.unwrap_or(1) } else { 1 };
    let (pager, first) =
        Pager::new(g.entries, page, ENTRIES_PER_PAGE, |p| page_url(q, &format!("cause={cause}&page={p}")));
    let rows = reports::rows(pool, r.id, 0, Some(g.cause), (ENTRIES_PER_PAGE as i64, first as i64)).await?;
    let rows = rows
        .into_iter()
        .map(|row| {
            let i = invalidated_row(&r.head, row);
            let u = compare_url(&i.a, &i.b);
            (i, u)
        })
        .collect();
    Ok(CauseView {
        cause,
        entries: g.entries,
        identical: g.identical,
        same_code: g.same_code,
        whys: g.reasons.into_iter().map(|w| (w.reason, w.entries)).collect(),
        whys_more: g.reasons_more,
        cost: g.cost,
        kernels: g.kernels,
        kernels_total: g.kernels_total,
        rows,
        open,
        pager,
    })
}
