//! Hazards of where a cache sits, end to end: the real CLI uploads real caches to a real server
//! on 127.0.0.1, which stores each root's latest hazards and shows them on the machine page and
//! `/metrics`; two machines reporting the same root that see the same hook event files are a
//! shared cache; older clients upload without hazards and absurd ones are left out with a skip.

use crate::common::*;
use crate::metrics::{Sample, get_at, parse};
use crate::upload::{post_raw, text, tiny_report};
use cachelens::web::{AppState, Config};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

const TOKEN: &str = "hazards-read-token-0123456789";

/// `machine`'s upload of `root` through the CLI, as `--json`, its hostname `machine` and its
/// hook's host `hook_host`: the one scan's summary.
async fn upload(url: &str, pool: &cachelens::db::Store, machine: &str, root: &Path, hook_host: &str) -> Value {
    let store = cachelens::db::Db::from(pool.clone());
    let token = cachelens::db::tokens::create(&store, machine).await.unwrap();
    let out = tokio::process::Command::new(bin())
        .arg("scan")
        .arg(root)
        .args(["--server", url, "--token", &token, "--machine", machine, "--json", "--hook-host", hook_host])
        .env("CACHELENS_HOSTNAME", machine)
        .env_remove("CACHELENS_DB")
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    v["scans"][0].clone()
}

/// One gauge of `/metrics` for (machine, root).
fn gauge(m: &BTreeMap<Sample, f64>, name: &str, machine: &str, root: &str) -> f64 {
    let labels = [("machine", machine), ("root", root)].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    *m.get(&(name.to_string(), labels)).unwrap_or_else(|| panic!("{name}{{{machine}, {root}}} missing"))
}

