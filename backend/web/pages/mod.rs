//! The HTML dashboard: one module per page, askama templates in `templates/`, htmx partials.
//!
//! Every page answers its full HTML at a shareable URL; with `HX-Request` (and not an htmx
//! history restore) it answers only the `*_partial.html` fragment that htmx swaps in. Errors
//! render as HTML pages with a fitting status (a real 404 for unknown machines, kernels and
//! entries).

mod assets;
pub mod entry;
pub mod fmt;
pub mod kernel;
pub mod kernels;
pub mod machine;
pub mod overview;
pub mod svg;

use super::AppState;
use super::error::AppError;
use askama::Template;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

/// Routes of the HTML pages and their static files.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(overview::page))
        .route("/machines/{name}", get(machine::page))
        .route("/kernels", get(kernels::page))
        .route("/kernels/{name}", get(kernel::page))
        .route("/entries/{machine}/{key}", get(entry::page))
        .route("/entries/{machine}/{key}/raw/{artifact}", get(entry::raw))
        .route("/static/{*path}", get(assets::serve))
        // Browsers ask for /favicon.ico on views without a <link rel=icon> (raw artifacts, JSON).
        .route("/favicon.ico", get(|| assets::serve(axum::extract::Path("favicon.svg".to_string()))))
        .fallback(|| async { PageError(AppError::NotFound("no such page".into())) })
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

/// True when htmx asks for a fragment. A history restore (`HX-History-Restore-Request`) wants
/// the whole page, so it gets it.
pub fn is_htmx(headers: &HeaderMap) -> bool {
    let has = |h: &str| headers.get(h).is_some_and(|v| v.as_bytes() == b"true");
    has("hx-request") && !has("hx-history-restore-request")
}

/// Result of a page handler.
pub type PageResult = Result<Response, PageError>;

/// An error answered as an HTML page.
pub struct PageError(pub AppError);

impl<E: Into<AppError>> From<E> for PageError {
    fn from(e: E) -> Self {
        PageError(e.into())
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    title: String,
    status: u16,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let page = ErrorPage {
            title: status.canonical_reason().unwrap_or("error").to_string(),
            status: status.as_u16(),
            message: self.0.public_message(),
        };
        let body = page.render().unwrap_or_else(|_| "error".into());
        (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
    }
}

/// 404 with a message naming what was not found.
pub fn not_found(what: impl Into<String>) -> PageError {
    PageError(AppError::NotFound(what.into()))
}

/// Shorthand for handlers that answer plain text with a status.
pub fn text(status: StatusCode, content_type: &'static str, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}
