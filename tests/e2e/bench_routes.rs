//! The load benchmark covers every GET route: `benches/load/routes.rs` lists the routes it
//! drives; these tests compare that list with the GET routes registered in `backend/web/**`
//! and with what the real router answers, so a new route without a benchmark row fails here.

#[path = "../../benches/load/routes.rs"]
mod routes;

use crate::common::{fresh_db, get};
use cachelens::web::{AppState, Config};
use std::collections::BTreeSet;
use std::path::Path;

/// (path relative to backend/web, text) of every .rs file under backend/web.
fn web_sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, base, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("backend/web");
    let mut out = vec![];
    walk(&base, &base, &mut out);
    out
}

fn covered() -> BTreeSet<String> {
    routes::ROUTES.iter().map(|r| r.pattern.to_string()).collect()
}

#[test]
fn bench_covers_every_registered_get_route() {
    let registered: BTreeSet<String> = routes::registered_get_routes(&web_sources()).into_iter().collect();
    // the parser sees the routes of each router (pages, nested API, the open router)
    for known in ["/", "/entries/{machine}/{key}/nearest", "/api/v1/invalidations", "/api/v1/history/kernels", "/login"]
    {
        assert!(registered.contains(known), "route parser missed {known}: {registered:?}");
    }
    let covered = covered();
    let missing: Vec<_> = registered.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "GET routes the load benchmark does not time: {missing:?}: add rows to benches/load/routes.rs"
    );
    let stale: Vec<_> = covered.difference(&registered).cloned().collect();
    assert!(stale.is_empty(), "benchmark rows for routes that are not registered: {stale:?}");
}

#[test]
fn a_new_get_route_is_caught() {
    let real: BTreeSet<String> = routes::registered_get_routes(&web_sources()).into_iter().collect();
    let mut files = web_sources();
    files.push(("pages/newpage.rs".into(), "Router::new()\n  .route(\n \"/new-page\",\n get(newpage::page))".into()));
    files.push(("api/newapi.rs".into(), r#"Router::new().route("/things", get(things)).route("/x", post(x))"#.into()));
    let registered: BTreeSet<String> = routes::registered_get_routes(&files).into_iter().collect();
    let new: Vec<_> = registered.difference(&real).cloned().collect();
    assert_eq!(new, ["/api/v1/things", "/new-page"]);
    assert!(new.iter().all(|r| !covered().contains(r)), "the coverage test would miss {new:?}");
}

/// Every row's route is answered by the real router (a handler's answer, not the fallback's).
#[tokio::test]
async fn every_bench_route_reaches_a_handler() {
    let (_dir, pool) = fresh_db().await;
    let state = AppState::new(pool, Config::default());
    for r in routes::ROUTES {
        let uri = r
            .pattern
            .replace("{name}", "nosuch")
            .replace("{machine}", "nosuch")
            .replace("{key}", "NOSUCHKEY")
            .replace("{artifact}", "x.json")
            .replace("{*path}", "style.css");
        let (status, body) = get(&state, &uri).await;
        assert!(
            !body.contains("no such page") && !body.contains("no such API endpoint"),
            "{uri} ({}) reached the fallback: {status}",
            r.label
        );
    }
}
