//! The HTTP server: `app(state)` builds the router used by `cachelens serve` and by tests, out
//! of two routers: the read router (pages, read API, static files), guarded as a whole by the
//! read token when one is set, and the upload router, authenticated by machine tokens.

pub mod api;
pub mod auth;
pub mod error;
pub mod metrics;
pub mod pages;
pub mod query;
pub mod serve;

use crate::db::Db;
use axum::Router;
use axum::http::{HeaderValue, header};
use std::sync::Arc;
use std::time::Duration;

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest accepted upload, after decompression.
    pub max_upload_bytes: usize,
    /// When set, reading pages and the read API needs it (see auth.rs). Checked by
    /// [`auth::check_read_token`] at start-up: never empty or short.
    pub read_token: Option<String>,
    /// How long a login cookie stays valid (`serve --login-days`, 7 by default): its value
    /// carries its issue time under a MAC keyed by the read token (see auth.rs).
    pub login_max_age: Duration,
    /// Longest wait for the next chunk of any request body.
    pub body_idle_timeout: Duration,
    /// Longest time an upload body may take to arrive whole.
    pub upload_read_timeout: Duration,
    /// Uploads received and waiting for their turn at once (each body spooled to a file in
    /// `spool_dir`); past it a new upload is answered 503 with Retry-After before its body is
    /// read. Worst case on disk: this many × `max_upload_bytes` (compressed bodies).
    pub upload_queue: usize,
    /// Where waiting upload bodies are spooled (unnamed files, gone when closed: nothing is left
    /// behind by a crash). `None`: the system's temp dir. `serve` uses an SQLite database's dir.
    pub spool_dir: Option<std::path::PathBuf>,
    /// Bounds on the work of one invalidation report's computation.
    pub report_limits: crate::answers::load::Limits,
    /// How long the invalidations page waits for a report being computed before it answers
    /// 202 with the progress and asks again a second later: a report of a few hundred kernels is
    /// shown at once, one across releases of 50,000 entries a side (seconds) never holds a page
    /// that long. The API waits for the report however long it takes (within `report_limits`).
    pub report_wait: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_upload_bytes: 256 << 20,
            read_token: None,
            login_max_age: Duration::from_secs(7 * 86_400),
            body_idle_timeout: Duration::from_secs(30),
            upload_read_timeout: Duration::from_secs(300),
            upload_queue: 64,
            spool_dir: None,
            report_limits: crate::answers::load::LIMITS,
            report_wait: Duration::from_millis(50), // `serve --report-wait-ms`
        }
    }
}

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    /// The database, with its per-database state.
    pub db: Db,
    pub config: Arc<Config>,
    /// Uploads decoded or ingested at once. A report is decoded only once it holds a slot, so
    /// memory is bounded by the slots, not by the clients: without this bound, 50 clients
    /// uploading together hold 50 decoded reports while they queue for their turn to write.
    pub upload_slots: Arc<tokio::sync::Semaphore>,
    /// Uploads received at once ([`Config::upload_queue`]): a body is read as it arrives, into
    /// a spool file, and waits there for a slot. Left in the client's socket instead, a body
    /// stalls the client's TCP stream for as long as the queue ahead of it takes, and the
    /// client's kernel gives up on the connection (ETIMEDOUT after a minute or two, seen with
    /// 50 nodes uploading at once).
    pub upload_queue: Arc<tokio::sync::Semaphore>,
    /// Commits answered 202 and still ingesting (`Prefer: respond-async`, see `api::uploads`).
    pub commits: Arc<api::uploads::Commits>,
    /// The server's invalidation-report computations (`answers::stored::Jobs`).
    pub jobs: Arc<crate::answers::stored::Jobs>,
    /// The server's Prometheus metrics (`GET /metrics`, see metrics.rs).
    pub metrics: Arc<metrics::Metrics>,
    /// Entry comparisons (`/compare`, `/api/v1/compare`) at once: two, others wait 10 s at most
    /// then get 503 (`answers::load::DiffSlots`).
    pub diff_slots: crate::answers::load::DiffSlots,
    /// Read-token guesses (`/login`, wrong bearer or basic-auth tokens): per client address and
    /// in all, 429 past them (`auth::Attempts`).
    pub attempts: Arc<auth::Attempts>,
}

impl AppState {
    pub fn new(db: impl Into<Db>, config: Config) -> Self {
        // One report ingesting in its turn to write, the next one decoding meanwhile; half the
        // cores at most, so that pages keep a core while 50 nodes upload at once.
        let slots = (std::thread::available_parallelism().map_or(2, |n| n.get()) / 2).clamp(1, 4);
        let queue = config.upload_queue.max(1);
        AppState {
            db: db.into(),
            jobs: Arc::default(),
            config: Arc::new(config),
            upload_queue: Arc::new(tokio::sync::Semaphore::new(queue)),
            upload_slots: Arc::new(tokio::sync::Semaphore::new(slots)),
            commits: Arc::default(),
            metrics: Arc::default(),
            diff_slots: Default::default(),
            attempts: Arc::default(),
        }
    }
}

/// The whole application: the read router behind the read token, the upload router beside it.
pub fn app(state: AppState) -> Router {
    let read = Router::new()
        .nest("/api/v1", api::read_router())
        .merge(pages::router())
        .route("/metrics", axum::routing::get(metrics::handler))
        .layer(axum::middleware::map_response(vary_on_htmx))
        // A layer of the router: every read route, and its fallback, needs the read token.
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::read_access));
    let uploads =
        api::upload_router().route_layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track_uploads));
    let open = Router::new().merge(uploads).route("/login", axum::routing::get(auth::login));
    read.merge(open)
        .layer(axum::middleware::map_response(security_headers))
        .layer(axum::middleware::from_fn_with_state(state.clone(), body_idle_timeout))
        // Times every request by its route pattern (MatchedPath is set before layers run).
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track_requests))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// A request body that sends nothing for `body_idle_timeout` fails (its reader gets an error).
async fn body_idle_timeout(
    axum::extract::State(s): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let idle = s.config.body_idle_timeout;
    next.run(req.map(|b| axum::body::Body::new(tower_http::timeout::TimeoutBody::new(idle, b)))).await
}

/// The Content-Security-Policy of every response. Pages load htmx and the stylesheet from
/// /static and nothing else: no inline script or style (htmx's own indicator `<style>` is turned
/// off by the `htmx-config` meta tag in base.html; style.css carries those rules), no eval, no
/// framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Headers on every response: no MIME sniffing (raw cache files are served as text), the CSP,
/// and no framing (clickjacking) for browsers that predate `frame-ancestors`.
async fn security_headers(mut resp: axum::response::Response) -> axum::response::Response {
    let h = resp.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    resp
}

/// Every HTML view answers either the whole page or the fragment htmx swaps in, depending on
/// `HX-Request` (a history restore gets the whole page): say so to caches, or a browser or proxy
/// may serve a cached fragment as a page (the back button showing a bare table). One layer for
/// every page and partial, so that no handler can forget it.
async fn vary_on_htmx(mut resp: axum::response::Response) -> axum::response::Response {
    let html = resp.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if html {
        resp.headers_mut().append(header::VARY, HeaderValue::from_static("HX-Request, HX-History-Restore-Request"));
    }
    resp
}
