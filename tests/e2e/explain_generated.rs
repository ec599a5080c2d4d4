//! Why entries differ, on caches compiled here by scripts/workload.py: other targets (sm_80,
//! gfx942), fp fusion off (corpus) against a default sm_90 cache, a key-only env change (pure
//! key churn) and another Triton release. Needs `CACHELENS_PYTHON` (Triton 3.6.0) and
//! `CACHELENS_PYTHON_ALT` (another release); without them these tests fail, unless
//! `CACHELENS_ALLOW_SKIP=1`.

use crate::common::*;
use cachelens::web::{AppState, Config};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The python named by env var `var`, or None when it is unset and `CACHELENS_ALLOW_SKIP=1`
/// (a run without Triton). Unset otherwise fails: a skipped proof must not read as a pass.
fn python(var: &str, what: &str) -> Option<std::ffi::OsString> {
    if let Some(py) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Some(py);
    }
    let msg = format!("{var} ({what}) is not set; scripts/test.sh sets it (scripts/triton-venv.sh)");
    assert!(std::env::var("CACHELENS_ALLOW_SKIP").as_deref() == Ok("1"), "{msg}; CACHELENS_ALLOW_SKIP=1 skips");
    eprintln!("skipping (CACHELENS_ALLOW_SKIP=1): {msg}");
    None
}

/// Caches compiled here by scripts/workload.py with `$CACHELENS_PYTHON` (Triton 3.6.0):
/// sm_90 (all 45 kernels), sm_80, gfx942 and sm_90 with `TRITON_F32_DEFAULT=ieee` (the add
/// kernels). None only when skipping is allowed (see [`python`]).
fn generated() -> Option<&'static PathBuf> {
    static GEN: OnceLock<Option<PathBuf>> = OnceLock::new();
    GEN.get_or_init(|| {
        let py = python("CACHELENS_PYTHON", "a python with Triton 3.6.0")?;
        let dir = tempfile::TempDir::new().unwrap().keep();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/workload.py");
        // TRITON_F32_DEFAULT is in the key, but 3.6.0 reads it only where a tl.dot is traced:
        // the add kernels get new keys and byte-identical binaries (pure key churn).
        for (name, target, kernels, env) in [
            ("sm90", "cuda:90", "add,softmax,layernorm,matmul", None),
            ("sm80", "cuda:80", "add", None),
            ("gfx942", "hip:gfx942", "add", None),
            ("f32ieee", "cuda:90", "add", Some(("TRITON_F32_DEFAULT", "ieee"))),
        ] {
            let mut cmd = std::process::Command::new(&py);
            cmd.arg(&script)
                .args(["--target", target, "--kernels", kernels])
                .env("TRITON_CACHE_DIR", dir.join(name))
                .env_remove("TRITON_DEFAULT_FP_FUSION")
                .env_remove("TRITON_F32_DEFAULT")
                .env_remove("TRITON_DEBUG");
            if let Some((k, v)) = env {
                cmd.env(k, v);
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "workload.py {target}: {}", String::from_utf8_lossy(&out.stderr));
            let v: Value =
                serde_json::from_slice(out.stdout.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap()).unwrap();
            assert_eq!(v["triton_version"], "3.6.0", "CACHELENS_PYTHON must have Triton 3.6.0");
        }
        Some(dir)
    })
    .as_ref()
}

async fn scan_generated(gen_dir: &Path) -> (Vec<crate::common::DbDir>, AppState) {
    let (keep, pool) = corpus_db(&[("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache")]).await;
    let store = cachelens::db::Db::from(pool.clone());
    for m in ["sm90", "sm80", "gfx942", "f32ieee"] {
        cachelens::collect::scan_local(&store, &gen_dir.join(m), &format!("gen-{m}")).await.unwrap();
    }
    (keep, AppState::new(pool, Config::default()))
}

async fn compare_of(state: &AppState, i: &Value) -> Value {
    get_json(state, &format!("/api/v1/compare?a={}&b={}", i["a"].as_str().unwrap(), i["b"].as_str().unwrap())).await
}

