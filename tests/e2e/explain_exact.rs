//! Explain exactly (issue 12), on caches compiled here by a real `pip install triton`:
//! the same release under another Python (same machine code, other bytes), lines added above
//! the kernels (the kernel moved, its code did not), and an env var set to its default.
//! Needs `CACHELENS_PYTHON` (Triton 3.6.0) and, for the Python case, `CACHELENS_PYTHON_OTHER`
//! (Triton 3.6.0 under another Python minor version); without them these tests fail, unless
//! `CACHELENS_ALLOW_SKIP=1`.

use crate::common::*;
use cachelens::web::{AppState, Config};
use serde_json::Value;
use std::path::Path;

pub fn python(var: &str) -> Option<std::ffi::OsString> {
    let p = std::env::var_os(var).filter(|p| !p.is_empty());
    if p.is_none() {
        skip_or_fail(&format!("{var} (a python with Triton 3.6.0) is not set"));
    }
    p
}

/// Runs `script` (a copy of scripts/workload.py) with `py` into `cache`; returns its JSON line.
pub fn compile(py: &std::ffi::OsStr, script: &Path, cache: &Path, kernels: &str, env: &[(&str, &str)]) -> Value {
    let mut cmd = std::process::Command::new(py);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TRITON_") || k.starts_with("CACHELENS_HOOK")) {
        cmd.env_remove(k);
    }
    cmd.arg(script)
        .args(["--target", "cuda:90", "--kernels", kernels])
        .env("TRITON_CACHE_DIR", cache)
        .env_remove("TRITON_DEFAULT_FP_FUSION")
        .env_remove("TRITON_F32_DEFAULT")
        .env_remove("TRITON_DEBUG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(out.stdout.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(v["triton_version"], "3.6.0", "{py:?} must have Triton 3.6.0");
    v
}

pub fn workload() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/workload.py")
}

async fn state_of(caches: &[(&Path, &str)]) -> (crate::common::DbDir, AppState) {
    let (dir, pool) = fresh_db().await;
    for (c, m) in caches {
        scan(&pool, c, m).await;
    }
    (dir, AppState::new(pool, Config::default()))
}

async fn compare_of(state: &AppState, i: &Value) -> Value {
    get_json(state, &format!("/api/v1/compare?a={}&b={}", i["a"].as_str().unwrap(), i["b"].as_str().unwrap())).await
}

