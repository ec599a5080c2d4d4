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
