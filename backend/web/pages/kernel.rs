//! `/kernels/{name}` — the variants grid of one kernel: num_warps across, num_stages down, one
//! grid per (backend/arch, Triton version, signature, shapes). Cells carry how many entries, on
//! which machines, their resources, the autotune configs measured for them in a cache of that
//! grid's backend, arch and version (winner marked),
//! Inductor best configs, byte-identical binaries and same machine code, with sample entries to open.
//!
//! Everything comes from the summary tables (`page_variant_cells`, `page_autotune_configs`):
//! a kernel with thousands of entries across a fleet costs a few hundred rows per request.

use super::{Hx, PageResult, not_found};
use crate::db::entries;
use crate::db::summaries::{self, AutotuneConfig, VariantCell};
use crate::fmt;
use crate::web::AppState;
use askama::Template;
use axum::extract::{Path, Query, State};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Autotune configs shown in one cell (the fastest first); the full list is below the grids.
const CELL_TIMINGS: usize = 4;

pub struct EntryLink {
    pub label: String,
    pub href: String,
}

#[derive(Clone)]
pub struct Timing {
    /// The grid the run was measured in ("cuda / sm_90 · Triton 3.6.0").
    pub measured_in: String,
    pub kwargs: String,
    pub ms: String,
    pub runs: i64,
    pub wins: i64,
    pub machines: String,
    pub winner: bool,
}

#[derive(Default)]
pub struct Cell {
    pub count: i64,
    pub samples: Vec<EntryLink>,
    pub more: i64,
    pub machines: String,
    pub resources: Vec<String>,
    pub timings: Vec<Timing>,
    pub timings_more: usize,
    pub winner: bool,
    pub best: i64,
    /// Entries of this cell whose binary another key of the kernel also has.
    pub shared_binary: i64,
    /// Entries of this cell whose machine code another key of the kernel also has.
    pub shared_code: i64,
}

pub struct Grid {
    pub title: String,
    pub signature: String,
    pub shapes: String,
    pub warps: Vec<String>,
    /// (num_stages label, one cell per warps column)
    pub rows: Vec<(String, Vec<Cell>)>,
}

pub struct Other {
    pub kind: String,
    pub cell: Cell,
}

pub struct Kernel {
    pub name: String,
    pub enc: String,
    pub entries: i64,
    pub grids: Vec<Grid>,
    pub others: Vec<Other>,
    /// Every autotune config measured for this kernel, fastest first.
    pub configs: Vec<Timing>,
    pub identical: i64,
    /// Entries whose machine code another key of the kernel has (byte-identical ones included).
    pub same_code: i64,
    /// Inductor decisions a choice compiled into this kernel took part in (a page of them).
    pub decisions: Vec<super::autotune::KernelDecisionView>,
    pub more_decisions: bool,
    /// Where compile time goes: the hook's stage times summed over the kernel's compiles.
    pub stages: Stages,
    /// The filter: its choices and what is picked.
    pub filter: Filter,
}

/// `?machine=&triton_version=&backend=` of the kernel page (empty: all).
#[derive(Debug, Default, serde::Deserialize)]
pub struct KernelQuery {
    pub machine: Option<String>,
    pub triton_version: Option<String>,
    pub backend: Option<String>,
}

