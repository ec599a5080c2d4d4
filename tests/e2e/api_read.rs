//! The read half of JSON API v1 on the whole corpus.

use crate::common::*;

/// The machine list and one machine's scans, as the API answers them on the fleet: snapshots
/// (`tests/e2e/snapshots/`; `cargo insta review` after a deliberate change), with scan times,
/// durations and temp paths redacted. a100-1 is an in-place upgrade: its second snapshot holds
/// both generations (45 kernels by 3.4.0, 45 by 3.5.1), and each scan found 45 new entries.
#[tokio::test]
async fn machines_and_entries_reflect_the_corpus() {
    let (_keep, state) = fleet().await;
    insta::assert_json_snapshot!("machines", get_json(&state, "/api/v1/machines").await, {
        "[].last_scan_at" => "[time]",
    });
    insta::assert_json_snapshot!("scans_a100", get_json(&state, "/api/v1/scans?machine=a100-1").await, {
        "[].scanned_at" => "[time]",
        "[].duration_ms" => "[ms]",
        "[].root" => "[temp dir]",
    });
    let entries = get_json(&state, "/api/v1/entries?machine=mi300-1&kernel=softmax_kernel&limit=1000").await;
    let e = entries.as_array().unwrap();
    assert!(!e.is_empty());
    assert!(e.iter().all(|x| x["backend"] == "hip" && x["arch"] == "gfx942" && x["warp_size"] == 64));
    assert!(e.iter().all(|x| x["registers"].as_i64().unwrap() > 0), "AMD VGPRs parsed");
    let k = get_json(&state, "/api/v1/kernels?q=layer&limit=5").await;
    assert!(k.as_array().unwrap().iter().all(|r| r["name"].as_str().unwrap().contains("layer")));
    let (status, body) = get(&state, "/api/v1/nope").await;
    assert_eq!(status, 404);
    assert!(body.contains("error"));
}

/// The field names of an object, sorted.
fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect();
    k.sort();
    k
}

/// The fields of each endpoint's answer, as a snapshot (`snapshots/e2e__api_read__fields.snap`):
/// every field docs/API.md lists plus the additions the API has on top of them. A field renamed or
/// dropped breaks the scripts that use API v1, so the snapshot changes only on purpose.
#[tokio::test]
async fn fields_of_each_endpoint() {
    let (_keep, state) = fleet().await;
    let first = |v: serde_json::Value| v.as_array().and_then(|a| a.first().cloned()).expect("a non-empty list");
    let e = first(get_json(&state, "/api/v1/entries?machine=h100-a&kernel=add_kernel").await);
    let a = format!("h100-a:{}", e["key"].as_str().unwrap());
    let inv = get_json(&state, "/api/v1/invalidations?a=h100-a&b=h100-c").await;
    let search = get_json(&state, &format!("/api/v1/search?key={a}")).await;
    let fields = serde_json::json!({
        "machines": keys(&first(get_json(&state, "/api/v1/machines").await)),
        "scans": keys(&first(get_json(&state, "/api/v1/scans?machine=h100-a").await)),
        "kernels": keys(&first(get_json(&state, "/api/v1/kernels").await)),
        "entries": keys(&e),
        "entries[].artifacts": keys(&e["artifacts"][0]),
        "history": keys(&first(get_json(&state, "/api/v1/history?machine=h100-a&bucket=day").await)),
        "compare": keys(&get_json(&state, &format!("/api/v1/compare?a={a}&b={a}")).await),
        "invalidations": keys(&inv),
        "invalidations.invalidated": keys(&inv["invalidated"][0]),
        "invalidations.cost": keys(&inv["cost"]),
        "invalidations.groups": keys(&inv["groups"][0]),
        "invalidations.groups.reasons": keys(&inv["groups"][0]["reasons"][0]),
        "invalidations.groups.kernels": keys(&inv["groups"][0]["kernels"][0]),
        "search": keys(&search),
        "search.entries": keys(&search["entries"][0]),
        "autotune": keys(&first(get_json(&state, "/api/v1/autotune").await)),
    });
    insta::assert_json_snapshot!("fields", fields);
}