/// Triton 3.6.0 under two Pythons: libtriton differs per Python ABI, so every key changes
/// (compiler build); the add kernels compile to the same bytes, the softmax kernels (which call
/// Triton's `language/standard.py`, whose install path the debug info embeds) to other bytes
/// with the same machine code.
#[tokio::test]
async fn same_release_other_python_same_machine_code() {
    let (Some(py), Some(other)) = (python("CACHELENS_PYTHON"), python("CACHELENS_PYTHON_OTHER")) else { return };
    let tmp = tempfile::TempDir::new().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    compile(&py, &workload(), &a, "add,softmax", &[]);
    compile(&other, &workload(), &b, "add,softmax", &[]);
    let (_db, state) = state_of(&[(&a, "py-a"), (&b, "py-b")]).await;
    let inv = get_json(&state, "/api/v1/invalidations?a=py-a&b=py-b").await;
    let s = inv["summary"].as_str().unwrap();
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "compiler", "count": 12}]), "{s}");
    assert_eq!(inv["identical_code"], 12, "{s}");
    assert!(
        s.starts_with(
            "12 of 12 entries recompiled after same Triton version, different compiler build (triton_key); \
             6 had identical binaries, 6 more the same machine code (only debug info differs)"
        ),
        "{s}"
    );
    let list = arr(&inv["invalidated"]);
    for i in list {
        assert_eq!(i["identical_code"], true, "{i}");
        assert_eq!(i["identical_binary"], i["kernel"] == "add_kernel", "{i}");
    }
    let soft = list.iter().find(|i| i["kernel"] == "softmax_kernel").unwrap();
    let c = compare_of(&state, soft).await;
    assert_eq!(
        (c["cause"].as_str(), c["identical_binary"].as_bool(), c["identical_code"].as_bool()),
        (Some("compiler"), Some(false), Some(true)),
        "{c}"
    );
    let cs = c["summary"].as_str().unwrap();
    assert!(cs.starts_with("same Triton version, different compiler build (triton_key)"), "{cs}");
    assert!(cs.ends_with("(same machine code: only debug info differs, pure key churn)"), "{cs}");
    let row = arr(&c["components"]).iter().find(|r| r["field"] == "machine code sha256").unwrap();
    assert!(row["a"].is_string() && row["a"] == row["b"], "{row}");
    assert_eq!(row["note"], "same machine code: the bytes differ only in debug info");
    // Pages: the compare notice, the row badge and the per-cause count.
    let (st, page) =
        get(&state, &format!("/compare?a={}&b={}", soft["a"].as_str().unwrap(), soft["b"].as_str().unwrap())).await;
    assert_eq!(st, 200);
    assert!(page.contains("id=\"identical-code\"") && !page.contains("id=\"identical-binary\""), "{page}");
    let (_, page) = get(&state, "/invalidations?a=py-a&b=py-b").await;
    assert_eq!(page.matches(">same machine code</span>").count(), 6, "{page}");
    assert!(page.contains("6 more compiled to the same machine code as before"), "{page}");
    // Kernel grids: softmax's 12 entries (6 per Python) share machine code, not bytes; add's
    // share bytes, so its page says "same binary" and no "same code" on top.
    let (_, page) = get(&state, "/kernels/softmax_kernel").await;
    assert!(page.contains("12 entries have the same machine code as another key of this kernel"), "{page}");
    assert!(page.contains("0 of them byte-identical"), "{page}");
    // six variants, each a cell holding its entry from both Pythons
    assert_eq!(page.matches("title=\"2 entries of this cell have machine code").count(), 6, "{page}");
    let (_, page) = get(&state, "/kernels/add_kernel").await;
    assert!(
        page.contains("12 entries compiled to the same bytes as another key of this kernel")
            && !page.contains("the same machine code as another key"),
        "{page}"
    );
}

/// The same file compiled, then compiled again with 3 lines added above the kernels: every
/// key changes, the code does not.
#[tokio::test]
async fn lines_added_above_the_kernels() {
    let Some(py) = python("CACHELENS_PYTHON") else { return };
    let tmp = tempfile::TempDir::new().unwrap();
    let src = std::fs::read_to_string(workload()).unwrap();
    let file = tmp.path().join("kernels.py");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::write(&file, &src).unwrap();
    compile(&py, &file, &a, "add,softmax", &[]);
    std::fs::write(&file, format!("# a comment\nimport os  # noqa\n\n{src}")).unwrap();
    compile(&py, &file, &b, "add,softmax", &[]);
    let (_db, state) = state_of(&[(&a, "before"), (&b, "after")]).await;
    let inv = get_json(&state, "/api/v1/invalidations?a=before&b=after").await;
    let s = inv["summary"].as_str().unwrap();
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "source", "count": 12}]), "{s}");
    assert!(
        s.starts_with("12 of 12 entries recompiled after the kernel moved 3 lines down in kernels.py; Triton keys on the kernel's first line (code unchanged)"),
        "{s}"
    );
    for i in arr(&inv["invalidated"]) {
        assert_eq!(i["cause"], "source", "{i}");
        assert_eq!(
            i["summary"].as_str().unwrap().split(" (").next().unwrap(),
            "code unchanged: the kernel moved 3 lines down in kernels.py; Triton keys on the kernel's first line; everything else equal",
            "{i}"
        );
        let c = compare_of(&state, i).await;
        assert_eq!(c["cause"], "source", "{c}");
        let row = arr(&c["components"]).iter().find(|r| r["field"] == "kernel location").unwrap();
        let (la, lb) = (row["a"].as_str().unwrap(), row["b"].as_str().unwrap());
        let line = |s: &str| s.rsplit(':').next().unwrap().parse::<i64>().unwrap();
        assert_eq!((line(lb) - line(la), row["differs"].as_bool()), (3, Some(true)), "{row}");
        assert!(la.starts_with("kernels.py:"), "{row}");
        assert_eq!(c["identical_code"], true, "same code: {c}");
    }
}