async fn page(url: &str, path: &str) -> String {
    let (status, _, body) = get_at(&format!("{url}{path}"), Some(TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploaded_hazards_reach_the_machine_page_and_metrics_and_a_shared_root_is_told() {
    let (_dir, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let state = AppState::new(pool.clone(), Config { read_token: Some(TOKEN.into()), ..Config::default() });
    let url = crate::metrics::serve(state).await;

    // The hook corpus (events of host `vm`), with a crashed writer's temp dir in one entry, and
    // a second node's event file beside the first: two nodes write this cache.
    let (_t, dir) = unpacked("h100-hook-3.6.0");
    let root = dir.join("triton-cache").canonicalize().unwrap();
    let key = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .unwrap();
    let tmp = key.join("tmp.pid_4242_0123456789abcdef");
    std::fs::create_dir(&tmp).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3 * 3600);
    std::fs::File::open(&tmp).unwrap().set_modified(old).unwrap();
    std::fs::copy(root.join(".cachelens/events-vm.jsonl"), root.join(".cachelens/events-node-b.jsonl")).unwrap();
    let root_s = root.display().to_string();

    // node-a (hook host `vm`) uploads: its summary carries what the server stored.
    let a = upload(&url, &pool, "node-a", &root, "vm").await;
    let h = &a["hazards"];
    let local = cachelens::scan::hazards::of(&root, cachelens::db::now_ms(), &cachelens::scan::Hosts::Any).unwrap();
    assert_eq!(h["fs_type"], json!(local.fs_type), "{a}");
    assert_eq!(h["fs_inodes"], json!(local.fs_inodes));
    assert_eq!(h["network"], json!(false));
    assert_eq!(h["orphan_temps"], json!(1), "{h}");
    assert_eq!(h["other_hosts"], json!(["node-b"]), "{h}");
    let inodes = cachelens::db::prune::cache_inodes(&pool, "node-a", &root_s).await.unwrap();
    let entries = a["entries"].as_i64().unwrap();
    assert!(inodes > entries && entries > 0, "{inodes} inodes, {entries} entries");
    assert_eq!(h["cache_inodes"], json!(inodes), "the server counts the inodes of the entries it holds");
    let warnings = h["warnings"].to_string();
    assert!(warnings.contains("hook events of node-b are here too") && warnings.contains("temp dirs of writers"));

    // node-b reports the same root (the same files): each is told the other shares it.
    let b = upload(&url, &pool, "node-b", &root, "node-b").await;
    assert_eq!(b["hazards"]["other_hosts"], json!(["vm"]), "{b}");
    assert_eq!(b["hazards"]["shared_with"], json!(["node-a"]), "{b}");
    let rows = cachelens::db::hazards::read(&pool, None).await.unwrap();
    let shared: Vec<(&str, &Vec<String>)> = rows.iter().map(|r| (r.machine.as_str(), &r.hazards.shared_with)).collect();
    assert_eq!(shared, [("node-a", &vec!["node-b".to_string()]), ("node-b", &vec!["node-a".to_string()])]);

    // The machine page's "Hazards" section.
    let body = page(&url, "/machines/node-a").await;
    let section = &body[body.find("<section id=\"hazards\">").expect("a Hazards section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains(&root_s), "{section}");
    assert!(section.contains(&format!("<td class=\"fs\">{}</td>", local.fs_type)), "{section}");
    assert!(section.contains(&format!("<td class=\"n\">{inodes}</td>")), "{section}");
    assert!(section.contains("yes: host node-b, machine node-b"), "{section}");
    assert!(section.contains("machines node-b report this root and see the same hook event files"), "{section}");
    assert!(section.contains("1 temp dirs of writers older than an hour"), "{section}");
    assert!(section.contains(&format!("free of {}", local.fs_inodes)), "{section}");

    // /metrics: one gauge per machine and root.
    let (status, _, text) = get_at(&format!("{url}/metrics"), Some(TOKEN)).await;
    assert_eq!(status, 200);
    let m = parse(&text);
    for machine in ["node-a", "node-b"] {
        assert_eq!(gauge(&m, "cachelens_shared_cache", machine, &root_s), 1.0);
        assert_eq!(gauge(&m, "cachelens_network_fs", machine, &root_s), 0.0);
        assert_eq!(gauge(&m, "cachelens_orphaned_temp_dirs", machine, &root_s), 1.0);
        assert_eq!(gauge(&m, "cachelens_fs_inodes", machine, &root_s), local.fs_inodes as f64);
        assert!(gauge(&m, "cachelens_fs_free_bytes", machine, &root_s) > 0.0);
        assert!(gauge(&m, "cachelens_fs_free_inodes", machine, &root_s) > 0.0);
    }
    assert_eq!(gauge(&m, "cachelens_cache_inodes", "node-a", &root_s), inodes as f64);

    // Retiring a machine drops its hazards; the other is no longer told it shares the root.
    cachelens::db::retention::retire(&store, "node-b").await.unwrap();
    let rows = cachelens::db::hazards::read(&pool, None).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].hazards.shared_with.is_empty() && rows[0].hazards.other_hosts == ["node-b"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_client_uploads_without_hazards_and_absurd_hazards_are_left_out() {
    let (_dir, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let url = crate::metrics::serve(AppState::new(pool.clone(), Config::default())).await;
    let token = cachelens::db::tokens::create(&store, "node-1").await.unwrap();
    let stored = || async { count(&pool, "SELECT COUNT(*) FROM root_hazards").await };

    // A report as clients before hazards send it.
    let (status, r) =
        post_raw(&url, "/api/v1/scans", Some(&token), tiny_report("node-1").to_string().into_bytes(), false).await;
    assert_eq!(status, 201, "{r}");
    assert!(r["summary"].get("hazards").is_none(), "{r}");
    assert_eq!(stored().await, 0);

    let good = json!({"cache_inodes": 0, "fs_type": "lustre", "network": true, "fs_bytes": 1000, "fs_bytes_free": 10,
                      "fs_inodes": 100, "fs_inodes_free": 1, "orphan_temps": 0, "warnings": ["<script>x</script>"]});
    let absurd = [
        ("fs_type", json!("x".repeat(10_000))),
        ("fs_type", json!("nfs\u{7}")),
        ("fs_inodes_free", json!(101)),
        ("fs_bytes", json!(u64::MAX)),
        ("orphan_temps", json!(-1)),
        ("other_hosts", json!(vec!["h"; 100_000])),
        ("event_hosts", json!([""])),
        ("network", json!("yes")),
    ];
    for (n, (field, value)) in absurd.iter().enumerate() {
        let mut h = good.clone();
        h[*field] = value.clone();
        let mut rep = tiny_report("node-1");
        rep["client_id"] = json!(format!("absurd-{n}"));
        rep["hazards"] = h;
        let (status, r) = post_raw(&url, "/api/v1/scans", Some(&token), rep.to_string().into_bytes(), false).await;
        assert_eq!(status, 201, "{field}: {r}");
        assert_eq!(r["summary"]["entries"], json!(1), "{field}: the scan stands");
        assert!(r["summary"].get("hazards").is_none(), "{field}: {r}");
        let skipped = r["summary"]["skipped"].to_string();
        assert!(skipped.contains("hazards"), "{field}: {skipped}");
        assert_eq!(stored().await, 0, "{field}");
    }

    // Within bounds: stored, its warnings the server's own (the client's text is dropped).
    let mut rep = tiny_report("node-1");
    rep["client_id"] = json!("good");
    rep["hazards"] = good;
    let (status, r) = post_raw(&url, "/api/v1/scans", Some(&token), rep.to_string().into_bytes(), false).await;
    assert_eq!(status, 201, "{r}");
    let w = r["summary"]["hazards"]["warnings"].to_string();
    assert!(w.contains("on lustre: Triton's cache on a network file system") && w.contains("Stale file handle"), "{w}");
    assert!(w.contains("1 of 100 inodes free (under 5%)") && !w.contains("script"), "{w}");
    assert_eq!(r["summary"]["hazards"]["cache_inodes"], json!(2), "one entry dir and its one file");
    assert_eq!(stored().await, 1);
    let (_, _, body) = get_at(&format!("{url}/machines/node-1"), None).await;
    assert!(body.contains("lustre (network)") && body.contains("Stale file handle"), "{body}");
}
