//! A database written by the previous release is served by this one: `tests/fixtures/old-db/`
//! (made by `scripts/old-db-fixture.sh` with a binary of commit 585be6e, migrations up to 0031)
//! holds the database and the answers that release's server gave for every GET route of
//! /api/v1 it had. The current `cachelens serve` opens a copy (running every later migration),
//! answers the same requests, and each answer must equal the pinned one but for the
//! differences named in [`ALLOWED`], each a route, a field path and why it changed by design.
//! Then every answer, the routes added since and `/metrics` included, must equal those of a
//! database this build scans from the same caches (what the migrations fill in is what a scan
//! records; only what a scan measures on the file system waits for the next scan), and
//! an unchanged re-scan into the migrated database lands and changes no answer.
mod diff;

use crate::common::{bin, spawn_served, unpack};
use diff::{Allowed, Kind, unexplained};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// An answer: (path under /api/v1, status, body).
type Answer = (String, u16, Value);

/// The fixture's dir.
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/old-db")
}

/// Where the fixture script unpacked the caches (`<machine>/cache/triton-cache`): a scan root is
/// stored as its path, so a re-scan must read a cache there to be the same root.
const BASE: &str = "/tmp/cachelens-old-db-fixture";

/// A history row's hit rate over the hook's lookups: hits / (hits + misses − inferred compiles).
fn hook_hit_rate(row: &Value) -> bool {
    let n = |k: &str| row[k].as_f64().unwrap();
    let lookups = n("hits") + n("misses") - n("inferred_compiles");
    lookups > 0.0 && row["hit_rate"].as_f64() == Some(n("hits") / lookups)
}

/// Hits' saved compile time: as many saving hits as hits at most, a time only with one.
fn saved(row: &Value) -> bool {
    let hits = row["saved_hits"].as_i64().unwrap();
    hits <= row["hits"].as_i64().unwrap() && row["saved_ms"].is_null() == (hits == 0)
}

/// A row's compile time is a whole number of nanoseconds (`db::history::ms`).
fn to_the_nanosecond(row: &Value) -> bool {
    row["compile_ms"].as_f64().is_some_and(|ms| (ms * 1e6).round() / 1e6 == ms)
}

/// A report's recompile cost is of its invalidated entries.
fn cost_of_invalidated(report: &Value) -> bool {
    report["cost"]["of"] == report["invalidated_total"]
}

/// The page's groups: one per cause of `by_cause`, with its count.
fn groups_by_cause(report: &Value) -> bool {
    let groups = report["groups"].as_array().unwrap();
    let of = |g: &Value| (g["cause"].clone(), g["entries"].clone());
    let by: Vec<_> =
        report["by_cause"].as_array().unwrap().iter().map(|c| (c["cause"].clone(), c["count"].clone())).collect();
    groups.iter().map(of).collect::<Vec<_>>() == by
}

/// Every difference from the previous release's answers that is by design. Nothing else may
/// differ; an entry no answer needs any more fails the test too (so the list stays exact).
const ALLOWED: &[Allowed] = &[
    Allowed {
        route: "/history",
        path: "[].hit_rate",
        kind: Kind::Changed,
        holds: hook_hit_rate,
        why: "hit rates count only the hook's lookups (6475360): compiles inferred from file times are no lookups",
    },
    Allowed {
        route: "/history/kernels",
        path: "[].hit_rate",
        kind: Kind::Changed,
        holds: hook_hit_rate,
        why: "as /history's",
    },
    Allowed {
        route: "/history",
        path: "[].saved_hits",
        kind: Kind::Added,
        holds: saved,
        why: "what hits saved (6475360, migration 0037 keeps it at ingest)",
    },
    Allowed { route: "/history", path: "[].saved_ms", kind: Kind::Added, holds: saved, why: "as saved_hits" },
    Allowed {
        route: "/history",
        path: "[].compile_ms",
        kind: Kind::Changed,
        holds: to_the_nanosecond,
        why: "sums of milliseconds to the nanosecond: the same on every read, on either store (db::history::ms)",
    },
    Allowed { route: "/history/kernels", path: "[].saved_hits", kind: Kind::Added, holds: saved, why: "as /history's" },
    Allowed { route: "/history/kernels", path: "[].saved_ms", kind: Kind::Added, holds: saved, why: "as /history's" },
    Allowed {
        route: "/invalidations",
        path: ".cost",
        kind: Kind::Added,
        holds: cost_of_invalidated,
        why: "the recompile cost the page shows (9d06026)",
    },
    Allowed {
        route: "/invalidations",
        path: ".groups",
        kind: Kind::Added,
        holds: groups_by_cause,
        why: "the page's groups: each cause's reasons, kernels and cost (9d06026)",
    },
];