/// Values that are unknown are JSON `null`, not 0 or "": a launcher `.so` entry has no
/// metadata (no warps, no backend) and no kernel binary (no registers).
#[tokio::test]
async fn unknown_values_are_null() {
    let (_keep, state) = fleet().await;
    let all = get_json(&state, "/api/v1/entries?machine=h100-a&limit=10000").await;
    let launcher = all
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["artifacts"].as_array().unwrap().iter().all(|a| a["name"].as_str().unwrap().ends_with(".so")))
        .expect("a launcher entry in h100-jit");
    for f in
        ["num_warps", "num_stages", "num_ctas", "backend", "arch", "warp_size", "registers", "spills", "triton_version"]
    {
        assert!(launcher[f].is_null(), "{f} of a launcher: {launcher}");
    }
}

/// Paging: `limit` defaults to 100, at most 10000; `offset` pages are disjoint and in order.
/// A bad query is a JSON `{error}` 400 on every endpoint, never axum's plain text.
#[tokio::test]
async fn paging_and_bad_queries() {
    let (_keep, state) = fleet().await;
    let len = |v: &serde_json::Value| v.as_array().unwrap().len();
    let total: i64 = get_json(&state, "/api/v1/machines")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["entries"].as_i64().unwrap())
        .sum();
    assert!(total > 100);
    assert_eq!(len(&get_json(&state, "/api/v1/entries").await), 100, "default limit");
    let everything = get_json(&state, "/api/v1/entries?limit=10000").await;
    assert_eq!(len(&everything) as i64, total, "limit=10000 is allowed and gives all");
    let id = |e: &serde_json::Value| format!("{}:{}", e["machine"], e["key"]);
    let mut paged = vec![];
    for off in (0..total).step_by(70) {
        let page = get_json(&state, &format!("/api/v1/entries?limit=70&offset={off}")).await;
        assert!(len(&page) == 70 || off + 70 > total);
        paged.extend(page.as_array().unwrap().iter().map(id));
    }
    let all: Vec<String> = everything.as_array().unwrap().iter().map(id).collect();
    assert_eq!(paged, all, "offset pages are disjoint and cover the list in order");
    // The list's order: machine, kernel, num_warps, num_stages, key (SQLite's, NULL first), on
    // every machine, with or without a kernel filter and removed entries.
    type Order = (String, Option<String>, Option<i64>, Option<i64>, String);
    let order = |e: &serde_json::Value| -> Order {
        let s = |f: &str| e[f].as_str().map(str::to_string);
        (s("machine").unwrap(), s("kernel"), e["num_warps"].as_i64(), e["num_stages"].as_i64(), s("key").unwrap())
    };
    for q in ["limit=10000", "include_removed=true&limit=10000", "kernel=add_kernel&limit=10000"] {
        let got: Vec<Order> =
            get_json(&state, &format!("/api/v1/entries?{q}")).await.as_array().unwrap().iter().map(order).collect();
        let mut sorted = got.clone();
        sorted.sort();
        let machines: std::collections::BTreeSet<&String> = got.iter().map(|o| &o.0).collect();
        assert!(got.len() > 10 && machines.len() > 2, "{q}: {} entries on {machines:?}", got.len());
        assert_eq!(got, sorted, "{q}: in the listing's order");
    }
    let n_scans = len(&get_json(&state, "/api/v1/scans").await);
    let p1 = get_json(&state, "/api/v1/scans?limit=2").await;
    let p2 = get_json(&state, "/api/v1/scans?limit=2&offset=2").await;
    assert!(n_scans > 4 && len(&p1) == 2 && len(&p2) == 2 && p1[0]["id"] != p2[0]["id"] && p1[1]["id"] != p2[0]["id"]);

    let endpoints = ["machines", "scans", "kernels", "entries", "history", "compare", "invalidations", "nearest"];
    for ep in endpoints {
        for q in ["limit=abc", "limit=0", "limit=20000", "offset=-1", "offset=x"] {
            let (status, body) = get(&state, &format!("/api/v1/{ep}?{q}")).await;
            assert_eq!(status, 400, "{ep}?{q}: {body}");
            let v: serde_json::Value =
                serde_json::from_str(&body).unwrap_or_else(|_| panic!("{ep}?{q}: not JSON: {body}"));
            assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{ep}?{q}: {v}");
        }
    }
    let (status, body) = get(&state, "/api/v1/entries?include_removed=maybe").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("include_removed")
    );
}