/// `TRITON_DEFAULT_FP_FUSION=1` (fp fusion is on by default): the key changes, the option does not.
#[tokio::test]
async fn env_var_set_to_its_default() {
    let Some(py) = python("CACHELENS_PYTHON") else { return };
    let tmp = tempfile::TempDir::new().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    compile(&py, &workload(), &a, "add", &[]);
    compile(&py, &workload(), &b, "add", &[("TRITON_DEFAULT_FP_FUSION", "1")]);
    let (_db, state) = state_of(&[(&a, "unset"), (&b, "set")]).await;
    let inv = get_json(&state, "/api/v1/invalidations?a=unset&b=set").await;
    let s = inv["summary"].as_str().unwrap();
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "env", "count": 6}]), "{s}");
    let c = compare_of(&state, &inv["invalidated"][0]).await;
    assert_eq!(c["cause"], "env", "{c}");
    let cs = c["summary"].as_str().unwrap();
    assert!(
        cs.starts_with("TRITON_DEFAULT_FP_FUSION=true on B (set to its default: the option is unchanged, setting it at all changed the key)"),
        "{cs}"
    );
    let ff = arr(&c["components"]).iter().find(|r| r["field"] == "enable_fp_fusion").unwrap();
    assert_eq!((ff["a"].as_bool(), ff["b"].as_bool(), ff["differs"].as_bool()), (Some(true), Some(true), Some(false)));
    let env = arr(&c["components"]).iter().find(|r| r["field"] == "TRITON_DEFAULT_FP_FUSION").unwrap();
    assert!(env["note"].as_str().unwrap().contains("default"), "{env}");
}

/// The hook on (`TRITON_CACHE_MANAGER`): each compile records the key's parts, and the
/// comparison uses them: `evidence` is `recorded`, the rows carry the recorded values and the
/// cause comes from the part that differs. Two Pythons → triton_key; lines added above the
/// kernels → source_hash; one side without the hook → inferred.
#[tokio::test]
async fn hooked_runs_record_the_key_parts() {
    let (Some(py), Some(other)) = (python("CACHELENS_PYTHON"), python("CACHELENS_PYTHON_OTHER")) else { return };
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("hook");
    let hook = hook.to_str().unwrap();
    let hooked = [("TRITON_CACHE_MANAGER", "cachelens_hook:TrackingCacheManager"), ("PYTHONPATH", hook)];
    let tmp = tempfile::TempDir::new().unwrap();
    let src = std::fs::read_to_string(workload()).unwrap();
    let file = tmp.path().join("kernels.py");
    let c = |n: &str| tmp.path().join(n);
    std::fs::write(&file, &src).unwrap();
    compile(&py, &file, &c("a"), "add", &hooked);
    compile(&other, &file, &c("b"), "add", &hooked);
    compile(&py, &file, &c("plain"), "add", &[]);
    std::fs::write(&file, format!("# a comment\n\n{src}")).unwrap();
    compile(&py, &file, &c("moved"), "add", &hooked);
    let (_db, state) =
        state_of(&[(&c("a"), "py-a"), (&c("b"), "py-b"), (&c("moved"), "moved"), (&c("plain"), "plain")]).await;
    let ver = |p: &std::ffi::OsStr| {
        let o = std::process::Command::new(p)
            .args(["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    let row = |c: &Value, f: &str| {
        arr(&c["components"]).iter().find(|r| r["field"] == f).cloned().unwrap_or_else(|| panic!("no {f}: {c}"))
    };

    // Another Python: triton_key differs (recorded), nothing else does.
    let inv = get_json(&state, "/api/v1/invalidations?a=py-a&b=py-b").await;
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "compiler", "count": 6}]), "{}", inv["summary"]);
    let cmp = compare_of(&state, &inv["invalidated"][0]).await;
    assert_eq!((cmp["cause"].as_str(), cmp["evidence"].as_str()), (Some("compiler"), Some("recorded")), "{cmp}");
    let s = cmp["summary"].as_str().unwrap();
    let want = format!(
        "same Triton version, different compiler build (triton_key, recorded): Python {} → {}; everything else equal",
        ver(&py),
        ver(&other)
    );
    assert!(s.starts_with(&want), "{s}");
    let tk = row(&cmp, "triton_key");
    assert!(tk["a"].as_str().is_some_and(|h| h.len() == 64) && tk["a"] != tk["b"] && tk["differs"] == true, "{tk}");
    assert_eq!(tk["note"], "recorded by the hook at compile time");
    for f in ["source_hash", "backend_hash", "options_hash", "env_vars"] {
        let r = row(&cmp, f);
        assert!(!r["a"].is_null() && r["a"] == r["b"], "{r}");
    }
    // Lines added above the kernels: the source hash differs (recorded), the IR does not.
    let inv = get_json(&state, "/api/v1/invalidations?a=py-a&b=moved").await;
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "source", "count": 6}]), "{}", inv["summary"]);
    let cmp = compare_of(&state, &inv["invalidated"][0]).await;
    assert_eq!((cmp["cause"].as_str(), cmp["evidence"].as_str()), (Some("source"), Some("recorded")), "{cmp}");
    let sh = row(&cmp, "source_hash");
    assert!(sh["a"] != sh["b"] && sh["differs"] == true, "{sh}");
    assert_eq!(row(&cmp, "triton_key")["differs"], false);
    assert!(
        cmp["summary"].as_str().unwrap().starts_with("code unchanged: the kernel moved 2 lines down in kernels.py"),
        "{}",
        cmp["summary"]
    );
    // One side without the hook: inferred, and the page says how to know.
    let inv = get_json(&state, "/api/v1/invalidations?a=plain&b=py-b").await;
    let cmp = compare_of(&state, &inv["invalidated"][0]).await;
    assert_eq!(cmp["evidence"], "inferred", "{cmp}");
    assert!(
        cmp["summary"].as_str().unwrap().contains("enable the hook to record the key's parts"),
        "{}",
        cmp["summary"]
    );
    let i = &inv["invalidated"][0];
    let (_, page) =
        get(&state, &format!("/compare?a={}&b={}", i["a"].as_str().unwrap(), i["b"].as_str().unwrap())).await;
    assert!(page.contains("id=\"evidence-inferred\"") && page.contains("Enable the hook to record the key"), "{page}");
    let i = &get_json(&state, "/api/v1/invalidations?a=py-a&b=py-b").await["invalidated"][0];
    let (_, page) =
        get(&state, &format!("/compare?a={}&b={}", i["a"].as_str().unwrap(), i["b"].as_str().unwrap())).await;
    assert!(page.contains("id=\"evidence-recorded\""), "{page}");
}

