//! Caches where real tools put them (issue 13): vLLM's per-rank `triton_cache/`, Inductor's
//! `triton/<device>/`, a corpus archive's top dir, the default locations under a fake home,
//! through the real CLI on copies of the corpus.
use crate::common;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;

const HASH: &str = "3d7bd6e8a1";

fn copy(src: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let st = Command::new("cp").arg("-a").arg(src).arg(to).status().unwrap();
    assert!(st.success());
}

/// A fake home with a vLLM cache of two ranks (the corpus JIT cache in each) and their
/// compiled graphs beside (the corpus Inductor dir's FX graphs), and an Inductor dir in
/// `tmp/torchinductor_u`. Returns (tempdir, home, inductor dir, corpus copy).
fn tree() -> (TempDir, PathBuf, PathBuf, PathBuf) {
    let t = TempDir::new().unwrap();
    let jit = common::corpus_read_only("h100-jit-3.6.0");
    let home = t.path().join("home");
    for rank in ["rank_0_0", "rank_1_0"] {
        let rank = home.join(".cache/vllm/torch_compile_cache").join(HASH).join(rank);
        copy(&jit.join("triton-cache"), &rank.join("triton_cache"));
        copy(&jit.join("inductor/fxgraph"), &rank.join("backbone/fxgraph"));
        // links beside the cache are neither followed nor counted
        std::os::unix::fs::symlink(jit.join("triton-cache"), rank.join("backbone/linked-dir")).unwrap();
        std::os::unix::fs::symlink(jit.join("ground-truth-events.jsonl"), rank.join("linked-file")).unwrap();
    }
    let inductor = t.path().join("tmp/torchinductor_u");
    copy(&jit.join("inductor"), &inductor);
    (t, home, inductor, jit)
}

/// (regular files, bytes) below `dir`, by std's walk (not following links).
fn files_under(dir: &Path) -> (i64, i64) {
    let (mut n, mut b) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            let (n2, b2) = files_under(&e.path());
            (n, b) = (n + n2, b + b2);
        } else if t.is_file() {
            (n, b) = (n + 1, b + e.metadata().unwrap().len() as i64);
        }
    }
    (n, b)
}

fn cachelens(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(common::bin());
    c.args(args);
    for v in ["TRITON_CACHE_DIR", "TRITON_HOME", "TORCHINDUCTOR_CACHE_DIR", "VLLM_CACHE_ROOT", "CACHELENS_DB"] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn summaries(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "{}", text(o));
    // one shape for one root or many
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["failed"], serde_json::json!([]), "{v}");
    v["scans"].as_array().unwrap_or_else(|| panic!("{v}")).clone()
}

#[tokio::test]
async fn vllm_tree_scanned_from_its_top_each_rank_a_root() {
    let (_t, home, _, _) = tree();
    let (_db, db) = common::fresh_db_at().await;
    let o =
        cachelens(&["scan", "--json", "--machine", "vm", "--db", db.to_str().unwrap(), home.to_str().unwrap()], &[]);
    let s = summaries(&o);
    let roots: Vec<&str> = s.iter().map(|s| s["root"].as_str().unwrap()).collect();
    let tcc = home.join(".cache/vllm/torch_compile_cache").join(HASH);
    let want = |r: &str| tcc.join(r).join("triton_cache").canonicalize().unwrap().display().to_string();
    assert_eq!(roots, [want("rank_0_0"), want("rank_1_0")], "{}", text(&o));
    // the first rank holds the 122 entries; the second the same keys, counted as duplicates
    assert_eq!(s[0]["entries"], 122);
    assert_eq!(s[1]["entries"], 0);
    let dups: i64 = s[1]["skipped"].as_object().unwrap().values().map(|v| v.as_i64().unwrap()).sum();
    assert_eq!(dups, 122, "{}", s[1]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("found Triton cache:"), "{}", text(&o));
    // beside each rank's cache: its compiled graphs (the FX graphs copied there), links not counted
    for (i, rank) in ["rank_0_0", "rank_1_0"].iter().enumerate() {
        let (files, bytes) = files_under(&tcc.join(rank).join("backbone"));
        assert!(files >= 2 && bytes > 100_000, "{files} {bytes}");
        let path = tcc.join(rank).canonicalize().unwrap().display().to_string();
        let want = serde_json::json!([{"tool": "vllm-compiled", "path": path, "files": files, "bytes": bytes, "complete": true}]);
        assert_eq!(s[i]["beside"], want, "{}", s[i]);
    }

    // where an entry lives: API and entry page
    let pool = cachelens::db::open(&db).await.unwrap();
    let state = cachelens::web::AppState::new(pool, Default::default());
    let rows = common::get_json(&state, "/api/v1/entries?machine=vm&limit=500").await;
    let rows = common::arr(&rows);
    assert_eq!(rows.len(), 122);
    for r in rows {
        assert_eq!(r["root"], want("rank_0_0"));
        assert_eq!(r["rank"], format!("torch_compile_cache/{HASH}/rank_0_0"));
        assert_eq!(r["dir"], r["key"]);
    }
    let key = rows[0]["key"].as_str().unwrap();
    let (st, page) = common::get(&state, &format!("/entries/vm/{key}")).await;
    assert_eq!(st, 200, "{page}");
    assert!(page.contains(&format!("torch_compile_cache/{HASH}/rank_0_0")), "{page}");
    assert!(page.contains("id=\"rank-dir\""), "{page}");
    let (st, page) = common::get(&state, "/machines/vm").await;
    assert_eq!(st, 200, "{page}");
    let disk = &page[page.find("id=\"disk\"").expect("a disk section")..];
    assert!(disk.contains(&format!("Triton cache (vLLM torch_compile_cache/{HASH}/rank_1_0)")), "{disk}");
    assert_eq!(disk.matches("vllm-compiled").count(), 2, "{disk}");
}

