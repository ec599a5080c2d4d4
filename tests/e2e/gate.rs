//! `cachelens gate` through the real binary: real upgrade pairs (the corpus' in-place upgrades,
//! and kernels compiled here by Triton 3.4.0 and 3.6.0), exit codes, text and JSON counted
//! against the cache dirs themselves, the database mode; and the command-line habits: no
//! progress bar off a terminal or with --quiet, shell completions, `token list --json`.

use crate::common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the binary: (exit code, stdout, stderr). CACHELENS_DB is cleared (the gate never reads
/// it, and other commands get --db).
fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin()).args(args).env_remove("CACHELENS_DB").output().unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), s(&out.stdout), s(&out.stderr))
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// The kernel entries of a cache dir, read independently of the scanner: key dir → the
/// metadata's (name, triton_version).
fn kernels(cache: &Path) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for d in std::fs::read_dir(cache).unwrap() {
        let d = d.unwrap().path();
        for f in std::fs::read_dir(&d).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".json") && !name.starts_with("__grp__") && !name.ends_with(".autotune.json") {
                let m: Value = json(&std::fs::read_to_string(&f).unwrap());
                let key = d.file_name().unwrap().to_string_lossy().into_owned();
                let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
                out.insert(key, (s("name"), s("triton_version")));
            }
        }
    }
    out
}

/// Every file below `dir` with its size and mtime: the gate must leave caches as it found them.
fn listing(dir: &Path) -> BTreeSet<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let md = e.metadata().unwrap();
            if md.is_dir() {
                todo.push(e.path());
            }
            out.insert((e.path(), md.len(), md.modified().unwrap()));
        }
    }
    out
}

fn cache_of(archive: &str) -> PathBuf {
    corpus_read_only(archive).join("triton-cache")
}

const A100_1: &str = "a100-upgrade-1-triton-3.4.0";
const A100_2: &str = "a100-upgrade-2-triton-3.5.1";

