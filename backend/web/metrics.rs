//! `GET /metrics`: the fleet and the server as Prometheus metrics, in the OpenMetrics text
//! format that `prometheus-client` encodes (Prometheus asks for it by default). The route sits
//! on the read router, so it needs the read token like the pages (docs/API.md, "Metrics").
//!
//! Per machine (label `machine`), the figures of the JSON API, read where the API reads them:
//! - `cachelens_entries`, `cachelens_bytes`, `cachelens_relocated_entries` and
//!   `cachelens_last_scan_timestamp_seconds`: `/api/v1/machines` (`entries`, `bytes`,
//!   `relocated`, `last_scan_at` / 1000), from the summary tables (`summaries::machine_summaries`);
//! - `cachelens_cache_hits_total`, `cachelens_cache_misses_total`, `cachelens_compiles_total`,
//!   `cachelens_inferred_compiles_total`, `cachelens_hook_events_total` and
//!   `cachelens_compile_seconds_total`: `/api/v1/history?machine=M` summed over its buckets
//!   (`hits`, `misses`, `compiles`, `inferred_compiles`, `hook_events`, `compile_ms` / 1000),
//!   from `history::by_machine`, the counting rules of that API.
//!
//! Per machine and cache root (labels `machine`, `root`), where it sits as its latest scan
//! reported (`db::hazards`, the machine page's "Hazards"): `cachelens_cache_inodes`,
//! `cachelens_fs_inodes`, `cachelens_fs_free_inodes`, `cachelens_fs_free_bytes`,
//! `cachelens_orphaned_temp_dirs`, `cachelens_network_fs` and `cachelens_shared_cache` (0/1).
//!
//! The server's own: `cachelens_uploads_total{status}` (scan uploads by HTTP status: `POST /api/v1/scans` and staged commits),
//! `cachelens_upload_bytes_total` (their bodies as received, before decompression) and
//! `cachelens_http_request_duration_seconds{route,method}` (every request, until its response
//! headers). `route` is the route's pattern (axum's `MatchedPath`, e.g. `/machines/{name}`),
//! never the path itself, so a crawler cannot grow the label set; requests no route matched
//! share `route="unmatched"`, and methods other than the standard ones `method="other"`.
//!
//! Cost of a scrape: the summary tables (as the overview), two index look-ups, and one read of
//! `root_hazards` (one row per machine root); the history
//! counts are recounted only when a scan or hook event landed since they were counted, and a
//! scrape waits at most [`WAIT_FOR_RECOUNT`] for that (else it shows the previous counts).

use super::AppState;
use super::error::{ApiError, AppError};
use crate::db::history::{self, Counts, HistoryFilter};
use crate::db::summaries::{self, MachineSummary};
use crate::db::{Db, Page};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Metric;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `route` label of requests that matched no route (unknown paths, 404s).
pub const UNMATCHED: &str = "unmatched";

/// Request duration buckets, seconds: fine around the 100 ms page goal, up to a slow upload.
const DURATION_BUCKETS: [f64; 14] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MachineLabel {
    machine: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RootLabels {
    machine: String,
    root: String,
}

/// The server's own metrics (one set per [`AppState`]), and the fleet counts kept between
/// scrapes.
#[derive(Debug)]
pub struct Metrics {
    uploads: Family<StatusLabel, Counter>,
    upload_bytes: Counter,
    requests: Family<RouteLabels, Histogram, fn() -> Histogram>,
    /// The last per-machine counts and the data version they were counted at.
    counts: std::sync::Mutex<Counted>,
    /// One recount at a time; scrapes meanwhile wait for it (or show the last counts).
    recounting: tokio::sync::Mutex<()>,
}

/// The data version (None: never counted) and the counts taken at it.
type Counted = (Option<(i64, i64)>, Arc<MachineCounts>);

/// Hit/miss/compile counts per machine name.
type MachineCounts = BTreeMap<String, Counts>;

/// How long a scrape waits for a recount before it shows the previous counts (the first
/// scrape waits for it whole). A recount of a million entries' compiles takes seconds, and
/// Prometheus gives a scrape 10 s by default.
const WAIT_FOR_RECOUNT: Duration = Duration::from_secs(2);

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            uploads: Family::default(),
            upload_bytes: Counter::default(),
            requests: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            counts: std::sync::Mutex::default(),
            recounting: tokio::sync::Mutex::default(),
        }
    }
}

