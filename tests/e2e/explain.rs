//! Why entries differ, proven on the real corpus through the DB, the JSON API, the pages and
//! the CLI: in-place upgrades (a100, mi300), the phases of the h100 JIT run (debug, source
//! edit, line info off). Caches compiled here: explain_generated.rs.

use crate::common::*;
use cachelens::answers::load as xl;
use cachelens::web::{AppState, Config};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;

async fn upgrades() -> (Vec<crate::common::DbDir>, AppState) {
    let (keep, pool) = corpus_db(&[
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
        ("mi300-1", "mi300-upgrade-1-triton-3.6.0", "triton-cache"),
        ("mi300-1", "mi300-upgrade-2-triton-3.9.0", "triton-cache"),
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
    ])
    .await;
    (keep, AppState::new(pool, Config::default()))
}

/// Checks an in-place upgrade of `machine`: `n` of `n` recompiled, every one matched to its
/// predecessor (same kernel, nothing but the compiler differs), through DB and API.
async fn check_upgrade(state: &AppState, machine: &str, old_v: &str, new_v: &str, n: usize) {
    let scans = get_json(state, &format!("/api/v1/scans?machine={machine}")).await;
    let (first, second) = (scans[1]["id"].as_i64().unwrap(), scans[0]["id"].as_i64().unwrap());
    // Through the DB.
    let (from, to, _) = xl::pick_scans(state.db.pool(), machine, None, None).await.unwrap();
    assert_eq!((from.as_ref().map(|s| s.id), to.id), (Some(first), second), "defaults: previous scan → latest");
    let r = xl::invalidations_scans(&state.db, from.as_ref(), &to).await.unwrap();
    assert_eq!((r.invalidated.len(), r.kept, r.new.len(), r.removed.len()), (n, n, 0, 0), "{}", r.summary);
    // Through the API, explicit and default scans alike.
    let inv = get_json(state, &format!("/api/v1/invalidations?machine={machine}&from={first}&to={second}")).await;
    assert_eq!(inv, get_json(state, &format!("/api/v1/invalidations?machine={machine}")).await);
    let list = arr(&inv["invalidated"]);
    assert_eq!(list.len(), n);
    assert_eq!(inv["kept"], n, "the old generation stays on disk");
    assert!(arr(&inv["new"]).is_empty() && arr(&inv["removed"]).is_empty());
    let summary = inv["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!(
            "{n} of {n} entries recompiled after Triton {old_v} → {new_v}; 0 had identical binaries"
        )),
        "{summary}"
    );
    assert_eq!(inv["by_cause"], serde_json::json!([{"cause": "compiler", "count": n}]));
    // The corpus was written under another path: every entry is relocated, counted and flagged.
    assert_eq!(inv["relocated"], 2 * n);
    assert!(inv["relocated_consequence"].as_str().unwrap().contains("Triton will miss on them"));
    // Every old entry is some new entry's predecessor, exactly once.
    let olds: HashSet<&str> = list.iter().map(|i| i["old_key"].as_str().unwrap()).collect();
    let news: HashSet<&str> = list.iter().map(|i| i["new_key"].as_str().unwrap()).collect();
    assert_eq!((olds.len(), news.len()), (n, n));
    let before = get_json(state, &format!("/api/v1/entries?machine={machine}&limit=1000")).await;
    let versions: HashMap<&str, &str> =
        arr(&before).iter().map(|e| (e["key"].as_str().unwrap(), e["triton_version"].as_str().unwrap())).collect();
    for i in list {
        assert_eq!(i["cause"], "compiler");
        assert_eq!(i["relocated"], true);
        assert_eq!(versions[i["old_key"].as_str().unwrap()], old_v);
        assert_eq!(versions[i["new_key"].as_str().unwrap()], new_v);
        assert_eq!(i["summary"], format!("Triton {old_v} → {new_v}; everything else equal"), "{i}");
        let c =
            get_json(state, &format!("/api/v1/compare?a={}&b={}", i["a"].as_str().unwrap(), i["b"].as_str().unwrap()))
                .await;
        assert_eq!(c["cause"], "compiler");
        assert_eq!(c["kernel_a"], i["kernel"]);
        assert_eq!(c["kernel_b"], i["kernel"]);
        // nothing but the compiler is a cause
        assert!(
            arr(&c["components"])
                .iter()
                .all(|r| r["differs"] == false || r["component"] == "compiler" || r["note"].is_string()),
            "{c}"
        );
    }
}

