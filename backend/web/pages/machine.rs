//! `/machines/{name}` — one machine: scans over time (server-side SVG), Triton versions, biggest
//! kernels, entries compiled per day, the relocated-cache warning, what can go and the hazards
//! of where each cache sits.

use super::overview::ScanView;
use super::{Hx, PageResult, not_found, svg};
use crate::db::{self, entries, scans, summaries};
use crate::fmt;
use crate::web::AppState;
use askama::Template;
use axum::extract::{Path, State};

pub struct KernelLink {
    pub name: String,
    pub href: String,
    pub entries: i64,
    pub size: String,
}

/// One Triton version present on a machine.
pub struct VersionRow {
    pub label: String,
    /// The machine's kernels of this version; `None` for entries whose metadata names no version
    /// (old Triton releases): the kernel filter cannot select those.
    pub href: Option<String>,
    pub entries: i64,
    pub size: String,
}

/// One row of "what fills this disk": a Triton cache dir or what another tool keeps beside it.
pub struct DiskRow {
    pub what: String,
    pub path: String,
    /// entries or files
    pub count: String,
    pub size: String,
    /// What it holds, in words (vLLM's compile artifacts and key factors); empty if not said.
    pub holds: String,
}

pub struct Machine {
    pub name: String,
    pub enc: String,
    pub entries: i64,
    pub kernels: i64,
    pub size: String,
    pub last_scan: String,
    pub versions: Vec<VersionRow>,
    pub biggest: Vec<KernelLink>,
    pub scans: Vec<ScanView>,
    pub scan_entries_svg: String,
    pub scan_bytes_svg: String,
    pub per_day_svg: String,
    pub days: usize,
    /// What the per-day chart covers, in words.
    pub days_note: String,
    /// Per root (latest scan of each): its Triton cache, then what sits beside it.
    pub disk: Vec<DiskRow>,
    pub disk_total: String,
    pub relocated: i64,
    /// (where the group files point, where the entries sit)
    pub relocated_paths: Option<(String, String)>,
    /// Autotune decisions recorded on this machine (Inductor's and Triton's): `/autotune?machine=`.
    pub autotune: i64,
    /// What the database keeps of the text files, in words ([`kept_note`]).
    pub kept: String,
    /// What the latest scan of each root skipped, by reason (most first).
    pub skips: Vec<SkipRow>,
    /// What `cachelens prune` would free on this machine.
    pub advice: super::advice::AdviceView,
    /// What misses cost on this machine.
    pub headline: Option<super::headline::HeadlineView>,
    /// Where each cache root sits, as its latest scan reported it.
    pub hazards: Vec<super::hazards::HazardRow>,
}

/// One reason the latest scan of a root skipped something, and how often.
pub struct SkipRow {
    pub root: String,
    pub reason: String,
    pub count: i64,
}

/// The latest scan of each root's skip reasons (`scans` oldest first), most frequent first.
fn skip_rows(scans: &[scans::ScanRow]) -> Vec<SkipRow> {
    let mut latest: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    for s in scans {
        latest.insert(&s.root, &s.skipped_json);
    }
    let mut rows: Vec<SkipRow> = latest
        .into_iter()
        .flat_map(|(root, json)| {
            let by_reason: std::collections::BTreeMap<String, i64> = serde_json::from_str(json).unwrap_or_default();
            by_reason.into_iter().map(move |(reason, count)| SkipRow { root: root.to_string(), reason, count })
        })
        .collect();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    rows.truncate(50);
    rows
}

#[derive(Template)]
#[template(path = "machine.html", blocks = ["fragment"])]
struct Page {
    title: String,
    d: Machine,
}

pub async fn page(State(s): State<AppState>, Path(name): Path<String>, hx: Hx) -> PageResult {
    let d = load(&s, &name).await?;
    hx.render(&Page { title: d.name.clone(), d }, |p| p.as_fragment().render())
}