#[test]
fn corpus_top_dir_finds_its_caches_and_an_empty_dir_fails() {
    let (t, _, _, jit) = tree();
    let (_db, db) = common::fresh_db_at_blocking();
    let dbs = db.to_str().unwrap();
    // the regression: this printed "0 entries" and exited 0
    let o = cachelens(&["scan", "--json", "--machine", "c", "--db", dbs, jit.to_str().unwrap()], &[]);
    let s = summaries(&o);
    let got: Vec<(String, i64)> =
        s.iter().map(|s| (s["root"].as_str().unwrap().to_string(), s["entries"].as_i64().unwrap())).collect();
    let root = |r: &str| jit.join(r).canonicalize().unwrap().display().to_string();
    assert_eq!(got, [(root("inductor"), 3), (root("triton-cache"), 122)]);
    let beside: Vec<(String, i64, i64)> = s[0]["beside"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tool"].as_str().unwrap().into(), t["files"].as_i64().unwrap(), t["bytes"].as_i64().unwrap()))
        .collect();
    let fx = files_under(&jit.join("inductor/fxgraph"));
    let aot = files_under(&jit.join("inductor/aotautograd"));
    assert!(fx.0 > 0 && aot.0 > 0);
    assert_eq!(beside, [("inductor-fxgraph".into(), fx.0, fx.1), ("inductor-aotautograd".into(), aot.0, aot.1)]);
    assert_eq!(s[1]["beside"], serde_json::json!([]));

    // a dir with no Triton cache (a symlink to one is not followed)
    let empty = t.path().join("empty");
    std::fs::create_dir_all(empty.join("a/b")).unwrap();
    std::os::unix::fs::symlink(jit.join("triton-cache"), empty.join("a/link")).unwrap();
    let o = cachelens(&["scan", "--machine", "c", "--db", dbs, empty.to_str().unwrap()], &[]);
    assert!(!o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("no Triton cache found under") && out.contains("--allow-empty"), "{out}");
    assert!(out.contains("1 symlinks"), "{out}");
    let o = cachelens(&["scan", "--allow-empty", "--machine", "c", "--db", dbs, empty.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("nothing scanned"), "{}", text(&o));
}

#[test]
fn defaults_under_a_fake_home() {
    let (t, home, inductor, _) = tree();
    let (_db, db) = common::fresh_db_at_blocking();
    let o = cachelens(
        &["scan", "--machine", "d", "--db", db.to_str().unwrap()],
        &[("HOME", &home), ("TORCHINDUCTOR_CACHE_DIR", &inductor)],
    );
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let triton = home.join(".triton/cache");
    assert!(out.contains(&format!("triton cache (default): {} not found", triton.display())), "{out}");
    let vllm = home.join(".cache/vllm");
    assert!(out.contains(&format!("vllm cache (default): {}: 2 Triton cache dirs", vllm.display())), "{out}");
    let ind = format!("inductor cache ($TORCHINDUCTOR_CACHE_DIR): {}: 1 Triton cache dirs", inductor.display());
    assert!(out.contains(&ind), "{out}");
    assert_eq!(out.matches("\nscan ").count() + usize::from(out.starts_with("scan ")), 3, "{out}");

    // $TRITON_HOME wins over ~/.triton; nothing anywhere is an error unless --allow-empty
    let nothing = t.path().join("nothing");
    std::fs::create_dir_all(nothing.join(".triton/cache")).unwrap();
    let env = [("HOME", nothing.as_path()), ("TRITON_HOME", nothing.as_path()), ("USER", Path::new("nobody-xyz"))];
    let o = cachelens(&["scan", "--machine", "d", "--db", db.to_str().unwrap()], &env);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            "triton cache ($TRITON_HOME): {}: 0 Triton cache dirs",
            nothing.join(".triton/cache").display()
        )),
        "{out}"
    );
}

