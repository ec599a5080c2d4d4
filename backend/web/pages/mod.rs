//! The HTML dashboard: one module per page, one askama template per page in `templates/`.
//!
//! Every page answers its full HTML at a shareable URL. An htmx request ([`Hx`]: `HX-Request`
//! and not a history restore) gets only the page template's `fragment` block, the part htmx
//! swaps in. Errors render as the one HTML error page ([`PageError`]) with a fitting status.

pub mod advice;
mod assets;
pub mod autotune;
pub mod compare;
pub mod entry;
pub mod hazards;
pub mod headline;
pub mod history;
pub mod invalidations;
pub mod kernel;
pub mod kernels;
pub mod machine;
pub mod overview;
pub mod search;
pub mod svg;
pub mod timeline;

use super::AppState;
use super::error::AppError;
pub use super::error::PageError;
use askama::Template;
use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use std::convert::Infallible;

/// Routes of the HTML pages and their static files.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(overview::page))
        .route("/machines/{name}", get(machine::page))
        .route("/kernels", get(kernels::page))
        .route("/kernels/{name}", get(kernel::page))
        .route("/entries/{machine}/{key}", get(entry::page))
        .route("/entries/{machine}/{key}/raw/{artifact}", get(entry::raw))
        .route("/entries/{machine}/{key}/nearest", get(compare::nearest_page))
        .route("/compare", get(compare::compare_page))
        .route("/search", get(search::page))
        .route("/invalidations", get(invalidations::page))
        .route("/history", get(history::page))
        .route("/autotune", get(autotune::list))
        .route("/autotune/{id}", get(autotune::decision))
        .route("/static/{*path}", get(assets::serve))
        // Browsers ask for /favicon.ico on views without a <link rel=icon> (raw artifacts, JSON).
        .route("/favicon.ico", get(|| assets::serve(axum::extract::Path("favicon.svg".to_string()))))
        .fallback(|| async { PageError(AppError::NotFound("no such page".into())) })
}

/// How a page was asked for: `Hx(true)` when htmx wants the fragment it swaps in.
///
/// `HX-Request` alone is not enough: when htmx restores a page that fell out of its history
/// cache (back/forward), it sends `HX-Request` *and* `HX-History-Restore-Request` and puts the
/// answer in `<body>`, so that request needs the whole page.
#[derive(Debug, Clone, Copy)]
pub struct Hx(pub bool);

impl<S: Send + Sync> FromRequestParts<S> for Hx {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let has = |h: &str| parts.headers.get(h).is_some_and(|v| v.as_bytes() == b"true");
        Ok(Hx(has("hx-request") && !has("hx-history-restore-request")))
    }
}

impl Hx {
    /// The page, or its `fragment` block (askama `blocks = ["fragment"]`), as a response:
    /// `fragment` renders the block, `|p| p.as_fragment().render()`.
    pub fn render<T: Template>(self, page: &T, fragment: impl FnOnce(&T) -> askama::Result<String>) -> PageResult {
        let html = if self.0 { fragment(page) } else { page.render() };
        html.map(|h| Html(h).into_response()).map_err(|e| AppError::Internal(anyhow::anyhow!("template: {e}")).into())
    }
}

/// Renders any askama template as an HTML response (askama ≥ 0.13 has no axum integration).
pub struct HtmlTemplate<T>(pub T);

impl<T: Template> IntoResponse for HtmlTemplate<T> {
    fn into_response(self) -> Response {
        match self.0.render() {
            Ok(html) => Html(html).into_response(),
            Err(e) => PageError(AppError::Internal(anyhow::anyhow!("template: {e}"))).into_response(),
        }
    }
}

/// Result of a page handler.
pub type PageResult = Result<Response, PageError>;

/// 404 with a message naming what was not found.
pub fn not_found(what: impl Into<String>) -> PageError {
    PageError(AppError::NotFound(what.into()))
}

/// Shorthand for handlers that answer plain text with a status.
pub fn text(status: StatusCode, content_type: &'static str, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}
