//! Every GET route of the dashboard and the API, as the load benchmark drives it: one row per
//! (route, request shape), with URL templates the benchmark fills from the fleet it built.
//!
//! `tests/e2e/bench_routes.rs` compares [`ROUTES`]' patterns with the GET routes registered in
//! `backend/web/**` and fails when the router gains one this list does not cover: add a row here
//! (and a placeholder in `benches/load/main.rs` if it needs a new fact of the fleet).
//!
//! Placeholders: `{machine}` a bench machine, `{machine2}` another one, `{key}` an entry of
//! `{machine}`, `{artifact}` one of its files, `{kernel}` a kernel, `{q}` a search term, `{up}`
//! the machine upgraded in place, `{from}`/`{to}` its two scans, `{old}`/`{new}` an entry of the
//! old and of the new release on it (same kernel), `{pair_old}`/`{pair_new}` two machines on two
//! releases, `{autotune}` the machine with real autotune decisions, `{decision}` one of them.
//! A template starting with `HX ` is sent with `HX-Request: true` (the htmx partial).
#![allow(dead_code)] // the test reads the patterns only

/// One timed row: the route's pattern as registered, a label, the URL templates (cycled).
pub struct Route {
    pub pattern: &'static str,
    pub label: &'static str,
    pub urls: &'static [&'static str],
}

const fn r(pattern: &'static str, label: &'static str, urls: &'static [&'static str]) -> Route {
    Route { pattern, label, urls }
}

pub const ROUTES: &[Route] = &[
    r("/", "overview", &["/"]),
    r("/machines/{name}", "machine page", &["/machines/{machine}"]),
    r("/machines/{name}", "machine page (upgraded)", &["/machines/{up}"]),
    r("/kernels", "kernel search (htmx partial)", &["HX /kernels?q={q}"]),
    r("/kernels", "kernel search, machine, by size", &["/kernels?q={q}&machine={machine}&sort=size"]),
    r("/kernels/{name}", "kernel page", &["/kernels/{kernel}"]),
    // the machine filter reads the kernel's live entries fleet-wide (db/kernel_cells_on.sql)
    r("/kernels/{name}", "kernel page, one machine", &["/kernels/{kernel}?machine={machine}"]),
    r("/entries/{machine}/{key}", "entry page", &["/entries/{machine}/{key}"]),
    r("/entries/{machine}/{key}/raw/{artifact}", "raw artifact", &["/entries/{machine}/{key}/raw/{artifact}"]),
    r("/entries/{machine}/{key}/nearest", "nearest page", &["/entries/{machine}/{key}/nearest"]),
    r("/compare", "compare (upgrade pair)", &["/compare?a={up}:{old}&b={up}:{new}"]),
    r("/invalidations", "invalidations same-release pair", &["/invalidations?a={machine}&b={machine2}"]),
    r("/invalidations", "invalidations release pair", &["/invalidations?a={pair_old}&b={pair_new}"]),
    r("/invalidations", "invalidations upgrade in place", &["/invalidations?machine={up}&from={from}&to={to}"]),
    r("/history", "history (fleet)", &["/history"]),
    r("/history", "history kernel", &["/history?kernel={kernel}"]),
    r("/history", "history machine", &["/history?machine={machine}"]),
    r("/autotune", "autotune decisions (machine)", &["/autotune?machine={autotune}"]),
    r("/autotune/{id}", "autotune decision", &["/autotune/{decision}"]),
    r("/metrics", "prometheus metrics", &["/metrics"]),
    r("/static/{*path}", "static file", &["/static/style.css"]),
    r("/favicon.ico", "favicon", &["/favicon.ico"]),
    r("/login", "login (redirect)", &["/login"]),
    r("/search", "key search (machine:prefix)", &["/search?key={machine}:{key}"]),
    r("/api/v1/machines", "api machines", &["/api/v1/machines"]),
    r("/api/v1/machines/{name}/advice", "api what can go (machine)", &["/api/v1/machines/{machine}/advice"]),
    r("/api/v1/search", "api key search (machine:prefix)", &["/api/v1/search?key={machine}:{key}"]),
    r("/api/v1/headline", "api headline (fleet)", &["/api/v1/headline"]),
    r("/api/v1/headline", "api headline (machine)", &["/api/v1/headline?machine={machine}"]),
    r("/api/v1/scans", "api scans", &["/api/v1/scans?machine={machine}"]),
    r("/api/v1/timeline", "api timeline", &["/api/v1/timeline"]),
    r("/api/v1/kernels", "api kernels", &["/api/v1/kernels?q={q}"]),
    r("/api/v1/entries", "api entries", &["/api/v1/entries?machine={machine}&kernel={kernel}"]),
    r("/api/v1/entries", "api entries (machine, deep page)", &["/api/v1/entries?machine={machine}&offset=40000"]),
    r("/api/v1/entries", "api entries (fleet, deep page)", &["/api/v1/entries?offset={deep}"]),
    r("/api/v1/autotune", "api autotune", &["/api/v1/autotune?machine={machine}&limit=100"]),
    r("/api/v1/compare", "api compare", &["/api/v1/compare?a={up}:{old}&b={up}:{new}"]),
    r("/api/v1/nearest", "api nearest", &["/api/v1/nearest?entry={machine}:{key}"]),
    r("/api/v1/invalidations", "api invalidations same-release", &["/api/v1/invalidations?a={machine}&b={machine2}"]),
    r("/api/v1/invalidations", "api invalidations release pair", &["/api/v1/invalidations?a={pair_old}&b={pair_new}"]),
    r(
        "/api/v1/invalidations",
        "api invalidations upgrade",
        &["/api/v1/invalidations?machine={up}&from={from}&to={to}"],
    ),
    r("/api/v1/history", "api history (fleet)", &["/api/v1/history"]),
    r("/api/v1/history", "api history kernel", &["/api/v1/history?kernel={kernel}"]),
    r("/api/v1/history/kernels", "api history kernels", &["/api/v1/history/kernels"]),
];

/// The GET routes registered in the router's source: `.route("PATH", get(...))` in
/// `backend/web/**/*.rs`; routes of `backend/web/api/` are nested under `/api/v1` (unless written
/// with it). `files` are (path relative to `backend/web`, text).
pub fn registered_get_routes(files: &[(String, String)]) -> Vec<String> {
    let mut out = vec![];
    for (path, text) in files {
        let api = path.starts_with("api/");
        let mut rest = text.as_str();
        while let Some(i) = rest.find(".route(") {
            rest = &rest[i + ".route(".len()..];
            let call = &rest[..rest.find(".route(").unwrap_or(rest.len())];
            let Some(open) = call.find('"') else { continue };
            let Some(len) = call[open + 1..].find('"') else { continue };
            let route = &call[open + 1..open + 1 + len];
            let args = call[open + 1 + len + 1..].trim_start().trim_start_matches(',').trim_start();
            let is_get = args.starts_with("get(") || args.starts_with("axum::routing::get(") || args.contains(".get(");
            if is_get {
                out.push(if api && !route.starts_with("/api/") {
                    format!("/api/v1{route}")
                } else {
                    route.to_string()
                });
            }
        }
    }
    out.sort();
    out.dedup();
    out
}