/// `scan --server` of a vLLM tree: each rank a scan on the server, with its compiled graphs'
/// sizes on the server's machine page; a `beside` that is not sane is skipped with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_tree_uploaded_with_its_sizes() {
    use crate::upload::{cli_upload, post_raw, server, text as both};
    let (_t, home, _, jit) = tree();
    let srv = server(Default::default()).await;
    let token = cachelens::db::tokens::create(&srv.db, "vup").await.unwrap();
    let out = cli_upload(&srv.url, &token, "vup", &home, &[]).await;
    let (stdout, stderr) = both(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("beside it: vllm-compiled").count(), 2, "{stdout}");
    let scans: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT root, beside_json FROM scans ORDER BY root").fetch_all(&srv.pool).await.unwrap();
    assert_eq!(scans.len(), 2);
    let (files, bytes) =
        files_under(&home.join(".cache/vllm/torch_compile_cache").join(HASH).join("rank_1_0/backbone"));
    let b: Value = serde_json::from_str(scans[1].1.as_deref().unwrap()).unwrap();
    assert_eq!((b[0]["files"].as_i64(), b[0]["bytes"].as_i64()), (Some(files), Some(bytes)), "{b}");
    let client = cachelens::upload::client().unwrap();
    let page = client.get(format!("{}/machines/vup", srv.url)).send().await.unwrap().text().await.unwrap();
    assert_eq!(page.matches("vllm-compiled").count(), 2, "{page}");

    let mut r = cachelens::collect::scan_report(&jit.join("triton-cache"), "vup").unwrap();
    r.beside = vec![cachelens::model::ToolSize { tool: "x".into(), path: "a\0b".into(), ..Default::default() }];
    let (st, body) = post_raw(&srv.url, "/api/v1/scans", Some(&token), serde_json::to_vec(&r).unwrap(), false).await;
    // skipped with its reason, the rest stored
    assert_eq!((st, body["skipped"].as_i64().unwrap_or(0) >= 1), (201, true), "{body}");
    assert!(body["summary"]["skipped"].to_string().contains("beside"), "{body}");
}

/// A cache emptied since its last scan (every entry dir deleted) no longer looks like a cache,
/// but the path holding it was scanned before: it is scanned again and its entries are marked
/// removed, not left live behind a "no Triton cache" error.
#[test]
fn emptied_cache_is_rescanned_and_its_entries_removed() {
    let (_t, p) = common::unpacked("h100-jit-3.6.0");
    let (_db, db) = common::fresh_db_at_blocking();
    let dbs = db.to_str().unwrap();
    let s = summaries(&cachelens(&["scan", "--json", "--machine", "e", "--db", dbs, p.to_str().unwrap()], &[]));
    assert_eq!(s.len(), 2);
    let cache = p.join("triton-cache");
    for d in std::fs::read_dir(&cache).unwrap() {
        std::fs::remove_dir_all(d.unwrap().path()).unwrap();
    }
    let o = cachelens(&["scan", "--json", "--machine", "e", "--db", dbs, p.to_str().unwrap()], &[]);
    let s = summaries(&o);
    let r = s
        .iter()
        .find(|s| s["root"] == cache.canonicalize().unwrap().display().to_string())
        .unwrap_or_else(|| panic!("{}", text(&o)));
    assert_eq!((r["entries"].as_i64(), r["removed_entries"].as_i64()), (Some(0), Some(122)), "{r}");
    assert!(text(&o).contains("scanned before, no entry dir now"), "{}", text(&o));
    // scanning the emptied cache dir itself: the same
    let o = cachelens(&["scan", "--json", "--machine", "e", "--db", dbs, cache.to_str().unwrap()], &[]);
    assert_eq!(summaries(&o)[0]["entries"], 0, "{}", text(&o));
}

