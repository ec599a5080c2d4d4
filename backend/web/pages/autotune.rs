//! `/autotune` — autotune decisions, paged (machine and kernel filters in the query string):
//! Inductor's max-autotune choices and Triton's `.autotune.json` results, each with its winner,
//! the winner's margin over the runner-up and whether aten or a Triton template won; and
//! `/autotune/{id}` — one Inductor decision, every choice with the cache entries it was compiled
//! into, or why none is shown. The view types of the kernel page's decisions live here too.

use super::{Hx, PageResult, not_found};
use crate::db::{self, decisions, inductor};
use crate::fmt;
use crate::model::AutotuneChoice;
use crate::web::AppState;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;

/// Decisions per page.
pub const PAGE_SIZE: i64 = 50;

#[derive(serde::Deserialize, Default)]
pub struct Filter {
    #[serde(default)]
    pub machine: String,
    #[serde(default)]
    pub kernel: String,
    pub page: Option<i64>,
}

/// One decision as a row of the list.
pub struct Row {
    pub source: &'static str,
    pub machine: String,
    pub op: String,
    /// Triton rows: the kernel's page, whose grids show which variants each config fits.
    pub op_href: Option<String>,
    pub key: String,
    pub precision: String,
    /// The decision's own page (Inductor) or the `.autotune.json` entry's (Triton).
    pub href: String,
    /// The winner as a person reads it ([`config_text`]); `winner_raw` as recorded.
    pub winner: String,
    pub winner_raw: String,
    pub kind: &'static str,
    pub runner_up: String,
    pub margin: String,
    pub choices: usize,
}

#[derive(Template)]
#[template(path = "autotune.html", blocks = ["fragment"])]
struct ListPage {
    title: String,
    f: Filter,
    rows: Vec<Row>,
    first: i64,
    last: i64,
    prev: Option<String>,
    next: Option<String>,
}

fn href(f: &Filter, page: i64) -> String {
    let mut parts = vec![];
    for (k, v) in [("machine", &f.machine), ("kernel", &f.kernel)] {
        if !v.is_empty() {
            parts.push(format!("{k}={}", fmt::enc(v)));
        }
    }
    if page > 1 {
        parts.push(format!("page={page}"));
    }
    if parts.is_empty() { "/autotune".into() } else { format!("/autotune?{}", parts.join("&")) }
}

/// `+0.0012 ms (4.9%)`: a margin in words; `—` when there is no runner-up.
pub fn margin_text(ms: Option<f64>, pct: Option<f64>) -> String {
    match (ms, pct) {
        (Some(ms), Some(p)) => format!("{ms:.4} ms ({p:.1}%)"),
        (Some(ms), None) => format!("{ms:.4} ms"),
        _ => "—".into(),
    }
}

pub async fn list(State(s): State<AppState>, Query(f): Query<Filter>, hx: Hx) -> PageResult {
    let page = f.page.unwrap_or(1).clamp(1, 1_000_000);
    let some = |v: &str| Some(v.trim()).filter(|v| !v.is_empty()).map(str::to_string);
    let (machine, kernel) = (some(&f.machine), some(&f.kernel));
    let mut rows = inductor::rows(
        &s.db,
        machine.as_deref(),
        kernel.as_deref(),
        db::Page { limit: PAGE_SIZE + 1, offset: (page - 1) * PAGE_SIZE },
    )
    .await?;
    let more = rows.len() as i64 > PAGE_SIZE;
    rows.truncate(PAGE_SIZE as usize);
    let rows: Vec<Row> = rows.into_iter().map(row).collect();
    let title = match (&machine, &kernel) {
        (Some(m), _) => format!("Autotune decisions on {m}"),
        (None, Some(k)) => format!("Autotune decisions of {k}"),
        _ => "Autotune decisions".into(),
    };
    let (prev, next) = ((page > 1).then(|| href(&f, page - 1)), more.then(|| href(&f, page + 1)));
    let first = (page - 1) * PAGE_SIZE + 1;
    let last = first + rows.len() as i64 - 1;
    let p = ListPage { title, rows, first, last, prev, next, f };
    hx.render(&p, |p| p.as_fragment().render())
}

fn row(r: inductor::AutotuneRow) -> Row {
    let href = match (r.id, &r.entry) {
        (Some(id), _) => format!("/autotune/{id}"),
        (None, Some(key)) => format!("/entries/{}/{}", fmt::enc(&r.machine), fmt::enc(key)),
        _ => String::new(),
    };
    Row {
        source: r.source,
        op_href: (r.source == "triton").then(|| format!("/kernels/{}#autotune", fmt::enc(&r.op))),
        href,
        kind: r.winner_kind,
        runner_up: r.runner_up.map(|c| config_text(&c)).unwrap_or_else(|| "—".into()),
        margin: margin_text(r.margin_ms, r.margin_pct),
        choices: r.choices.len(),
        machine: r.machine,
        op: r.op,
        key: r.key,
        precision: r.precision,
        winner: config_text(&r.winner),
        winner_raw: r.winner,
    }
}