/// What the history counts are derived from: the last scan (every entry and its compile times
/// land with one) and the last hook event. Both ids only grow; two index look-ups.
async fn data_version(db: &Db) -> sqlx::Result<(i64, i64)> {
    sqlx::query_as("SELECT COALESCE((SELECT MAX(id) FROM scans), 0), COALESCE((SELECT MAX(id) FROM events), 0)")
        .fetch_one(db.pool())
        .await
}

/// The one read of per-machine hit/miss/compile counts: the all-time history per machine, as
/// `/api/v1/history` counts it. (Where per-hour aggregates exist, sum them here instead.)
async fn history_by_machine(db: &Db) -> sqlx::Result<MachineCounts> {
    let rows = history::by_machine(db.pool(), &HistoryFilter::default()).await?;
    Ok(rows.into_iter().map(|r| (r.name, r.counts)).collect())
}

impl Metrics {
    fn cached(&self) -> (Option<(i64, i64)>, Arc<MachineCounts>) {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Per-machine counts, recounted when data landed since they were counted. A slow recount
    /// goes on in the background while this scrape shows the previous counts.
    async fn fleet_counts(self: &Arc<Self>, db: &Db) -> sqlx::Result<Arc<MachineCounts>> {
        let now = data_version(db).await?;
        let (version, counts) = self.cached();
        if version == Some(now) {
            return Ok(counts);
        }
        let (me, d) = (self.clone(), db.clone());
        let task = tokio::spawn(async move { me.recount(&d, now).await });
        let joined = match version {
            None => task.await,
            Some(_) => match tokio::time::timeout(WAIT_FOR_RECOUNT, task).await {
                Ok(j) => j,
                Err(_) => return Ok(counts),
            },
        };
        joined.map_err(|e| sqlx::Error::Protocol(format!("metrics recount failed: {e}")))?
    }

    /// Count at data version `now`, unless a recount that ran meanwhile already did.
    async fn recount(&self, db: &Db, now: (i64, i64)) -> sqlx::Result<Arc<MachineCounts>> {
        let _one = self.recounting.lock().await;
        let (version, counts) = self.cached();
        if version.is_some_and(|v| v.0 >= now.0 && v.1 >= now.1) {
            return Ok(counts);
        }
        let fresh = Arc::new(history_by_machine(db).await?);
        *self.counts.lock().unwrap_or_else(|e| e.into_inner()) = (Some(now), fresh.clone());
        Ok(fresh)
    }

    /// The whole exposition: per-machine figures, then the server's metrics.
    async fn render(self: &Arc<Self>, db: &Db) -> Result<String, AppError> {
        db.fresh_summaries().await?;
        let machines = summaries::machine_summaries(db.pool(), Page::ALL).await?;
        let counts = self.fleet_counts(db).await?;
        let none = Counts::default();
        let mut reg = Registry::default();
        for s in PER_MACHINE {
            let values = machines.iter().filter_map(|m| {
                let v = (s.value)(m, counts.get(&m.name).unwrap_or(&none))?;
                Some((MachineLabel { machine: m.name.clone() }, v))
            });
            if s.counter {
                let fam = Family::<MachineLabel, Counter<f64, AtomicU64>>::default();
                values.for_each(|(l, v)| {
                    fam.get_or_create(&l).inc_by(v.max(0.0));
                });
                register(&mut reg, s.name, s.help, s.unit, fam);
            } else {
                let fam = Family::<MachineLabel, Gauge<f64, AtomicU64>>::default();
                values.for_each(|(l, v)| {
                    fam.get_or_create(&l).set(v);
                });
                register(&mut reg, s.name, s.help, s.unit, fam);
            }
        }
        register_hazards(&mut reg, crate::db::hazards::read(db.pool(), None).await?);
        reg.register(
            "cachelens_uploads",
            "Scan uploads (POST /api/v1/scans, staged upload commits) by HTTP status",
            self.uploads.clone(),
        );
        let bytes_help = "Bytes of scan upload bodies received, as sent (compressed)";
        register(&mut reg, "cachelens_upload", bytes_help, Some("bytes"), self.upload_bytes.clone());
        let time_help = "Time to answer a request, until its response headers, by route pattern";
        register(&mut reg, "cachelens_http_request_duration", time_help, Some("seconds"), self.requests.clone());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg)
            .map_err(|e| AppError::Internal(anyhow::anyhow!("encoding metrics: {e}")))?;
        Ok(out)
    }
}