#[tokio::test]
async fn explain_upgrades_match_every_kernel_to_its_predecessor() {
    let (_keep, state) = upgrades().await;
    check_upgrade(&state, "a100-1", "3.4.0", "3.5.1", 45).await;
    check_upgrade(&state, "mi300-1", "3.6.0", "3.9.0", 25).await;
}

#[tokio::test]
async fn explain_compare_api_and_errors() {
    let (_keep, state) = upgrades().await;
    let inv = get_json(&state, "/api/v1/invalidations?machine=a100-1").await;
    let i = &inv["invalidated"][0];
    let (a, b) = (i["a"].as_str().unwrap(), i["b"].as_str().unwrap());
    let c = get_json(&state, &format!("/api/v1/compare?a={a}&b={b}")).await;
    for k in ["a", "b", "cause", "summary", "components", "identical_binary"] {
        assert!(c.get(k).is_some(), "compare lacks {k}: {c}");
    }
    assert_eq!(c["identical_binary"], false);
    let rows = arr(&c["components"]);
    assert_eq!(rows[0]["field"], "triton_version", "differing key inputs first");
    assert_eq!(
        (rows[0]["component"].as_str(), rows[0]["a"].as_str(), rows[0]["b"].as_str()),
        (Some("compiler"), Some("3.4.0"), Some("3.5.1"))
    );
    let first_equal = rows.iter().position(|r| r["differs"] == false).unwrap();
    assert!(rows[first_equal..].iter().all(|r| r["differs"] == false), "differing rows first");
    for comp in ["compiler", "backend", "source", "options", "none"] {
        assert!(rows.iter().any(|r| r["component"] == comp), "component {comp} listed");
    }
    // The corpus was written elsewhere: every entry is relocated, and says what that means.
    let reloc = arr(&c["relocated"]);
    assert_eq!(reloc.len(), 2);
    let msg = reloc[0]["consequence"].as_str().unwrap();
    assert!(
        msg.starts_with("its group file points to /")
            && msg.ends_with("Triton will miss on this entry where it sits now"),
        "{msg}"
    );
    // Other IRs on request, locations kept with strip=0.
    let ptx = get_json(&state, &format!("/api/v1/compare?a={a}&b={b}&ir=ptx")).await;
    assert_eq!(ptx["ir"]["kind"], "ptx");
    assert!(ptx["ir"]["a_available"] == true && ptx["ir"]["equal"].as_u64().unwrap() > 10);
    let raw = get_json(&state, &format!("/api/v1/compare?a={a}&b={b}&strip=0")).await;
    assert_eq!(raw["ir"]["strip"], false);
    // Same entry: no cause.
    assert_eq!(get_json(&state, &format!("/api/v1/compare?a={a}&b={a}")).await["cause"], "none");
    // Corpus: 3.5.1 matmul variants that differ only in num_stages compiled to one cubin.
    let e = get_json(&state, "/api/v1/entries?machine=a100-1&kernel=matmul_kernel&limit=1000").await;
    let e: Vec<&Value> = arr(&e).iter().filter(|x| x["triton_version"] == "3.5.1").collect();
    let (x, y) = e
        .iter()
        .flat_map(|x| e.iter().map(move |y| (*x, *y)))
        .find(|(x, y)| {
            x["key"] != y["key"] && x["binary_sha256"].is_string() && x["binary_sha256"] == y["binary_sha256"]
        })
        .expect("a100 3.5.1 matmul variants with one cubin");
    let (xa, ya) = (format!("a100-1:{}", x["key"].as_str().unwrap()), format!("a100-1:{}", y["key"].as_str().unwrap()));
    let c = get_json(&state, &format!("/api/v1/compare?a={xa}&b={ya}")).await;
    let s = c["summary"].as_str().unwrap();
    assert_eq!((c["cause"].as_str(), c["identical_binary"].as_bool()), (Some("options"), Some(true)), "{s}");
    assert!(s.starts_with("num_stages ") && s.ends_with("(identical binary: pure key churn)"), "{s}");
    let (st, page) = get(&state, &format!("/compare?a={xa}&b={ya}")).await;
    assert!(st == 200 && page.contains("The recompile was pure key churn."), "{page}");
    // Errors: 400 malformed, 404 unknown, JSON bodies.
    for (uri, status) in [
        (format!("/api/v1/compare?a=nocolon&b={b}"), 400),
        (format!("/api/v1/compare?a={a}"), 400),
        (format!("/api/v1/compare?a={a}&b={b}&ir=sass"), 400),
        (format!("/api/v1/compare?a=a100-1:NOSUCHKEY&b={b}"), 404),
        (format!("/api/v1/compare?a=nobody:{}&b={b}", i["old_key"].as_str().unwrap()), 404),
        ("/api/v1/nearest?entry=a100-1:NOSUCHKEY".into(), 404),
        ("/api/v1/nearest".into(), 400),
        ("/api/v1/invalidations?machine=nobody".into(), 404),
        ("/api/v1/invalidations?machine=a100-1&to=99999".into(), 404),
        ("/api/v1/invalidations".into(), 400),
        ("/api/v1/invalidations?a=a100-1&b=nobody".into(), 404),
    ] {
        let (s, body) = get(&state, &uri).await;
        assert_eq!(s, status, "{uri}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{uri}: not JSON: {body}"));
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{uri}: {body}");
    }
}

