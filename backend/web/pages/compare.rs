//! `/compare` (why two entries differ: components, IR diff) and `/entries/{m}/{key}/nearest`
//! (a kernel's entries on every machine, fewest differences first).

use super::search::candidates;
use super::{Hx, PageResult};
use crate::answers::load::{self as dbx, ExplainError, Neighbour};
use crate::explain::report::{CompareReport, IR_KINDS};
use crate::web::AppState;
use crate::web::query::{CompareQuery, NearestQuery};
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};

/// Query-string encoding of a `machine:key` id (the colon kept readable).
pub fn enc(s: &str) -> String {
    crate::fmt::enc(s).replace("%3A", ":")
}

/// The compare URL of two `machine:key` ids.
pub fn compare_url(a: &str, b: &str) -> String {
    format!("/compare?a={}&b={}", enc(a), enc(b))
}

#[derive(Template)]
#[template(path = "compare.html", blocks = ["fragment"])]
struct ComparePage {
    q: CompareView,
}

/// Everything the compare page shows.
pub struct CompareView {
    pub a: String,
    pub b: String,
    pub r: Option<CompareReport>,
    pub ir: String,
    pub strip: bool,
    pub kinds: Vec<(&'static str, String)>,
    pub strip_url: String,
}

impl CompareView {
    /// The entry page of a `machine:key` id.
    pub fn entry_url(id: &str) -> String {
        match id.rsplit_once(':') {
            Some((m, k)) => format!("/entries/{}/{}", crate::fmt::enc(m), crate::fmt::enc(k)),
            None => "/".into(),
        }
    }
    /// A value as a table cell.
    pub fn show(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::Null => "—".into(),
            serde_json::Value::String(s) if s.is_empty() => "\"\"".into(),
            serde_json::Value::String(s) => s.clone(),
            o => o.to_string(),
        }
    }
}

/// `GET /compare?a=M:KEY&b=M:KEY[&ir=ttgir][&strip=0]` (no ids: the empty form).
pub async fn compare_page(State(s): State<AppState>, hx: Hx, Query(q): Query<CompareQuery>) -> PageResult {
    let (a, b) = (q.a.clone().unwrap_or_default(), q.b.clone().unwrap_or_default());
    let r = if a.is_empty() && b.is_empty() {
        None
    } else {
        let (ia, ib) = q.ids()?;
        // Short ids (the start of a key, as the grids show it) are answered at the whole ids' URL.
        let tail = format!(
            "{}{}",
            q.ir().map(|k| format!("&ir={}", enc(k))).unwrap_or_default(),
            if q.strip() { "" } else { "&strip=0" }
        );
        let (fa, fb) = match (dbx::resolve(s.db.pool(), ia).await, dbx::resolve(s.db.pool(), ib).await) {
            (Ok(fa), Ok(fb)) => (fa, fb),
            (Err(ExplainError::Ambiguous(x)), _) => {
                return candidates(&x, |id| format!("{}{tail}", compare_url(id, ib)));
            }
            (_, Err(ExplainError::Ambiguous(x))) => {
                return candidates(&x, |id| format!("{}{tail}", compare_url(ia, id)));
            }
            (Err(e), _) | (_, Err(e)) => return Err(e.into()),
        };
        if (fa.as_str(), fb.as_str()) != (ia, ib) {
            return Ok(Redirect::to(&format!("{}{tail}", compare_url(&fa, &fb))).into_response());
        }
        Some(dbx::compare_ids(&s.db, &s.diff_slots, ia, ib, q.ir(), q.strip()).await?)
    };
    let ir = r.as_ref().map(|r| r.ir.kind.clone()).unwrap_or_else(|| "source".into());
    let base = compare_url(&a, &b);
    let strip_flag = if q.strip() { "" } else { "&strip=0" };
    // only the IR tabs either entry has (a CUDA pair has no `.amdgcn`), and the one shown
    let mut held: Vec<String> = vec![];
    for id in [&a, &b] {
        if let Some((m, k)) = id.rsplit_once(':') {
            held.extend(crate::db::entries::file_types(s.db.pool(), m, k).await?);
        }
    }
    let kinds = IR_KINDS
        .iter()
        .filter(|k| held.is_empty() || **k == ir || held.iter().any(|h| h == *k))
        .map(|k| (*k, format!("{base}&ir={k}{strip_flag}")))
        .collect();
    let strip_url = format!("{base}&ir={ir}{}", if q.strip() { "&strip=0" } else { "" });
    let q = CompareView { a, b, r, ir, strip: q.strip(), kinds, strip_url };
    hx.render(&ComparePage { q }, |p| p.as_fragment().render())
}

#[derive(Template)]
#[template(path = "nearest.html", blocks = ["fragment"])]
struct NearestPage {
    v: NearestView,
}

/// What the nearest page shows.
pub struct NearestView {
    pub id: String,
    pub kernel: String,
    pub rows: Vec<(Neighbour, String)>,
}

/// `GET /entries/{machine}/{key}/nearest[?limit=N]`.
pub async fn nearest_page(
    State(s): State<AppState>,
    hx: Hx,
    Path((machine, key)): Path<(String, String)>,
    Query(q): Query<NearestQuery>,
) -> PageResult {
    let id = format!("{machine}:{key}");
    let page = |id: &str| match id.rsplit_once(':') {
        Some((m, k)) => format!("/entries/{}/{}/nearest?limit={}", crate::fmt::enc(m), crate::fmt::enc(k), q.limit()),
        None => "/".into(),
    };
    match dbx::resolve(s.db.pool(), &id).await {
        Ok(full) if full != id => return Ok(Redirect::to(&page(&full)).into_response()),
        Ok(_) => {}
        Err(ExplainError::Ambiguous(x)) => return candidates(&x, page),
        Err(e) => return Err(e.into()),
    }
    let (of, list) = dbx::nearest_cached(&s.db, s.db.nearest_cache(), &id, q.limit()).await?;
    let kernel = of.kernel_name().unwrap_or("?").to_string();
    let rows = list
        .into_iter()
        .map(|n| {
            let u = compare_url(&id, &n.id);
            (n, u)
        })
        .collect();
    hx.render(&NearestPage { v: NearestView { id, kernel, rows } }, |p| p.as_fragment().render())
}
