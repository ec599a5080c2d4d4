//! `/` — the fleet at a glance: machines, recent scans, bytes by artifact type and what
//! `TRITON_STORE_BINARY_ONLY=1` would save.

use super::{Hx, PageResult};
use crate::db::{self, scans, summaries};
use crate::fmt;
use crate::web::AppState;
use askama::Template;
use axum::extract::State;

/// Artifact types that `TRITON_STORE_BINARY_ONLY=1` still writes (metadata, group file, the
/// binary, and `.source`: Triton 3.4+ stores the unoptimised TTIR before the option is looked at,
/// and older releases write none), or that it does not concern (launchers, autotune results).
const KEPT_BINARY_ONLY: &[&str] = &["json", "grp", "cubin", "hsaco", "so", "autotune.json", "source"];

pub struct MachineView {
    pub name: String,
    pub href: String,
    pub entries: i64,
    pub kernels: i64,
    pub size: String,
    pub versions: String,
    pub last_scan: String,
    pub last_scan_at: String,
    pub relocated: i64,
}

pub struct ScanView {
    pub machine: String,
    pub href: String,
    pub at: String,
    pub age: String,
    pub root: String,
    pub entries: i64,
    pub new_entries: i64,
    pub removed_entries: i64,
    pub skipped: i64,
    pub relocated: i64,
    pub size: String,
}

pub struct ExtView {
    pub ext: String,
    pub files: i64,
    pub size: String,
    pub pct: String,
    /// The share as a number 0–100 (the width of its bar).
    pub share: String,
    pub kept: bool,
}

pub struct Overview {
    pub machines: Vec<MachineView>,
    pub scans: Vec<ScanView>,
    pub exts: Vec<ExtView>,
    pub total: String,
    pub saving: String,
    /// The same in bytes (in the page as a data attribute: exact, for scripts and tests).
    pub saving_bytes: i64,
    pub saving_pct: String,
    /// What `cachelens prune` would free across the fleet.
    pub advice: super::advice::AdviceView,
    /// What misses cost across the fleet.
    pub headline: Option<super::headline::HeadlineView>,
    /// The latest fleet events, newest first.
    pub timeline: Vec<super::timeline::EventView>,
}

#[derive(Template)]
#[template(path = "overview.html", blocks = ["fragment"])]
struct Page {
    title: String,
    d: Overview,
}

pub async fn page(State(s): State<AppState>, hx: Hx) -> PageResult {
    let d = load(&s).await?;
    hx.render(&Page { title: "Overview".into(), d }, |p| p.as_fragment().render())
}

fn pct(part: i64, whole: i64) -> String {
    if whole == 0 { "0%".into() } else { format!("{:.0}%", 100.0 * part as f64 / whole as f64) }
}

async fn load(s: &AppState) -> Result<Overview, super::PageError> {
    s.db.fresh_summaries().await?;
    let machines = summaries::machine_summaries(s.db.pool(), db::Page::ALL).await?;
    let scans = scans::scans(s.db.pool(), None, db::Page::new(Some(10), None)).await?;
    let exts = summaries::ext_stats(s.db.pool()).await?;
    let total: i64 = exts.iter().fold(0, |t, e| t.saturating_add(e.bytes));
    let saving: i64 =
        exts.iter().filter(|e| !KEPT_BINARY_ONLY.contains(&e.ext.as_str())).fold(0, |t, e| t.saturating_add(e.bytes));
    let advice = super::advice::fleet(&crate::prune::advice::fleet(s.db.pool()).await?);
    Ok(Overview {
        advice,
        machines: machines
            .into_iter()
            .map(|m| MachineView {
                href: format!("/machines/{}", fmt::enc(&m.name)),
                entries: m.entries,
                kernels: m.kernels,
                size: fmt::bytes(m.bytes),
                versions: m.versions_csv.unwrap_or_default().replace(',', ", "),
                last_scan: fmt::age(m.last_scan_at),
                last_scan_at: fmt::time(m.last_scan_at),
                relocated: m.relocated,
                name: m.name,
            })
            .collect(),
        scans: scans.into_iter().map(scan_view).collect(),
        exts: exts
            .into_iter()
            .map(|e| ExtView {
                kept: KEPT_BINARY_ONLY.contains(&e.ext.as_str()),
                files: e.files,
                size: fmt::bytes(e.bytes),
                pct: pct(e.bytes, total),
                share: if total == 0 { "0".into() } else { format!("{:.1}", 100.0 * e.bytes as f64 / total as f64) },
                ext: e.ext,
            })
            .collect(),
        total: fmt::bytes(total),
        saving: fmt::bytes(saving),
        saving_bytes: saving,
        saving_pct: pct(saving, total),
        headline: super::headline::load(s.db.pool(), None).await?,
        timeline: crate::db::timeline::latest(s.db.pool(), db::Page { limit: super::timeline::SHOWN, offset: 0 })
            .await?
            .into_iter()
            .map(super::timeline::view)
            .collect(),
    })
}

/// A scan row as the overview and machine pages show it.
pub fn scan_view(r: scans::ScanRow) -> ScanView {
    ScanView {
        href: format!("/machines/{}", fmt::enc(&r.machine)),
        at: fmt::time(Some(r.scanned_at)),
        age: fmt::age(Some(r.scanned_at)),
        root: r.root,
        entries: r.entries,
        new_entries: r.new_entries,
        removed_entries: r.removed_entries,
        skipped: r.skipped,
        relocated: r.relocated,
        size: fmt::bytes(r.bytes),
        machine: r.machine,
    }
}
