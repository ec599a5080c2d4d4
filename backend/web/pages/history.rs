//! The `/history` page: hits, misses, compiles and compile time per hour or day, per machine and
//! per kernel, with a server-side SVG chart. Filter changes fetch only the results (htmx,
//! `HX-Request`); a plain GET renders the whole page, so every view has a shareable URL.

use super::{Hx, PageResult};
use crate::db::history::{self, Bucket, Counts, HistoryPoint, NamedCounts};
use crate::fmt::{self, enc};
use crate::web::AppState;
use crate::web::error::AppError;
use crate::web::query::HistoryQuery;
use askama::Template;
use axum::extract::{Query, State};

/// Kernels per page of "misses most".
const TOP_KERNELS: usize = 25;
/// Past this many buckets between the first and the last, the chart shows only active ones; it
/// never draws more than this many (the latest).
const DENSE_MAX: i64 = 240;
/// Buckets listed in the per-bucket table (the latest; the JSON API has them all).
const ROWS_MAX: usize = 100;
/// Kernels offered in the filter's suggestions (those that miss most).
const KERNEL_CHOICES: i64 = 200;

/// One row of a table, formatted for display.
#[derive(Clone)]
pub struct Row {
    pub label: String,
    pub href: String,
    pub hits: String,
    pub misses: String,
    pub compiles: String,
    pub inferred: i64,
    pub compile_time: String,
    pub hit_rate: String,
}

/// A `<select>` option.
#[derive(Clone)]
pub struct Opt {
    pub value: String,
    pub selected: bool,
}

/// One segment of a stacked bar (SVG units).
#[derive(Clone)]
pub struct Seg {
    pub y: String,
    pub h: String,
    pub class: &'static str,
}

#[derive(Clone)]
pub struct Bar {
    pub x: String,
    pub w: String,
    pub segs: Vec<Seg>,
    pub title: String,
}

#[derive(Clone)]
pub struct Tick {
    pub x: String,
    pub label: String,
}

/// The stacked-bar chart: hits, misses the hook saw, compiles inferred from mtimes.
#[derive(Clone)]
pub struct Chart {
    pub width: i64,
    pub height: i64,
    pub base: i64,
    pub left: i64,
    pub bars: Vec<Bar>,
    pub ticks: Vec<Tick>,
    pub ymax: i64,
    pub sparse: bool,
}

/// Everything the results part of the page shows.
#[derive(Clone)]
pub struct HistoryView {
    pub machine: String,
    pub kernel: String,
    pub bucket: &'static str,
    pub machines: Vec<Opt>,
    pub kernels: Vec<Opt>,
    pub buckets: Vec<Opt>,
    pub total: Row,
    pub has_hook: bool,
    pub chart: Chart,
    pub rows: Vec<Row>,
    pub per_machine: Vec<Row>,
    pub per_kernel: Vec<Row>,
    /// Links to the previous and next page of the kernel table, when there is one.
    pub kernel_prev: Option<String>,
    pub kernel_next: Option<String>,
    /// "kernels 26–50 of 1,234".
    pub kernel_range: String,
    /// Buckets left out of the per-bucket table (older than the ones listed).
    pub rows_hidden: usize,
    pub api_url: String,
    /// The latest misses (of the filter), each with the way to why it missed.
    pub misses: Vec<MissView>,
}

/// Misses listed, the latest first.
pub const MISSES: i64 = 10;

/// A miss as the page lists it: the key it compiled, its variant's nearest earlier key and the
/// comparison of the two.
#[derive(Clone)]
pub struct MissView {
    pub when: String,
    pub machine: String,
    pub kernel: String,
    pub key: String,
    /// The entry's page, when it is stored.
    pub key_href: Option<String>,
    /// ("machine:KEY", its entry page, the compare page of it and the miss's key).
    pub earlier: Option<(String, String, String)>,
    /// The entry's nearest-neighbours page (every candidate, ranked).
    pub nearest_href: Option<String>,
}