fn picked(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// The kernel page's filter form: each control's choices (those of the kernel's live entries)
/// as (value, selected), and the live entries of the kernel in all.
#[derive(Default)]
pub struct Filter {
    pub machines: Vec<(String, bool)>,
    pub versions: Vec<(String, bool)>,
    pub backends: Vec<(String, bool)>,
    pub active: bool,
    pub total: i64,
}

fn filter_of(all: &[VariantCell], q: &KernelQuery) -> Filter {
    let opts = |vals: BTreeSet<String>, cur: Option<&str>| {
        vals.into_iter().map(|v| (v.clone(), Some(v.as_str()) == cur)).collect()
    };
    let machines = all.iter().flat_map(|c| c.machines.split(',')).filter(|m| !m.is_empty()).map(String::from).collect();
    let versions = all.iter().filter_map(|c| c.triton_version.clone()).collect();
    let backends = all.iter().filter_map(|c| c.backend.clone()).collect();
    Filter {
        machines: opts(machines, picked(&q.machine)),
        versions: opts(versions, picked(&q.triton_version)),
        backends: opts(backends, picked(&q.backend)),
        active: picked(&q.machine).is_some() || picked(&q.triton_version).is_some() || picked(&q.backend).is_some(),
        total: all.iter().map(|c| c.entries).sum(),
    }
}

/// Whether a grid or an autotune run of (backend, version) is in the filter.
fn keeps(q: &KernelQuery, backend: &Option<String>, version: &Option<String>) -> bool {
    picked(&q.backend).is_none_or(|b| backend.as_deref() == Some(b))
        && picked(&q.triton_version).is_none_or(|v| version.as_deref() == Some(v))
}

/// A kernel's stage times summed (`db::stages::of_kernel`).
#[derive(Default)]
pub struct Stages {
    /// (stage, summed time, share of the sum in %, as a bar width 0–100, mean per compile, compiles)
    pub rows: Vec<(String, String, String, String, String, i64)>,
    pub total: String,
    /// The most compiles any stage was timed in (the compiles counted).
    pub compiles: i64,
}

fn stages_view(sums: &[crate::db::stages::StageSum]) -> Stages {
    let total: f64 = sums.iter().map(|s| s.ms).sum();
    let rows = sums
        .iter()
        .map(|s| {
            let share = if total > 0.0 { 100.0 * s.ms / total } else { 0.0 };
            (
                s.stage.clone(),
                fmt::ms(s.ms),
                format!("{share:.0}%"),
                format!("{share:.1}"),
                fmt::ms(s.ms / s.compiles.max(1) as f64),
                s.compiles,
            )
        })
        .collect();
    Stages { rows, total: fmt::ms(total), compiles: sums.iter().map(|s| s.compiles).max().unwrap_or(0) }
}

#[derive(Template)]
#[template(path = "kernel.html", blocks = ["fragment"])]
struct Page {
    title: String,
    d: Kernel,
}

pub async fn page(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<KernelQuery>,
    hx: Hx,
) -> PageResult {
    s.db.fresh_summaries().await?;
    let all = summaries::kernel_cells(s.db.pool(), &name).await?;
    if all.is_empty() {
        return Err(not_found(format!("no live entries of a kernel named {name:?}")));
    }
    let filter = filter_of(&all, &q);
    let mut cells = match picked(&q.machine) {
        Some(m) => summaries::kernel_cells_on(s.db.pool(), &name, m).await?,
        None => all,
    };
    cells.retain(|c| keeps(&q, &c.backend, &c.triton_version));
    let mut configs = summaries::kernel_autotune_configs(s.db.pool(), &name).await?;
    configs.retain(|a| {
        keeps(&q, &a.backend, &a.triton_version)
            && picked(&q.machine).is_none_or(|m| a.machines.split(',').any(|x| x == m))
    });
    let (identical, same_code) = summaries::kernel_identical(s.db.pool(), &name).await?;
    // the samples' names as the cells hold them; by id only where a cell does not (yet)
    let mut names: HashMap<i64, (String, String)> =
        cells.iter().flat_map(|c| c.sample_names()).map(|(id, m, k)| (id, (m, k))).collect();
    let ids: Vec<i64> = cells
        .iter()
        .flat_map(|c| [c.sample_min, c.sample_max])
        .filter(|id| !names.contains_key(id))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !ids.is_empty() {
        names.extend(entries::entry_names(s.db.pool(), &ids).await?.into_iter().map(|(id, m, k)| (id, (m, k))));
    }
    let live: i64 = cells.iter().map(|c| c.entries).sum();
    let first = crate::db::Page { limit: 21, offset: 0 };
    let mut decisions = crate::db::decisions::kernel_decisions(s.db.pool(), &name, live, first).await?;
    let more_decisions = decisions.len() > 20;
    decisions.truncate(20);
    let mut d = build(name, cells, &configs, (identical, same_code), &names);
    (d.decisions, d.more_decisions) = (super::autotune::kernel_views(decisions), more_decisions);
    d.stages = stages_view(&crate::db::stages::of_kernel(s.db.pool(), &d.name, picked(&q.machine)).await?);
    d.filter = filter;
    hx.render(&Page { title: d.name.clone(), d }, |p| p.as_fragment().render())
}

fn kwargs(config_json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(config_json).unwrap_or_default();
    let kw = v
        .get("kwargs")
        .and_then(|k| k.as_object())
        .map(|o| o.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "));
    let mut s = kw.unwrap_or_default();
    for k in ["num_warps", "num_stages", "num_ctas", "maxnreg"] {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            s.push_str(&format!(" {k}={x}"));
        }
    }
    s.trim().to_string()
}

/// Whether an autotune config could have produced entries with these TTIR shapes: its block
/// sizes (integer kwargs ≥ 16) are exactly the dimensions seen in the shapes. Constexprs are not
/// in the metadata, so this is the evidence there is; without shapes every config fits.
fn fits_shapes(blocks: &[i64], shapes: &str) -> bool {
    let dims: BTreeSet<i64> = shapes.split([',', 'x']).filter_map(|t| t.trim().parse().ok()).collect();
    let blocks: BTreeSet<i64> = blocks.iter().copied().collect();
    dims.is_empty() || blocks.is_empty() || blocks == dims
}

/// Each config's block sizes, parsed once per page (not once per cell and grid).
type Blocks<'a> = HashMap<&'a str, Vec<i64>>;

/// Block sizes of a config in the order its kwargs were written (Triton keeps the dict order).
fn block_sizes(config_json: &str) -> Vec<i64> {
    let v: serde_json::Value = serde_json::from_str(config_json).unwrap_or_default();
    v.get("kwargs")
        .and_then(|k| k.as_object())
        .map(|o| o.values().filter_map(|x| x.as_i64()).filter(|x| *x >= 16).collect())
        .unwrap_or_default()
}

/// How many of the 2-D tile shapes `AxB` list A before B in the config's kwargs order.
fn order_agreement(blocks: &[i64], shapes: &str) -> usize {
    let pos = |d: i64| blocks.iter().position(|b| *b == d);
    shapes
        .split(',')
        .filter_map(|s| s.split_once('x'))
        .filter_map(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .filter(|&(a, b): &(i64, i64)| matches!((pos(a), pos(b)), (Some(i), Some(j)) if i < j))
        .count()
}

/// Of configs whose block sizes are the same set (BM=128 BN=64 and BM=64 BN=128 both fit a grid
/// whose tiles use 128, 64 and 32), keep those whose kwargs order agrees best with the order of
/// the dimensions in the TTIR's 2-D tiles: kernels write `BM, BN, BK` and build `BM x BN`,
/// `BM x BK` tiles. With no such evidence (a tie), all of them stay.
fn best_order_fit<'a>(fit: Vec<&'a AutotuneConfig>, shapes: &str, blocks: &Blocks) -> Vec<&'a AutotuneConfig> {
    let score = |a: &AutotuneConfig| order_agreement(&blocks[a.config_json.as_str()], shapes);
    let best = fit.iter().map(|a| score(a)).max().unwrap_or(0);
    fit.into_iter().filter(|a| score(a) == best).collect()
}

