//! `/kernels/{name}` — the variants grid of one kernel: num_warps across, num_stages down, one
//! grid per (backend/arch, Triton version, signature, shapes). Cells carry the entries, their
//! machines and resources, autotune timings (winner marked), Inductor best configs, and
//! byte-identical binaries.

use super::{HtmlTemplate, PageResult, fmt, is_htmx, not_found};
use crate::db::pages::{self, AutotuneRow};
use crate::db::read::EntryRow;
use crate::web::AppState;
use askama::Template;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Most entries one kernel page lays out.
const MAX_ENTRIES: i64 = 5000;

pub struct EntryLink {
    pub label: String,
    pub href: String,
    pub best_config: bool,
    /// How many other entries of this kernel have the very same binary.
    pub same_binary: usize,
}

pub struct Timing {
    pub machine: String,
    /// The autotune result entry (one tuning run) this timing comes from.
    pub run: String,
    pub run_href: String,
    pub kwargs: String,
    pub ms: String,
    pub winner: bool,
}

#[derive(Default)]
pub struct Cell {
    pub entries: Vec<EntryLink>,
    pub machines: String,
    pub resources: Vec<String>,
    pub timings: Vec<Timing>,
    pub winner: bool,
    pub best: bool,
}

pub struct Run {
    pub machine: String,
    pub run: String,
    pub href: String,
    pub winner: String,
    pub timings: Vec<Timing>,
}

pub struct Grid {
    pub title: String,
    pub signature: String,
    pub shapes: String,
    pub warps: Vec<String>,
    /// (num_stages label, one cell per warps column)
    pub rows: Vec<(String, Vec<Cell>)>,
}

pub struct Kernel {
    pub name: String,
    pub enc: String,
    pub entries: usize,
    pub capped: bool,
    pub grids: Vec<Grid>,
    pub others: Vec<(String, Vec<EntryLink>)>,
    /// One autotune run (a `<fn>.autotune.json` entry) per item, its timings in config order.
    pub runs: Vec<Run>,
    pub identical: usize,
}

#[derive(Template)]
#[template(path = "kernel.html")]
struct Page {
    title: String,
    d: Kernel,
}

#[derive(Template)]
#[template(path = "kernel_partial.html")]
struct Partial {
    d: Kernel,
}

pub async fn page(
    State(s): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> PageResult {
    let entries = pages::kernel_entries(&s.pool, &name, MAX_ENTRIES + 1).await?;
    if entries.is_empty() {
        return Err(not_found(format!(
            "no live entries of a kernel named {name:?}"
        )));
    }
    let autotune = pages::kernel_autotune(&s.pool, &name).await?;
    let best: BTreeSet<i64> = pages::kernel_best_config_ids(&s.pool, &name)
        .await?
        .into_iter()
        .collect();
    let d = build(name, entries, &autotune, &best);
    Ok(if is_htmx(&headers) {
        HtmlTemplate(Partial { d }).into_response()
    } else {
        HtmlTemplate(Page {
            title: d.name.clone(),
            d,
        })
        .into_response()
    })
}

fn kwargs(config_json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(config_json).unwrap_or_default();
    let kw = v.get("kwargs").and_then(|k| k.as_object()).map(|o| {
        o.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    });
    let mut s = kw.unwrap_or_default();
    for k in ["num_warps", "num_stages", "num_ctas", "maxnreg"] {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            s.push_str(&format!(" {k}={x}"));
        }
    }
    s.trim().to_string()
}

fn timing(a: &AutotuneRow) -> Timing {
    Timing {
        machine: a.machine.clone(),
        run: a.entry_key.get(..10).unwrap_or(&a.entry_key).to_string(),
        run_href: format!(
            "/entries/{}/{}",
            fmt::enc(&a.machine),
            fmt::enc(&a.entry_key)
        ),
        kwargs: kwargs(&a.config_json),
        ms: a
            .best_ms
            .map(|m| format!("{m:.4} ms"))
            .unwrap_or_else(|| "failed".into()),
        winner: a.winner,
    }
}

/// Whether an autotune config could have produced entries with these TTIR shapes: its block
/// sizes (integer kwargs ≥ 16) are exactly the dimensions seen in the shapes. Constexprs are not
/// in the metadata, so this is the evidence there is; without shapes every config fits.
fn fits_shapes(config_json: &str, shapes: &str) -> bool {
    let dims: BTreeSet<i64> = shapes
        .split([',', 'x'])
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    let v: serde_json::Value = serde_json::from_str(config_json).unwrap_or_default();
    let blocks: BTreeSet<i64> = v
        .get("kwargs")
        .and_then(|k| k.as_object())
        .map(|o| {
            o.values()
                .filter_map(|x| x.as_i64())
                .filter(|x| *x >= 16)
                .collect()
        })
        .unwrap_or_default();
    dims.is_empty() || blocks.is_empty() || blocks == dims
}