/// Per machine and root, the hazards its latest scan reported (`db::hazards`, as the machine
/// page shows them).
fn register_hazards(reg: &mut Registry, roots: Vec<crate::db::hazards::RootHazards>) {
    type Value = fn(&crate::model::Hazards) -> f64;
    let series: [(&str, &str, Option<&str>, Value); 7] = [
        ("cachelens_cache_inodes", "Inodes the root's live entries use (entry dirs and their files)", None, |h| {
            h.cache_inodes as f64
        }),
        ("cachelens_fs_inodes", "Inodes of the file system the root sits on", None, |h| h.fs_inodes as f64),
        ("cachelens_fs_free_inodes", "Free inodes of the file system the root sits on", None, |h| {
            h.fs_inodes_free as f64
        }),
        ("cachelens_fs_free", "Free bytes of the file system the root sits on", Some("bytes"), |h| {
            h.fs_bytes_free as f64
        }),
        ("cachelens_orphaned_temp_dirs", "Writers' temp dirs older than an hour in the root", None, |h| {
            h.orphan_temps as f64
        }),
        ("cachelens_network_fs", "1 when the root sits on a network or cluster file system", None, |h| {
            f64::from(u8::from(h.network))
        }),
        ("cachelens_shared_cache", "1 when other hosts or machines write the root (a shared cache)", None, |h| {
            f64::from(u8::from(crate::scan::hazards::shared(h)))
        }),
    ];
    for (name, help, unit, value) in series {
        let fam = Family::<RootLabels, Gauge<f64, AtomicU64>>::default();
        for r in &roots {
            fam.get_or_create(&RootLabels { machine: r.machine.clone(), root: r.root.clone() }).set(value(&r.hazards));
        }
        register(reg, name, help, unit, fam);
    }
}

/// Register `metric`; a unit is appended to the name (OpenMetrics), `_total` to a counter's.
fn register(reg: &mut Registry, name: &str, help: &str, unit: Option<&str>, metric: impl Metric) {
    match unit {
        Some("seconds") => reg.register_with_unit(name, help, Unit::Seconds, metric),
        Some("bytes") => reg.register_with_unit(name, help, Unit::Bytes, metric),
        Some(other) => reg.register_with_unit(name, help, Unit::Other(other.into()), metric),
        None => reg.register(name, help, metric),
    }
}

/// One per-machine series: its value for a machine (`None`: no sample) from the machine's
/// summary (`/api/v1/machines`) and history counts (`/api/v1/history`).
struct Series {
    name: &'static str,
    help: &'static str,
    unit: Option<&'static str>,
    counter: bool,
    value: fn(&MachineSummary, &Counts) -> Option<f64>,
}