async fn load(s: &AppState, name: &str) -> Result<Machine, super::PageError> {
    s.db.fresh_summaries().await?;
    let m = summaries::machine_summary(s.db.pool(), name)
        .await?
        .ok_or_else(|| not_found(format!("no machine named {name:?}")))?;
    let mut scans = scans::scans(s.db.pool(), Some(name), db::Page::new(Some(200), None)).await?;
    scans.reverse(); // oldest first for the charts
    let (e_pts, b_pts) = machine_totals(&scans);
    let per_day = summaries::compiled_per_day(s.db.pool(), m.id).await?;
    let (bars, days_note) = day_bars(&per_day);
    let relocated_paths = match entries::relocated_example(s.db.pool(), m.id).await? {
        Some((root, dir, group)) if m.relocated > 0 => Some((written_root(group.as_deref(), &dir), root)),
        _ => None,
    };
    let versions = summaries::machine_versions(s.db.pool(), m.id).await?;
    let biggest = summaries::biggest_kernels(s.db.pool(), m.id, 10).await?;
    let (disk, disk_total) = disk_rows(scans::root_sizes(s.db.pool(), name).await?);
    let autotune = db::decisions::machine_count(s.db.pool(), name).await?;
    let skips = skip_rows(&scans);
    let kept = kept_note(db::blobs::totals(s.db.pool()).await?);
    let headline = super::headline::load(s.db.pool(), Some(name)).await?;
    let advice = crate::prune::advice::current(&s.db, name)
        .await?
        .ok_or_else(|| not_found(format!("no machine named {name:?}")))?;
    let hazards = super::hazards::rows(db::hazards::read(s.db.pool(), Some(name)).await?);
    Ok(Machine {
        hazards,
        advice: super::advice::machine(&advice),
        headline,
        autotune,
        kept,
        skips,
        disk,
        disk_total,
        enc: fmt::enc(&m.name),
        entries: m.entries,
        kernels: m.kernels,
        size: fmt::bytes(m.bytes),
        last_scan: fmt::age(m.last_scan_at),
        versions: versions
            .into_iter()
            .map(|(v, n, b)| VersionRow {
                // a local build's version ("3.6.0+git1a2b3c") has a `+`, a space in a query string
                href: v
                    .as_deref()
                    .map(|v| format!("/kernels?machine={}&triton_version={}", fmt::enc(name), fmt::enc(v))),
                label: v.unwrap_or_else(|| "no version recorded (autotune results, old Triton)".into()),
                entries: n,
                size: fmt::bytes(b),
            })
            .collect(),
        biggest: biggest
            .into_iter()
            .map(|k| KernelLink {
                href: format!("/kernels/{}", fmt::enc(&k.name)),
                entries: k.entries,
                size: fmt::bytes(k.bytes),
                name: k.name,
            })
            .collect(),
        scan_entries_svg: svg::line_chart(
            "Entries (all cache dirs)",
            &e_pts,
            |t| fmt::time(Some(t)),
            |v| format!("{v:.0}"),
        ),
        scan_bytes_svg: svg::line_chart(
            "Cache size (all cache dirs)",
            &b_pts,
            |t| fmt::time(Some(t)),
            |v| fmt::bytes(v as i64),
        ),
        per_day_svg: svg::bar_chart("Entries compiled per day (UTC)", &bars, |v| format!("{v:.0}")),
        days: per_day.len(),
        days_note,
        scans: scans.into_iter().rev().take(20).map(super::overview::scan_view).collect(),
        relocated: m.relocated,
        relocated_paths,
        name: m.name,
    })
}

/// The blob store's figures in words: text files are stored once per distinct text for every
/// machine (compressed since migration 0030), so the figures are the store's, not this machine's.
fn kept_note(t: db::blobs::Totals) -> String {
    if t.texts == 0 {
        return "no text files stored yet".into();
    }
    let ratio =
        if t.stored > 0 { format!(", 1/{:.1} of the text", t.bytes as f64 / t.stored as f64) } else { String::new() };
    let plain = match t.plain {
        0 => String::new(),
        n => format!("; {n} of them written before compression, kept as plain text"),
    };
    format!(
        "{} distinct texts, {} as written, {} stored compressed (zstd{ratio}){plain}",
        t.texts,
        fmt::bytes(t.bytes),
        fmt::bytes(t.stored)
    )
}

/// (unix ms, value) points of a chart.
type Points = Vec<(i64, f64)>;

