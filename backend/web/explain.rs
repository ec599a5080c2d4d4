//! Explainer pages: `/compare`, `/entries/{machine}/{key}/nearest`, `/invalidations`. Each
//! answers the full page, or with `HX-Request` the partial the page embeds.

use super::AppState;
use super::error::AppError;
use crate::db::scans::ScanRef;
use crate::explain::load::{self as dbx, ExplainError, Neighbour};
use crate::explain::report::{CompareReport, IR_KINDS, InvalidationsReport};
use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use sqlx::SqlitePool;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/compare", get(compare_page))
        .route("/entries/{machine}/{key}/nearest", get(nearest_page))
        .route("/invalidations", get(invalidations_page))
}

impl From<ExplainError> for AppError {
    fn from(e: ExplainError) -> Self {
        match e {
            ExplainError::Bad(m) => AppError::BadRequest(m),
            ExplainError::NotFound(m) => AppError::NotFound(m),
            ExplainError::Db(e) => e.into(),
        }
    }
}

/// Query of `/compare` (page and API).
#[derive(Debug, Deserialize, Default)]
pub struct CompareQuery {
    pub a: Option<String>,
    pub b: Option<String>,
    /// `source`, `ttir`, `ttgir`, `llir`, `ptx` or `amdgcn`.
    pub ir: Option<String>,
    /// `0` keeps locations in the IR diff.
    pub strip: Option<String>,
}

impl CompareQuery {
    pub fn ids(&self) -> Result<(&str, &str), AppError> {
        fn need<'a>(v: &'a Option<String>, n: &str) -> Result<&'a str, AppError> {
            v.as_deref()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| AppError::BadRequest(format!("missing {n}=MACHINE:KEY")))
        }
        Ok((need(&self.a, "a")?, need(&self.b, "b")?))
    }
    pub fn strip(&self) -> bool {
        !matches!(self.strip.as_deref(), Some("0" | "false" | "no" | "off"))
    }
    fn ir(&self) -> Option<&str> {
        self.ir.as_deref().filter(|s| !s.is_empty())
    }
}

/// Query of `/api/v1/nearest` and the nearest page.
#[derive(Debug, Deserialize, Default)]
pub struct NearestQuery {
    pub entry: Option<String>,
    pub limit: Option<usize>,
}

impl NearestQuery {
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(20).clamp(1, 1000)
    }
}

/// Query of `/invalidations` (page and API).
#[derive(Debug, Deserialize, Default)]
pub struct InvalidationsQuery {
    pub machine: Option<String>,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub a: Option<String>,
    pub b: Option<String>,
}

/// The scans behind a one-machine invalidations report (for the scan picker).
pub struct ScanContext {
    pub from: Option<ScanRef>,
    pub to: ScanRef,
    pub scans: Vec<ScanRef>,
}

impl InvalidationsQuery {
    /// Runs the report the query asks for.
    pub async fn run(&self, pool: &SqlitePool) -> Result<(InvalidationsReport, Option<ScanContext>), AppError> {
        let some = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
        match (some(&self.machine), some(&self.a), some(&self.b)) {
            (Some(m), None, None) => {
                let (from, to, scans) = dbx::pick_scans(pool, &m, self.from, self.to).await?;
                let r = dbx::invalidations_scans(pool, from.as_ref(), &to).await?;
                Ok((r, Some(ScanContext { from, to, scans })))
            }
            (None, Some(a), Some(b)) => Ok((dbx::invalidations_machines(pool, &a, &b).await?, None)),
            _ => Err(AppError::BadRequest("give machine=M (with optional from=SCAN&to=SCAN) or a=M1&b=M2".into())),
        }
    }
}

/// An error as a small HTML page.
pub struct PageError(pub AppError);

impl<E: Into<AppError>> From<E> for PageError {
    fn from(e: E) -> Self {
        PageError(e.into())
    }
}

#[derive(Template)]
#[template(path = "explain_error.html")]
struct ErrorPage {
    status: u16,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let page = ErrorPage { status: status.as_u16(), message: self.0.public_message() };
        (status, Html(page.render().unwrap_or_else(|_| "error".into()))).into_response()
    }
}

type PageResult = Result<Response, PageError>;

fn is_htmx(h: &HeaderMap) -> bool {
    h.get("hx-request").is_some_and(|v| v == "true")
}

/// Renders a template as an HTML response.
fn html(t: &impl Template) -> PageResult {
    let body = t.render().map_err(|e| AppError::Internal(e.into()))?;
    Ok((StatusCode::OK, Html(body)).into_response())
}

/// Query-string encoding of a value.
pub fn enc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => o.push(b as char),
            b':' => o.push(':'),
            _ => o.push_str(&format!("%{b:02X}")),
        }
    }
    o
}