#[tokio::test]
async fn explain_nearest_and_cross_arch() {
    let (_keep, state) = upgrades().await;
    // An sm_80 add kernel (3.5.1) against its nearest sm_90 one (3.6.0, h100 JIT).
    let inv = get_json(&state, "/api/v1/invalidations?machine=a100-1").await;
    let add = arr(&inv["invalidated"]).iter().find(|i| i["kernel"] == "add_kernel").unwrap();
    let id = add["b"].as_str().unwrap();
    let near = get_json(&state, &format!("/api/v1/nearest?entry={id}&limit=200")).await;
    assert_eq!(near["kernel"], "add_kernel");
    let list = arr(&near["neighbours"]);
    let rank = |n: &Value| (n["components"].as_u64().unwrap(), n["differing"].as_u64().unwrap());
    assert!(list.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])), "ranked by components, then fields");
    assert_eq!(list[0]["id"], add["a"], "the nearest is its own predecessor");
    assert!(list.iter().all(|n| n["id"] != id), "not itself");
    let h100 = list.iter().find(|n| n["machine"] == "h100-a").expect("h100 add kernels are neighbours");
    let c = get_json(&state, &format!("/api/v1/compare?a={id}&b={}", h100["id"].as_str().unwrap())).await;
    assert_eq!(c["cause"], "compiler", "3.5.1 → 3.6.0 is the most upstream difference: {}", c["summary"]);
    let arch = arr(&c["components"]).iter().find(|r| r["field"] == "target.arch").unwrap();
    assert_eq!(
        (arch["component"].as_str(), arch["a"].as_i64(), arch["b"].as_i64(), arch["differs"].as_bool()),
        (Some("backend"), Some(80), Some(90), Some(true))
    );
    assert!(c["summary"].as_str().unwrap().contains("backend: target sm80 → sm90"), "{}", c["summary"]);
    // The nearest page lists the same, each row linking to its compare view.
    let (m, k) = id.split_once(':').unwrap();
    let (s, page) = get(&state, &format!("/entries/{m}/{k}/nearest")).await;
    assert_eq!(s, 200);
    let page = page.replace("&#38;", "&").replace("&amp;", "&");
    assert!(
        page.contains("<html") && page.contains(&format!("/compare?a={id}&b={}", add["a"].as_str().unwrap())),
        "{page}"
    );
    let (_, part) = get_hx(&state, &format!("/entries/{m}/{k}/nearest")).await;
    assert!(!part.contains("<html") && part.contains("neighbours"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// Replays the h100 JIT runs phase by phase (cold, warm, debug, edit, line info off) into one
/// cache dir, scanning after each, as a user scanning after every job would.
#[tokio::test]
async fn explain_h100_jit_phases() {
    let (_t, jit) = unpacked("h100-jit-3.6.0");
    let events = std::fs::read_to_string(jit.join("ground-truth-events.jsonl")).unwrap();
    let mut phases: Vec<(String, Vec<String>)> = vec![];
    for line in events.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        let mut phase = e["phase"].as_str().unwrap().to_string();
        if phase == "inductor" {
            continue;
        }
        // The TRITON_DISABLE_LINE_INFO=1 run is labelled warm too; unlike the plain warm run it misses.
        if phase == "warm" && e["cache_hit"] == false {
            phase = "line-info".into();
        }
        let key = hex_to_b32(e["hash"].as_str().unwrap());
        assert!(jit.join("triton-cache").join(&key).is_dir(), "key dir of {}", e["hash"]);
        match phases.iter_mut().find(|p| p.0 == phase) {
            Some(p) => p.1.push(key),
            None => phases.push((phase, vec![key])),
        }
    }
    let names: Vec<&str> = phases.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(names, ["cold", "warm", "debug", "edit", "line-info"]);
    let (_db, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let cache = tempfile::TempDir::new().unwrap();
    let mut scans = vec![];
    for (_, keys) in &phases {
        for k in keys {
            copy_dir(&jit.join("triton-cache").join(k), &cache.path().join(k));
        }
        scans.push(cachelens::collect::scan_local(&store, cache.path(), "h100-jit").await.unwrap().scan_id);
    }
    let state = AppState::new(pool.clone(), Config::default());
    let phase = |i: usize| format!("/api/v1/invalidations?machine=h100-jit&from={}&to={}", scans[i - 1], scans[i]);
    // warm: everything hit
    let warm = get_json(&state, &phase(1)).await;
    assert_eq!((warm["kept"].as_u64(), arr(&warm["invalidated"]).len()), (Some(45), 0), "{}", warm["summary"]);
    // debug: TRITON_DEBUG=1 → the option `debug`
    let debug = get_json(&state, &phase(2)).await;
    assert_eq!(arr(&debug["invalidated"]).len(), 17, "{}", debug["summary"]);
    assert_eq!(debug["by_cause"], serde_json::json!([{"cause": "options", "count": 17}]));
    for i in arr(&debug["invalidated"]) {
        assert!(i["summary"].as_str().unwrap().starts_with("debug false → true"), "{i}");
    }
    let c = get_json(
        &state,
        &format!(
            "/api/v1/compare?a={}&b={}",
            debug["invalidated"][0]["a"].as_str().unwrap(),
            debug["invalidated"][0]["b"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(c["cause"], "options");
    let row = arr(&c["components"]).iter().find(|r| r["field"] == "debug").unwrap();
    assert_eq!(
        (row["component"].as_str(), row["a"].as_bool(), row["b"].as_bool()),
        (Some("options"), Some(false), Some(true))
    );
    // edit: the add kernel's source edited → source
    let edit = get_json(&state, &phase(3)).await;
    assert_eq!(edit["by_cause"], serde_json::json!([{"cause": "source", "count": 6}]), "{}", edit["summary"]);
    assert!(arr(&edit["invalidated"]).iter().all(|i| i["kernel"] == "add_kernel"));
    let e0 = &edit["invalidated"][0];
    let c =
        get_json(&state, &format!("/api/v1/compare?a={}&b={}", e0["a"].as_str().unwrap(), e0["b"].as_str().unwrap()))
            .await;
    assert_eq!(c["cause"], "source");
    assert!(
        c["ir"]["deleted"].as_u64().unwrap() + c["ir"]["inserted"].as_u64().unwrap() > 0,
        "the edit shows in the IR diff"
    );
    // line info off: an env var in the metadata → env
    let li = get_json(&state, &phase(4)).await;
    assert_eq!(li["by_cause"], serde_json::json!([{"cause": "env", "count": 45}]), "{}", li["summary"]);
    assert!(li["summary"].as_str().unwrap().contains("TRITON_DISABLE_LINE_INFO"), "{}", li["summary"]);
    // The same through the DB functions.
    let to = cachelens::db::scans::scan(&pool, scans[4]).await.unwrap().unwrap();
    let from = cachelens::db::scans::scan(&pool, scans[3]).await.unwrap().unwrap();
    let r = xl::invalidations_scans(&store, Some(&from), &to).await.unwrap();
    assert_eq!(r.invalidated.len(), 45);
    assert!(r.invalidated.iter().all(|i| i.cause == cachelens::explain::Cause::Env));
    // Scans of one machine with another root cannot be compared.
    let other = tempfile::TempDir::new().unwrap();
    let s = cachelens::collect::scan_local(&store, other.path(), "h100-jit").await.unwrap().scan_id;
    let (st, body) = get(&state, &format!("/api/v1/invalidations?machine=h100-jit&from={}&to={s}", scans[4])).await;
    assert_eq!(st, 400, "{body}");
}

#[tokio::test]
async fn explain_pages() {
    let (_keep, state) = upgrades().await;
    let (s, page) = get(&state, "/invalidations?machine=a100-1").await;
    assert_eq!(s, 200);
    assert!(
        page.contains("<html") && page.contains("45 of 45 entries recompiled after Triton 3.4.0 → 3.5.1"),
        "{page}"
    );
    assert!(page.contains("id=\"scan-picker\""), "scan picker");
    // Says how entries are paired: option/constexpr/signature changes are variants, not recompiles.
    assert!(page.contains("id=\"pairing\"") && page.contains("A change to one of those is another variant"), "{page}");
    // One cause, one section: the reason once, a line per kernel, the 45 entries behind a
    // disclosure, 20 a page.
    assert_eq!(page.matches("class=\"cause-group\"").count(), 1, "{page}");
    assert!(page.contains("<span class=\"badge compiler\">compiler</span> 45 recompiled"), "{page}");
    assert_eq!(page.matches("<ul class=\"whys\"><li>").count(), 1);
    assert!(
        page.contains("<tr class=\"inv-kernel\"><td>matmul_kernel</td><td>30</td><td>0</td><td>0</td><td>unknown</td>"),
        "{page}"
    );
    assert_eq!(page.matches("class=\"inv-kernel\"").count(), 4, "matmul, add, softmax, layernorm");
    assert_eq!(page.matches("class=\"inv-row\"").count(), 20);
    assert!(page.contains("<details class=\"inv-entries\">"), "closed until paged");
    assert!(page.contains("id=\"cost\"") && page.contains("Recompile cost: <b>unknown</b>"), "no hook on a100-1");
    let (s, last) = get(&state, "/invalidations?machine=a100-1&cause=compiler&page=3").await;
    assert_eq!(s, 200);
    assert_eq!(last.matches("class=\"inv-row\"").count(), 5, "entries 41-45");
    assert!(last.contains("entries 41–45 of 45") && last.contains("<details class=\"inv-entries\" open>"));
    assert!(last.contains("cause=compiler&#38;page=2"), "previous page link");
    // Every entry once over the three pages.
    let mut keys = std::collections::BTreeSet::new();
    for p in 1..=3 {
        let (_, body) = get(&state, &format!("/invalidations?machine=a100-1&cause=compiler&page={p}")).await;
        for row in body.split("<tr class=\"inv-row\">").skip(1) {
            keys.insert(row.split("<td class=\"key\">").nth(2).unwrap().split('<').next().unwrap().to_string());
        }
    }
    assert_eq!(keys.len(), 45, "{keys:?}");
    assert!(page.contains("will miss on them where they sit now"), "relocated entries flagged");
    let href = page
        .split("class=\"compare\" href=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .replace("&#38;", "&")
        .replace("&amp;", "&");
    assert!(href.starts_with("/compare?a=a100-1:"), "{href}");
    let (s, cmp) = get(&state, &href).await;
    assert_eq!(s, 200);
    assert!(cmp.contains("id=\"headline\"") && cmp.contains("Triton 3.4.0 → 3.5.1; everything else equal"), "{cmp}");
    assert!(cmp.contains("class=\"differs\"") || cmp.contains("class=\"differs cause\""), "differing rows highlighted");
    assert!(cmp.contains("Triton will miss on this entry where it sits now"));
    assert!(cmp.contains("class=\"diff\""), "IR diff");
    assert!(cmp.contains("href=\"/entries/a100-1/"), "entry links");
    assert!(!cmp.contains("/entries//"), "entry links");
    // htmx gets the partial only.
    let (s, part) = get_hx(&state, &href).await;
    assert_eq!(s, 200);
    assert!(!part.contains("<html") && part.contains("id=\"headline\""));
    let (_, part) = get_hx(&state, "/invalidations?machine=mi300-1").await;
    assert!(
        !part.contains("<html") && part.contains("25 of 25 entries recompiled after Triton 3.6.0 → 3.9.0"),
        "{part}"
    );
    // Two machines now.
    let (s, two) = get(&state, "/invalidations?a=a100-1&b=h100-a").await;
    assert_eq!(s, 200, "{two}");
    // Errors are pages.
    let (s, bad) = get(&state, "/compare?a=x&b=y").await;
    assert_eq!(s, 400);
    assert!(bad.contains("<html") && bad.contains("MACHINE:KEY"));
    let (s, _) = get(&state, "/compare?a=a100-1:NOPE&b=a100-1:NOPE2").await;
    assert_eq!(s, 404);
    let (s, form) = get(&state, "/compare").await;
    assert!(s == 200 && form.contains("<form"));
}

#[tokio::test]
async fn explain_cli() {
    let (_keep, pool) = corpus_db(&[
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let db = db_at(&pool).await;
    let state = AppState::new(pool, Config::default());
    let inv = get_json(&state, "/api/v1/invalidations?machine=a100-1").await;
    let i = &inv["invalidated"][0];
    let (a, b) = (i["a"].as_str().unwrap(), i["b"].as_str().unwrap());
    let run = |args: &[&str]| {
        std::process::Command::new(bin()).arg("explain").args(args).arg("--db").arg(&db).output().unwrap()
    };
    let out = run(&[a, b]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("cause: compiler\nTriton 3.4.0 → 3.5.1; everything else equal"), "{text}");
    assert!(text.contains("* compiler  triton_version"), "{text}");
    assert!(text.contains("equal ("), "{text}");
    assert!(text.contains("IR .source (locations stripped): 0 lines only in A, 0 only in B"), "{text}");
    assert!(text.contains("Triton will miss on this entry where it sits now"), "{text}");
    // --json is the API's answer.
    let out = run(&[a, b, "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let api = get_json(&state, &format!("/api/v1/compare?a={a}&b={b}")).await;
    assert_eq!(v, api);
    // --ir ptx --diff: the PTX differs across the upgrade (version header at least); the diff
    // lines are the API's side-by-side rows.
    let out = run(&[a, b, "--ir", "ptx", "--diff"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let api = get_json(&state, &format!("/api/v1/compare?a={a}&b={b}&ir=ptx")).await;
    let (del, ins) = (api["ir"]["deleted"].as_u64().unwrap(), api["ir"]["inserted"].as_u64().unwrap());
    assert!(del + ins > 0, "{api}");
    assert!(text.contains(&format!("IR .ptx (locations stripped): {del} lines only in A, {ins} only in B")), "{text}");
    assert!(text.contains("--- A .ptx\n+++ B .ptx"), "{text}");
    let minus = text.lines().filter(|l| l.starts_with("- ")).count() as u64;
    let plus = text.lines().filter(|l| l.starts_with("+ ")).count() as u64;
    assert_eq!((minus, plus), (del, ins), "every differing line printed once");
    let out = run(&[a, b, "--ir", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown IR"));
    // Unknown and malformed ids: exit 1 with a clear message.
    let out = run(&[a, "a100-1:NOSUCHKEY"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no entry a100-1:NOSUCHKEY"));
    let out = run(&["garbage", b]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected MACHINE:KEY"));
}