/// The machine's entries and bytes after each scan (oldest first): a scan covers one cache dir,
/// so the machine's total then is that scan's figures plus the latest of each other dir. (Plotting
/// each scan alone would show a machine with a big and a small cache dir as emptying and
/// refilling.)
fn machine_totals(scans: &[scans::ScanRow]) -> (Points, Points) {
    let mut latest: std::collections::HashMap<&str, (i64, i64)> = Default::default();
    let (mut entries, mut bytes) = (vec![], vec![]);
    for r in scans {
        latest.insert(&r.root, (r.entries, r.bytes));
        entries.push((r.scanned_at, latest.values().map(|v| v.0).sum::<i64>() as f64));
        bytes.push((r.scanned_at, latest.values().map(|v| v.1 as f64).sum::<f64>()));
    }
    (entries, bytes)
}

/// Days the per-day chart shows at most: a year-old cache still gets readable bars.
const MAX_DAYS: i64 = 90;

/// One bar per day from the first to the last day with compiles — days without any are bars of
/// zero, so gaps show — over the last [`MAX_DAYS`] at most; and a sentence saying what is shown.
fn day_bars(per_day: &[(i64, i64)]) -> (Vec<(String, f64)>, String) {
    let (Some(first), Some(last)) = (per_day.first().map(|d| d.0), per_day.last().map(|d| d.0)) else {
        return (vec![], String::new());
    };
    let from = first.max(last - MAX_DAYS + 1);
    let by_day: std::collections::HashMap<i64, i64> = per_day.iter().copied().collect();
    let bars = (from..=last).map(|d| (fmt::day(d), by_day.get(&d).copied().unwrap_or(0) as f64)).collect();
    let total: i64 = per_day.iter().map(|d| d.1).sum();
    let mut note = format!(
        "{total} entries compiled on {} day(s) between {} and {}",
        per_day.len(),
        fmt::day(first),
        fmt::day(last)
    );
    if from > first {
        let before: i64 = per_day.iter().filter(|d| d.0 < from).map(|d| d.1).sum();
        note.push_str(&format!(
            "; the chart shows the last {MAX_DAYS} days ({before} compiled before {})",
            fmt::day(from)
        ));
    }
    (bars, note)
}

/// The directory the group file's children point into, minus the entry's own dir: the cache
/// root of the machine (or path) that wrote the entry.
fn written_root(group_json: Option<&str>, dir: &str) -> String {
    let written = group_json
        .and_then(|g| serde_json::from_str::<serde_json::Value>(g).ok())
        .and_then(|g| g.get("written_at").and_then(|w| w.as_str()).map(str::to_string))
        .unwrap_or_else(|| "another path".into());
    written.strip_suffix(&format!("/{dir}")).map(str::to_string).unwrap_or(written)
}

/// "What fills this disk": each root's Triton cache and what sits beside it, with the total.
fn disk_rows(roots: Vec<scans::RootSize>) -> (Vec<DiskRow>, String) {
    let mut rows = vec![];
    let mut total = 0;
    for r in roots {
        total += r.bytes;
        let rank = crate::scan::discover::rank_dir(&r.root).map(|k| format!(" (vLLM {k})")).unwrap_or_default();
        let vllm = r.beside.iter().flatten().any(|t| t.tool.starts_with("vllm-") && t.tool != "vllm-compiled");
        let what = if vllm { "vLLM compile cache" } else { "Triton cache" };
        rows.push(DiskRow {
            what: format!("{what}{rank}"),
            path: r.root.clone(),
            count: format!("{} entries", r.entries),
            size: fmt::bytes(r.bytes),
            holds: String::new(),
        });
        let Some(beside) = r.beside else {
            let path = "not counted: scanned before cachelens counted other tools' caches".into();
            let (count, size, holds) = ("–".into(), "–".into(), String::new());
            rows.push(DiskRow { what: "beside it".into(), path, count, size, holds });
            continue;
        };
        for t in beside {
            total += t.bytes;
            let floor = if t.complete { "" } else { "at least " };
            let inodes = t.inodes.map(|n| format!(", {n} inodes")).unwrap_or_default();
            rows.push(DiskRow {
                what: t.tool,
                path: t.path,
                count: format!("{floor}{} files{inodes}", t.files),
                size: format!("{floor}{}", fmt::bytes(t.bytes)),
                holds: t.holds.unwrap_or_default(),
            });
        }
    }
    (rows, fmt::bytes(total))
}
