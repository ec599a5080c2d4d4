//! The end of `cachelens scan`'s summary: the machine's hits and misses as the hook saw them
//! (the figures `/api/v1/headline?machine=` answers) and, with `--server`, its dashboard page;
//! a machine without the hook is said to have none, not a 0% hit rate. Local and uploaded, in
//! text and in `--json`.

use crate::common::*;
use crate::upload::{cli_upload, server, text};
use cachelens::web::{AppState, Config};
use serde_json::Value;

/// What the summary's line must say of one window of the headline API (`week` or `all`).
fn said_of(w: &Value) -> String {
    let rate = match w["hit_rate"].as_f64() {
        Some(r) => format!("hit rate {:.1}%", r * 100.0),
        None => "no lookups".into(),
    };
    format!("{rate} ({} hits, {} misses)", w["hits"], w["misses"])
}

/// The JSON `hit_miss` equals the headline API's figures of the same machine.
fn same_figures(hm: &Value, api: &Value) {
    for (ours, theirs) in [("week", "week"), ("all_time", "all")] {
        for k in ["hits", "misses", "hit_rate", "miss_ms", "saved_ms"] {
            assert_eq!(hm[ours][k], api[theirs][k], "{ours}.{k}: {hm} vs {api}");
        }
    }
}

fn cli_scan(db: &std::path::Path, root: &std::path::Path, machine: &str, json: bool) -> (String, String) {
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("scan").arg(root).args(["--quiet", "--machine", machine, "--hook-host", "*", "--db"]).arg(db);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.env_remove("CACHELENS_SERVER").output().unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "{o}\n{e}");
    (o, e)
}

#[tokio::test]
async fn a_local_scan_ends_with_the_machines_hits_and_misses() {
    let (_t, db) = fresh_db_at().await;
    let hook = corpus_read_only("h100-hook-3.6.0").join("triton-cache");
    let (out, _) = cli_scan(&db, &hook, "h100-hook", false);
    let state = AppState::new(cachelens::db::open(&db).await.unwrap(), Config::default());
    let api = get_json(&state, "/api/v1/headline?machine=h100-hook").await;
    assert!(api["all"]["hits"].as_i64().unwrap() > 0 && api["all"]["misses"].as_i64().unwrap() > 0, "{api}");
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("hits and misses on h100-hook (the hook's Triton cache lookups): "), "{out}");
    assert!(last.contains(&format!("last 7 days {}", said_of(&api["week"]))), "{last}\n{api}");
    assert!(last.contains(&format!("all time {}", said_of(&api["all"]))), "{last}\n{api}");
    assert!(!out.contains("dashboard:"), "a local scan knows no dashboard URL:\n{out}");

    // the same in --json, beside the one shape's fields (a second scan: nothing new, same figures)
    let (json, _) = cli_scan(&db, &hook, "h100-hook", true);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["scans"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["database"], db.display().to_string());
    assert!(v["server"].is_null() && v["dashboard"].is_null(), "{v}");
    assert_eq!(v["hit_miss"]["machine"], "h100-hook");
    assert_eq!(v["hit_miss"]["hook"], true);
    same_figures(&v["hit_miss"], &api);

    // a machine the hook never reported from: said so, no 0% hit rate
    let jit = corpus_read_only("h100-jit-3.6.0").join("triton-cache");
    let (out, _) = cli_scan(&db, &jit, "h100-a", false);
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("hits and misses on h100-a: unknown, the hook has not reported"), "{out}");
    assert!(!last.contains('%'), "{last}");
    let (json, _) = cli_scan(&db, &jit, "h100-a", true);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["hit_miss"]["hook"], false, "{v}");
    assert!(v["hit_miss"]["all_time"]["hit_rate"].is_null(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_ends_with_the_servers_figures_and_the_machines_page() {
    let srv = server(Config::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "h100-hook").await.unwrap();
    let hook = corpus_read_only("h100-hook-3.6.0").join("triton-cache");
    let out = cli_upload(&srv.url, &token, "h100-hook", &hook, &["--quiet", "--hook-host", "*"]).await;
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}\n{e}");
    let state = AppState::new(srv.pool.clone(), Config::default());
    let api = get_json(&state, "/api/v1/headline?machine=h100-hook").await;
    assert!(api["all"]["hits"].as_i64().unwrap() > 0, "{api}");
    let lines: Vec<&str> = o.lines().collect();
    let [.., hm, page] = lines.as_slice() else { panic!("{o}") };
    assert!(hm.contains(&format!("all time {}", said_of(&api["all"]))), "{hm}\n{api}");
    assert_eq!(*page, format!("dashboard: {}/machines/h100-hook", srv.url));
    // the page named is the machine's
    let (status, _) = get(&state, "/machines/h100-hook").await;
    assert_eq!(status, 200);

    let out = cli_upload(&srv.url, &token, "h100-hook", &hook, &["--quiet", "--hook-host", "*", "--json"]).await;
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}\n{e}");
    let v: Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["server"], srv.url.as_str());
    assert!(v["database"].is_null(), "{v}");
    assert_eq!(v["dashboard"], format!("{}/machines/h100-hook", srv.url));
    same_figures(&v["hit_miss"], &get_json(&state, "/api/v1/headline?machine=h100-hook").await);
}
