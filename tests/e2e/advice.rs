//! "What can go" on the server (prune::advice): the machine page, the overview and
//! `/api/v1/machines/{name}/advice` say per class what `cachelens prune --json` (a dry run) says
//! for the same caches scanned into the same database: an in-place upgrade (superseded, unused)
//! and a hooked cache (hook times), on real corpus caches.

use crate::common::*;
use cachelens::web::{AppState, Config};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Per class: (items, bytes, inodes), from a CLI plan root's items.
fn cli_classes(root: &Value) -> BTreeMap<String, (i64, i64, i64)> {
    let mut out = BTreeMap::new();
    for i in arr(&root["items"]) {
        let t = out.entry(i["class"].as_str().unwrap().to_string()).or_insert((0, 0, 0));
        t.0 += 1;
        t.1 += i["bytes"].as_i64().unwrap();
        t.2 += i["inodes"].as_i64().unwrap();
    }
    out
}

/// Per class, from the advice's (or a root advice's) `classes`.
fn api_classes(v: &Value) -> BTreeMap<String, (i64, i64, i64)> {
    arr(&v["classes"])
        .iter()
        .map(|t| {
            let n = |k: &str| t[k].as_i64().unwrap();
            (t["class"].as_str().unwrap().to_string(), (n("items"), n("bytes"), n("inodes")))
        })
        .collect()
}

/// The rows of a page's "What can go" table: class → (items, bytes, inodes), read from the
/// row attributes the template writes (`data-class`, `data-bytes`, `data-inodes`, `data-items`).
fn page_classes(html: &str) -> BTreeMap<String, (i64, i64, i64)> {
    let section = html.split("id=\"what-can-go\"").nth(1).expect("a What can go section");
    let section = section.split("</section>").next().unwrap();
    let attr = |tr: &str, k: &str| -> String {
        tr.split(&format!("{k}=\"")).nth(1).and_then(|v| v.split('"').next()).unwrap().to_string()
    };
    section
        .split("<tr data-class=")
        .skip(1)
        .filter(|tr| tr.split('>').next().unwrap().contains("data-bytes"))
        .map(|tr| {
            let tr = &format!("data-class={}", tr.split('>').next().unwrap());
            let n = |k: &str| attr(tr, k).parse::<i64>().unwrap();
            (attr(tr, "data-class"), (n("data-items"), n("data-bytes"), n("data-inodes")))
        })
        .collect()
}

/// Point every group file under `dir` at where its entry sits now, as Triton would have written
/// it here: the copy is no longer relocated (its group files named the capture machine's path).
fn unrelocate(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            unrelocate(&p);
        } else if p.file_name().unwrap().to_str().unwrap().starts_with("__grp__") {
            let mut g: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            for v in g["child_paths"].as_object_mut().unwrap().values_mut() {
                let name = Path::new(v.as_str().unwrap()).file_name().unwrap().to_owned();
                *v = Value::from(p.parent().unwrap().join(name).to_str().unwrap());
            }
            std::fs::write(&p, serde_json::to_vec(&g).unwrap()).unwrap();
        }
    }
}

/// Move every file's mtime under `dir` back by `days`, keeping their order (compile times).
fn age_by(dir: &Path, days: u64) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            age_by(&p, days);
        } else {
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            let m = f.metadata().unwrap().modified().unwrap();
            f.set_modified(m - std::time::Duration::from_secs(days * 86_400)).unwrap();
        }
    }
}

