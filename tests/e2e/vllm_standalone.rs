//! vLLM's current compile cache (issue 34, item 5) on the real torch 2.11 fixture
//! `h200-vllm-standalone-torch-2.11` (demo/CORPUS.md): the Triton kernels inside unpacked
//! artifacts found from above the vLLM root, the binary artifacts listed with their bytes,
//! inodes and kernels, vLLM's key factors shown; each checked against what the GPU run recorded
//! (`ground-truth.json`), through the real CLI.
use crate::common;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

const ARCHIVE: &str = "h200-vllm-standalone-torch-2.11";
const BINARY: &str = "9a3a45d015";
const UNPACKED: &str = "83055ac700";

fn truth(fx: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(fx.join("ground-truth.json")).unwrap()).unwrap()
}

/// (key, kernel name) pairs of a ground-truth list of `["<KEY>/<name>.json", "<name>"]`.
fn pairs(v: &Value) -> BTreeSet<(String, String)> {
    common::arr(v)
        .iter()
        .map(|p| {
            let key = p[0].as_str().unwrap().split('/').next().unwrap().to_string();
            (key, p[1].as_str().unwrap().to_string())
        })
        .collect()
}

/// `scan --json` of `path` into `db`: the summaries.
fn scan(path: &Path, db: &Path, machine: &str) -> Vec<Value> {
    let o = Command::new(common::bin())
        .args(["scan", "--json", "--machine", machine, "--db"])
        .arg(db)
        .arg(path)
        .env_remove("CACHELENS_DB")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{text}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    serde_json::from_value::<Vec<Value>>(v["scans"].clone()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The vLLM root of the fixture copied where vLLM keeps it under a home dir:
/// `home/.cache/vllm` (its unpacked artifacts' Triton caches are 9 levels below `home`).
fn home_with_vllm(t: &TempDir) -> PathBuf {
    let fx = common::corpus_read_only(ARCHIVE);
    let home = t.path().join("home");
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    let st = Command::new("cp").arg("-a").arg(fx.join("vllm")).arg(home.join(".cache/vllm")).status().unwrap();
    assert!(st.success());
    home
}

#[tokio::test]
async fn unpacked_artifacts_kernels_found_from_above_the_vllm_root_with_their_names() {
    let fx = common::corpus_read_only(ARCHIVE);
    let gt = truth(&fx);
    let mut want = pairs(&gt["load_unpacked"]["triton0"]);
    want.extend(pairs(&gt["load_unpacked"]["triton1"]));
    assert_eq!(want.len(), 2, "{gt}");
    let t = TempDir::new().unwrap();
    let home = home_with_vllm(&t);
    // one level above the vLLM root (the archive dir), a home dir, and the dir above that
    for path in [fx.clone(), home.clone(), t.path().to_path_buf()].iter() {
        let (_db, db) = common::fresh_db_at().await;
        let summaries = scan(path, &db, "vu");
        let pool = cachelens::db::open(&db).await.unwrap();
        let state = cachelens::web::AppState::new(pool, Default::default());
        let rows = common::get_json(&state, "/api/v1/entries?machine=vu&limit=100").await;
        let got: BTreeSet<(String, String)> = common::arr(&rows)
            .iter()
            .map(|r| (r["key"].as_str().unwrap().to_string(), r["kernel"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(got, want, "scanning {}: {summaries:?}", path.display());
        // each kernel sits in its artifact (scanned as an Inductor dir), in the rank dir
        for r in common::arr(&rows) {
            let root = r["root"].as_str().unwrap();
            assert!(
                root.contains(&format!("{UNPACKED}/rank_0_0/backbone/artifact_compile_range_1_512_subgraph_")),
                "{r}"
            );
            assert_eq!(r["rank"], format!("torch_compile_cache/{UNPACKED}/rank_0_0"), "{r}");
            assert_eq!(r["dir"], format!("triton/0/{}", r["key"].as_str().unwrap()), "{r}");
        }
        // the artifact holding each kernel is the one the GPU run loaded it from
        for (n, list) in [(0, "triton0"), (1, "triton1")] {
            for (key, _) in pairs(&gt["load_unpacked"][list]) {
                let r = common::arr(&rows).iter().find(|r| r["key"] == key.as_str()).unwrap();
                assert!(r["root"].as_str().unwrap().ends_with(&format!("_subgraph_{n}")), "{r}");
            }
        }
    }
}

#[tokio::test]
async fn binary_artifacts_listed_with_bytes_inodes_kernels_and_key_factors() {
    let fx = common::corpus_read_only(ARCHIVE);
    let gt = truth(&fx);
    let t = TempDir::new().unwrap();
    let home = home_with_vllm(&t);
    let (_db, db) = common::fresh_db_at().await;
    let summaries = scan(&home, &db, "vb");
    let prefix = home.join(".cache/vllm/torch_compile_cache").join(BINARY).join("rank_0_0/backbone");
    let prefix = prefix.canonicalize().unwrap();
    let s = summaries.iter().find(|s| s["root"] == prefix.display().to_string()).expect("the binary prefix dir a root");
    assert_eq!(s["entries"], 0, "{s}");
    let beside = common::arr(&s["beside"]);
    // each artifact: its exact bytes, one file and one inode, its AOTAutograd key and kernels
    let loaded = pairs(&gt["load_binary"]["ind"]);
    assert_eq!(loaded.len(), 2, "{gt}");
    let mut kernels_listed = BTreeSet::new();
    for n in 0..2 {
        let path = prefix.join(format!("artifact_compile_range_1_512_subgraph_{n}"));
        let row = beside.iter().find(|b| b["path"] == path.display().to_string()).unwrap_or_else(|| panic!("{s}"));
        let md = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!((row["tool"].as_str(), row["bytes"].as_u64()), (Some("vllm-artifact"), Some(md.len())), "{row}");
        assert_eq!(
            (row["files"].as_i64(), row["inodes"].as_i64(), row["complete"].as_bool()),
            (Some(1), Some(1), Some(true))
        );
        let holds = row["holds"].as_str().unwrap();
        let aot = gt["compile"][format!("s{n}")][0]["aot_autograd"][0].as_str().unwrap();
        assert!(holds.starts_with("binary: 1 Inductor FX graph;"), "{holds}");
        assert!(holds.contains(&format!("AOTAutograd key {aot}")), "{holds}");
        assert!(holds.contains(&gt["compile"]["torch_key"].as_str().unwrap()[..12]), "{holds}");
        assert!(!holds.contains("not read"), "{holds}");
        for (key, name) in &loaded {
            if holds.contains(&format!("{name} [{key}]")) {
                kernels_listed.insert((key.clone(), name.clone()));
            }
        }
    }
    // together the binary artifacts list exactly the kernels a fresh process loading them wrote
    assert_eq!(kernels_listed, loaded);
    // vLLM's key factors for the rank dir
    let factors = beside.iter().find(|b| b["tool"] == "vllm-key-factors").unwrap_or_else(|| panic!("{s}"));
    let raw: Value = serde_json::from_slice(&std::fs::read(prefix.join("cache_key_factors.json")).unwrap()).unwrap();
    let holds = factors["holds"].as_str().unwrap();
    for k in ["config_hash", "code_hash", "compiler_hash"] {
        assert!(holds.contains(&format!("{k}={}", raw[k].as_str().unwrap())), "{holds}");
    }
    assert!(holds.contains("VLLM_COMPILE_CACHE_SAVE_FORMAT=binary"), "{holds}");

    // the machine page's "What fills this disk": the rows, their inodes and what they hold
    let pool = cachelens::db::open(&db).await.unwrap();
    let state = cachelens::web::AppState::new(pool, Default::default());
    let (st, page) = common::get(&state, "/machines/vb").await;
    assert_eq!(st, 200, "{page}");
    let disk = &page[page.find("id=\"disk\"").expect("a disk section")..];
    let disk = &disk[..disk.find("</section>").unwrap()];
    assert!(disk.contains(&format!("vLLM compile cache (vLLM torch_compile_cache/{BINARY}/rank_0_0)")), "{disk}");
    assert_eq!(disk.matches("vllm-artifact").count(), 4, "{disk}");
    assert_eq!(disk.matches("1 files, 1 inodes").count(), 4, "two artifacts and two key factor files: {disk}");
    assert!(disk.contains(&format!("config_hash={}", raw["config_hash"].as_str().unwrap())), "{disk}");
    for (key, name) in &loaded {
        assert!(disk.contains(&format!("{name} [{key}]")), "{disk}");
    }
}