/// Uploaded by the real CLI to a real server on 127.0.0.1: the key parts (hook events) and the
/// machine-code digests (entry resources) arrive, so the server's answer is the local one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_keep_key_parts_and_code_digests() {
    let (Some(py), Some(other)) = (python("CACHELENS_PYTHON"), python("CACHELENS_PYTHON_OTHER")) else { return };
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("hook");
    let hooked =
        [("TRITON_CACHE_MANAGER", "cachelens_hook:TrackingCacheManager"), ("PYTHONPATH", hook.to_str().unwrap())];
    let tmp = tempfile::TempDir::new().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    compile(&py, &workload(), &a, "softmax", &hooked);
    compile(&other, &workload(), &b, "softmax", &hooked);
    let srv = crate::upload::server(Config::default()).await;
    for (m, dir) in [("up-a", &a), ("up-b", &b)] {
        let token = cachelens::db::tokens::create(&srv.db, m).await.unwrap();
        let out = crate::upload::cli_upload(&srv.url, &token, m, dir, &[]).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let inv = crate::upload::get_json_at(&format!("{}/api/v1/invalidations?a=up-a&b=up-b", srv.url)).await;
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "compiler", "count": 6}]), "{}", inv["summary"]);
    assert_eq!(inv["identical_code"], 6, "{}", inv["summary"]);
    let i = &inv["invalidated"][0];
    let url = format!("{}/api/v1/compare?a={}&b={}", srv.url, i["a"].as_str().unwrap(), i["b"].as_str().unwrap());
    let c = crate::upload::get_json_at(&url).await;
    assert_eq!(
        (c["evidence"].as_str(), c["identical_binary"].as_bool(), c["identical_code"].as_bool()),
        (Some("recorded"), Some(false), Some(true)),
        "{c}"
    );
}