#[tokio::test]
async fn what_can_go_agrees_with_prune_dry_run() {
    let dir = tempfile::TempDir::new().unwrap();
    // an in-place upgrade: 3.4.0's keys, then 3.5.1's for the same kernels in the same dir
    let upgraded = dir.path().join("upgraded");
    for a in ["a100-upgrade-1-triton-3.4.0", "a100-upgrade-2-triton-3.5.1"] {
        let staging = dir.path().join("staging");
        let _ = std::fs::remove_dir_all(&staging);
        unpack(a, &staging);
        let _ = std::fs::remove_dir_all(&upgraded);
        std::fs::rename(staging.join(a), &upgraded).unwrap();
    }
    let hooked = dir.path().join("hooked");
    unpack("h100-hook-3.6.0", &hooked);
    let (upgraded, hooked) = (upgraded.join("triton-cache"), hooked.join("h100-hook-3.6.0"));
    unrelocate(&upgraded);
    unrelocate(&hooked);
    // compiled 60 days earlier than captured: the newer generation is unused for 30 days
    age_by(&upgraded, 60);
    let (_db, db) = fresh_db_at().await;
    let out = Command::new(bin())
        .args(["prune", "--json", "-q", "--machine", "node", "--hook-host", "vm", "--db"])
        .arg(&db)
        .args([&upgraded, &hooked])
        .env_remove("CACHELENS_DB")
        // the plan file on PostgreSQL: beside the default database
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!Path::new(cli["plan_file"].as_str().unwrap()).as_os_str().is_empty());

    let pool = cachelens::db::open(&db).await.unwrap();
    // a second machine, for the fleet's sums
    let (_other, other_root) = unpacked("mi300-upgrade-2-triton-3.9.0");
    scan(&pool, &other_root.join("triton-cache"), "other").await;
    let state = AppState::new(pool, Config::default());
    let api = get_json(&state, "/api/v1/machines/node/advice").await;

    let mut seen = BTreeMap::new();
    for root in arr(&cli["plan"]["roots"]) {
        let path = root["root"].as_str().unwrap();
        let mine = arr(&api["roots"]).iter().find(|r| r["root"] == path).unwrap_or_else(|| panic!("{path}: {api}"));
        let mut want = cli_classes(root);
        // temp dirs are not in the database: the CLI's alone (none in these caches)
        assert_eq!(want.remove("orphan_temp"), None, "{path}");
        assert_eq!(api_classes(mine), want, "{path}: API vs CLI");
        for k in ["entries", "bytes", "inodes"] {
            assert_eq!(mine[k], root[k], "{path}: {k}");
        }
        for (c, t) in want {
            let s = seen.entry(c).or_insert((0, 0, 0));
            (s.0, s.1, s.2) = (s.0 + t.0, s.1 + t.1, s.2 + t.2);
        }
    }
    // the caches hold every class the server can see
    for c in ["superseded", "unused"] {
        assert!(seen.get(c).is_some_and(|t| t.0 > 0), "no {c} entries: {seen:?}");
    }
    assert_eq!(api_classes(&api), seen, "machine's classes are the sums of its dirs'");
    let cmd = api["command"].as_str().unwrap();
    assert!(cmd.starts_with("cachelens prune --machine node --unused-for 30d "), "{cmd}");
    assert!(cmd.contains(upgraded.to_str().unwrap()) && cmd.contains(hooked.to_str().unwrap()), "{cmd}");

    let (status, page) = get(&state, "/machines/node").await;
    assert_eq!(status, 200);
    assert_eq!(page_classes(&page), seen, "machine page vs CLI");
    assert!(page.contains(cmd), "the page shows the command: {cmd}");

    // the overview sums each machine's advice stored when its scan landed
    let other = get_json(&state, "/api/v1/machines/other/advice").await;
    // its copy still names the capture machine's paths: relocated
    assert!(api_classes(&other).get("relocated").is_some_and(|t| t.0 > 0), "{other}");
    let mut fleet = seen.clone();
    for (c, t) in api_classes(&other) {
        let s = fleet.entry(c).or_insert((0, 0, 0));
        (s.0, s.1, s.2) = (s.0 + t.0, s.1 + t.1, s.2 + t.2);
    }
    let (status, overview) = get(&state, "/").await;
    assert_eq!(status, 200);
    assert_eq!(page_classes(&overview), fleet, "overview vs the machines' advice");
    assert!(overview.contains("cachelens prune --machine other --unused-for 30d"));

    let (status, body) = get(&state, "/api/v1/machines/nosuch/advice").await;
    assert_eq!(status, 404, "{body}");
}

