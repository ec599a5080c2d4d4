//! `/search?key=` finds entries by the start of their key (`VURMD4`, or `a100-1:VURMD4KEVF` as
//! the grids show it): one match opens its entry page, several are listed. The same list answers
//! a short id that names several entries on `/compare`, `/entries/...` and their nearest pages
//! ([`candidates`]). Reads are indexed key ranges with a bound ([`crate::db::keys`]).

use super::{HtmlTemplate, PageResult};
use crate::db::keys::{KeyHit, by_prefix};
use crate::explain::load::{Ambiguous, parse_id};
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

/// `GET /search?key=PREFIX` or `?key=MACHINE:PREFIX`.
pub async fn page(State(s): State<AppState>, Query(q): Query<SearchQuery>) -> PageResult {
    let text = q.key.trim().to_string();
    let render = |note: String, hits: Vec<Hit>, more: bool| {
        Ok(HtmlTemplate(SearchPage { v: SearchView { q: text.clone(), note, hits, more } }).into_response())
    };
    if text.is_empty() {
        return render("Type the start of a key (as the grids show it: MACHINE:KEY or KEY).".into(), vec![], false);
    }
    let (machine, key) = match text.contains(':') {
        true => match parse_id(&text) {
            Ok((m, k)) => (Some(m), k),
            Err(e) => return render(e.to_string(), vec![], false),
        },
        false => (None, text.as_str()),
    };
    if !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return render(format!("{key:?} is no key: keys have letters, digits, _ and -"), vec![], false);
    }
    let mut hits =
        by_prefix(s.db.pool(), machine, key, SHOWN as i64 + 1).await.map_err(crate::web::error::AppError::from)?;
    let more = hits.len() > SHOWN;
    hits.truncate(SHOWN);
    if let ([one], false) = (hits.as_slice(), more) {
        return Ok(Redirect::to(&entry_href(one)).into_response());
    }
    let note = match (hits.len(), more) {
        (0, _) => format!(
            "No entry has a key starting with {key:?}{}.",
            machine.map(|m| format!(" on {m}")).unwrap_or_default()
        ),
        (n, false) => format!("{n} entries have a key starting with {key:?}."),
        (n, true) => format!("The first {n} entries with a key starting with {key:?}: type more of it to narrow them."),
    };
    let hits = hits.iter().map(|h| hit(h, entry_href(h))).collect();
    render(note, hits, more)
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