/// A real max-autotune Inductor dir (H100): its `cache/<hash>` decisions through the CLI scan
/// and `GET /api/v1/autotune`, checked against the file itself.
#[tokio::test]
async fn inductor_max_autotune_choices() {
    let (_t, dir) = common::unpacked("h100-inductor-autotune-triton-3.6.0");
    let (_db, db) = common::fresh_db_at().await;
    let o = cachelens(&["scan", "--json", "--machine", "at", "--db", db.to_str().unwrap(), dir.to_str().unwrap()], &[]);
    let s = summaries(&o);
    assert_eq!(s.len(), 1, "{}", text(&o));
    assert_eq!(s[0]["root"], dir.canonicalize().unwrap().display().to_string());
    assert_eq!(s[0]["entries"], 130);
    // the file, read here independently: op -> key -> precision -> choice -> ms
    let cache = std::fs::read_dir(dir.join("cache")).unwrap().next().unwrap().unwrap().path();
    // Python's json writes a failed choice as `Infinity`: read it here as null
    let raw = std::fs::read_to_string(&cache).unwrap();
    assert!(raw.contains(": Infinity"), "the fixture has failed choices");
    let file: Value = serde_json::from_str(&raw.replace(": Infinity", ": null")).unwrap();
    let mut want = vec![];
    for (op, keys) in file["cache"].as_object().unwrap() {
        for (key, precs) in keys.as_object().unwrap() {
            for (prec, choices) in precs.as_object().unwrap() {
                let c = choices.as_object().unwrap();
                let ms = |v: &Value| v.as_f64().unwrap_or(f64::INFINITY);
                let best = c.iter().min_by(|a, b| ms(a.1).total_cmp(&ms(b.1))).unwrap();
                want.push((op.clone(), key.clone(), prec.clone(), c.len(), best.0.clone()));
            }
        }
    }
    want.sort();
    assert_eq!(want.len(), 4);
    let pool = cachelens::db::open(&db).await.unwrap();
    let state = cachelens::web::AppState::new(pool, Default::default());
    let rows = common::get_json(&state, "/api/v1/autotune?machine=at").await;
    let mut got: Vec<(String, String, String, usize, String)> = common::arr(&rows)
        .iter()
        .map(|r| {
            assert_eq!((r["source"].as_str(), r["machine"].as_str()), (Some("inductor"), Some("at")));
            let ch = r["choices"].as_array().unwrap();
            let ms: Vec<f64> = ch.iter().map(|c| c["ms"].as_f64().unwrap_or(f64::INFINITY)).collect();
            assert!(ms.windows(2).all(|w| w[0] <= w[1]), "fastest first: {ms:?}");
            assert_eq!(r["winner"], ch[0]["name"]);
            let name = |k: &str| r[k].as_str().unwrap().to_string();
            (name("op"), name("key"), name("precision"), ch.len(), name("winner"))
        })
        .collect();
    got.sort();
    assert_eq!(got, want);
    // filters and paging
    assert_eq!(common::arr(&common::get_json(&state, "/api/v1/autotune?kernel=addmm").await).len(), 4);
    assert_eq!(common::arr(&common::get_json(&state, "/api/v1/autotune?machine=nope").await).len(), 0);
    let page = common::get_json(&state, "/api/v1/autotune?machine=at&limit=1&offset=3").await;
    assert_eq!(common::arr(&page).len(), 1);
    let winner = &want[0].4;
    let by_choice = common::get_json(&state, &format!("/api/v1/autotune?kernel={winner}")).await;
    assert!(!common::arr(&by_choice).is_empty());
    // a re-scan replaces the root's decisions, never doubles them
    let o = cachelens(&["scan", "--json", "--machine", "at", "--db", db.to_str().unwrap(), dir.to_str().unwrap()], &[]);
    summaries(&o);
    assert_eq!(common::arr(&common::get_json(&state, "/api/v1/autotune").await).len(), 4);
}