/// The kernel list filtered by machine, backend, arch or version and a name (each filter spelled
/// out in the SQL, `db::summaries::kernels`) holds exactly the live entries of each kernel that
/// match, as `/api/v1/entries` lists them, in the asked order: on the whole corpus, every machine,
/// alone and with a name filter, and a backend and arch across machines.
#[tokio::test]
async fn filtered_kernel_list_equals_the_entries() {
    use std::collections::BTreeMap;
    let (_keep, state) = fleet().await;
    let entries = get_json(&state, "/api/v1/entries?limit=10000").await;
    let entries = arr(&entries);
    assert!(entries.len() > 300 && entries.len() < 10_000, "{}", entries.len());
    // (entries, distinct machines, bytes) per kernel of the live entries that `keep` keeps
    let want = |keep: &dyn Fn(&serde_json::Value) -> bool| {
        let mut by: BTreeMap<String, (i64, std::collections::BTreeSet<String>, i64)> = BTreeMap::new();
        for e in entries.iter().filter(|e| e["kernel"].is_string() && keep(e)) {
            let k = by.entry(e["kernel"].as_str().unwrap().to_string()).or_default();
            k.0 += 1;
            k.1.insert(e["machine"].as_str().unwrap().to_string());
            k.2 += e["bytes"].as_i64().unwrap();
        }
        by.into_iter().map(|(name, (n, m, b))| (name, n, m.len() as i64, b)).collect::<Vec<_>>()
    };
    let state = &state;
    let got = |uri: String| async move {
        let v = get_json(state, &uri).await;
        let rows: Vec<(String, i64, i64, i64)> = arr(&v)
            .iter()
            .map(|r| {
                let n = |k: &str| r[k].as_i64().unwrap();
                (r["name"].as_str().unwrap().to_string(), n("entries"), n("machines"), n("bytes"))
            })
            .collect();
        rows
    };
    let machines: std::collections::BTreeSet<&str> = entries.iter().map(|e| e["machine"].as_str().unwrap()).collect();
    let mut checked = 0;
    for m in &machines {
        // no name filter, and a piece of one of the machine's kernel names (`_` is a literal)
        let name = entries.iter().find(|e| e["machine"] == *m && e["kernel"].is_string()).unwrap()["kernel"].clone();
        let piece = name.as_str().unwrap().get(2..7).unwrap_or("_").to_string();
        for q in ["", piece.as_str()] {
            let mut rows = got(format!("/api/v1/kernels?machine={m}&q={q}&sort=size&limit=10000")).await;
            let mut expected = want(&|e| e["machine"] == *m && e["kernel"].as_str().unwrap().contains(q));
            assert!(!expected.is_empty(), "{m} {q}");
            // largest first, then by name
            assert!(rows.windows(2).all(|w| (w[0].3, &w[1].0) >= (w[1].3, &w[0].0)), "{m}: by size: {rows:?}");
            rows.sort();
            expected.sort();
            assert_eq!(rows, expected, "machine {m} q={q:?}");
            checked += 1;
        }
    }
    for (col, v) in [("backend", "hip"), ("arch", "sm_90"), ("triton_version", "3.6.0")] {
        let rows = got(format!("/api/v1/kernels?{col}={v}&sort=name&limit=10000")).await;
        let expected = want(&|e| e[col] == v);
        assert!(!expected.is_empty(), "{col}={v}");
        assert_eq!(rows, expected, "{col}={v}, by name");
    }
    assert_eq!(checked, 2 * machines.len());
    assert!(got("/api/v1/kernels?machine=nope".into()).await.is_empty());
}

/// `/api/v1/entries` reads a page's artifacts in one query: each entry's list is exactly its
/// own files, by name, as the database holds them (every live and removed entry of the corpus).
#[tokio::test]
async fn entries_carry_exactly_their_own_artifacts() {
    let (_keep, state) = fleet().await;
    let all = get_json(&state, "/api/v1/entries?include_removed=true&limit=10000").await;
    let all = arr(&all);
    assert!(all.len() > 300);
    let mut files = 0;
    for e in all {
        let want: Vec<(String, String, i64, String)> = sqlx::query_as(
            "SELECT a.name, a.ext, a.bytes, a.sha256 FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id
             JOIN machines m ON m.id = e.machine_id WHERE m.name = ? AND e.key = ? ORDER BY a.name",
        )
        .bind(e["machine"].as_str().unwrap())
        .bind(e["key"].as_str().unwrap())
        .fetch_all(state.db.pool())
        .await
        .unwrap();
        let got: Vec<(String, String, i64, String)> = arr(&e["artifacts"])
            .iter()
            .map(|a| {
                let s = |k: &str| a[k].as_str().unwrap().to_string();
                (s("name"), s("ext"), a["bytes"].as_i64().unwrap(), s("sha256"))
            })
            .collect();
        assert_eq!(got, want, "{}:{}", e["machine"], e["key"]);
        files += got.len();
    }
    assert!(files > all.len(), "{files} files");
}