/// The corpus' in-place upgrade as two dirs: 3.4.0's 45 kernels, then the dir after 3.5.1
/// compiled the same kernels into it (both generations). Every base kernel recompiles.
#[test]
fn gate_fails_on_a_real_upgrade_with_causes_in_text_and_json() {
    let (base, change) = (cache_of(A100_1), cache_of(A100_2));
    let before = (listing(&base), listing(&change));
    let (b, c) = (base.to_str().unwrap(), change.to_str().unwrap());
    let (code, out, err) = cli(&["gate", b, c, "--max-invalidated", "10%"]);
    assert_eq!(code, 1, "{out}{err}");
    // Counted from the dirs: base kernels, and change kernels under keys the base lacks.
    let (bk, ck) = (kernels(&base), kernels(&change));
    let fresh: BTreeSet<&String> = ck.keys().filter(|k| !bk.contains_key(*k)).collect();
    assert_eq!((bk.len(), fresh.len()), (45, 45));
    assert!(
        out.starts_with(
            "gate FAILED: 45 of 45 base entries (4 kernels) would recompile (100.0%), more than the 10% allowed\n"
        ),
        "{out}"
    );
    assert!(out.contains("\nbase:   ") && out.contains(" (45 entries of 4 kernels)\nchange: "), "{out}");
    assert!(out.contains(" (90 entries of 4 kernels)\n"), "the change holds both generations: {out}");
    // No hook in these caches: the cost is unknown, and the line says why.
    assert!(out.contains("\nrecompile cost: unknown: the hook (TRITON_CACHE_MANAGER="), "{out}");
    assert!(
        out.contains("\ncompiler: 45 entries of 4 kernels, compile time unknown\n  45 × Triton 3.4.0 → 3.5.1"),
        "{out}"
    );
    assert!(out.contains("Triton 3.4.0 → 3.5.1; everything else equal"), "{out}");
    assert!(out.contains("... and 25 more"), "20 shown per cause: {out}");
    assert!(!err.contains("scanning"), "no progress bar off a terminal: {err}");

    let (code, out, _) = cli(&["gate", b, c, "--max-invalidated", "10%", "--json"]);
    assert_eq!(code, 1);
    let v = json(&out);
    assert_eq!(v["passed"], false);
    assert_eq!((v["base_entries"].as_u64(), v["change_entries"].as_u64()), (Some(45), Some(90)));
    assert_eq!((v["base_kernels"].as_u64(), v["change_kernels"].as_u64()), (Some(4), Some(4)));
    assert_eq!(v["invalidated_kernels"].as_u64(), Some(4));
    assert_eq!(v["recompile"], serde_json::json!({"ms": 0.0, "timed": 0, "of": 45}));
    assert_eq!(v["invalidated"].as_u64(), Some(fresh.len() as u64));
    assert_eq!(v["share"].as_f64(), Some(1.0));
    assert_eq!(v["by_cause"], serde_json::json!([{"cause": "compiler", "count": 45}]));
    assert_eq!((v["kept"].as_u64(), v["new"].as_u64(), v["removed"].as_u64()), (Some(45), Some(0), Some(0)));
    let rows = arr(&v["report"]["invalidated"]);
    assert_eq!(rows.len(), 45);
    let news: BTreeSet<&str> = rows.iter().map(|r| r["new_key"].as_str().unwrap()).collect();
    assert_eq!(news, fresh.iter().map(|k| k.as_str()).collect(), "each new key once");
    for r in rows {
        let (old, new) = (&bk[r["old_key"].as_str().unwrap()], &ck[r["new_key"].as_str().unwrap()]);
        assert_eq!((old.0.as_str(), old.1.as_str(), new.1.as_str()), (r["kernel"].as_str().unwrap(), "3.4.0", "3.5.1"));
        assert_eq!(new.0, old.0, "paired with the same kernel: {r}");
    }
    assert_eq!((listing(&base), listing(&change)), before, "the gate wrote into a cache");

    // A threshold at or above the measured share passes; the count and fraction forms too.
    for (limit, want) in [("100%", 0), ("1.0", 0), ("45", 0), ("44", 1), ("0.9", 1)] {
        let (code, out, err) = cli(&["gate", b, c, "--max-invalidated", limit, "-q"]);
        assert_eq!(code, want, "--max-invalidated {limit}: {out}{err}");
        assert!(err.is_empty(), "--quiet: {err}");
    }
    let (_, out, _) = cli(&["gate", b, c, "--max-invalidated", "45"]);
    assert!(out.starts_with(
        "gate passed: 45 of 45 base entries (4 kernels) would recompile (100.0%), within the 45 entries allowed"
    ));
}

