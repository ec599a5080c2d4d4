//! `/entries/{machine}/{key}` — one cache entry: metadata, artifacts, resources, group file, an
//! IR viewer (`?ir=ttgir`, swapped by htmx as `entry_ir_partial.html`) and its kernel's other
//! variants; `/entries/{machine}/{key}/raw/{artifact}` serves an IR file as plain text.

use super::{HtmlTemplate, Hx, PageResult, not_found, text};
use crate::db::{artifacts, entries, summaries};
use crate::fmt;
use crate::web::AppState;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::Value;

/// Other variants of the kernel listed on an entry page; the kernel page has them all.
pub const VARIANTS: usize = 50;

/// IR tabs, in pipeline order.
pub const IR_EXTS: &[&str] = &["source", "ttir", "ttgir", "llir", "ptx", "amdgcn"];
/// The viewer shows at most this many lines...
pub const MAX_LINES: usize = 20_000;
/// ...and at most this many bytes of one IR file.
pub const MAX_BYTES: usize = 2 << 20;

pub struct Ir {
    /// (ext, href, active)
    pub tabs: Vec<(String, String, bool)>,
    pub name: String,
    pub raw_href: String,
    pub gutter: String,
    pub code: String,
    pub total_lines: usize,
    pub shown_lines: usize,
    /// Why the text is not shown, when it is not: the scanner keeps no text over its storage
    /// limit (and none that is not UTF-8).
    pub missing: Option<String>,
}

pub struct Entry {
    pub e: entries::EntryRow,
    pub kernel_href: Option<String>,
    pub nearest_href: String,
    pub created: String,
    pub size: String,
    pub sits_in: String,
    /// The cache dir (scan root) it was found in.
    pub cache_dir: String,
    pub meta: Vec<(String, String)>,
    pub artifacts: Vec<(String, String, String, Option<String>)>,
    pub resources: Vec<(String, String)>,
    pub group: Vec<(String, String)>,
    pub group_missing: Vec<String>,
    pub written_at: Option<String>,
    pub best_config: bool,
    /// Inductor max-autotune decisions this entry took part in as a choice: (href, words).
    pub autotune: Vec<(String, String)>,
    pub same_binary: Vec<(String, String)>,
    pub variants: Vec<(String, String)>,
    /// Other live entries of the kernel beyond the [`VARIANTS`] listed.
    pub variants_more: i64,
    pub ir: Ir,
    /// The stage columns of `compiles`, in pipeline order.
    pub stage_names: Vec<String>,
    /// Its latest compiles the hook timed.
    pub compiles: Vec<CompileRow>,
}

/// A compile as the entry page lists it: (when, total, one time per stage column).
pub type CompileRow = (String, String, Vec<String>);

/// Compiles of an entry listed with their stage times (the latest).
pub const COMPILES: i64 = 10;