fn timing(a: &AutotuneConfig) -> Timing {
    Timing {
        measured_in: match &a.backend {
            Some(_) => grid_title(&a.backend, &a.arch, &a.triton_version),
            None => "a cache with no compiled entry of this kernel".into(),
        },
        kwargs: kwargs(&a.config_json),
        // Triton records a config that failed to compile or run (out of resources) as Infinity.
        ms: a.best_ms.filter(|m| m.is_finite()).map(|m| format!("{m:.4} ms")).unwrap_or_else(|| "failed (inf)".into()),
        runs: a.runs,
        wins: a.wins,
        machines: sorted_csv(&a.machines),
        winner: a.wins > 0,
    }
}

/// "b, a, c" → "a, b, c"
fn sorted_csv(csv: &str) -> String {
    let set: BTreeSet<&str> = csv.split(',').filter(|s| !s.is_empty()).collect();
    set.into_iter().collect::<Vec<_>>().join(", ")
}

fn range(lo: Option<i64>, hi: Option<i64>) -> Option<String> {
    let (lo, hi) = (lo?, hi?);
    Some(if lo == hi { lo.to_string() } else { format!("{lo}–{hi}") })
}

fn link(id: i64, names: &HashMap<i64, (String, String)>) -> Option<EntryLink> {
    let (m, k) = names.get(&id)?;
    Some(EntryLink {
        label: format!("{m}:{}", k.get(..10).unwrap_or(k)),
        href: format!("/entries/{}/{}", fmt::enc(m), fmt::enc(k)),
    })
}