/// The entry lists read as one JSON text (`/api/v1/entries`, an entry page's variants and its
/// same-binary entries) hold exactly the rows SQLite gives one by one for the same query, in its
/// order, every column included: every page of the fleet's list (removed entries too, by machine
/// and by kernel), the variants of every kernel, the same-binary entries of every binary.
#[tokio::test]
async fn entry_lists_read_as_json_are_the_rows_sqlite_gives() {
    use cachelens::db::Page;
    use cachelens::db::entries::{ENTRY_COLUMNS, EntryRow, entries, kernel_entries, same_binary};
    use sqlx::AssertSqlSafe;
    let (_keep, pool) = fleet_db().await;
    let show = |rows: &[EntryRow]| -> Vec<(i64, serde_json::Value)> {
        // the artifacts are attached apart (`with_artifacts`, unchanged): the rows' own columns
        let mut v: Vec<(i64, serde_json::Value)> =
            rows.iter().map(|r| (r.id, serde_json::to_value(r).unwrap())).collect();
        v.iter_mut().for_each(|(_, r)| drop(r.as_object_mut().unwrap().remove("artifacts")));
        v
    };
    let rows = |sql: String| {
        let pool = pool.clone();
        async move { sqlx::query_as::<_, EntryRow>(AssertSqlSafe(sql)).fetch_all(&pool).await.unwrap() }
    };
    let from = "FROM entry_rows e JOIN machines m ON m.id = e.machine_id";
    let order = "ORDER BY m.name, e.kernel, e.num_warps, e.num_stages, e.key";
    let all = rows(format!("SELECT {ENTRY_COLUMNS} {from} {order}")).await;
    assert!(all.iter().any(|r| r.relocated) && all.iter().any(|r| !r.relocated), "both relocated and not");
    assert!(all.len() > 300);
    for (limit, offset) in [(100, 0), (100, 100), (7, 293), (10_000, 0)] {
        let got = entries(&pool, None, None, true, Page { limit, offset }).await.unwrap();
        let want: Vec<EntryRow> = all.iter().skip(offset as usize).take(limit as usize).cloned().collect();
        assert_eq!(show(&got), show(&want), "page {limit} at {offset}");
    }
    let live = rows(format!(
        "SELECT {ENTRY_COLUMNS} {from} WHERE m.name = 'h100-a' AND e.kernel = 'matmul_kernel' AND e.removed_at IS NULL {order}"
    ))
    .await;
    assert!(!live.is_empty());
    let got =
        entries(&pool, Some("h100-a"), Some("matmul_kernel"), false, Page { limit: 1000, offset: 0 }).await.unwrap();
    assert_eq!(show(&got), show(&live));
    let kernels: Vec<String> = sqlx::query_scalar("SELECT DISTINCT kernel FROM entry_rows WHERE kernel IS NOT NULL")
        .fetch_all(&pool)
        .await
        .unwrap();
    for k in &kernels {
        let want = rows(format!(
            "SELECT {ENTRY_COLUMNS} {from} WHERE e.kernel = '{}' AND e.removed_at IS NULL
             ORDER BY e.backend, e.arch, e.triton_version, e.num_warps, e.num_stages, e.id LIMIT 51",
            k.replace('\'', "''")
        ))
        .await;
        assert_eq!(show(&kernel_entries(&pool, k, 51).await.unwrap()), show(&want), "{k}");
    }
    let binaries: Vec<(String, String)> = sqlx::query_as(
        "SELECT binary_sha256, min(key) FROM entry_rows WHERE binary_sha256 IS NOT NULL GROUP BY binary_sha256",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut shared = 0;
    for (sha, key) in &binaries {
        let want: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.name, e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id
             WHERE e.binary_sha256 = ? AND e.key <> ? ORDER BY e.id LIMIT 20",
        )
        .bind(sha)
        .bind(key)
        .fetch_all(&pool)
        .await
        .unwrap();
        shared += usize::from(!want.is_empty());
        assert_eq!(same_binary(&pool, sha, key, 20).await.unwrap(), want, "{sha}");
    }
    assert!(shared > 0, "some binary is shared by another key");
}