/// What differs between the migrated database and one this build made from the same caches:
/// when each scan ran and how long it took (and [`ADVICE_TIMES`]). Nothing else: the migrations
/// fill in what later releases record, as a scan would.
const SCAN_TIMES: &[Allowed] = &[
    Allowed { route: "/scans", path: "[].scanned_at", kind: Kind::Changed, holds: any, why: "scanned later" },
    Allowed { route: "/scans", path: "[].duration_ms", kind: Kind::Changed, holds: any, why: "timed anew" },
    Allowed { route: "/machines", path: "[].last_scan_at", kind: Kind::Changed, holds: any, why: "scanned later" },
    Allowed { route: "/timeline", path: "[].at", kind: Kind::Changed, holds: any, why: "when its scan was made" },
];

/// When a machine's advice was computed: as a scan of any machine lands, and when a database
/// without it is first served.
const ADVICE_TIMES: &[Allowed] = &[
    Allowed {
        route: "/machines/h100-hook/advice",
        path: ".computed_at",
        kind: Kind::Changed,
        holds: any,
        why: "computed when its scan landed, or when the migrated database was first served",
    },
    Allowed {
        route: "/machines/mi300-1/advice",
        path: ".computed_at",
        kind: Kind::Changed,
        holds: any,
        why: "as h100-hook's",
    },
];

/// No condition on the new value.
fn any(_: &Value) -> bool {
    true
}

/// The pinned answers: (path under /api/v1, status, body).
fn pinned() -> Vec<Answer> {
    let text = std::fs::read_to_string(fixture().join("answers.jsonl")).unwrap();
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["get"].as_str().unwrap().to_string(), v["status"].as_u64().unwrap() as u16, v["body"].clone())
        })
        .collect()
}

/// The fixture's database, decompressed into `dir`.
fn old_db(dir: &Path) -> PathBuf {
    let xz = std::fs::read(fixture().join("old.sqlite.xz")).unwrap();
    let mut db = Vec::new();
    lzma_rs::xz_decompress(&mut &xz[..], &mut db).unwrap();
    let path = dir.join("cachelens.db");
    std::fs::write(&path, db).unwrap();
    path
}

/// `cachelens serve` of this build on `db`: (the server, its URL). (Every database of this test
/// is an SQLite file, whatever the tests' store: it migrates an old release's file.)
fn serve(db: &Path) -> (crate::common::Served, String) {
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("serve").arg("--db").arg(db).args(["--listen", "127.0.0.1:0"]);
    // migrating takes a moment on a loaded machine; the wait is no assertion on time
    spawn_served(cmd, 300)
}

/// What a scan measures of its root's file system (db/hazards.rs): absent from `/metrics` for a
/// machine not scanned since the migration, as nothing measured it.
const HAZARD_SERIES: &[&str] = &[
    "cachelens_cache_inodes",
    "cachelens_fs_free_bytes",
    "cachelens_fs_free_inodes",
    "cachelens_fs_inodes",
    "cachelens_network_fs",
    "cachelens_orphaned_temp_dirs",
    "cachelens_shared_cache",
];

/// `/metrics` of the server at `url`, as a set of lines (series in any order), the scan times
/// (when the scans ran) and request durations (of this process) left out; and the lines of
/// [`HAZARD_SERIES`] apart.
async fn metrics(url: &str) -> (std::collections::BTreeSet<String>, std::collections::BTreeSet<String>) {
    let text =
        cachelens::upload::client().unwrap().get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    let name = |l: &str| {
        let l = l.strip_prefix("# ").map(|c| c.split(' ').nth(1).unwrap_or("")).unwrap_or(l);
        l.split(['{', ' ']).next().unwrap().to_string()
    };
    let timed = ["cachelens_last_scan_timestamp_seconds", "cachelens_http_request_duration_seconds"];
    let lines = text.lines().filter(|l| !timed.iter().any(|t| name(l).starts_with(t))).map(str::to_string);
    lines.partition(|l| !HAZARD_SERIES.contains(&name(l).as_str()))
}

/// Each pinned route asked of the server at `url`: (path, status, body).
async fn ask_all(url: &str, routes: &[Answer]) -> Vec<Answer> {
    let http = cachelens::upload::client().unwrap();
    let mut out = Vec::new();
    for (get, _, _) in routes {
        let r = http.get(format!("{url}/api/v1{get}")).send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {get}: not JSON ({e}): {text}"));
        out.push((get.clone(), status, body));
    }
    out
}