const PER_MACHINE: &[Series] = &[
    Series {
        name: "cachelens_entries",
        help: "Live cache entries of the machine (as /api/v1/machines)",
        unit: None,
        counter: false,
        value: |m, _| Some(m.entries as f64),
    },
    Series {
        name: "cachelens_bytes",
        help: "Bytes of the machine's live cache entries (as /api/v1/machines)",
        unit: None,
        counter: false,
        value: |m, _| Some(m.bytes as f64),
    },
    Series {
        name: "cachelens_relocated_entries",
        help: "Live entries whose group file points to another path: Triton misses on them where they sit",
        unit: None,
        counter: false,
        value: |m, _| Some(m.relocated as f64),
    },
    Series {
        name: "cachelens_last_scan_timestamp",
        help: "Unix time of the machine's last scan",
        unit: Some("seconds"),
        counter: false,
        value: |m, _| m.last_scan_at.map(|t| t as f64 / 1000.0),
    },
    Series {
        name: "cachelens_cache_hits",
        help: "Cache lookups that found an entry: hook events (as /api/v1/history)",
        unit: None,
        counter: true,
        value: |_, c| Some(c.hits as f64),
    },
    Series {
        name: "cachelens_cache_misses",
        help: "Cache lookups that compiled: hook misses plus compiles inferred from entry times (as /api/v1/history)",
        unit: None,
        counter: true,
        value: |_, c| Some(c.misses as f64),
    },
    Series {
        name: "cachelens_compiles",
        help: "Kernel compiles: hook compile events plus compiles inferred from entry times (as /api/v1/history)",
        unit: None,
        counter: true,
        value: |_, c| Some(c.compiles as f64),
    },
    Series {
        name: "cachelens_inferred_compiles",
        help: "Compiles known only from an entry's metadata time, without a duration",
        unit: None,
        counter: true,
        value: |_, c| Some(c.inferred_compiles as f64),
    },
    Series {
        name: "cachelens_hook_events",
        help: "Hook events received (0: the machine's hits are unknown)",
        unit: None,
        counter: true,
        value: |_, c| Some(c.hook_events as f64),
    },
    Series {
        name: "cachelens_compile",
        help: "Compile time the hook measured: time lost to misses",
        unit: Some("seconds"),
        counter: true,
        value: |_, c| Some(c.compile_ms.unwrap_or(0.0) / 1000.0),
    },
];

/// `GET /metrics`.
pub async fn handler(State(s): State<AppState>) -> Result<Response, ApiError> {
    let text = s.metrics.render(&s.db).await?;
    let mut resp = text.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    Ok(resp)
}

/// Layer of the whole app: time every request by its route pattern.
pub async fn track_requests(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map_or(UNMATCHED, |p| p.as_str()).to_string();
    // Standard methods by name; any other (hyper accepts made-up ones) as one label.
    let method = match req.method().as_str() {
        m @ ("GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS" | "TRACE" | "CONNECT") => m,
        _ => "other",
    }
    .to_string();
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    s.metrics.requests.get_or_create(&RouteLabels { route, method }).observe(started.elapsed().as_secs_f64());
    resp
}

/// Layer of the upload routes: count scan uploads by status (`POST /api/v1/scans`, and a staged
/// upload's commit), and the bytes of every upload body as they are read (a whole report, a
/// staged upload's parts, blobs and commit; a body refused before it is read counts no bytes).
pub async fn track_uploads(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    let is_scan = path == "/api/v1/scans" || path == "/api/v1/uploads/{id}/commit";
    if !(path == "/api/v1/scans" || path.starts_with("/api/v1/uploads")) {
        return next.run(req).await;
    }
    let counter = s.metrics.upload_bytes.clone();
    let req = req.map(|body| {
        axum::body::Body::new(body.map_frame(move |f| {
            if let Some(d) = f.data_ref() {
                counter.inc_by(d.len() as u64);
            }
            f
        }))
    });
    let resp = next.run(req).await;
    if is_scan {
        s.metrics.uploads.get_or_create(&StatusLabel { status: resp.status().as_u16() }).inc();
    }
    resp
}