fn miss_view(m: crate::db::misses::Miss) -> MissView {
    let short = |k: &str| k.get(..10).unwrap_or(k).to_string();
    let entry = |machine: &str, key: &str| format!("/entries/{}/{}", enc(machine), enc(key));
    let here = entry(&m.machine, &m.key);
    MissView {
        when: fmt::time(Some(m.ts)),
        kernel: m.kernel.clone().unwrap_or_else(|| "?".into()),
        key: short(&m.key),
        key_href: m.stored.then(|| here.clone()),
        earlier: m.earlier.as_ref().map(|(om, ok)| {
            let compare = format!("/compare?a={}:{}&b={}:{}", enc(om), enc(ok), enc(&m.machine), enc(&m.key));
            (format!("{om}:{}", short(ok)), entry(om, ok), compare)
        }),
        nearest_href: m.stored.then(|| format!("{here}/nearest")),
        machine: m.machine,
    }
}

#[derive(Template)]
#[template(path = "history.html", blocks = ["fragment"])]
struct Page {
    view: HistoryView,
}

/// `GET /history?machine=&kernel=&bucket=hour|day`
pub async fn page(State(s): State<AppState>, hx: Hx, Query(q): Query<HistoryQuery>) -> PageResult {
    // The same page for every visitor until data lands: read from the aggregates once.
    let view = s.db.memo(format!("history page {q:?}"), view(&s, &q)).await?;
    hx.render(&Page { view }, |p| p.as_fragment().render())
}

async fn view(s: &AppState, q: &HistoryQuery) -> Result<HistoryView, AppError> {
    let bucket = q.bucket()?;
    let f = q.filter();
    let pool = s.db.pool();
    let series = history::series(pool, &f, bucket).await?;
    let per_machine = history::by_machine(pool, &f).await?;
    let (machines, mut kernels) = history::choices(pool, KERNEL_CHOICES).await?;
    let (machine, kernel) = (f.machine.clone().unwrap_or_default(), f.kernel.clone().unwrap_or_default());
    if !kernel.is_empty() && !kernels.contains(&kernel) {
        kernels.push(kernel.clone());
    }
    let total = history::total(series.iter().map(|p| &p.counts));
    let link = |m: &str, k: &str| format!("/history?machine={}&kernel={}&bucket={}", enc(m), enc(k), bucket.as_str());
    let opts = |all: Vec<String>, cur: &str| all.into_iter().map(|v| Opt { selected: v == cur, value: v }).collect();
    // Only the asked page of the kernel table is read (one more query when it is past the end).
    let kpage_at = |p: usize| crate::db::Page { limit: TOP_KERNELS as i64, offset: ((p - 1) * TOP_KERNELS) as i64 };
    let asked = q.kpage.unwrap_or(1).max(1);
    let (mut missing, n) = history::by_kernel_page(pool, &f, true, kpage_at(asked)).await?;
    let pages = (n as usize).div_ceil(TOP_KERNELS).max(1);
    let kpage = asked.min(pages);
    if kpage != asked {
        missing = history::by_kernel_page(pool, &f, true, kpage_at(kpage)).await?.0;
    }
    let n = n as usize;
    let kpage_link = |p: usize| format!("{}&kpage={p}", link(&machine, &kernel));
    let first = (kpage - 1) * TOP_KERNELS;
    let misses = crate::db::misses::latest(pool, f.machine.as_deref(), f.kernel.as_deref(), MISSES).await?;
    let shown = series.len().saturating_sub(DENSE_MAX as usize);
    Ok(HistoryView {
        bucket: bucket.as_str(),
        machines: opts(machines, &machine),
        kernels: opts(kernels, &kernel),
        buckets: opts(vec!["hour".into(), "day".into(), "minute".into()], bucket.as_str()),
        total: row("all".into(), String::new(), &total),
        has_hook: total.hook_events > 0,
        chart: chart(&series[shown..], bucket),
        rows: series.iter().rev().take(ROWS_MAX).map(|p| row(fmt_t(p.t, bucket), String::new(), &p.counts)).collect(),
        rows_hidden: series.len().saturating_sub(ROWS_MAX),
        per_machine: per_machine
            .iter()
            .map(|n: &NamedCounts| row(n.name.clone(), link(&n.name, &kernel), &n.counts))
            .collect(),
        per_kernel: missing.iter().map(|n| row(n.name.clone(), link(&machine, &n.name), &n.counts)).collect(),
        kernel_prev: (kpage > 1).then(|| kpage_link(kpage - 1)),
        kernel_next: (kpage < pages).then(|| kpage_link(kpage + 1)),
        kernel_range: format!("kernels {}–{} of {}", (first + 1).min(n), (first + TOP_KERNELS).min(n), n),
        api_url: format!(
            "/api/v1/history?machine={}&kernel={}&bucket={}&limit=10000",
            enc(&machine),
            enc(&kernel),
            bucket.as_str()
        ),
        misses: misses.into_iter().map(miss_view).collect(),
        machine,
        kernel,
    })
}