/// Each config's [`Timing`], made once per page (by the config's address in the page's list):
/// a config shows in many cells, and each made its JSON parsed again.
type Timed = HashMap<usize, Timing>;

fn addr(a: &AutotuneConfig) -> usize {
    a as *const AutotuneConfig as usize
}

fn cell(c: &VariantCell, configs: &[&AutotuneConfig], timed: &Timed, names: &HashMap<i64, (String, String)>) -> Cell {
    let mut resources = vec![];
    for (label, r) in [
        ("registers", range(c.reg_min, c.reg_max)),
        ("spills", range(c.spill_min, c.spill_max)),
        ("shared", range(c.shared_min, c.shared_max)),
    ] {
        if let Some(r) = r {
            resources.push(format!("{label} {r}"));
        }
    }
    let mut ids = vec![c.sample_min];
    if c.sample_max != c.sample_min {
        ids.push(c.sample_max);
    }
    let samples: Vec<EntryLink> = ids.into_iter().filter_map(|id| link(id, names)).collect();
    let timings: Vec<Timing> = configs.iter().take(CELL_TIMINGS).map(|a| timed[&addr(a)].clone()).collect();
    Cell {
        count: c.entries,
        more: c.entries - samples.len() as i64,
        samples,
        machines: sorted_csv(&c.machines),
        resources,
        winner: configs.iter().any(|a| a.wins > 0),
        timings_more: configs.len().saturating_sub(CELL_TIMINGS),
        timings,
        best: c.best_config,
        shared_binary: c.shared_binary,
        shared_code: c.shared_code,
    }
}

/// "cuda / sm_90 · Triton 3.6.0": what a grid (and an autotune run) was compiled for.
fn grid_title(backend: &Option<String>, arch: &Option<String>, version: &Option<String>) -> String {
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    format!("{} / {} · Triton {}", o(backend), o(arch), version.as_deref().unwrap_or("unknown"))
}

/// (backend, arch, version, signature, shapes) of one grid.
type GridKey = (Option<String>, Option<String>, Option<String>, String, String);