#[tokio::test]
async fn explain_generated_caches() {
    let Some(dir) = generated() else { return };
    let (_keep, state) = scan_generated(dir).await;
    // fp fusion off (corpus) against a default sm_90 3.6.0 cache: env, all 45.
    let inv = get_json(&state, "/api/v1/invalidations?a=gen-sm90&b=h100-c").await;
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "env", "count": 45}]), "{}", inv["summary"]);
    let s = inv["summary"].as_str().unwrap();
    assert!(
        s.starts_with(
            "45 of 45 entries recompiled after TRITON_DEFAULT_FP_FUSION=false set (sets enable_fp_fusion false)"
        ),
        "{s}"
    );
    assert_eq!(arr(&inv["new"]).len() + arr(&inv["removed"]).len(), 0, "{}", inv["summary"]);
    let c = compare_of(&state, &inv["invalidated"][0]).await;
    assert_eq!(c["cause"], "env");
    let s = c["summary"].as_str().unwrap();
    assert!(
        s.starts_with("TRITON_DEFAULT_FP_FUSION=false on B (sets enable_fp_fusion false); everything else equal"),
        "{s}"
    );
    let ff = arr(&c["components"]).iter().find(|r| r["field"] == "enable_fp_fusion").unwrap();
    assert_eq!(
        (ff["component"].as_str(), ff["a"].as_bool(), ff["b"].as_bool(), ff["differs"].as_bool()),
        (Some("env"), Some(true), Some(false), Some(true))
    );
    assert!(ff["note"].as_str().unwrap().contains("TRITON_DEFAULT_FP_FUSION"), "{ff}");
    // One change, one line with its count: on the page, and in `gate` over the same two dirs.
    let (st, page) = get(&state, "/invalidations?a=gen-sm90&b=h100-c").await;
    assert_eq!(st, 200);
    let whys: Vec<&str> = page.split("<span class=\"why\">").skip(1).collect();
    assert_eq!(whys.len(), 1, "one reason: {page}");
    assert!(
        whys[0].starts_with("TRITON_DEFAULT_FP_FUSION=false on B (sets enable_fp_fusion false); everything else equal</span> <span class=\"muted why-n\">(45 entries)</span>"),
        "{}",
        &whys[0][..200.min(whys[0].len())]
    );
    let fp = corpus_read_only("h100-fpfusion-off-triton-3.6.0").join("triton-cache");
    let out = std::process::Command::new(bin())
        .args(["gate", "-q", "--max-invalidated", "100%"])
        .args([dir.join("sm90"), fp])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let want = "\nenv: 45 entries of 4 kernels, compile time unknown\n  45 × TRITON_DEFAULT_FP_FUSION=false on B (sets enable_fp_fusion false); everything else equal\n";
    assert!(text.contains(want), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains(" × ")).count(), 1, "{text}");
    // Both 3.6.0 but installed in different venvs: libdevice's path differs, and CUDA keys it
    // by content, so it is shown and is no cause ("everything else equal" above).
    let ext = arr(&c["components"]).iter().find(|r| r["field"] == "extern_libs").unwrap();
    assert_ne!(ext["a"], ext["b"], "install paths differ: {ext}");
    assert_eq!(ext["differs"], true);
    assert_eq!(ext["note"], "path differs but CUDA keys these libraries by content: not a cause", "{ext}");
    // The same kernels for sm_80: backend.
    let inv = get_json(&state, "/api/v1/invalidations?a=gen-sm90&b=gen-sm80").await;
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "backend", "count": 6}]), "{}", inv["summary"]);
    let c = compare_of(&state, &inv["invalidated"][0]).await;
    assert_eq!(c["cause"], "backend");
    assert!(
        c["summary"].as_str().unwrap().starts_with("target sm90 → sm80; everything else equal"),
        "{}",
        c["summary"]
    );
    // For AMD gfx942: backend, arch and warp size.
    let inv = get_json(&state, "/api/v1/invalidations?a=gen-sm90&b=gen-gfx942").await;
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "backend", "count": 6}]), "{}", inv["summary"]);
    let c = compare_of(&state, &inv["invalidated"][0]).await;
    let s = c["summary"].as_str().unwrap();
    assert!(s.starts_with("backend cuda → hip, target sm90 → gfx942, warp size 32 → 64; everything else equal"), "{s}");
    // Another num_warps, same softmax block: options.
    let e = get_json(&state, "/api/v1/entries?machine=gen-sm90&kernel=softmax_kernel").await;
    let e = arr(&e);
    let w4 = e.iter().find(|x| x["num_warps"] == 4).unwrap();
    let w8 = e.iter().find(|x| x["num_warps"] == 8 && x["shapes"] == w4["shapes"]).unwrap();
    let c = get_json(
        &state,
        &format!(
            "/api/v1/compare?a=gen-sm90:{}&b=gen-sm90:{}",
            w4["key"].as_str().unwrap(),
            w8["key"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(c["cause"], "options", "{}", c["summary"]);
    assert!(c["summary"].as_str().unwrap().starts_with("num_warps 4 → 8"), "{}", c["summary"]);
    // The generated cache sits where it was written: not relocated.
    assert!(arr(&c["relocated"]).is_empty());
}

/// A key-only change (`TRITON_F32_DEFAULT` on kernels without a dot): every add kernel
/// recompiled to the same bytes, said by the invalidations and compare APIs and pages.
#[tokio::test]
async fn explain_generated_pure_key_churn() {
    let Some(dir) = generated() else { return };
    let (_keep, state) = scan_generated(dir).await;
    let inv = get_json(&state, "/api/v1/invalidations?a=gen-sm90&b=gen-f32ieee").await;
    let s = inv["summary"].as_str().unwrap();
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "env", "count": 6}]), "{s}");
    assert!(
        s.starts_with("6 of 45 entries recompiled after TRITON_F32_DEFAULT=ieee set; 6 had identical binaries"),
        "{s}"
    );
    let list = arr(&inv["invalidated"]);
    assert_eq!(list.len(), 6);
    for i in list {
        assert_eq!(i["identical_binary"], true, "{i}");
        assert_eq!(
            i["summary"],
            "TRITON_F32_DEFAULT=ieee on B; everything else equal (identical binary: pure key churn)"
        );
        let c = compare_of(&state, i).await;
        assert_eq!((c["cause"].as_str(), c["identical_binary"].as_bool()), (Some("env"), Some(true)), "{c}");
        let bin = arr(&c["components"]).iter().find(|r| r["field"] == "binary sha256").unwrap();
        assert!(bin["a"].is_string() && bin["a"] == bin["b"], "{bin}");
        assert_eq!(bin["note"], "same bytes under different keys: pure key churn");
    }
    // The pages: a badge per row, and the compare view's notice.
    let (st, page) = get(&state, "/invalidations?a=gen-sm90&b=gen-f32ieee").await;
    assert_eq!(st, 200);
    assert_eq!(page.matches("<span class=\"badge\">identical binary</span>").count(), 6, "{page}");
    let (a, b) = (list[0]["a"].as_str().unwrap(), list[0]["b"].as_str().unwrap());
    let (st, cmp) = get(&state, &format!("/compare?a={a}&b={b}")).await;
    assert_eq!(st, 200);
    assert!(cmp.contains("id=\"identical-binary\"") && cmp.contains("The recompile was pure key churn."), "{cmp}");
    // A real recompile is not flagged.
    let (_, cmp) = get(&state, &format!("/compare?a={a}&b={}", list[1]["b"].as_str().unwrap())).await;
    assert!(!cmp.contains("id=\"identical-binary\""), "{cmp}");
}

