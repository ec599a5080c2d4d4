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