fn build(
    name: String,
    cells: Vec<VariantCell>,
    configs: &[AutotuneConfig],
    (identical, same_code): (i64, i64),
    names: &HashMap<i64, (String, String)>,
) -> Kernel {
    let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    let timed: Timed = configs.iter().map(|a| (addr(a), timing(a))).collect();
    let mut groups: BTreeMap<GridKey, Vec<&VariantCell>> = BTreeMap::new();
    let mut others = vec![];
    for c in &cells {
        if !c.kind.is_empty() {
            others.push(Other { kind: c.kind.clone(), cell: cell(c, &[], &timed, names) });
            continue;
        }
        groups
            .entry((
                c.backend.clone(),
                c.arch.clone(),
                c.triton_version.clone(),
                o(&c.signature),
                c.shapes.clone().unwrap_or_default(),
            ))
            .or_default()
            .push(c);
    }
    others.sort_by(|a, b| a.kind.cmp(&b.kind));
    let blocks: Blocks = configs.iter().map(|a| (a.config_json.as_str(), block_sizes(&a.config_json))).collect();
    let grids = groups
        .into_iter()
        .map(|((backend, arch, version, signature, shapes), cs)| {
            // only the runs measured in a cache of this backend, arch and version (and, per cell
            // below, on a machine that has entries in the cell)
            let measured: Vec<&AutotuneConfig> = configs
                .iter()
                .filter(|a| {
                    a.backend.is_some() && a.backend == backend && a.arch == arch && a.triton_version == version
                })
                .collect();
            let warps: BTreeSet<Option<i64>> = cs.iter().map(|c| c.num_warps).collect();
            let stages: BTreeSet<Option<i64>> = cs.iter().map(|c| c.num_stages).collect();
            let rows = stages
                .iter()
                .map(|st| {
                    let row = warps
                        .iter()
                        .map(|w| {
                            let here: Vec<&&VariantCell> =
                                cs.iter().filter(|c| c.num_warps == *w && c.num_stages == *st).collect();
                            match here.as_slice() {
                                [] => Cell::default(),
                                [..] => {
                                    // timed on a machine whose entries the cell holds
                                    let on: BTreeSet<&str> = here.iter().flat_map(|c| c.machines.split(',')).collect();
                                    let fit: Vec<&AutotuneConfig> = measured
                                        .iter()
                                        .copied()
                                        // cheapest test first: a matmul kernel's page tests 120
                                        // configs against 79 cells
                                        .filter(|a| a.num_warps == *w && a.num_stages == *st)
                                        .filter(|a| fits_shapes(&blocks[a.config_json.as_str()], &shapes))
                                        .filter(|a| a.machines.split(',').any(|m| on.contains(m)))
                                        .collect();
                                    let t = best_order_fit(fit, &shapes, &blocks);
                                    merge(here.iter().map(|c| cell(c, &t, &timed, names)).collect())
                                }
                            }
                        })
                        .collect();
                    (format!("num_stages={}", fmt::num(*st)), row)
                })
                .collect();
            Grid {
                title: grid_title(&backend, &arch, &version),
                signature,
                shapes,
                warps: warps.iter().map(|w| format!("num_warps={}", fmt::num(*w))).collect(),
                rows,
            }
        })
        .collect();
    Kernel {
        enc: fmt::enc(&name),
        entries: cells.iter().map(|c| c.entries).sum(),
        grids,
        others,
        configs: configs.iter().map(|a| timed[&addr(a)].clone()).collect(),
        identical,
        same_code,
        decisions: vec![],
        more_decisions: false,
        stages: Stages::default(),
        filter: Filter::default(),
        name,
    }
}

/// One grid cell from the summary rows that fall in it (rows differing only in columns the grid
/// does not show, e.g. a NULL and a missing value, add up).
fn merge(mut parts: Vec<Cell>) -> Cell {
    let mut c = parts.remove(0);
    for p in parts {
        c.count += p.count;
        c.more += p.more + p.samples.len() as i64;
        c.best += p.best;
        c.shared_binary += p.shared_binary;
        c.shared_code += p.shared_code;
        let ms: BTreeSet<String> =
            c.machines.split(", ").chain(p.machines.split(", ")).filter(|s| !s.is_empty()).map(String::from).collect();
        c.machines = ms.into_iter().collect::<Vec<_>>().join(", ");
    }
    c
}
