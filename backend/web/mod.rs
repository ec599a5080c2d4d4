//! The HTTP server: `app(state)` builds the router used by `cachelens serve` and by tests.

pub mod api;
pub mod auth;
pub mod error;
pub mod pages;
pub mod query;

use crate::db::Db;
use axum::Router;
use std::sync::Arc;

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest accepted upload, after decompression.
    pub max_upload_bytes: usize,
    /// When set, reading pages and the read API needs `Authorization: Bearer <this>` (or the
    /// basic-auth password / `?token=` cookie flow documented in README.md).
    pub read_token: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config { max_upload_bytes: 256 << 20, read_token: None }
    }
}

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    /// The database, with its per-database state.
    pub db: Db,
    pub config: Arc<Config>,
    /// One writer at a time: uploads are ingested one after the other while pages keep reading.
    pub write_lock: Arc<tokio::sync::Mutex<()>>,
    /// Uploads being decoded or ingested at once. A decoded report is several times its gzip
    /// size; without this bound, 50 clients uploading together hold 50 decoded reports while
    /// they queue for the write lock. Bodies still arrive concurrently (compressed).
    pub upload_slots: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    pub fn new(db: impl Into<Db>, config: Config) -> Self {
        // One report ingesting under the write lock, the next one decoding meanwhile; half the
        // cores at most, so that pages keep a core while 50 nodes upload at once.
        let slots = (std::thread::available_parallelism().map_or(2, |n| n.get()) / 2).clamp(1, 4);
        AppState {
            db: db.into(),
            config: Arc::new(config),
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
            upload_slots: Arc::new(tokio::sync::Semaphore::new(slots)),
        }
    }
}

/// The whole application.
pub fn app(state: AppState) -> Router {
    Router::new()
        .nest("/api/v1", api::router())
        .merge(pages::router())
        .route("/login", axum::routing::get(auth::login))
        .layer(axum::middleware::map_response(vary_on_htmx))
        // Keep this layer after every route: it guards them all (see auth.rs).
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::read_access))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Every HTML view answers either the whole page or the fragment htmx swaps in, depending on
/// `HX-Request` (a history restore gets the whole page): say so to caches, or a browser or proxy
/// may serve a cached fragment as a page (the back button showing a bare table). One layer for
/// every page and partial, so that no handler can forget it.
async fn vary_on_htmx(mut resp: axum::response::Response) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    let html = resp.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if html {
        resp.headers_mut().append(header::VARY, HeaderValue::from_static("HX-Request, HX-History-Restore-Request"));
    }
    resp
}
