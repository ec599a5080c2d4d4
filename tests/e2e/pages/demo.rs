//! `cachelens serve --demo`: the real binary loads the bundled caches into a fresh database and
//! serves them; an existing database is refused and left as it was.

use crate::common::*;
use std::path::Path;
use std::process::Command;

/// Key dirs Triton wrote under `dir` (what a scan counts as entries): non-empty, not hidden
/// (the hook's `.cachelens/`), not an in-flight `tmp.*` dir.
fn key_dirs(dir: &Path) -> i64 {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|d| d.unwrap().path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            !n.starts_with('.') && !n.starts_with("tmp.")
        })
        .filter(|p| std::fs::read_dir(p).unwrap().next().is_some())
        .count() as i64
}

/// Entries each demo machine should show, counted from the bundled archives themselves: the
/// last snapshot of an in-place upgrade holds both generations; an Inductor dir's caches sit
/// in `triton/<device>/`.
fn expected_entries() -> Vec<(&'static str, i64)> {
    let unpack = corpus_read_only;
    let inductor = |root: &Path| -> i64 {
        std::fs::read_dir(root.join("inductor/triton")).unwrap().map(|d| key_dirs(&d.unwrap().path())).sum()
    };
    let jit = unpack("h100-jit-3.6.0");
    vec![
        ("a100-1", key_dirs(&unpack("a100-upgrade-2-triton-3.5.1").join("triton-cache"))),
        ("h100-a", key_dirs(&jit.join("triton-cache")) + inductor(&jit)),
        ("h100-autotune", key_dirs(&unpack("h100-inductor-autotune-triton-3.6.0").join("triton/0"))),
        ("h100-b", inductor(&unpack("h100-inductor-3.6.0"))),
        ("h100-c", key_dirs(&unpack("h100-fpfusion-off-triton-3.6.0").join("triton-cache"))),
        ("h100-hook", key_dirs(&unpack("h100-hook-3.6.0").join("triton-cache"))),
        ("mi300-1", key_dirs(&unpack("mi300-upgrade-2-triton-3.9.0").join("triton-cache"))),
    ]
}

/// Kills the server when the test ends, passing or not.
fn serve_demo(tmp: &Path) -> (Served, String) {
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--demo", "--listen", "127.0.0.1:0"]).env("TMPDIR", tmp);
    spawn_served(cmd, 300)
}

#[tokio::test]
async fn serve_demo_loads_the_bundled_caches_into_a_fresh_database() {
    let expected = expected_entries();
    let tmp = tempfile::TempDir::new().unwrap();
    let (_server, url) = serve_demo(tmp.path());
    let http = cachelens::upload::client().unwrap();
    let machines: serde_json::Value =
        http.get(format!("{url}/api/v1/machines")).send().await.unwrap().json().await.unwrap();
    let got: Vec<(String, i64)> = machines
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m["entries"].as_i64().unwrap()))
        .collect();
    let want: Vec<(String, i64)> = expected.iter().map(|(m, n)| (m.to_string(), *n)).collect();
    assert_eq!(got, want, "demo machines and their entry counts");
    let versions = |name: &str| {
        machines.as_array().unwrap().iter().find(|m| m["name"] == name).unwrap()["triton_versions"].clone()
    };
    assert_eq!(versions("a100-1"), serde_json::json!(["3.4.0", "3.5.1"]), "the in-place upgrade");
    assert_eq!(versions("mi300-1"), serde_json::json!(["3.6.0", "3.9.0"]));
    // the database is a fresh one under the temp dir, not the user's default
    let dbs: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|d| d.unwrap().path()).collect();
    assert!(dbs.iter().any(|d| d.join("demo.db").exists()), "demo.db in a fresh temp dir: {dbs:?}");
    let page = http.get(format!("{url}/")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("href=\"/machines/h100-hook\""), "the overview lists the demo machines");
}

#[tokio::test]
async fn serve_demo_refuses_an_existing_database() {
    // the demo is an SQLite file beside the default one: this is about a file that holds data
    let t = tempfile::TempDir::new().unwrap();
    let db = t.path().join("test.db");
    let pool = cachelens::db::open(&db).await.unwrap();
    sqlx::query("INSERT INTO machines(name, created_at) VALUES ('real-node', 0)").execute(&pool).await.unwrap();
    pool.close().await;
    let out = Command::new(bin())
        .args(["serve", "--demo", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .env_remove("CACHELENS_DB")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {err}");
    assert!(err.contains("fresh database") && err.contains("already exists"), "{err}");
    let pool = cachelens::db::open(&db).await.unwrap();
    let names: Vec<String> = sqlx::query_scalar("SELECT name FROM machines").fetch_all(&pool).await.unwrap();
    assert_eq!(names, ["real-node"], "nothing was loaded into it");
}