fn row(label: String, href: String, c: &Counts) -> Row {
    let hook = c.hook_events > 0;
    Row {
        label,
        href,
        hits: if hook { c.hits.to_string() } else { "–".into() },
        // the hook's misses: compiles inferred from mtimes are no lookups (they are in `compiles`)
        misses: if hook { (c.misses - c.inferred_compiles).max(0).to_string() } else { "–".into() },
        compiles: c.compiles.to_string(),
        inferred: c.inferred_compiles,
        compile_time: c.compile_ms.map(fmt::duration_ms).unwrap_or_else(|| "–".into()),
        hit_rate: c.hit_rate().map(|r| format!("{:.1}%", r * 100.0)).unwrap_or_else(|| "–".into()),
    }
}

/// Build the stacked bars. Gaps between active buckets are kept (empty slots) unless the range
/// is too long to draw every bucket.
fn chart(series: &[HistoryPoint], bucket: Bucket) -> Chart {
    let (width, height, left, base) = (900i64, 240i64, 44i64, 200i64);
    let span = match (series.first(), series.last()) {
        (Some(a), Some(b)) => (b.t - a.t) / bucket.ms() + 1,
        _ => 0,
    };
    let sparse = span > DENSE_MAX;
    let slots = if sparse { series.len() as i64 } else { span }.max(1);
    let slot_w = (width - left - 4) as f64 / slots as f64;
    let ymax = series.iter().map(|p| p.counts.hits + p.counts.misses).max().unwrap_or(0).max(1);
    let scale = (base - 10) as f64 / ymax as f64;
    let t0 = series.first().map(|p| p.t).unwrap_or(0);
    let mut bars = vec![];
    let mut ticks = vec![];
    let every = ((slots as f64) / 8.0).ceil().max(1.0) as i64;
    for (i, p) in series.iter().enumerate() {
        let slot = if sparse { i as i64 } else { (p.t - t0) / bucket.ms() };
        let x = left as f64 + slot as f64 * slot_w;
        let c = &p.counts;
        let parts = [(c.hits, "hit"), (c.misses - c.inferred_compiles, "miss"), (c.inferred_compiles, "inferred")];
        let mut y = base as f64;
        let segs = parts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|&(n, class)| {
                let h = n as f64 * scale;
                y -= h;
                Seg { y: format!("{y:.1}"), h: format!("{h:.1}"), class }
            })
            .collect();
        let title = format!(
            "{}: {} hits, {} misses, {} compiles ({} inferred), compile time {}",
            fmt_t(p.t, bucket),
            c.hits,
            c.misses,
            c.compiles,
            c.inferred_compiles,
            c.compile_ms.map(fmt::duration_ms).unwrap_or_else(|| "unknown".into())
        );
        bars.push(Bar { x: format!("{x:.1}"), w: format!("{:.1}", (slot_w * 0.8).clamp(1.0, 48.0)), segs, title });
        if i == 0 || slot % every == 0 {
            ticks.push(Tick { x: format!("{x:.1}"), label: fmt_t(p.t, bucket) });
        }
    }
    Chart { width, height, base, left, bars, ticks, ymax, sparse }
}

/// Bucket start as text (UTC).
fn fmt_t(ms: i64, b: Bucket) -> String {
    let f = match b {
        Bucket::Day => "%Y-%m-%d",
        Bucket::Hour => "%Y-%m-%d %H:00",
        Bucket::Minute => "%Y-%m-%d %H:%M",
        Bucket::Second => "%H:%M:%S",
    };
    fmt::stamp(ms, f)
}
