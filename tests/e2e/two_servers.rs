//! Two `cachelens serve` processes on one database (a rolling restart, or two behind one proxy),
//! an SQLite file or a PostgreSQL database: what lands through one is on the other's pages and
//! API within a second, and both answer the same; a report is computed once, and finished by the
//! other when its server dies. Real binaries, real uploads through the CLI; each test runs on
//! both stores (PostgreSQL's from `CACHELENS_TEST_PG`).

use crate::common::*;
use crate::upload::get_json_at;
use cachelens::web::{AppState, Config};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn serve(db: &Path) -> (Served, String) {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--db"]).arg(db);
    spawn_served(cmd, 60)
}

fn upload(url: &str, token: &str, machine: &str, cache: &Path) {
    let out = std::process::Command::new(bin())
        .args(["scan", "--quiet", "--server", url, "--token", token, "--machine", machine])
        .arg(cache)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// How long until `url`'s machine list names `machine` (polled every 20 ms, at most 10 s).
async fn until_listed(url: &str, machine: &str) -> Duration {
    let t0 = Instant::now();
    loop {
        let v = get_json_at(&format!("{url}/api/v1/machines")).await;
        if arr(&v).iter().any(|m| m["name"] == machine) {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{machine} never listed by {url}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the two servers must answer alike about `machine`.
async fn answers(url: &str, machine: &str) -> Vec<Value> {
    let mut out = vec![];
    for path in [
        "/api/v1/machines".to_string(),
        "/api/v1/kernels?limit=1000".to_string(),
        format!("/api/v1/entries?machine={machine}&limit=10000"),
        format!("/api/v1/history?machine={machine}&bucket=day"),
    ] {
        out.push(get_json_at(&format!("{url}{path}")).await);
    }
    out
}

/// A new database: an SQLite file in `dir`, or a new PostgreSQL database (`None` when there is
/// no test PostgreSQL and that may be skipped).
async fn team_db(dir: &Path, pg: bool) -> Option<PathBuf> {
    match pg {
        true => new_pg_database("two").await.map(PathBuf::from),
        false => Some(dir.join("team.db")),
    }
}

/// An upload through either server is listed by the other within a second of the upload
/// command's end, and then every answer of both (machines, kernels, the machine's entries and
/// history) is the same, with each server's in-memory answers read before the landing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_through_one_server_is_on_the_other_within_a_second() {
    upload_through_one_read_through_the_other(false).await
}

/// [`an_upload_through_one_server_is_on_the_other_within_a_second`] on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_an_upload_through_one_server_is_on_the_other_within_a_second() {
    upload_through_one_read_through_the_other(true).await
}

async fn upload_through_one_read_through_the_other(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = team_db(dir.path(), pg).await else { return };
    let (ta, tb) = (token_for(&db, "node-a").await, token_for(&db, "node-b").await);
    let (_a, url_a) = serve(&db);
    let (_b, url_b) = serve(&db);
    // both have answered (and kept what they keep in memory) before anything lands
    assert_eq!(answers(&url_a, "node-a").await, answers(&url_b, "node-a").await);
    let (_j, jit) = unpacked("h100-jit-3.6.0");
    let (_m, mi300) = unpacked("mi300-upgrade-1-triton-3.6.0");

    upload(&url_a, &ta, "node-a", &jit.join("triton-cache"));
    let took = until_listed(&url_b, "node-a").await;
    assert!(took < Duration::from_secs(1), "node-a reached the other server after {took:?}");
    assert_eq!(answers(&url_a, "node-a").await, answers(&url_b, "node-a").await);
    let entries = get_json_at(&format!("{url_b}/api/v1/entries?machine=node-a&limit=10000")).await;
    assert!(!arr(&entries).is_empty());

    upload(&url_b, &tb, "node-b", &mi300.join("triton-cache"));
    let took = until_listed(&url_a, "node-b").await;
    assert!(took < Duration::from_secs(1), "node-b reached the other server after {took:?}");
    assert_eq!(answers(&url_a, "node-b").await, answers(&url_b, "node-b").await);
}

/// A server on `db` logging to `log` (report computations at debug), with `failpoint` armed:
/// the child and its URL.
fn serve_logged(db: &Path, log: &Path, failpoint: &str) -> (Served, String) {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .env("CACHELENS_LOG", "warn,cachelens=debug")
        .env("CACHELENS_FAILPOINT", failpoint)
        .env_remove("CACHELENS_DB")
        .stderr(std::fs::File::create(log).unwrap());
    let served = Served(cmd.spawn().unwrap());
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(at) = text.find("on http://") {
            let url = text[at + 3..].lines().next().unwrap().trim().to_string();
            return (served, url);
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the server never said it is serving:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the report tests share: a database of two machines (an A100 cache before and after a
/// Triton upgrade, as two machines), whose pair report is real work; an SQLite database of the
/// same to compute the report on apart (a backup of it, or on PostgreSQL the same caches scanned
/// into a file: the two stores must answer alike); a log file for each of the two servers.
struct Setup {
    db: std::path::PathBuf,
    copy: std::path::PathBuf,
    la: std::path::PathBuf,
    lb: std::path::PathBuf,
}

async fn two_machines(pg: bool) -> Option<(Vec<tempfile::TempDir>, Setup)> {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    let setup = Setup { db: team_db(dir.path(), pg).await?, copy: at("copy.db"), la: at("a.log"), lb: at("b.log") };
    let (_a, old) = unpacked("a100-upgrade-1-triton-3.4.0");
    let (_b, new) = unpacked("a100-upgrade-2-triton-3.5.1");
    let both = if pg { vec![&setup.db, &setup.copy] } else { vec![&setup.db] };
    for db in both {
        let pool = cachelens::db::open(db).await.unwrap();
        scan(&pool, &old.join("triton-cache"), "m1").await;
        scan(&pool, &new.join("triton-cache"), "m2").await;
        pool.close().await;
    }
    if !pg {
        let out = backup_cmd(&setup.db, &setup.copy).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    Some((vec![dir, _a, _b], setup))
}

const PAIR: &str = "/api/v1/invalidations?a=m1&b=m2";

/// Two servers asked for the same report at once compute it once: the first claims it (and is
/// slowed here for 3 s), the second waits for what the first stores. Both answer it, equal to
/// the report a third, in-process server computes on a backup of the database, and only one
/// log says it computed a report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_asked_for_one_report_compute_it_once() {
    one_report_computed_once(false).await
}

/// [`two_servers_asked_for_one_report_compute_it_once`] on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_two_servers_asked_for_one_report_compute_it_once() {
    one_report_computed_once(true).await
}

async fn one_report_computed_once(pg: bool) {
    let Some((_keep, Setup { db, copy, la, lb })) = two_machines(pg).await else { return };
    let (_a, url_a) = serve_logged(&db, &la, "report-claimed-slow");
    let (_b, url_b) = serve_logged(&db, &lb, "report-claimed-slow");
    let first = tokio::spawn(get_json_at_owned(format!("{url_a}{PAIR}")));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = get_json_at(&format!("{url_b}{PAIR}")).await;
    let first = first.await.unwrap();
    assert_eq!(first, second);
    let pool = cachelens::db::open(&copy).await.unwrap();
    let want = get_json(&AppState::new(pool, Config::default()), PAIR).await;
    assert_eq!(second, want);
    let computed = |log: &Path| std::fs::read_to_string(log).unwrap().matches("report computed").count();
    assert_eq!((computed(&la), computed(&lb)), (1, 0), "computations by the first and the second server");
}

async fn get_json_at_owned(url: String) -> Value {
    get_json_at(&url).await
}

/// A server killed while it computes a report leaves its claim behind; the other server, asked
/// for the report, waits for the claim to lapse, then computes and stores it: its answer equals
/// the report computed on a backup, and no claim is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_whose_server_died_is_finished_by_the_other() {
    dead_servers_report_finished(false).await
}

/// [`a_report_whose_server_died_is_finished_by_the_other`] on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_report_whose_server_died_is_finished_by_the_other() {
    dead_servers_report_finished(true).await
}

async fn dead_servers_report_finished(pg: bool) {
    let Some((_keep, Setup { db, copy, la, lb })) = two_machines(pg).await else { return };
    let (_a, url_a) = serve_logged(&db, &la, "report-claimed");
    let (_b, url_b) = serve_logged(&db, &lb, "");
    // the first server claims the report and dies (its request gets no answer)
    let _ = cachelens::upload::client().unwrap().get(format!("{url_a}{PAIR}&wait=0")).send().await;
    let t0 = Instant::now();
    loop {
        let log = std::fs::read_to_string(&la).unwrap_or_default();
        if log.contains("failpoint report-claimed") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the first server never reached its failpoint:\n{log}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pool = cachelens::db::open(&db).await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM report_leases").await, 1, "the dead server's claim");
    let asked = cachelens::upload::client().unwrap().get(format!("{url_b}{PAIR}&wait=0")).send().await.unwrap();
    assert_eq!(asked.status(), 202, "the other server waits for the claim to lapse");
    let asked: Value = asked.json().await.unwrap();
    assert_eq!(asked["computing"], true, "{asked}");
    let answer = get_json_at(&format!("{url_b}{PAIR}")).await;
    let copy_pool = cachelens::db::open(&copy).await.unwrap();
    let want = get_json(&AppState::new(copy_pool, Config::default()), PAIR).await;
    assert_eq!(answer, want);
    assert!(std::fs::read_to_string(&lb).unwrap().contains("report computed"));
    let t0 = Instant::now();
    while count(&pool, "SELECT COUNT(*) FROM report_leases").await > 0 {
        assert!(t0.elapsed() < Duration::from_secs(5), "a claim left behind");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