/// Two copies of the same cache: nothing recompiles, even with no recompile allowed.
#[test]
fn gate_passes_on_an_identical_pair() {
    let base = cache_of(A100_1);
    let (_t, copy) = unpacked(A100_1);
    let copy = copy.join("triton-cache");
    let (code, out, err) =
        cli(&["gate", base.to_str().unwrap(), copy.to_str().unwrap(), "--max-invalidated", "0", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v = json(&out);
    assert_eq!((v["passed"].as_bool(), v["invalidated"].as_u64(), v["kept"].as_u64()), (Some(true), Some(0), Some(45)));
    assert_eq!(v["by_cause"], serde_json::json!([]));
}

#[test]
fn gate_input_errors_exit_2() {
    let base = cache_of(A100_1);
    let b = base.to_str().unwrap();
    let t = tempfile::TempDir::new().unwrap();
    let missing = t.path().join("nope");
    let m = missing.to_str().unwrap();
    let empty = t.path().to_str().unwrap();
    // a file that is not there (PostgreSQL has no missing database to name)
    let db = t.path().join("none.db");
    for (args, says) in [
        (vec!["gate", b, m, "--max-invalidated", "10%"], "nope"),
        (vec!["gate", m, b, "--max-invalidated", "10%"], "nope"),
        (vec!["gate", b, empty, "--max-invalidated", "10%"], "no Triton cache"),
        (vec!["gate", b, b, "--max-invalidated", "ten%"], "give a percentage"),
        (vec!["gate", b, b, "--max-invalidated", "150%"], "give a percentage"),
        (vec!["gate", b, b, "--max-invalidated", "-2"], "give a percentage"),
        (vec!["gate", b, "--max-invalidated", "10%"], "two cache dirs"),
        (vec!["gate", b, b], "--max-invalidated"),
        (vec!["gate", "m1", "m2", "--db", db.to_str().unwrap(), "--max-invalidated", "1"], "no database"),
    ] {
        let (code, out, err) = cli(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    assert!(!db.exists(), "a missing --db is not created");
    let (code, out, _) = cli(&["gate", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("Exit status:\n  0  passed") && out.contains("  2  the gate could not decide"), "{out}");
}

/// The database mode: an in-place upgrade scanned twice on one machine, and two machines.
#[test]
fn gate_reads_scans_and_machines_of_a_database() {
    let t = tempfile::TempDir::new().unwrap();
    let (_db, db) = fresh_db_at_blocking();
    let d = db.to_str().unwrap();
    let scan = |machine: &str, archive: &str, at: &Path| -> i64 {
        let _ = std::fs::remove_dir_all(at);
        let staging = t.path().join("staging");
        let _ = std::fs::remove_dir_all(&staging);
        unpack(archive, &staging);
        std::fs::rename(staging.join(archive), at).unwrap();
        let (code, out, err) = cli(&["scan", "--db", d, "--machine", machine, "--json", at.to_str().unwrap()]);
        assert_eq!(code, 0, "{out}{err}");
        json(&out)["scans"][0]["scan_id"].as_i64().unwrap()
    };
    let a100 = t.path().join("a100");
    let s1 = scan("a100", A100_1, &a100);
    let s2 = scan("a100", A100_2, &a100);
    // Latest scan against the one before, then the same two named.
    let (code, out, err) = cli(&["gate", "--db", d, "a100", "--max-invalidated", "10%", "--json"]);
    assert_eq!(code, 1, "{out}{err}");
    let v = json(&out);
    assert_eq!(
        (v["base"].as_str(), v["change"].as_str()),
        (Some(&*format!("a100@{s1}")), Some(&*format!("a100@{s2}")))
    );
    assert_eq!(
        (v["invalidated"].as_u64(), v["base_entries"].as_u64(), v["base_kernels"].as_u64()),
        (Some(45), Some(45), Some(4))
    );
    assert_eq!(v["by_cause"], serde_json::json!([{"cause": "compiler", "count": 45}]));
    let (a, b) = (format!("a100@{s1}"), format!("a100@{s2}"));
    let (code, named, _) = cli(&["gate", "--db", d, &a, &b, "--max-invalidated", "10%", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(json(&named)["report"], v["report"]);
    let (code, out, _) = cli(&["gate", "--db", d, &a, &b, "--max-invalidated", "100%"]);
    assert_eq!(code, 0, "{out}");
    // Two machines: the AMD pair, 3.6.0 then 3.9.0 (both generations in the second).
    let (m1, m2) = (t.path().join("mi300-1"), t.path().join("mi300-2"));
    scan("mi300-old", "mi300-upgrade-1-triton-3.6.0", &m1);
    scan("mi300-new", "mi300-upgrade-2-triton-3.9.0", &m2);
    let old = kernels(&m1.join("triton-cache"));
    let (code, out, err) = cli(&["gate", "--db", d, "mi300-old", "mi300-new", "--max-invalidated", "10%"]);
    assert_eq!(code, 1, "{out}{err}");
    let head = format!("gate FAILED: {n} of {n} base entries (4 kernels) would recompile (100.0%)", n = old.len());
    let cause = format!("\ncompiler: {} entries of 4 kernels, compile time unknown\n", old.len());
    assert!(out.starts_with(&head) && out.contains(&cause), "{out}");
    // Errors of the database mode: unknown machine or scan, a first scan, a mixed pair.
    for args in [
        vec!["gate", "--db", d, "nobody", "a100", "--max-invalidated", "1"],
        vec!["gate", "--db", d, &a, "a100@999", "--max-invalidated", "1"],
        vec!["gate", "--db", d, &a, "--max-invalidated", "1"],
        vec!["gate", "--db", d, &a, "mi300-new", "--max-invalidated", "1"],
    ] {
        let (code, out, err) = cli(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.starts_with("error: "), "{err}");
    }
}

/// The python named by `var`, or None when unset and `CACHELENS_ALLOW_SKIP=1`.
fn python(var: &str) -> Option<std::ffi::OsString> {
    if let Some(py) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Some(py);
    }
    assert!(
        std::env::var("CACHELENS_ALLOW_SKIP").as_deref() == Ok("1"),
        "{var} is not set; CACHELENS_ALLOW_SKIP=1 skips"
    );
    eprintln!("skipping (CACHELENS_ALLOW_SKIP=1): {var} is not set");
    None
}

/// scripts/workload.py for sm_90 into `dir`, with an optional env var; returns Triton's version.
fn compile(py: &std::ffi::OsStr, dir: &Path, kernels: &str, env: &[(&str, &str)]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/workload.py");
    let mut cmd = Command::new(py);
    cmd.arg(&script).args(["--target", "cuda:90", "--kernels", kernels]).env("TRITON_CACHE_DIR", dir);
    for v in ["TRITON_DEFAULT_FP_FUSION", "TRITON_F32_DEFAULT", "TRITON_DEBUG"] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "workload.py: {}", String::from_utf8_lossy(&out.stderr));
    let last = out.stdout.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap().to_vec();
    json(&String::from_utf8(last).unwrap())["triton_version"].as_str().unwrap().to_string()
}

/// The recipe of docs/ci-gate.md: the same kernels compiled ahead of time for sm_90 on this
/// CPU under the base and under the change: a Triton upgrade (3.4.0 → 3.6.0); and an env var
/// set for the add kernels' job only (the change is a dir holding two caches: the add kernels
/// compiled with `TRITON_F32_DEFAULT=ieee`, softmax without).
#[test]
fn gate_on_kernels_compiled_here_by_two_triton_releases() {
    let (Some(py), Some(alt)) = (python("CACHELENS_PYTHON"), python("CACHELENS_PYTHON_ALT")) else { return };
    let t = tempfile::TempDir::new().unwrap();
    let (new, old, change) = (t.path().join("3.6.0"), t.path().join("alt"), t.path().join("change"));
    assert_eq!(compile(&py, &new, "add,softmax", &[]), "3.6.0");
    let version = compile(&alt, &old, "add", &[]);
    assert_ne!(version, "3.6.0", "CACHELENS_PYTHON_ALT must have another Triton");
    compile(&py, &change.join("add-ieee"), "add", &[("TRITON_F32_DEFAULT", "ieee")]);
    compile(&py, &change.join("softmax"), "softmax", &[]);
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();

    // The upgrade: every add kernel recompiles; softmax is new in the change, not counted.
    let (code, out, err) = cli(&["gate", &s(&old), &s(&new), "--max-invalidated", "10%", "--json"]);
    assert_eq!(code, 1, "{out}{err}");
    let v = json(&out);
    let (ok, nk) = (kernels(&old), kernels(&new));
    let softmax = nk.values().filter(|(n, _)| n == "softmax_kernel").count();
    assert_eq!((ok.len(), softmax), (6, 6));
    assert_eq!(v["by_cause"], serde_json::json!([{"cause": "compiler", "count": ok.len()}]));
    assert_eq!((v["invalidated"].as_u64(), v["new"].as_u64()), (Some(6), Some(softmax as u64)));
    for r in arr(&v["report"]["invalidated"]) {
        assert_eq!(r["summary"], format!("Triton {version} → 3.6.0; everything else equal"), "{r}");
        assert!(ok.contains_key(r["old_key"].as_str().unwrap()) && nk.contains_key(r["new_key"].as_str().unwrap()));
    }
    let (code, text, _) = cli(&["gate", &s(&old), &s(&new), "--max-invalidated", "10%"]);
    assert_eq!(code, 1);
    assert!(text.contains("\ncompiler: 6 entries of 1 kernel, compile time unknown\n  6 × Triton "), "{text}");
    assert!(text.contains("\n    add_kernel  ") && text.contains("6 new variants"), "{text}");

    // The env var: the add kernels' keys change (6 of 12), softmax's do not.
    let moved: usize = ["add-ieee", "softmax"]
        .iter()
        .map(|d| kernels(&change.join(d)).keys().filter(|k| !nk.contains_key(*k)).count())
        .sum();
    assert_eq!((moved, nk.len()), (6, 12), "counted from the dirs");
    for (limit, want) in [("50%", 0), ("0.5", 0), ("6", 0), ("49%", 1), ("5", 1)] {
        let (code, out, err) = cli(&["gate", &s(&new), &s(&change), "--max-invalidated", limit, "--json"]);
        assert_eq!(code, want, "{limit}: {out}{err}");
        let v = json(&out);
        assert_eq!(v["by_cause"], serde_json::json!([{"cause": "env", "count": moved}]), "{limit}");
        assert_eq!((v["share"].as_f64(), v["passed"].as_bool()), (Some(0.5), Some(want == 0)));
        assert_eq!(
            (v["kept"].as_u64(), v["change_entries"].as_u64(), v["change_kernels"].as_u64()),
            (Some(6), Some(12), Some(2))
        );
    }
}

/// Words of `text` that are 64-digit hex digests (a recorded hash, a sha256).
fn digests(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() == 64 && w.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect()
}

/// `TRITON_DEFAULT_FP_FUSION=0` (it turns `enable_fp_fusion` off) under the hook on both sides,
/// so the recorded options hash differs too: one change, said once with its count, no digest
/// in the report.
#[tokio::test]
async fn gate_says_an_env_var_that_sets_an_option_once_and_what_recompiling_costs() {
    let Some(py) = python("CACHELENS_PYTHON") else { return };
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("hook");
    let hooked =
        [("TRITON_CACHE_MANAGER", "cachelens_hook:TrackingCacheManager"), ("PYTHONPATH", hook.to_str().unwrap())];
    let t = tempfile::TempDir::new().unwrap();
    let (base, change) = (t.path().join("base"), t.path().join("fpfusion-off"));
    compile(&py, &base, "add,softmax", &hooked);
    compile(&py, &change, "add,softmax", &[hooked[0], hooked[1], ("TRITON_DEFAULT_FP_FUSION", "0")]);
    let (b, c) = (base.to_str().unwrap(), change.to_str().unwrap());
    let n = kernels(&base).len();
    assert_eq!(n, 12, "6 add and 6 softmax variants");
    let (code, out, err) = cli(&["gate", b, c, "--max-invalidated", "100%", "--show", "100"]);
    assert_eq!(code, 0, "{out}{err}");
    let why = "TRITON_DEFAULT_FP_FUSION=false on B (sets enable_fp_fusion false); everything else equal";
    assert!(out.contains(&format!("\n  {n} × {why}\n")), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains(" × ")).count(), 1, "one change, one line: {out}");
    assert_eq!(out.lines().filter(|l| l.contains(" -> ")).count(), n, "each entry listed: {out}");
    assert!(digests(&out).is_empty(), "no digest in the report: {:?}", digests(&out));
    let (_, out, _) = cli(&["gate", b, c, "--max-invalidated", "100%", "--json"]);
    let v = json(&out);
    for r in arr(&v["report"]["invalidated"]) {
        assert_eq!(r["cause"], "env", "{r}");
        assert!(r["summary"].as_str().unwrap().starts_with(why), "{r}");
        assert!(digests(r["summary"].as_str().unwrap()).is_empty(), "{r}");
    }
    assert!(digests(v["summary"].as_str().unwrap()).is_empty(), "{}", v["summary"]);

    // What recompiling costs: the compile times the hook wrote for the new keys, summed here
    // from its event files.
    let mut timed: std::collections::HashMap<String, f64> = Default::default();
    for f in std::fs::read_dir(change.join(".cachelens")).unwrap() {
        for l in std::fs::read_to_string(f.unwrap().path()).unwrap().lines() {
            let e = json(l);
            if e["event"] == "compile" {
                timed.insert(e["key"].as_str().unwrap().into(), e["compile_ms"].as_f64().unwrap());
            }
        }
    }
    let rows = arr(&v["report"]["invalidated"]);
    let mut ms = 0.0;
    for r in rows {
        let want = timed[r["new_key"].as_str().unwrap()];
        assert_eq!(r["compile_ms"].as_f64(), Some(want), "{r}");
        ms += want;
    }
    let got = &v["recompile"];
    assert_eq!((got["timed"].as_u64(), got["of"].as_u64()), (Some(n as u64), Some(n as u64)), "{got}");
    assert!((got["ms"].as_f64().unwrap() - ms).abs() < 1e-6, "{got} against {ms}");
    assert_eq!(
        (v["base_entries"].as_u64(), v["base_kernels"].as_u64(), v["invalidated_kernels"].as_u64()),
        (Some(12), Some(2), Some(2))
    );
    // Shown as people read it (`850 ms`, `1.2 s`): a fast machine compiles these in under a second.
    let secs = cachelens::fmt::duration_ms(ms);
    let (_, out, _) = cli(&["gate", b, c, "--max-invalidated", "100%"]);
    assert!(out.starts_with("gate passed: 12 of 12 base entries (2 kernels) would recompile (100.0%)"), "{out}");
    assert!(
        out.contains(&format!("\nrecompile cost: {secs} of compile time for the 12 recompiled entries\n")),
        "{out}"
    );
    assert!(out.contains(&format!("\nenv: 12 entries of 2 kernels, compile time {secs}\n")), "{out}");
    // The invalidations page says the same figure.
    let (_db, pool) = fresh_db().await;
    scan(&pool, &base, "base").await;
    scan(&pool, &change, "change").await;
    let state = cachelens::web::AppState::new(pool, cachelens::web::Config::default());
    let (st, page) = get(&state, "/invalidations?a=base&b=change").await;
    assert_eq!(st, 200);
    assert!(page.contains(&format!("Recompile cost: <b>{secs}</b> of compile time for the 12 of 12")), "{page}");
    let whys = page.matches("<span class=\"why\">").count();
    assert_eq!(whys, 1, "one reason on the page too");
    assert!(page.contains(&format!("<span class=\"why\">{why}</span>")), "{page}");
    assert!(digests(page.split("<table").next().unwrap()).is_empty(), "no digest above the tables");
}

/// Under a terminal (a pty made by `script`) a scan draws its bar on stderr; `--quiet` and a
/// pipe draw none.
#[test]
fn progress_bar_only_on_a_terminal_and_not_with_quiet() {
    let ((_t, db), (_q, quiet_db)) = (fresh_db_at_blocking(), fresh_db_at_blocking());
    let cache = cache_of(A100_1);
    let run = |quiet: bool| {
        let db = if quiet { &quiet_db } else { &db };
        let cmd = format!(
            "stty cols 160 rows 40; {} scan --db {} --machine p {} {}",
            bin().display(),
            db.display(),
            cache.display(),
            if quiet { "--quiet" } else { "" }
        );
        let out = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let tty = run(false);
    let bar = format!("scanning {}", cache.canonicalize().unwrap().display());
    // A 45-entry scan takes ~70 ms: the bar may be drawn before the scan has counted its entries,
    // so only its presence (and its unit) is certain.
    assert!(tty.contains(&bar) && tty.contains(" entries"), "{tty}");
    assert!(tty.contains("scan 1 of "), "the summary still follows: {tty}");
    let quiet = run(true);
    assert!(!quiet.contains("scanning") && quiet.contains("scan 1 of "), "{quiet}");
    // Off a terminal: nothing on stderr but what the scan says.
    let (code, out, err) = cli(&["scan", "--db", db.to_str().unwrap(), "--machine", "p2", cache.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("scanning") && !err.contains('\u{1b}'), "{err}");
}

#[test]
fn completions_name_every_subcommand() {
    let (code, script, err) = cli(&["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    for sub in ["up", "scan", "serve", "explain", "token", "gate", "completions"] {
        assert!(script.contains(&format!("cachelens,{sub})")), "{sub} missing");
    }
    assert!(script.contains("--max-invalidated"));
    // bash itself reads it (syntax check) and registers the completion function.
    let t = tempfile::TempDir::new().unwrap();
    let f = t.path().join("c.bash");
    std::fs::write(&f, &script).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p cachelens", f.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cachelens"));
    for shell in ["zsh", "fish"] {
        let (code, s, _) = cli(&["completions", shell]);
        assert!(code == 0 && s.contains("max-invalidated"), "{shell}");
    }
    let (code, _, err) = cli(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn token_list_json() {
    let (_t, db) = fresh_db_at_blocking();
    let d = db.to_str().unwrap();
    let (code, token, _) = cli(&["token", "create", "--machine", "node-7", "--db", d]);
    assert_eq!(code, 0);
    cli(&["token", "create", "--machine", "node-8", "--db", d]);
    assert_eq!(cli(&["token", "revoke", "2", "--db", d]).0, 0);
    let (code, out, err) = cli(&["token", "list", "--json", "--db", d]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let rows = arr(&v);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0]["id"].as_i64(), rows[0]["machine"].as_str()), (Some(1), Some("node-7")));
    assert!(rows[0]["revoked_at"].is_null() && rows[1]["revoked_at"].is_i64(), "{v}");
    assert!(!out.contains(token.trim()), "the token itself is never listed");
}

/// Copy the entry dirs `keys` of `from` into `to` (a new cache dir), files as they are.
fn copy_entries(from: &Path, to: &Path, keys: &[&String]) {
    for k in keys {
        let (src, dst) = (from.join(k), to.join(k));
        std::fs::create_dir_all(&dst).unwrap();
        for f in std::fs::read_dir(&src).unwrap() {
            let f = f.unwrap();
            if f.file_type().unwrap().is_file() {
                std::fs::copy(f.path(), dst.join(f.file_name())).unwrap();
            }
        }
    }
}

/// A change cache that holds (almost) nothing, as a change job that failed or wrote elsewhere
/// leaves it: the gate cannot decide (exit 2, saying why) instead of passing with every base
/// kernel "removed"; `--allow-empty-change` gates it anyway (the old behaviour). The rule:
/// fewer than 10% of the base's kernel entries, with a base of 10 or more, or none at all.
#[test]
fn gate_cannot_decide_on_an_almost_empty_change() {
    let base = cache_of(A100_1);
    let b = base.to_str().unwrap();
    let bk = kernels(&base);
    assert_eq!(bk.len(), 45);
    let keys: Vec<&String> = bk.keys().collect();
    let t = tempfile::TempDir::new().unwrap();
    let (few, enough) = (t.path().join("few"), t.path().join("enough"));
    copy_entries(&base, &few, &keys[..4]); // 4 of 45: under 10%
    copy_entries(&base, &enough, &keys[..5]); // 5 of 45: 11%
    let (f, e) = (few.to_str().unwrap(), enough.to_str().unwrap());

    for json in [false, true] {
        let mut args = vec!["gate", b, f, "--max-invalidated", "10%"];
        if json {
            args.push("--json");
        }
        let (code, out, err) = cli(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains(
                "error: the change cache holds 4 kernel entries against 45 in the base: nothing to compare (did its jobs run?)"
            ),
            "{err}"
        );
    }
    // --allow-empty-change: compared as before, nothing invalidated, 41 base kernels removed
    let (code, out, err) = cli(&["gate", b, f, "--max-invalidated", "0", "--allow-empty-change", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v = json(&out);
    assert_eq!((v["change_entries"].as_u64(), v["kept"].as_u64(), v["removed"].as_u64()), (Some(4), Some(4), Some(41)));
    // 5 of 45 is compared
    let (code, out, err) = cli(&["gate", b, e, "--max-invalidated", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("gate passed: 0 of 45 base entries (0 kernels) would recompile"), "{out}");

    // No kernel entry at all: key dirs Triton made for lookups that never compiled.
    let empty = t.path().join("empty");
    for k in &keys[..3] {
        std::fs::create_dir_all(empty.join(k)).unwrap();
    }
    let (code, out, err) = cli(&["gate", b, empty.to_str().unwrap(), "--max-invalidated", "10%"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("holds 0 kernel entries against 45") || err.contains("no Triton cache"), "{err}");
}

/// Kernel names reach CI logs: a name holding a line break then `::error ...::` (a GitHub
/// Actions workflow command, which needs `::` at the start of a line) is shown escaped on one
/// line, like every control character; `--json` keeps the name as it is.
#[test]
fn gate_escapes_kernel_names_in_its_report() {
    const EVIL: &str = "\n::error title=x::boom\u{1b}]0;pwned\u{7}\u{202e}";
    let (_tb, base) = unpacked(A100_1);
    let (_tc, change) = unpacked(A100_2);
    let (base, change) = (base.join("triton-cache"), change.join("triton-cache"));
    for cache in [&base, &change] {
        for d in std::fs::read_dir(cache).unwrap() {
            let d = d.unwrap().path();
            for f in std::fs::read_dir(&d).unwrap() {
                let f = f.unwrap().path();
                let name = f.file_name().unwrap().to_str().unwrap().to_string();
                if let Some(stem) = name.strip_prefix("__grp__").and_then(|n| n.strip_suffix(".json")) {
                    std::fs::rename(&f, d.join(format!("__grp__{stem}{EVIL}.json"))).unwrap();
                } else if name.ends_with(".json") && !name.ends_with(".autotune.json") {
                    let mut m: Value = json(&std::fs::read_to_string(&f).unwrap());
                    let Some(k) = m["name"].as_str() else { continue };
                    m["name"] = Value::from(format!("{k}{EVIL}"));
                    std::fs::write(&f, serde_json::to_vec(&m).unwrap()).unwrap();
                }
            }
        }
    }
    let (b, c) = (base.to_str().unwrap(), change.to_str().unwrap());
    let (code, out, err) = cli(&["gate", b, c, "--max-invalidated", "10%"]);
    assert_eq!(code, 1, "{out}{err}");
    for (what, text) in [("stdout", &out), ("stderr", &err)] {
        let bad: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("::")).collect();
        assert!(bad.is_empty(), "{what}: lines a CI runner reads as workflow commands: {bad:?}");
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{what}: control characters: {text:?}");
        assert!(!text.contains('\u{202e}'), "{what}: a bidi override: {text:?}");
    }
    let shown = "_kernel\\n::error title=x::boom\\x1b]0;pwned\\x07\\u{202e}  ";
    assert_eq!(out.matches(shown).count(), 20, "20 rows shown, each name escaped: {out}");
    // --json: the names as the cache holds them (JSON escapes its own strings)
    let (code, out, _) = cli(&["gate", b, c, "--max-invalidated", "10%", "--json"]);
    assert_eq!(code, 1);
    let v = json(&out);
    assert!(arr(&v["report"]["invalidated"]).iter().all(|r| r["kernel"].as_str().unwrap().ends_with(EVIL)), "{v}");
    assert!(!out.lines().any(|l| l.trim_start().starts_with("::")));
}