/// The compare URL of two `machine:key` ids.
pub fn compare_url(a: &str, b: &str) -> String {
    format!("/compare?a={}&b={}", enc(a), enc(b))
}

#[derive(Template)]
#[template(path = "compare.html")]
struct ComparePage {
    q: CompareView,
}

#[derive(Template)]
#[template(path = "compare_partial.html")]
struct ComparePartial {
    q: CompareView,
}

/// Everything the compare templates show.
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
            Some((m, k)) => format!("/entries/{}/{}", enc(m), enc(k)),
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

async fn compare_page(State(s): State<AppState>, h: HeaderMap, Query(q): Query<CompareQuery>) -> PageResult {
    let (a, b) = (q.a.clone().unwrap_or_default(), q.b.clone().unwrap_or_default());
    let r = if a.is_empty() && b.is_empty() {
        None
    } else {
        let (ia, ib) = q.ids()?;
        Some(dbx::compare_ids(s.db.pool(), ia, ib, q.ir(), q.strip()).await?)
    };
    let ir = r.as_ref().map(|r| r.ir.kind.clone()).unwrap_or_else(|| "source".into());
    let base = compare_url(&a, &b);
    let strip_flag = if q.strip() { "" } else { "&strip=0" };
    let kinds = IR_KINDS.iter().map(|k| (*k, format!("{base}&ir={k}{strip_flag}"))).collect();
    let strip_url = format!("{base}&ir={ir}{}", if q.strip() { "&strip=0" } else { "" });
    let view = CompareView { a, b, r, ir, strip: q.strip(), kinds, strip_url };
    if is_htmx(&h) { html(&ComparePartial { q: view }) } else { html(&ComparePage { q: view }) }
}

#[derive(Template)]
#[template(path = "nearest.html")]
struct NearestPage {
    v: NearestView,
}

#[derive(Template)]
#[template(path = "nearest_partial.html")]
struct NearestPartial {
    v: NearestView,
}

/// What the nearest templates show.
pub struct NearestView {
    pub id: String,
    pub kernel: String,
    pub rows: Vec<(Neighbour, String)>,
}

async fn nearest_page(
    State(s): State<AppState>,
    h: HeaderMap,
    Path((machine, key)): Path<(String, String)>,
    Query(q): Query<NearestQuery>,
) -> PageResult {
    let id = format!("{machine}:{key}");
    let (of, list) = dbx::nearest_of(s.db.pool(), &id, q.limit()).await?;
    let kernel = of.side.kernel_name().unwrap_or("?").to_string();
    let rows = list
        .into_iter()
        .map(|n| {
            let u = compare_url(&id, &n.id);
            (n, u)
        })
        .collect();
    let v = NearestView { id, kernel, rows };
    if is_htmx(&h) { html(&NearestPartial { v }) } else { html(&NearestPage { v }) }
}

#[derive(Template)]
#[template(path = "invalidations.html")]
struct InvalidationsPage {
    v: InvalidationsView,
}

#[derive(Template)]
#[template(path = "invalidations_partial.html")]
struct InvalidationsPartial {
    v: InvalidationsView,
}

/// Invalidated rows of one cause: (cause, count, rows with their compare URL).
pub type CauseGroup = (String, usize, Vec<(crate::explain::report::InvalidatedRow, String)>);

/// What the invalidations templates show.
pub struct InvalidationsView {
    pub r: InvalidationsReport,
    pub scans: Option<ScanContext>,
    /// Per cause: (cause, count, rows with their compare URL).
    pub groups: Vec<CauseGroup>,
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
        crate::run::fmt_time(*ms)
    }
}

#[derive(Template)]
#[template(path = "invalidations_pick.html")]
struct InvalidationsPick {
    machines: Vec<String>,
}

async fn invalidations_page(
    State(s): State<AppState>,
    h: HeaderMap,
    Query(q): Query<InvalidationsQuery>,
) -> PageResult {
    if [&q.machine, &q.a, &q.b].iter().all(|v| v.as_deref().is_none_or(str::is_empty)) {
        let page = crate::db::Page::new(Some(10_000), None);
        let machines =
            crate::db::summaries::machine_summaries(s.db.pool(), page).await?.into_iter().map(|m| m.name).collect();
        return html(&InvalidationsPick { machines });
    }
    let (r, scans) = q.run(s.db.pool()).await?;
    let groups = r
        .by_cause
        .iter()
        .map(|c| {
            let rows: Vec<_> = r
                .invalidated
                .iter()
                .filter(|i| i.cause == c.cause)
                .map(|i| (i.clone(), compare_url(&i.a, &i.b)))
                .collect();
            (c.cause.as_str().to_string(), c.count, rows)
        })
        .collect();
    let v = InvalidationsView { r, scans, groups };
    if is_htmx(&h) { html(&InvalidationsPartial { v }) } else { html(&InvalidationsPage { v }) }
}
