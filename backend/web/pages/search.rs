//! `/search?key=` finds entries by the start of their key (`VURMD4`, or `a100-1:VURMD4KEVF` as
//! the grids show it): one match opens its entry page, several are listed. The same list answers
//! a short id that names several entries on `/compare`, `/entries/...` and their nearest pages
//! ([`candidates`]). Reads are indexed key ranges with a bound ([`crate::db::keys`]).

use super::{HtmlTemplate, PageResult};
use crate::answers::load::{Ambiguous, parse_id};
use crate::db::keys::{KeyHit, by_prefix};
use crate::web::AppState;
use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};

/// Matches a search lists at most.
pub const SHOWN: usize = 50;

#[derive(Debug, Default, serde::Deserialize)]
pub struct SearchQuery {
    /// A key's start, alone or after `MACHINE:` (`key`: the kernels page's filter is `q`).
    #[serde(default)]
    pub key: String,
}

#[derive(Template)]
#[template(path = "search.html")]
struct SearchPage {
    v: SearchView,
}

/// What the search page shows.
pub struct SearchView {
    pub q: String,
    /// One line saying what the list is (or why there is none).
    pub note: String,
    pub hits: Vec<Hit>,
    /// More entries match than listed.
    pub more: bool,
}

/// One entry listed, with the page it opens.
pub struct Hit {
    pub id: String,
    pub kernel: String,
    pub live: bool,
    pub href: String,
}

/// The entry page of `machine:key`.
fn entry_href(h: &KeyHit) -> String {
    format!("/entries/{}/{}", crate::fmt::enc(&h.machine), crate::fmt::enc(&h.key))
}

fn hit(h: &KeyHit, href: String) -> Hit {
    Hit {
        id: format!("{}:{}", h.machine, h.key),
        kernel: h.kernel.clone().unwrap_or_else(|| "(no kernel name)".into()),
        live: h.live,
        href,
    }
}

/// What a search found: the entries (at most [`SHOWN`]) and whether more match.
pub struct Found {
    pub machine: Option<String>,
    pub key: String,
    pub hits: Vec<KeyHit>,
    pub more: bool,
}

/// The entries whose key starts as `text` says (`PREFIX` or `MACHINE:PREFIX`), as the page and
/// `/api/v1/search` list them. `Ok(Err(why))`: the text names no key.
pub async fn find(pool: &crate::db::Store, text: &str) -> sqlx::Result<Result<Found, String>> {
    let (machine, key) = match text.contains(':') {
        true => match parse_id(text) {
            Ok((m, k)) => (Some(m), k),
            Err(e) => return Ok(Err(e.to_string())),
        },
        false => (None, text),
    };
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Ok(Err(format!("{key:?} is no key: keys have letters, digits, _ and -")));
    }
    let mut hits = by_prefix(pool, machine, key, SHOWN as i64 + 1).await?;
    let more = hits.len() > SHOWN;
    hits.truncate(SHOWN);
    Ok(Ok(Found { machine: machine.map(str::to_string), key: key.to_string(), hits, more }))
}

/// `GET /search?key=PREFIX` or `?key=MACHINE:PREFIX`.
pub async fn page(State(s): State<AppState>, Query(q): Query<SearchQuery>) -> PageResult {
    let text = q.key.trim().to_string();
    let render = |note: String, hits: Vec<Hit>, more: bool| {
        Ok(HtmlTemplate(SearchPage { v: SearchView { q: text.clone(), note, hits, more } }).into_response())
    };
    if text.is_empty() {
        return render("Type the start of a key (as the grids show it: MACHINE:KEY or KEY).".into(), vec![], false);
    }
    let f = match find(s.db.pool(), &text).await.map_err(crate::web::error::AppError::from)? {
        Ok(f) => f,
        Err(why) => return render(why, vec![], false),
    };
    if let ([one], false) = (f.hits.as_slice(), f.more) {
        return Ok(Redirect::to(&entry_href(one)).into_response());
    }
    let key = &f.key;
    let note = match (f.hits.len(), f.more) {
        (0, _) => format!(
            "No entry has a key starting with {key:?}{}.",
            f.machine.as_deref().map(|m| format!(" on {m}")).unwrap_or_default()
        ),
        (n, false) => format!("{n} entries have a key starting with {key:?}."),
        (n, true) => format!("The first {n} entries with a key starting with {key:?}: type more of it to narrow them."),
    };
    let hits = f.hits.iter().map(|h| hit(h, entry_href(h))).collect();
    render(note, hits, f.more)
}

/// One entry of `/api/v1/search`.
#[derive(serde::Serialize)]
pub struct ApiHit {
    /// `MACHINE:KEY`, as `explain` and `/compare` take it.
    pub id: String,
    pub machine: String,
    pub key: String,
    pub kernel: Option<String>,
    /// Still in its cache (not removed).
    pub live: bool,
    /// Its entry page.
    pub url: String,
}

/// The answer of `/api/v1/search`.
#[derive(serde::Serialize)]
pub struct ApiFound {
    /// The machine searched (`null`: every machine) and the key's start.
    pub machine: Option<String>,
    pub key: String,
    /// At most 50, in (machine, key) order.
    pub entries: Vec<ApiHit>,
    /// More entries match than listed.
    pub more: bool,
}

/// `GET /api/v1/search?key=PREFIX` or `?key=MACHINE:PREFIX`: what the search page lists, as
/// JSON (one match is listed too, where the page opens it); 400 `{error}` for no key.
pub async fn api(
    State(s): State<AppState>,
    crate::web::api::ApiQuery(q): crate::web::api::ApiQuery<SearchQuery>,
) -> Result<axum::Json<ApiFound>, crate::web::error::ApiError> {
    use crate::web::error::AppError;
    let text = q.key.trim();
    if text.is_empty() {
        return Err(AppError::BadRequest("missing key=PREFIX (or MACHINE:PREFIX)".into()).into());
    }
    let f = find(s.db.pool(), text).await.map_err(AppError::from)?.map_err(AppError::BadRequest)?;
    let entries = f
        .hits
        .iter()
        .map(|h| ApiHit {
            id: format!("{}:{}", h.machine, h.key),
            machine: h.machine.clone(),
            key: h.key.clone(),
            kernel: h.kernel.clone(),
            live: h.live,
            url: entry_href(h),
        })
        .collect();
    Ok(axum::Json(ApiFound { machine: f.machine, key: f.key, entries, more: f.more }))
}

/// The answer to a short id that names several entries: the candidates, each linking to
/// `href(whole id)` (the same page with that entry), status 300 (Multiple Choices).
pub fn candidates(a: &Ambiguous, href: impl Fn(&str) -> String) -> PageResult {
    let hits = a.candidates.iter().map(|h| hit(h, href(&format!("{}:{}", h.machine, h.key)))).collect();
    let more = if a.more { " (and more: type more of the key)" } else { "" };
    let note = format!("{} names more than one entry{more}: pick one.", a.id);
    let v = SearchView { q: a.id.clone(), note, hits, more: a.more };
    Ok((StatusCode::MULTIPLE_CHOICES, HtmlTemplate(SearchPage { v })).into_response())
}
