//! The read half of JSON API v1 on the whole corpus.

use crate::common::*;

#[tokio::test]
async fn machines_and_entries_reflect_the_corpus() {
    let (_keep, state) = fleet().await;
    let machines = get_json(&state, "/api/v1/machines").await;
    let names: Vec<&str> = machines.as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a100-1", "h100-a", "h100-b", "h100-c", "mi300-1"]);
    let a100 = &machines[0];
    // snapshot 2 holds both generations: 45 kernels by 3.4.0 and 45 by 3.5.1
    assert_eq!(a100["entries"], 90);
    assert_eq!(a100["triton_versions"], serde_json::json!(["3.4.0", "3.5.1"]));
    let scans = get_json(&state, "/api/v1/scans?machine=a100-1").await;
    assert_eq!(scans.as_array().unwrap().len(), 2);
    assert_eq!(scans[0]["new_entries"], 45, "the upgrade scan finds 45 new entries");
    assert_eq!(scans[1]["new_entries"], 45);
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

fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect();
    k.sort();
    k
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Every field DESIGN.md lists, per endpoint (and the additions the API has on top of them):
/// a field renamed or dropped breaks the scripts that use API v1.
#[tokio::test]
async fn fields_of_each_endpoint() {
    let (_keep, state) = fleet().await;
    let first = |v: serde_json::Value| v.as_array().and_then(|a| a.first().cloned()).expect("a non-empty list");
    let m = first(get_json(&state, "/api/v1/machines").await);
    assert_eq!(keys(&m), sorted(&["name", "entries", "kernels", "bytes", "last_scan_at", "triton_versions"]));
    let s = first(get_json(&state, "/api/v1/scans?machine=h100-a").await);
    let design = ["id", "machine", "scanned_at", "entries", "new_entries", "removed_entries", "bytes"];
    let extra = ["root", "changed_entries", "skipped", "skipped_json", "relocated", "duration_ms", "source"];
    assert_eq!(keys(&s), sorted(&[&design[..], &extra[..]].concat()));
    let k = first(get_json(&state, "/api/v1/kernels").await);
    assert_eq!(keys(&k), sorted(&["name", "entries", "machines", "bytes", "last_compiled"]));
    let e = first(get_json(&state, "/api/v1/entries?machine=h100-a&kernel=add_kernel").await);
    let design = [
        "machine",
        "key",
        "kernel",
        "backend",
        "arch",
        "warp_size",
        "num_warps",
        "num_stages",
        "num_ctas",
        "triton_version",
        "created_at",
        "bytes",
        "registers",
        "spills",
        "shared_bytes",
        "artifacts",
    ];
    let extra = ["kind", "signature", "shapes", "relocated", "partial", "binary_sha256", "removed_at"];
    assert_eq!(keys(&e), sorted(&[&design[..], &extra[..]].concat()), "{e}");
    assert_eq!(keys(&e["artifacts"][0]), sorted(&["name", "ext", "bytes", "sha256"]));
    let h = first(get_json(&state, "/api/v1/history?machine=h100-a&bucket=day").await);
    for f in ["t", "compiles", "hits", "misses", "compile_ms"] {
        assert!(h.get(f).is_some(), "history lacks {f}: {h}");
    }
    let a = format!("h100-a:{}", e["key"].as_str().unwrap());
    let c = get_json(&state, &format!("/api/v1/compare?a={a}&b={a}")).await;
    for f in ["a", "b", "cause", "summary", "components", "identical_binary"] {
        assert!(c.get(f).is_some(), "compare lacks {f}: {c}");
    }
    let inv = get_json(&state, "/api/v1/invalidations?a=h100-a&b=h100-c").await;
    for f in ["kept", "invalidated", "new", "removed"] {
        assert!(inv.get(f).is_some(), "invalidations lacks {f}");
    }
    let i = &inv["invalidated"][0];
    for f in ["kernel", "old_key", "new_key", "cause", "identical_binary"] {
        assert!(i.get(f).is_some(), "invalidated lacks {f}: {i}");
    }
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