/// The stage columns and rows of an entry's compiles.
fn compile_rows(cs: Vec<crate::db::stages::Compile>) -> (Vec<String>, Vec<CompileRow>) {
    let mut names: Vec<String> = vec![];
    for c in &cs {
        for (k, _) in &c.stages {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names.sort_by_key(|k| (crate::db::stages::ORDER.iter().position(|s| s == k).unwrap_or(usize::MAX), k.clone()));
    let rows = cs
        .into_iter()
        .map(|c| {
            let cells = names
                .iter()
                .map(|n| c.stages.iter().find(|(k, _)| k == n).map_or("–".into(), |(_, ms)| fmt::ms(*ms)))
                .collect();
            (fmt::time(Some(c.ts)), c.compile_ms.map_or("–".into(), fmt::ms), cells)
        })
        .collect();
    (names, rows)
}

#[derive(Template)]
#[template(path = "entry.html")]
struct Page {
    title: String,
    d: Entry,
}

#[derive(Template)]
#[template(path = "entry_ir_partial.html")]
struct IrPartial {
    ir: Ir,
}

#[derive(serde::Deserialize)]
pub struct EntryQuery {
    ir: Option<String>,
}

fn href(machine: &str, key: &str) -> String {
    format!("/entries/{}/{}", fmt::enc(machine), fmt::enc(key))
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn object_rows(json: Option<&str>) -> Vec<(String, String)> {
    let v: Value = json.and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default();
    v.as_object().map(|o| o.iter().map(|(k, v)| (k.clone(), compact(v))).collect()).unwrap_or_default()
}

pub async fn page(
    State(s): State<AppState>,
    Path((machine, key)): Path<(String, String)>,
    Query(q): Query<EntryQuery>,
    hx: Hx,
) -> PageResult {
    let Some(e) = entries::entry(s.db.pool(), &machine, &key).await? else {
        return short_key(&s, &machine, &key, q.ir.as_deref()).await;
    };
    let ir = ir(&s, &e, q.ir.as_deref()).await?;
    if hx.0 {
        return Ok(HtmlTemplate(IrPartial { ir }).into_response());
    }
    let d = load(&s, e, ir).await?;
    let title = format!("{} {}", d.e.kernel.as_deref().unwrap_or("entry"), d.e.key.get(..10).unwrap_or(&d.e.key));
    Ok(HtmlTemplate(Page { title, d }).into_response())
}

/// No entry has `key` on `machine`: the one whose key starts with it (a short key, as the grids
/// show it) at its own URL, the candidates when several do, else 404.
async fn short_key(s: &AppState, machine: &str, key: &str, ir: Option<&str>) -> PageResult {
    use crate::answers::load::{ExplainError, resolve};
    let page = |id: &str| {
        let (m, k) = id.rsplit_once(':').unwrap_or((machine, key));
        format!("{}{}", href(m, k), ir.map(|i| format!("?ir={}", fmt::enc(i))).unwrap_or_default())
    };
    match resolve(s.db.pool(), &format!("{machine}:{key}")).await {
        Ok(full) if full.rsplit_once(':').is_some_and(|(_, k)| k != key) => {
            Ok(axum::response::Redirect::to(&page(&full)).into_response())
        }
        Ok(_) => Err(not_found(format!("no entry {key:?} on machine {machine:?}"))),
        Err(ExplainError::Ambiguous(x)) => super::search::candidates(&x, page),
        Err(ExplainError::Bad(_) | ExplainError::NotFound(_)) => {
            Err(not_found(format!("no entry {key:?} on machine {machine:?}")))
        }
        Err(e) => Err(crate::web::error::AppError::from(e).into()),
    }
}

/// The group file's children, the ones missing on disk, and where the writer put them.
type Group = (Vec<(String, String)>, Vec<String>, Option<String>);

fn group(json: Option<&str>) -> Group {
    let g: Value = json.and_then(|g| serde_json::from_str(g).ok()).unwrap_or_default();
    let children = g.get("children").and_then(|c| c.as_object());
    let missing = g.get("missing").and_then(|m| m.as_array());
    (
        children.map(|o| o.iter().map(|(k, v)| (k.clone(), compact(v))).collect()).unwrap_or_default(),
        missing.map(|a| a.iter().map(compact).collect()).unwrap_or_default(),
        g.get("written_at").and_then(|w| w.as_str()).map(str::to_string),
    )
}

fn variant_link(v: &entries::EntryRow) -> (String, String) {
    if v.num_warps.is_none() && v.num_stages.is_none() {
        // autotune results and launchers: no version or options to show
        return (format!("{} · {}:{}", v.kind, v.machine, v.key.get(..10).unwrap_or(&v.key)), href(&v.machine, &v.key));
    }
    let label = format!(
        "{} · w{} s{} · {}:{}",
        v.triton_version.as_deref().unwrap_or("?"),
        fmt::num(v.num_warps),
        fmt::num(v.num_stages),
        v.machine,
        v.key.get(..10).unwrap_or(&v.key)
    );
    (label, href(&v.machine, &v.key))
}

async fn load(s: &AppState, e: entries::EntryRow, ir: Ir) -> Result<Entry, super::PageError> {
    let det = entries::entry_detail(s.db.pool(), e.id).await?;
    let (group, group_missing, written_at) = group(det.group_json.as_deref());
    let mut variants = match &e.kernel {
        Some(k) => entries::kernel_entries(s.db.pool(), k, VARIANTS as i64 + 1).await?,
        None => vec![],
    };
    variants.retain(|v| v.id != e.id);
    let variants_more = match &e.kernel {
        // a full list may hide more: the live entries of the kernel, less this one (if live) and
        // those listed
        Some(k) if variants.len() >= VARIANTS => {
            let live = summaries::kernel_live_entries(s.db.pool(), k).await?;
            (live - i64::from(e.removed_at.is_none()) - VARIANTS as i64).max(0)
        }
        _ => 0,
    };
    let same_binary = match &e.binary_sha256 {
        Some(h) => entries::same_binary(s.db.pool(), h, &e.key, 20).await?,
        None => vec![],
    };
    let base = href(&e.machine, &e.key);
    let (stage_names, compiles) =
        compile_rows(crate::db::stages::of_entry(s.db.pool(), &e.machine, &e.key, COMPILES).await?);
    Ok(Entry {
        stage_names,
        compiles,
        kernel_href: e.kernel.as_ref().map(|k| format!("/kernels/{}", fmt::enc(k))),
        nearest_href: format!("{base}/nearest"),
        created: fmt::time(e.created_at),
        size: fmt::bytes(e.bytes),
        sits_in: format!("{}/{}", det.root, det.dir),
        cache_dir: det.root.clone(),
        meta: object_rows(det.metadata_json.as_deref()),
        artifacts: e
            .artifacts
            .iter()
            .map(|a| {
                let raw = IR_EXTS.contains(&a.ext.as_str()).then(|| format!("{base}/raw/{}", fmt::enc(&a.name)));
                (a.name.clone(), fmt::bytes(a.bytes), a.sha256.clone(), raw)
            })
            .collect(),
        resources: object_rows(det.resources_json.as_deref()),
        group,
        group_missing,
        written_at,
        best_config: entries::is_best_config(s.db.pool(), &e.machine, &e.key).await?,
        autotune: super::autotune::entry_views(crate::db::decisions::entry_choices(s.db.pool(), e.id).await?),
        same_binary: same_binary.into_iter().map(|(m, k)| (format!("{m}:{k}"), href(&m, &k))).collect(),
        variants: variants.iter().take(VARIANTS).map(variant_link).collect(),
        variants_more,
        ir,
        e,
    })
}

/// The IR viewer for the tab `want` (default: ttgir, else the first IR present).
async fn ir(s: &AppState, e: &entries::EntryRow, want: Option<&str>) -> Result<Ir, super::PageError> {
    let present: Vec<&artifacts::ArtifactRow> =
        IR_EXTS.iter().filter_map(|x| e.artifacts.iter().find(|a| a.ext == *x)).collect();
    let chosen = want
        .and_then(|w| present.iter().find(|a| a.ext == w))
        .or_else(|| present.iter().find(|a| a.ext == "ttgir"))
        .or(present.first())
        .copied();
    let base = href(&e.machine, &e.key);
    let tabs = present
        .iter()
        .map(|a| (a.ext.clone(), format!("{base}?ir={}", a.ext), chosen.is_some_and(|c| c.name == a.name)))
        .collect();
    let Some(a) = chosen else {
        return Ok(Ir {
            tabs,
            name: String::new(),
            raw_href: String::new(),
            gutter: String::new(),
            code: String::new(),
            total_lines: 0,
            shown_lines: 0,
            missing: None,
        });
    };
    let content = artifacts::blob(s.db.pool(), &a.sha256).await?;
    let text = content.as_deref().unwrap_or("");
    let total_lines = text.lines().count();
    let mut code = String::new();
    let mut shown_lines = 0;
    for line in text.lines().take(MAX_LINES) {
        if code.len() + line.len() + 1 > MAX_BYTES {
            break;
        }
        code.push_str(line);
        code.push('\n');
        shown_lines += 1;
    }
    let gutter = (1..=shown_lines).map(|i| i.to_string()).collect::<Vec<_>>().join("\n");
    Ok(Ir {
        tabs,
        raw_href: format!("{base}/raw/{}", fmt::enc(&a.name)),
        name: a.name.clone(),
        gutter,
        code,
        total_lines,
        shown_lines,
        missing: content.is_none().then(|| not_stored(a.bytes)),
    })
}

/// Why an IR file's text is not in the database.
fn not_stored(bytes: i64) -> String {
    let limit = crate::scan::entry::MAX_TEXT_BYTES as i64;
    if bytes > limit {
        format!(
            "is {}, over the scanner's {} storage limit for IR text: its text was not stored",
            fmt::bytes(bytes),
            fmt::bytes(limit)
        )
    } else {
        "was not stored (its text is not UTF-8)".into()
    }
}

/// `GET /entries/{machine}/{key}/raw/{artifact}`: an IR file as plain text.
pub async fn raw(State(s): State<AppState>, Path((machine, key, name)): Path<(String, String, String)>) -> PageResult {
    let e = entries::entry(s.db.pool(), &machine, &key)
        .await?
        .ok_or_else(|| not_found(format!("no entry {key:?} on machine {machine:?}")))?;
    let a = artifacts::artifact(s.db.pool(), e.id, &name)
        .await?
        .ok_or_else(|| not_found(format!("entry has no artifact {name:?}")))?;
    let body = artifacts::blob(s.db.pool(), &a.sha256).await?.ok_or_else(|| {
        if IR_EXTS.contains(&a.ext.as_str()) {
            not_found(format!("{name} {}", not_stored(a.bytes)))
        } else {
            not_found(format!("{name} is a binary: only IR text is kept"))
        }
    })?;
    Ok(text(StatusCode::OK, "text/plain; charset=utf-8", body))
}
