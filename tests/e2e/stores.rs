//! What either store must answer alike, asked of the test PostgreSQL directly (the other e2e
//! tests run on it with `CACHELENS_TEST_STORE=postgres`).

use crate::common::new_pg_database;

/// One statement text run first with a NULL double, then with doubles: PostgreSQL prepares it
/// once with its first parameters' types, and each run stores what it was given (sqlx 0.9.0's
/// Any driver would have typed the NULL as a `float4`: `db::store`).
#[tokio::test]
async fn a_null_double_first_leaves_the_statement_taking_doubles() {
    let Some(url) = new_pg_database("binds").await else { return };
    let store = cachelens::db::open(std::path::Path::new(&url)).await.unwrap();
    sqlx::query("CREATE TABLE t (seq INTEGER, ms REAL)").execute(&store).await.unwrap();
    let values = [None, Some(1735.05_f64), Some(-0.25), None, Some(1e300)];
    for (seq, ms) in values.iter().enumerate() {
        sqlx::query("INSERT INTO t(seq, ms) VALUES (?, ?)").bind(seq as i64).bind(*ms).execute(&store).await.unwrap();
    }
    let back: Vec<Option<f64>> = sqlx::query_scalar("SELECT ms FROM t ORDER BY seq").fetch_all(&store).await.unwrap();
    assert_eq!(back, values);
}

/// Every read-API route worth asking of a database: each list and filter, per machine and per
/// kernel, entries compared, nearest, invalidation reports of machine pairs and of each upgrade.
async fn api_routes(state: &cachelens::web::AppState) -> Vec<String> {
    use crate::common::{arr, get_json};
    use cachelens::fmt::enc;
    let mut r: Vec<String> = [
        "/machines",
        "/scans",
        "/timeline",
        "/timeline?limit=2&offset=1",
        "/kernels",
        "/kernels?sort=size",
        "/autotune?limit=1000",
        "/history",
        "/history?bucket=day",
        "/history?bucket=minute",
        "/history/kernels",
        "/headline",
        "/entries?limit=10000",
    ]
    .map(String::from)
    .into();
    let machines: Vec<String> =
        arr(&get_json(state, "/api/v1/machines").await).iter().map(|m| m["name"].as_str().unwrap().into()).collect();
    assert!(machines.len() >= 3, "{machines:?}");
    for m in &machines {
        let m = enc(m);
        for q in
            ["/scans?machine=", "/kernels?sort=size&machine=", "/entries?limit=10000&machine=", "/headline?machine="]
        {
            r.push(format!("{q}{m}"));
        }
        r.push(format!("/history?bucket=hour&machine={m}"));
        r.push(format!("/machines/{m}/advice"));
        r.push(format!("/autotune?limit=1000&machine={m}"));
    }
    for (a, b) in machines.iter().zip(machines.iter().skip(1)) {
        r.push(format!("/invalidations?a={}&b={}", enc(a), enc(b)));
    }
    // each machine's scans, oldest to newest: the upgrades in place
    for m in &machines {
        let scans = get_json(state, &format!("/api/v1/scans?machine={}", enc(m))).await;
        let roots: std::collections::BTreeSet<&str> = arr(&scans).iter().filter_map(|s| s["root"].as_str()).collect();
        let ids: Vec<i64> = arr(&scans).iter().filter_map(|s| s["id"].as_i64()).collect();
        if let (1, [.., from, to]) = (roots.len(), ids.as_slice()) {
            let (from, to) = ((*from).min(*to), (*from).max(*to));
            r.push(format!("/invalidations?machine={}&from={from}&to={to}", enc(m)));
        }
    }
    let kernels = get_json(state, "/api/v1/kernels?sort=size").await;
    for k in arr(&kernels).iter().take(6) {
        let k = enc(k["name"].as_str().unwrap());
        r.push(format!("/kernels?q={k}"));
        r.push(format!("/history?kernel={k}"));
        r.push(format!("/entries?limit=10000&kernel={k}"));
        // two entries of the kernel compared, and the nearest of one
        let entries = get_json(state, &format!("/api/v1/entries?limit=2&kernel={k}")).await;
        let refs: Vec<String> = arr(&entries)
            .iter()
            .map(|e| format!("{}:{}", e["machine"].as_str().unwrap(), e["key"].as_str().unwrap()))
            .collect();
        if let [a, b] = refs.as_slice() {
            r.push(format!("/compare?a={}&b={}", enc(a), enc(b)));
            r.push(format!("/nearest?entry={}", enc(a)));
            r.push(format!("/search?key={}", enc(&a[..a.len() - 40])));
        }
    }
    r
}

/// `cachelens db copy` moves the demo's database (five machines, upgrades in place, the hook's
/// events, autotune results) from its SQLite file into PostgreSQL with nothing lost: every
/// read-API answer of the copy equals the file's, status and body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_copied_into_postgresql_answers_every_api_route_as_its_file_does() {
    use crate::common::get;
    use cachelens::web::{AppState, Config};
    let Some(url) = new_pg_database("copydemo").await else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.db");
    let lite = cachelens::db::open(&file).await.unwrap();
    cachelens::demo::load(&cachelens::db::Db::from(lite.clone()), &dir.path().join("work")).await.unwrap();
    lite.close().await;
    let out = std::process::Command::new(crate::common::bin())
        .args(["db", "copy", "--from"])
        .arg(&file)
        .args(["--to", &url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let lite = AppState::new(cachelens::db::open(&file).await.unwrap(), Config::default());
    let pg = AppState::new(cachelens::db::open(std::path::Path::new(&url)).await.unwrap(), Config::default());
    let routes = api_routes(&lite).await;
    assert!(routes.len() > 60, "{}", routes.len());
    let mut differ = vec![];
    for route in &routes {
        let uri = format!("/api/v1{route}");
        let (a, b) = (get(&lite, &uri).await, get(&pg, &uri).await);
        assert_eq!(a.0, 200, "GET {uri} of the file: {}", a.1);
        let parse = |s: &str| -> serde_json::Value {
            serde_json::from_str(s).unwrap_or_else(|e| panic!("GET {uri}: not JSON ({e}): {s}"))
        };
        if a.0 != b.0 || parse(&a.1) != parse(&b.1) {
            differ.push(format!("GET {uri}: {} {}\n  file:       {:.600}\n  PostgreSQL: {:.600}", a.0, b.0, a.1, b.1));
        }
    }
    assert!(differ.is_empty(), "{} of {} answers differ:\n{}", differ.len(), routes.len(), differ.join("\n"));
}