/// A landing that changed nothing keeps what it would recompute from every live entry of the
/// machine: its stored advice (while younger than an hour) and its roots' cache inodes. A
/// landing that changed an entry recomputes both, and an advice over an hour old is recomputed
/// by any landing, or by a reader (and stored for the next).
#[tokio::test]
async fn an_unchanged_landing_keeps_the_stored_advice_and_inodes() {
    let (_t, dir) = unpacked("h100-jit-3.6.0");
    let root = dir.join("triton-cache");
    // uploads: a server stores the hazards a node reports (a local scan prints them)
    let srv = crate::upload::server(Config::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "node").await.unwrap();
    let pool = srv.pool.clone();
    let land = || async {
        let up = cachelens::upload::scan_and_upload(&srv.url, &token, &root, "node", cachelens::upload::Retry::new(2));
        up.await.map(|u| u.response.summary)
    };
    land().await.unwrap();
    let computed = || count(&pool, "SELECT computed_at FROM machine_advice");
    let inodes =
        || count(&pool, "SELECT CAST(json_extract(hazards_json, '$.cache_inodes') AS INTEGER) FROM root_hazards");
    let real = inodes().await;
    assert!(real > 10, "{real}");
    // marks: what an unchanged landing must leave as it is
    sqlx::query("UPDATE machine_advice SET computed_at = computed_at - 600000").execute(&pool).await.unwrap();
    let (machine, at, hazards): (i64, String, String) =
        sqlx::query_as("SELECT machine_id, root, hazards_json FROM root_hazards").fetch_one(&pool).await.unwrap();
    let mut hazards: Value = serde_json::from_str(&hazards).unwrap();
    hazards["cache_inodes"] = 7.into();
    sqlx::query("UPDATE root_hazards SET hazards_json = ? WHERE machine_id = ? AND root = ?")
        .bind(hazards.to_string())
        .bind(machine)
        .bind(at)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(inodes().await, 7);
    let marked = computed().await;
    let s = land().await.unwrap();
    assert_eq!((s.new_entries, s.changed_entries, s.removed_entries), (0, 0, 0));
    assert_eq!(computed().await, marked, "an unchanged landing keeps a 10-minute-old advice");
    assert_eq!(inodes().await, 7, "an unchanged landing keeps the root's stored inode count");
    // an hour old: recomputed even so
    sqlx::query("UPDATE machine_advice SET computed_at = computed_at - 3600000").execute(&pool).await.unwrap();
    land().await.unwrap();
    assert!(computed().await > marked, "an advice over an hour old is recomputed");
    assert_eq!(inodes().await, real, "the hazards take the recomputed advice's count of the root's inodes");
    // an entry gone: both recomputed (one entry dir and its files fewer)
    sqlx::query("UPDATE machine_advice SET computed_at = computed_at - 600000").execute(&pool).await.unwrap();
    let marked = computed().await;
    let gone = std::fs::read_dir(&root)
        .unwrap()
        .map(|d| d.unwrap().path())
        .find(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .unwrap();
    let files = std::fs::read_dir(&gone).unwrap().count() as i64;
    std::fs::remove_dir_all(&gone).unwrap();
    assert_eq!(land().await.unwrap().removed_entries, 1);
    assert!(computed().await > marked, "a landing that removed an entry recomputes the advice");
    assert_eq!(inodes().await, real - 1 - files, "and counts the root's inodes again");
    // read over an hour after: computed for the reader, and stored for the next one
    sqlx::query("UPDATE machine_advice SET computed_at = computed_at - 7200000").execute(&pool).await.unwrap();
    let stale = computed().await;
    let read = crate::upload::get_json_at(&format!("{}/api/v1/machines/node/advice", srv.url)).await;
    assert!(read["computed_at"].as_i64().unwrap() > stale + 7_000_000, "{read}");
    let t = std::time::Instant::now();
    while computed().await != read["computed_at"].as_i64().unwrap() {
        assert!(t.elapsed().as_secs() < 30, "the advice computed for a reader was not stored");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