/// A Triton autotune config (`.autotune.json`'s JSON: `kwargs`, `num_warps`, `num_stages`, …) as
/// a person reads it: `BM=64 BN=128 BK=32 GROUP=8 · 4 warps · 3 stages`, with `num_ctas` and
/// `maxnreg` only where set otherwise than by default. Anything else (an Inductor choice's name)
/// is shown as it is.
pub fn config_text(c: &str) -> String {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(c) else {
        return c.to_string();
    };
    let mut parts = vec![];
    if let Some(serde_json::Value::Object(kw)) = o.get("kwargs") {
        let kw: Vec<String> = kw
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}={s}"),
                v => format!("{k}={v}"),
            })
            .collect();
        if !kw.is_empty() {
            parts.push(kw.join(" "));
        }
    }
    let num = |k: &str| o.get(k).and_then(|v| v.as_i64());
    if let Some(w) = num("num_warps") {
        parts.push(format!("{w} warps"));
    }
    if let Some(st) = num("num_stages") {
        parts.push(format!("{st} stages"));
    }
    if let Some(n) = num("num_ctas").filter(|&n| n != 1) {
        parts.push(format!("{n} CTAs"));
    }
    if let Some(r) = num("maxnreg").or_else(|| num("maxreg")) {
        parts.push(format!("maxnreg {r}"));
    }
    if parts.is_empty() { c.to_string() } else { parts.join(" · ") }
}

/// One choice of a decision on its page.
pub struct ChoiceView {
    pub rank: usize,
    pub name: String,
    pub kind: &'static str,
    pub ms: String,
    /// Behind the winner: `+0.0012 ms (4.9%)`; empty for the winner.
    pub behind: String,
    pub winner: bool,
    pub entries: Vec<EntryLink>,
    /// Why no entry is linked (empty when some are), or why several are.
    pub note: String,
}

pub struct EntryLink {
    pub href: String,
    pub key: String,
    /// `triton_mm · num_warps=8 num_stages=4 · shapes 64x128,…`
    pub what: String,
}

#[derive(Template)]
#[template(path = "autotune_decision.html")]
struct DecisionPage {
    title: String,
    r: inductor::AutotuneRow,
    enc_machine: String,
    margin: String,
    choices: Vec<ChoiceView>,
}

pub async fn decision(State(s): State<AppState>, Path(id): Path<String>) -> PageResult {
    let id: i64 = id.parse().map_err(|_| not_found(format!("no autotune decision {id:?}")))?;
    let d =
        decisions::decision(s.db.pool(), id).await?.ok_or_else(|| not_found(format!("no autotune decision {id}")))?;
    let win_ms = d.row.choices.iter().find(|c| c.name == d.row.winner).and_then(|c| c.ms);
    let enc_machine = fmt::enc(&d.row.machine);
    let choices = (d.row.choices.iter().zip(d.linked))
        .enumerate()
        .map(|(rank, (c, linked))| choice_view(rank, c, &d.row.winner, win_ms, &enc_machine, linked))
        .collect();
    let title = format!("{} on {}", d.row.op, d.row.machine);
    let margin = margin_text(d.row.margin_ms, d.row.margin_pct);
    Ok(super::HtmlTemplate(DecisionPage { title, r: d.row, enc_machine, margin, choices }).into_response())
}

fn choice_view(
    rank: usize,
    c: &AutotuneChoice,
    winner: &str,
    win_ms: Option<f64>,
    machine: &str,
    linked: Vec<decisions::LinkedEntry>,
) -> ChoiceView {
    let kind = inductor::choice_kind(&c.name);
    let module = inductor::choice_module(&c.name);
    let note = match (kind, module, linked.len()) {
        ("aten", _, _) => {
            "aten extern kernel (cuBLAS and the like): not a Triton kernel, no cache entry to link".into()
        }
        (_, None, _) => "no evidence: the name ends with no Inductor module hash to match entries by".into(),
        (_, Some(m), 0) => format!(
            "no evidence: no live entry of this machine was compiled from Inductor module {m}.py (a benchmark-only \
             compile in a subprocess whose cache was not kept, a pruned cache, or a cache dir not scanned)"
        ),
        (_, Some(m), 1) => format!("compiled from Inductor module {m}.py"),
        (_, Some(m), n) => format!(
            "{n} entries compiled from Inductor module {m}.py: the same source compiled under different keys \
             (options, target or Triton version); all are listed"
        ),
    };
    let behind = match (c.ms, win_ms) {
        _ if c.name == winner => String::new(),
        (Some(ms), Some(w)) => format!("+{}", margin_text(Some(ms - w), (w > 0.0).then(|| (ms - w) / w * 100.0))),
        _ => String::new(),
    };
    let entries = linked
        .into_iter()
        .map(|e| {
            let mut what = e.kernel.unwrap_or_else(|| "?".into());
            let opt = |k: &str, v: Option<i64>| v.map(|v| format!(" {k}={v}")).unwrap_or_default();
            what.push_str(&format!(" ·{}{}", opt("num_warps", e.num_warps), opt("num_stages", e.num_stages)));
            if let Some(s) = e.shapes.filter(|s| !s.is_empty()) {
                what.push_str(&format!(" · shapes {s}"));
            }
            EntryLink { href: format!("/entries/{machine}/{}", fmt::enc(&e.key)), key: e.key, what }
        })
        .collect();
    ChoiceView {
        rank: rank + 1,
        name: c.name.clone(),
        kind,
        ms: c.ms.map(|m| format!("{m:.4}")).unwrap_or_else(|| "failed".into()),
        behind,
        winner: c.name == winner,
        entries,
        note,
    }
}