/// The cache of `machine` at its fixed path (see [`BASE`]): a fresh copy of corpus `archive`
/// with only the entry dirs holding a file `keep` takes (the fixture script's subsets); its root.
fn place(machine: &str, archive: &str, keep: fn(&str) -> bool) -> PathBuf {
    let machine_dir = Path::new(BASE).join(machine);
    std::fs::create_dir_all(&machine_dir).unwrap();
    let staging = TempDir::new_in(&machine_dir).unwrap();
    unpack(archive, staging.path());
    let root = staging.path().join(archive).join("triton-cache");
    for d in std::fs::read_dir(&root).unwrap().flatten().filter(|d| d.path().is_dir()) {
        let names: Vec<String> =
            std::fs::read_dir(d.path()).unwrap().flatten().map(|f| f.file_name().to_string_lossy().into()).collect();
        if !names.iter().any(|n| keep(n)) {
            std::fs::remove_dir_all(d.path()).unwrap();
        }
    }
    let cache = machine_dir.join("cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::rename(staging.path().join(archive), &cache).unwrap();
    cache.join("triton-cache")
}

/// `cachelens scan` of this build: `root` into `db` as `machine`, crediting it every hook event
/// (as the fixture script did); its JSON summary.
fn scan(db: &Path, machine: &str, root: &Path) -> Value {
    let out = std::process::Command::new(bin())
        .arg("scan")
        .arg("--db")
        .arg(db)
        .args(["--machine", machine, "--hook-host", "*", "--json", "-q"])
        .arg(root)
        .env_remove("CACHELENS_DB")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The fixture's caches scanned by this build into a fresh `db`, in the fixture's order.
fn fresh(db: &Path) {
    let any = |_: &str| true;
    scan(db, "h100-hook", &place("h100-hook", "h100-hook-3.6.0", any));
    let upgraded = |n: &str| ["add_kernel.", "softmax_kernel.", "layernorm_kernel."].iter().any(|k| n.starts_with(k));
    scan(db, "mi300-1", &place("mi300-1", "mi300-upgrade-1-triton-3.6.0", upgraded));
    // snapshot 2 holds both generations: the same dir after an in-place upgrade
    scan(db, "mi300-1", &place("mi300-1", "mi300-upgrade-2-triton-3.9.0", upgraded));
    let add_and_autotune = |n: &str| n.starts_with("add_kernel.") || n.ends_with(".autotune.json");
    scan(db, "h100-a", &place("h100-a", "h100-jit-3.6.0", add_and_autotune));
}

/// Routes the previous release did not have, asked of the migrated database and of a fresh one.
fn new_routes(old: &[Answer]) -> Vec<Answer> {
    let hook = &old.iter().find(|(g, _, _)| g == "/entries?machine=h100-hook").unwrap().2;
    let key = hook[0]["key"].as_str().unwrap();
    [
        "/timeline".to_string(),
        "/timeline?limit=2&offset=1".into(),
        "/headline".into(),
        "/headline?machine=h100-hook".into(),
        "/machines/h100-hook/advice".into(),
        "/machines/mi300-1/advice".into(),
        format!("/search?key={}", &key[..4]),
        format!("/search?key=h100-hook:{key}"),
    ]
    .into_iter()
    .map(|g| (g, 200, Value::Null))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_the_previous_release_answers_as_it_did() {
    let old = pinned();
    // every GET route of /api/v1 the previous release had is asked
    for route in [
        "/machines",
        "/scans",
        "/kernels",
        "/entries",
        "/autotune",
        "/compare",
        "/nearest",
        "/invalidations",
        "/history",
        "/history/kernels",
    ] {
        let asked = old.iter().filter(|(g, s, _)| g.split('?').next() == Some(route) && *s == 200).count();
        assert!(asked > 0, "the fixture asks no {route}");
    }
    let dir = TempDir::new().unwrap();
    let db = old_db(dir.path());
    // the migrations applied, with their checksums; this build's: every one, unchanged since
    let applied = |db: PathBuf| async move {
        let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(db).read_only(true);
        let pool = sqlx::SqlitePool::connect_with(opts).await.unwrap();
        let v: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT version, checksum FROM _sqlx_migrations WHERE success ORDER BY version")
                .fetch_all(&pool)
                .await
                .unwrap();
        pool.close().await;
        v
    };
    let ours: Vec<(i64, Vec<u8>)> = cachelens::db::MIGRATOR.iter().map(|m| (m.version, m.checksum.to_vec())).collect();
    let released: Vec<_> = ours.iter().filter(|(v, _)| *v <= 31).cloned().collect();
    assert_eq!(applied(db.clone()).await, released, "the fixture has the migrations up to 0031, as they landed");

    let (server, url) = serve(&db);
    let migrated = ask_all(&url, &old).await;
    let routes = new_routes(&old);
    let migrated_new = ask_all(&url, &routes).await;
    let (migrated_metrics, migrated_hazards) = metrics(&url).await;
    drop(server);
    assert!(migrated_hazards.is_empty(), "{migrated_hazards:?}");
    for (get, status, body) in &migrated_new {
        assert_eq!(*status, 200, "GET {get}: {body}");
    }
    let mut used = vec![false; ALLOWED.len()];
    let bad = unexplained(&old, &migrated, ALLOWED, &mut used);
    assert!(bad.is_empty(), "{} answers differ from the previous release's:\n{}", bad.len(), bad.join("\n"));
    let stale: Vec<_> =
        ALLOWED.iter().zip(&used).filter(|(_, u)| !**u).map(|(a, _)| (a.route, a.path, a.why)).collect();
    assert!(stale.is_empty(), "allowed differences no answer shows any more: {stale:?}");
    assert_eq!(applied(db.clone()).await, ours, "every migration of this build is applied");
    // each scan knows its root's Triton version (0044): the next scan of a root compares with it
    let pool = sqlx::SqlitePool::connect_with(sqlx::sqlite::SqliteConnectOptions::new().filename(&db).read_only(true))
        .await
        .unwrap();
    let versions: Vec<(i64, Option<String>)> =
        sqlx::query_as("SELECT id, triton_version FROM scans ORDER BY id").fetch_all(&pool).await.unwrap();
    pool.close().await;
    let want = [(1, "3.6.0"), (2, "3.6.0"), (3, "3.9.0"), (4, "3.6.0")].map(|(i, v)| (i, Some(v.to_string())));
    assert_eq!(versions, want);

    // the same caches scanned by this build into a fresh database answer every route, the new
    // ones too, as the migrated one does, but for when the scans ran
    let fresh_db = dir.path().join("fresh.db");
    fresh(&fresh_db);
    let (server, url) = serve(&fresh_db);
    let (fresh_old, fresh_new) = (ask_all(&url, &old).await, ask_all(&url, &routes).await);
    let (fresh_metrics, fresh_hazards) = metrics(&url).await;
    drop(server);
    let odd: Vec<_> = migrated_metrics.symmetric_difference(&fresh_metrics).collect();
    assert!(odd.is_empty(), "/metrics of the migrated database and a fresh one differ: {odd:?}");
    assert!(
        fresh_hazards.iter().any(|l| l.starts_with("cachelens_cache_inodes{machine=\"mi300-1\"")),
        "{fresh_hazards:?}"
    );
    let times = [SCAN_TIMES, ADVICE_TIMES].concat();
    let mut used = vec![false; times.len()];
    let mut bad = unexplained(&migrated, &fresh_old, &times, &mut used);
    bad.extend(unexplained(&migrated_new, &fresh_new, &times, &mut used));
    assert!(
        bad.is_empty(),
        "{} answers of the migrated database differ from a fresh one's:\n{}",
        bad.len(),
        bad.join("\n")
    );

    // an unchanged re-scan of h100-hook (its cache is where it was) lands: nothing new, changed
    // or removed, no hook event read twice; then every answer is as before but the new scan's
    let s = scan(&db, "h100-hook", &Path::new(BASE).join("h100-hook/cache/triton-cache"));
    let s = &s["scans"][0];
    assert_eq!(s["root"], format!("{BASE}/h100-hook/cache/triton-cache"), "{s}");
    assert_eq!(s["events"].as_i64(), Some(0), "the hook's events were read before the migration: {s}");
    assert_eq!((s["entries"].as_i64(), s["new_entries"].as_i64()), (Some(20), Some(0)), "{s}");
    assert_eq!((s["changed_entries"].as_i64(), s["removed_entries"].as_i64()), (Some(0), Some(0)), "{s}");
    let (server, url) = serve(&db);
    let (rescanned, rescanned_new) = (ask_all(&url, &old).await, ask_all(&url, &routes).await);
    drop(server);
    let new_scan = rescanned.iter().find(|(g, _, _)| g == "/scans").unwrap().2[0].clone();
    assert_eq!((&new_scan["id"], &new_scan["machine"]), (&s["scan_id"], &Value::from("h100-hook")), "{new_scan}");
    let mut expected = migrated.clone();
    for (get, _, body) in &mut expected {
        match get.as_str() {
            // the new scan heads the list of scans
            "/scans" => body.as_array_mut().unwrap().insert(0, new_scan.clone()),
            // h100-hook was scanned last at that scan
            "/machines" => {
                for m in body.as_array_mut().unwrap().iter_mut().filter(|m| m["name"] == "h100-hook") {
                    m["last_scan_at"] = new_scan["scanned_at"].clone();
                }
            }
            _ => {}
        }
    }
    let mut used = vec![false; ADVICE_TIMES.len()];
    let mut bad = unexplained(&expected, &rescanned, &[], &mut []);
    bad.extend(unexplained(&migrated_new, &rescanned_new, ADVICE_TIMES, &mut used));
    assert!(bad.is_empty(), "{} answers changed after an unchanged re-scan:\n{}", bad.len(), bad.join("\n"));
}