/// Triton's own `.autotune.json` results in `GET /api/v1/autotune` (`source: "triton"`), after
/// Inductor's, checked against the corpus files: one row per file, every config, the key as
/// Triton wrote it, the winner the fastest median.
#[tokio::test]
async fn triton_autotune_rows_beside_inductor_ones() {
    let jit = common::corpus_read_only("h100-jit-3.6.0");
    let (_t, ind) = common::unpacked("h100-inductor-autotune-triton-3.6.0");
    let (_db, db) = common::fresh_db_at().await;
    for p in [jit.join("triton-cache"), ind] {
        summaries(&cachelens(
            &["scan", "--json", "--machine", "tm", "--db", db.to_str().unwrap(), p.to_str().unwrap()],
            &[],
        ));
    }
    let mut files = vec![];
    for d in std::fs::read_dir(jit.join("triton-cache")).unwrap() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            let f = f.unwrap().path();
            if f.to_string_lossy().ends_with(".autotune.json") {
                // a failed config is timed `Infinity` (Python's json): null here
                let raw = std::fs::read_to_string(&f).unwrap().replace("Infinity", "null");
                let v: Value = serde_json::from_str(&raw).unwrap();
                files.push((v["key"].to_string(), v["configs_timings"].as_array().unwrap().len()));
            }
        }
    }
    files.sort();
    assert!(files.len() >= 2);
    let pool = cachelens::db::open(&db).await.unwrap();
    let state = cachelens::web::AppState::new(pool, Default::default());
    let all = common::get_json(&state, "/api/v1/autotune?machine=tm").await;
    let all = common::arr(&all);
    let sources: Vec<&str> = all.iter().map(|r| r["source"].as_str().unwrap()).collect();
    assert_eq!(sources.iter().filter(|s| **s == "inductor").count(), 4);
    assert!(sources.windows(2).all(|w| w[0] <= w[1]), "inductor rows first: {sources:?}");
    let mut got = vec![];
    for r in all.iter().filter(|r| r["source"] == "triton") {
        assert_eq!(r["op"], "matmul_kernel");
        let ch = r["choices"].as_array().unwrap();
        let best = ch.iter().filter_map(|c| c["ms"].as_f64()).fold(f64::INFINITY, f64::min);
        assert_eq!(ch[0]["ms"].as_f64(), Some(best));
        assert!(ch.iter().any(|c| c["name"] == r["winner"]), "{r}");
        got.push((r["key"].as_str().unwrap().to_string(), ch.len()));
    }
    got.sort();
    assert_eq!(got, files);
    // Parsed texts are kept by sha256 (`db::inductor::ParsedAutotune`): read again, and from a
    // fresh handle on the database (nothing kept), the answer is the same; a second machine
    // whose entries hold the very same texts gets rows of its own machine and entries.
    let warm = common::get_json(&state, "/api/v1/autotune?machine=tm").await;
    assert_eq!(common::arr(&warm), all);
    summaries(&cachelens(
        &[
            "scan",
            "--json",
            "--machine",
            "tm2",
            "--db",
            db.to_str().unwrap(),
            jit.join("triton-cache").to_str().unwrap(),
        ],
        &[],
    ));
    let cold = cachelens::web::AppState::new(cachelens::db::open(&db).await.unwrap(), Default::default());
    let both = common::get_json(&state, "/api/v1/autotune?limit=1000").await;
    assert_eq!(both, common::get_json(&cold, "/api/v1/autotune?limit=1000").await);
    let of = |m: &str| -> Vec<(String, String)> {
        let rows = common::arr(&both).iter().filter(|r| r["source"] == "triton" && r["machine"] == m);
        rows.map(|r| (r["entry"].as_str().unwrap().to_string(), r["key"].to_string())).collect()
    };
    assert_eq!(of("tm2").len(), files.len());
    assert_eq!(of("tm2"), of("tm"), "the same entries and texts on both machines");
    // paging runs across both sources
    let tail = common::get_json(&state, "/api/v1/autotune?machine=tm&limit=3&offset=3").await;
    let tail: Vec<&str> = common::arr(&tail).iter().map(|r| r["source"].as_str().unwrap()).collect();
    assert_eq!(tail, ["inductor", "triton", "triton"]);
    let k = common::get_json(&state, "/api/v1/autotune?kernel=matmul_kernel").await;
    assert_eq!(common::arr(&k).len(), 2 * files.len(), "tm's and tm2's");
}