fn runs(autotune: &[AutotuneRow]) -> Vec<Run> {
    let mut runs: Vec<Run> = vec![];
    for t in autotune.iter().map(timing) {
        if runs.last().is_none_or(|r| r.href != t.run_href) {
            runs.push(Run {
                machine: t.machine.clone(),
                run: t.run.clone(),
                href: t.run_href.clone(),
                winner: String::new(),
                timings: vec![],
            });
        }
        let r = runs.last_mut().expect("pushed above");
        if t.winner {
            r.winner = format!("{} ({})", t.kwargs, t.ms);
        }
        r.timings.push(t);
    }
    runs
}

fn range(vals: impl Iterator<Item = Option<i64>>) -> Option<String> {
    let v: Vec<i64> = vals.flatten().collect();
    let (lo, hi) = (v.iter().min()?, v.iter().max()?);
    Some(if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    })
}

fn link(e: &EntryRow, best: &BTreeSet<i64>, dups: &HashMap<&str, usize>) -> EntryLink {
    EntryLink {
        label: format!("{}:{}", e.machine, e.key.get(..10).unwrap_or(&e.key)),
        href: format!("/entries/{}/{}", fmt::enc(&e.machine), fmt::enc(&e.key)),
        best_config: best.contains(&e.id),
        same_binary: e
            .binary_sha256
            .as_deref()
            .and_then(|h| dups.get(h))
            .map_or(0, |n| n - 1),
    }
}

fn cell(
    es: &[&EntryRow],
    timings: &[&AutotuneRow],
    best: &BTreeSet<i64>,
    dups: &HashMap<&str, usize>,
) -> Cell {
    let machines: BTreeSet<&str> = es.iter().map(|e| e.machine.as_str()).collect();
    let mut resources = vec![];
    for (label, r) in [
        ("registers", range(es.iter().map(|e| e.registers))),
        ("spills", range(es.iter().map(|e| e.spills))),
        ("shared", range(es.iter().map(|e| e.shared_bytes))),
    ] {
        if let Some(r) = r {
            resources.push(format!("{label} {r}"));
        }
    }
    let timings: Vec<Timing> = timings
        .iter()
        .filter(|a| machines.contains(a.machine.as_str()))
        .map(|a| timing(a))
        .collect();
    Cell {
        winner: timings.iter().any(|t| t.winner),
        best: es.iter().any(|e| best.contains(&e.id)),
        entries: es.iter().map(|e| link(e, best, dups)).collect(),
        machines: machines.into_iter().collect::<Vec<_>>().join(", "),
        resources,
        timings,
    }
}

fn build(
    name: String,
    mut entries: Vec<EntryRow>,
    autotune: &[AutotuneRow],
    best: &BTreeSet<i64>,
) -> Kernel {
    let capped = entries.len() as i64 > MAX_ENTRIES;
    entries.truncate(MAX_ENTRIES as usize);
    let mut dups: HashMap<&str, usize> = HashMap::new();
    for e in &entries {
        if let Some(h) = e.binary_sha256.as_deref() {
            *dups.entry(h).or_default() += 1;
        }
    }
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    let mut groups: BTreeMap<(String, String, String, String), Vec<&EntryRow>> = BTreeMap::new();
    let mut others: BTreeMap<String, Vec<EntryLink>> = BTreeMap::new();
    for e in &entries {
        if e.num_warps.is_none() && e.num_stages.is_none() {
            others
                .entry(e.kind.clone())
                .or_default()
                .push(link(e, best, &dups));
            continue;
        }
        let title = format!("{} / {}", o(&e.backend), o(&e.arch));
        let version = e.triton_version.clone().unwrap_or_else(|| "unknown".into());
        groups
            .entry((
                title,
                version,
                o(&e.signature),
                e.shapes.clone().unwrap_or_default(),
            ))
            .or_default()
            .push(e);
    }
    let grids = groups
        .into_iter()
        .map(|((title, version, signature, shapes), es)| {
            let warps: BTreeSet<Option<i64>> = es.iter().map(|e| e.num_warps).collect();
            let stages: BTreeSet<Option<i64>> = es.iter().map(|e| e.num_stages).collect();
            let rows = stages
                .iter()
                .map(|st| {
                    let cells = warps
                        .iter()
                        .map(|w| {
                            let here: Vec<&EntryRow> = es
                                .iter()
                                .copied()
                                .filter(|e| e.num_warps == *w && e.num_stages == *st)
                                .collect();
                            if here.is_empty() {
                                return Cell::default();
                            }
                            let t: Vec<&AutotuneRow> = autotune
                                .iter()
                                .filter(|a| a.num_warps == *w && a.num_stages == *st)
                                .filter(|a| fits_shapes(&a.config_json, &shapes))
                                .collect();
                            cell(&here, &t, best, &dups)
                        })
                        .collect();
                    (format!("num_stages={}", fmt::num(*st)), cells)
                })
                .collect();
            Grid {
                title: format!("{title} · Triton {version}"),
                signature,
                shapes,
                warps: warps
                    .iter()
                    .map(|w| format!("num_warps={}", fmt::num(*w)))
                    .collect(),
                rows,
            }
        })
        .collect();
    Kernel {
        enc: fmt::enc(&name),
        entries: entries.len(),
        capped,
        grids,
        others: others.into_iter().collect(),
        runs: runs(autotune),
        identical: dups.values().filter(|n| **n > 1).map(|n| n - 1).sum(),
        name,
    }
}