/// A decision on a kernel's page: the kernel's choice there and how it fared.
pub struct KernelDecisionView {
    pub href: String,
    pub machine: String,
    pub op: String,
    pub key: String,
    pub choice: String,
    pub won: bool,
    /// `won by 0.0002 ms (0.8%) over triton_mm-c…` or `lost to addmm-… by …`
    pub outcome: String,
}

/// The kernel page's view of the decisions it took part in.
pub fn kernel_views(rows: Vec<decisions::KernelDecision>) -> Vec<KernelDecisionView> {
    rows.into_iter()
        .map(|d| {
            let won = d.mine.name == d.winner;
            let outcome = if won {
                let (ru, ms, pct) = inductor::margin(&d.choices, &d.winner);
                match ru {
                    Some(ru) => format!("won by {} over {ru}", margin_text(ms, pct)),
                    None => "won (no other timed choice)".into(),
                }
            } else {
                let w = d.choices.iter().find(|c| c.name == d.winner).and_then(|c| c.ms);
                match (d.mine.ms, w) {
                    (Some(m), Some(w)) => format!(
                        "lost to {} by {}",
                        d.winner,
                        margin_text(Some(m - w), (w > 0.0).then(|| (m - w) / w * 100.0))
                    ),
                    _ => format!("lost to {} (failed to benchmark)", d.winner),
                }
            };
            KernelDecisionView {
                href: format!("/autotune/{}", d.id),
                machine: d.machine,
                op: d.op,
                key: format!("{} {}", d.key, d.precision),
                choice: d.mine.name,
                won,
                outcome,
            }
        })
        .collect()
}

/// The entry page's lines: `triton_mm-c… in addmm [(…)]: won` or `…: rank 3 of 20, +0.0012 ms (4.9%)`.
pub fn entry_views(rows: Vec<decisions::EntryChoice>) -> Vec<(String, String)> {
    rows.into_iter()
        .map(|c| {
            let fared = match (c.rank, c.ms, c.winner_ms) {
                (0, _, _) => "won".to_string(),
                (_, Some(m), Some(w)) => format!(
                    "rank {} of {}, {} behind the winner",
                    c.rank + 1,
                    c.choices,
                    margin_text(Some(m - w), (w > 0.0).then(|| (m - w) / w * 100.0))
                ),
                _ => format!("rank {} of {}, failed to benchmark", c.rank + 1, c.choices),
            };
            (format!("/autotune/{}", c.id), format!("{} in {} {}: {fared}", c.name, c.op, c.key))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_decision_lost_names_the_winner_and_the_gap() {
        let ch = |n: &str, ms| AutotuneChoice { name: n.into(), ms };
        let d = |mine: AutotuneChoice| decisions::KernelDecision {
            id: 7,
            machine: "m".into(),
            op: "addmm".into(),
            key: "k".into(),
            precision: "highest".into(),
            winner: "addmm-x".into(),
            choices: vec![ch("addmm-x", Some(0.01)), ch("triton_mm-a", Some(0.0125)), ch("triton_mm-b", None)],
            mine,
        };
        let v = kernel_views(vec![d(ch("triton_mm-a", Some(0.0125))), d(ch("triton_mm-b", None))]);
        assert!(!v[0].won);
        assert_eq!(v[0].outcome, "lost to addmm-x by 0.0025 ms (25.0%)");
        assert_eq!(v[1].outcome, "lost to addmm-x (failed to benchmark)");
        let w = kernel_views(vec![d(ch("addmm-x", Some(0.01)))]);
        assert!(w[0].won);
        assert_eq!(w[0].outcome, "won by 0.0025 ms (25.0%) over triton_mm-a");
    }
}
