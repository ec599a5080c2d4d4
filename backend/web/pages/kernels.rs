//! `/kernels` — the kernel list: search as you type (htmx swaps the page's `fragment` block), filters
//! for machine, backend, arch and Triton version, sorting and paging. The query string is the
//! whole state: a full page load of the same URL renders the same list.

use super::{Hx, PageResult};
use crate::db;
use crate::db::summaries::{self, FilterChoices, KernelQuery};
use crate::fmt;
use crate::web::AppState;
use askama::Template;
use axum::extract::{Query, State};

/// Kernels per page.
pub const PAGE_SIZE: i64 = 50;

pub struct Row {
    pub name: String,
    pub href: String,
    pub entries: i64,
    pub machines: i64,
    pub size: String,
    pub last: String,
}

pub struct Results {
    pub rows: Vec<Row>,
    pub first: i64,
    pub last: i64,
    pub prev: Option<String>,
    pub next: Option<String>,
    pub filtered: bool,
    pub empty_db: bool,
}

#[derive(Template)]
#[template(path = "kernels.html", blocks = ["fragment"])]
struct Page {
    title: String,
    f: KernelQuery,
    choices: FilterChoices,
    sorts: Vec<(&'static str, &'static str)>,
    d: Results,
}

/// The query string of `f` on another page.
fn href(f: &KernelQuery, page: i64) -> String {
    let mut parts = vec![];
    for (k, v) in [
        ("q", &f.q),
        ("machine", &f.machine),
        ("backend", &f.backend),
        ("arch", &f.arch),
        ("triton_version", &f.triton_version),
        ("sort", &f.sort),
    ] {
        if !v.is_empty() {
            parts.push(format!("{k}={}", fmt::enc(v)));
        }
    }
    if page > 1 {
        parts.push(format!("page={page}"));
    }
    if parts.is_empty() { "/kernels".into() } else { format!("/kernels?{}", parts.join("&")) }
}

pub async fn page(State(s): State<AppState>, Query(f): Query<KernelQuery>, hx: Hx) -> PageResult {
    let d = load(&s, &f).await?;
    // The fragment shows only the results: no need for the filter choices.
    let choices = if hx.0 { FilterChoices::default() } else { summaries::filter_choices(s.db.pool()).await? };
    let sorts = vec![("variants", "most variants"), ("size", "largest"), ("last", "last compiled"), ("name", "name")];
    let title = "Kernels".into();
    hx.render(&Page { title, f, choices, sorts, d }, |p| p.as_fragment().render())
}

async fn load(s: &AppState, f: &KernelQuery) -> Result<Results, super::PageError> {
    s.db.fresh_summaries().await?;
    let page = f.page.unwrap_or(1).max(1);
    let mut rows =
        summaries::kernels(s.db.pool(), &f.filter(), db::Page { limit: PAGE_SIZE + 1, offset: (page - 1) * PAGE_SIZE })
            .await?;
    let more = rows.len() as i64 > PAGE_SIZE;
    rows.truncate(PAGE_SIZE as usize);
    let filtered = [&f.q, &f.machine, &f.backend, &f.arch, &f.triton_version].iter().any(|v| !v.trim().is_empty());
    let empty_db = rows.is_empty() && !filtered && page == 1;
    let first = (page - 1) * PAGE_SIZE + 1;
    Ok(Results {
        last: first + rows.len() as i64 - 1,
        first,
        prev: (page > 1).then(|| href(f, page - 1)),
        next: more.then(|| href(f, page + 1)),
        rows: rows
            .into_iter()
            .map(|k| Row {
                href: format!("/kernels/{}", fmt::enc(&k.name)),
                entries: k.entries,
                machines: k.machines,
                size: fmt::bytes(k.bytes),
                last: fmt::time(k.last_compiled),
                name: k.name,
            })
            .collect(),
        filtered,
        empty_db,
    })
}