/// key → (signature, shapes) of a machine's entries.
async fn variants(state: &AppState, machine: &str) -> HashMap<String, (Value, Value)> {
    let e = get_json(state, &format!("/api/v1/entries?machine={machine}&limit=1000")).await;
    arr(&e).iter().map(|e| (e["key"].as_str().unwrap().into(), (e["signature"].clone(), e["shapes"].clone()))).collect()
}

/// With `CACHELENS_PYTHON_ALT` (a python with another Triton release; scripts/test.sh makes
/// one with 3.4.0): the add kernels compiled by it against the same ones by 3.6.0 → compiler,
/// both versions named, every kernel matched to its counterpart.
#[tokio::test]
async fn explain_generated_other_triton_version() {
    let Some(alt) = python("CACHELENS_PYTHON_ALT", "a python with a Triton other than 3.6.0") else {
        return;
    };
    let Some(dir) = generated() else { return };
    let cache = tempfile::TempDir::new().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/workload.py");
    let out = std::process::Command::new(alt)
        .arg(&script)
        .args(["--target", "cuda:90", "--kernels", "add"])
        .env("TRITON_CACHE_DIR", cache.path())
        .env_remove("TRITON_DEFAULT_FP_FUSION")
        .env_remove("TRITON_DEBUG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(out.stdout.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap()).unwrap();
    let version = v["triton_version"].as_str().unwrap().to_string();
    assert_ne!(version, "3.6.0", "CACHELENS_PYTHON_ALT must have another Triton than 3.6.0");
    let (_keep, state) = scan_generated(dir).await;
    cachelens::collect::scan_local(&state.db, cache.path(), "gen-alt").await.unwrap();
    let inv = get_json(&state, "/api/v1/invalidations?a=gen-alt&b=gen-sm90").await;
    let s = inv["summary"].as_str().unwrap();
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "compiler", "count": 6}]), "{s}");
    assert!(s.starts_with(&format!("6 of 6 entries recompiled after Triton {version} → 3.6.0")), "{s}");
    // gen-sm90 also holds softmax, layernorm and matmul: new there, but no add kernel is.
    assert!(arr(&inv["removed"]).is_empty(), "every kernel matched: {inv}");
    assert!(arr(&inv["new"]).iter().all(|n| n["kernel"] != "add_kernel"), "every kernel matched: {inv}");
    let list = arr(&inv["invalidated"]);
    let olds: HashSet<&str> = list.iter().map(|i| i["old_key"].as_str().unwrap()).collect();
    let news: HashSet<&str> = list.iter().map(|i| i["new_key"].as_str().unwrap()).collect();
    assert_eq!((list.len(), olds.len(), news.len()), (6, 6, 6), "one to one");
    let (alt_e, sm90) = (variants(&state, "gen-alt").await, variants(&state, "gen-sm90").await);
    assert_eq!(olds, alt_e.keys().map(String::as_str).collect(), "every alt entry invalidated");
    for i in list {
        assert_eq!(i["cause"], "compiler", "{i}");
        assert_eq!(i["kernel"], "add_kernel");
        assert_eq!(i["summary"], format!("Triton {version} → 3.6.0; everything else equal"), "{i}");
        // Matched to its own variant: same block size and dtype.
        assert_eq!(alt_e[i["old_key"].as_str().unwrap()], sm90[i["new_key"].as_str().unwrap()], "{i}");
        let c = compare_of(&state, i).await;
        let tv = arr(&c["components"]).iter().find(|r| r["field"] == "triton_version").unwrap();
        assert_eq!((tv["a"].as_str(), tv["b"].as_str()), (Some(version.as_str()), Some("3.6.0")));
    }
}
