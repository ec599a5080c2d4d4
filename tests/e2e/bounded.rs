//! Bounded work per request (issue 32): big IR compares, the stored invalidation reports, and
//! read-token guesses, each through a real server on 127.0.0.1 (the accept loop `serve` runs).

use crate::common::*;
use cachelens::db::Store;
use cachelens::web::{AppState, Config};
use std::path::Path;
use std::time::{Duration, Instant};

/// `app(state)` served by the accept loop of `cachelens serve` on 127.0.0.1:0; its URL.
async fn serve(state: AppState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let limits = cachelens::web::serve::Limits { header_timeout: Duration::from_secs(10), max_connections: 256 };
    let app = cachelens::web::app(state);
    tokio::spawn(cachelens::web::serve::serve(listener, app, limits, std::future::pending()));
    url
}

/// A synthetic TTIR of `lines` body lines; `edit`: every 10th constant differs.
fn big_ir(lines: usize, edit: bool) -> String {
    let mut s = String::from(
        "module {\n  tt.func public @add_kernel(%x_ptr: !tt.ptr<bf16> {tt.divisibility = 16 : i32}, %n: i32) {\n",
    );
    for i in 0..lines {
        let v = if edit && i % 10 == 0 { i + 1 } else { i };
        s.push_str(&format!("    %v{i} = arith.constant {v} : i32 loc(#loc{})\n", i % 20));
    }
    s.push_str("    tt.return\n  }\n}\n");
    s
}

/// Two entries of one kernel whose `.source` and `.ttir` are `lines` lines each (every 10th
/// differs), scanned as machine `big`: (dirs to keep, pool, id A, id B).
async fn big_pair(lines: usize) -> (Vec<crate::common::DbDir>, Store, String, String) {
    let (t, dir) = unpacked("h100-jit-3.6.0");
    let cache = dir.join("triton-cache");
    let mut keys: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("add_kernel.source").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    keys.sort();
    assert!(keys.len() >= 2, "two add_kernel entries in the corpus");
    for (k, edit) in [(&keys[0], false), (&keys[1], true)] {
        let text = big_ir(lines, edit);
        for ext in ["source", "ttir"] {
            std::fs::write(cache.join(k).join(format!("add_kernel.{ext}")), &text).unwrap();
        }
    }
    let (dbdir, pool) = fresh_db().await;
    scan(&pool, &cache, "big").await;
    (vec![t.into(), dbdir], pool, format!("big:{}", keys[0]), format!("big:{}", keys[1]))
}

/// Two 60,000-line texts (3.3 MB each): the diff reads the first 20,000 lines of each and says
/// so, the page stays small, and compares run off the async workers in two slots: a cheap
/// request sent while four run answers before any of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_ir_compares_are_cut_and_leave_other_requests_alone() {
    let (_keep, pool, a, b) = big_pair(60_000).await;
    let url = serve(AppState::new(pool, Config::default())).await;
    let http = cachelens::upload::client().unwrap();
    let api = format!("{url}/api/v1/compare?a={a}&b={b}");
    let r = http.get(&api).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    let note = v["ir"]["truncated"].as_str().unwrap_or_else(|| panic!("no truncation note: {}", v["ir"]));
    assert!(note.contains("first 20000 lines"), "{note}");
    assert!(v["ir"]["deleted"].as_u64().unwrap() <= 2_000, "{}", v["ir"]);
    let page = http.get(format!("{url}/compare?a={a}&b={b}")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let body = page.text().await.unwrap();
    assert!(body.contains("Diffed in part"), "the page says the diff is cut");
    assert!(body.len() < 3 << 20, "the page stays small: {} bytes", body.len());

    // Eight big compares at once (two run, the others wait for a turn), then a cheap request:
    // it does not queue behind them (before, the compares ran on the async workers and it
    // waited for all of them).
    let t0 = Instant::now();
    let mut big = Vec::new();
    for i in 0..8 {
        let (ir, strip) = (["source", "ttir"][i % 2], ["0", "1"][i / 2 % 2]);
        let (http, u) = (http.clone(), format!("{url}/compare?a={a}&b={b}&ir={ir}&strip={strip}"));
        big.push(tokio::spawn(async move {
            let r = http.get(u).send().await.unwrap();
            let status = r.status().as_u16();
            let _ = r.bytes().await;
            (status, t0.elapsed())
        }));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let r = http.get(format!("{url}/api/v1/machines")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let cheap = t0.elapsed();
    let mut last = Duration::ZERO;
    for h in big {
        let (status, done) = h.await.unwrap();
        assert_eq!(status, 200);
        last = last.max(done);
    }
    println!("cheap request answered at {cheap:?}, the last of 8 compares at {last:?}");
    assert!(cheap < last, "the cheap request ({cheap:?}) waited for every compare ({last:?})");
}

/// Scans `cache` as machine `m` `n` times (each a scan of the machine).
async fn scans(pool: &Store, cache: &Path, m: &str, n: usize) -> Vec<i64> {
    for _ in 0..n {
        scan(pool, cache, m).await;
    }
    sqlx::query_scalar("SELECT s.id FROM scans s JOIN machines m ON m.id = s.machine_id WHERE m.name = ? ORDER BY s.id")
        .bind(m)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Reports a reader asks for are a bounded store: past the bound the oldest asked one is
/// evicted (and computed again when asked again), the landing reports stay; meaningless pairs
/// are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_reports_stay_within_their_bound() {
    let (_t, dir) = unpacked("mi300-upgrade-1-triton-3.6.0");
    let cache = dir.join("triton-cache");
    let (_d, pool) = fresh_db().await;
    let ids = scans(&pool, &cache, "m1", 6).await;
    let other = scans(&pool, &cache, "m2", 1).await;
    // Each scan's landing report: the latest four of m1 stay landing ones, the older join the rest.
    let landing = count(&pool, "SELECT COUNT(*) FROM inv_reports WHERE landing = 1").await;
    let m1_landing = count(&pool, "SELECT COUNT(*) FROM inv_reports WHERE landing = 1 AND machine = 'm1'").await;
    assert_eq!(m1_landing, cachelens::db::reports::LANDING_KEPT);
    let asked0 = count(&pool, "SELECT COUNT(*) FROM inv_reports WHERE landing = 0").await;
    let limits = cachelens::answers::load::Limits { kept: (3, 1_000_000), ..cachelens::answers::load::LIMITS };
    let url = serve(AppState::new(pool.clone(), Config { report_limits: limits, ..Config::default() })).await;
    let http = cachelens::upload::client().unwrap();
    let get = |from: i64, to: i64| {
        let (http, u) = (http.clone(), format!("{url}/api/v1/invalidations?machine=m1&from={from}&to={to}"));
        async move {
            let r = http.get(u).send().await.unwrap();
            let s = r.status().as_u16();
            (s, r.json::<serde_json::Value>().await.unwrap())
        }
    };
    // Meaningless pairs: 422 / 404 with what is wrong, nothing stored.
    let before = count(&pool, "SELECT COUNT(*) FROM inv_reports").await;
    let (s, v) = get(ids[3], ids[1]).await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"].as_str().unwrap().contains("later scan"), "{v}");
    let (s, v) = get(ids[2], ids[2]).await;
    assert_eq!(s, 422, "{v}");
    assert!(v["error"].as_str().unwrap().contains("same scan"), "{v}");
    let (s, v) = get(other[0], ids[2]).await;
    assert_eq!(s, 404, "another machine's scan: {v}");
    let (s, v) = get(ids[0], 999_999).await;
    assert_eq!(s, 404, "an unknown scan: {v}");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM inv_reports").await, before);

    // Distinct pairs, none a landing report: at most 3 of them stay, the oldest go first.
    let pairs = [(0, 2), (0, 3), (0, 4), (1, 3), (1, 4), (1, 5), (0, 5)];
    for (i, (f, t)) in pairs.iter().enumerate() {
        let (s, v) = get(ids[*f], ids[*t]).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!((v["from"].as_i64(), v["to"].as_i64()), (Some(ids[*f]), Some(ids[*t])));
        let asked = count(&pool, "SELECT COUNT(*) FROM inv_reports WHERE landing = 0").await;
        assert_eq!(asked, (asked0 + i as i64 + 1).min(3), "after {} pairs", i + 1);
        assert_eq!(count(&pool, "SELECT COUNT(*) FROM inv_reports WHERE landing = 1").await, landing);
    }
    let spec = |f: usize, t: usize| format!("scan:{}:{}", ids[t], ids[f]);
    let kept: Vec<String> = sqlx::query_scalar("SELECT spec FROM inv_reports WHERE landing = 0 ORDER BY spec")
        .fetch_all(&pool)
        .await
        .unwrap();
    let mut want = vec![spec(1, 4), spec(1, 5), spec(0, 5)];
    want.sort();
    assert_eq!(kept, want, "the latest three stay");
    // No orphan rows are left behind by evictions.
    let orphans =
        count(&pool, "SELECT COUNT(*) FROM inv_rows WHERE report_id NOT IN (SELECT id FROM inv_reports)").await;
    assert_eq!(orphans, 0);
    // An evicted pair is computed again when asked, and is then stored again.
    let (s, v) = get(ids[0], ids[2]).await;
    assert_eq!(s, 200, "{v}");
    let n = count(&pool, &format!("SELECT COUNT(*) FROM inv_reports WHERE spec = '{}'", spec(0, 2))).await;
    assert_eq!(n, 1);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM inv_reports WHERE landing = 0").await, 3);
}

const TOKEN: &str = "r3ad-s3cret-0123456789";

/// `/login` on one connection: a few wrong tokens are answered 401, then 429 with
/// `Retry-After`, the right token included (no oracle past the limit); bearer guesses share the
/// limit. The cookie carries `Max-Age` and is refused once older than the login days.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_guesses_are_limited_and_cookies_expire() {
    let (_d, pool) = fresh_db().await;
    let url = serve(AppState::new(pool, Config { read_token: Some(TOKEN.into()), ..Config::default() })).await;
    // One client, one kept-alive connection.
    let _ = cachelens::upload::client().unwrap(); // installs the TLS provider reqwest needs
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for i in 0..200 {
        let r = http.get(format!("{url}/login?token=wrong-{i}")).send().await.unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            retry_after = r.headers().get("retry-after").map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
        }
    }
    let wrong = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert!((5..=20).contains(&wrong), "{wrong} wrong tokens compared before the limit");
    assert_eq!(wrong + limited, 200);
    assert!(retry_after.is_some_and(|s| (1..=60).contains(&s)), "{retry_after:?}");
    let r = http.get(format!("{url}/login?token={TOKEN}")).send().await.unwrap();
    assert_eq!(r.status(), 429, "past the limit even the right token is not compared");
    let r = http.get(format!("{url}/api/v1/machines")).bearer_auth("guess").send().await.unwrap();
    assert_eq!(r.status(), 429, "bearer guesses share the limit");
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("too many"), "{v}");

    // Cookies: a fresh one reads, one past the login days or of another token does not, and
    // none of that is limited by the guesses above.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let with = |c: String| {
        let (http, u) = (http.clone(), format!("{url}/api/v1/machines"));
        async move { http.get(u).header("cookie", format!("cachelens_read={c}")).send().await.unwrap().status() }
    };
    use cachelens::web::auth::{cookie_value, cookie_value_at};
    assert_eq!(with(cookie_value(TOKEN)).await, 200);
    assert_eq!(with(cookie_value_at(TOKEN, now - 6 * 86_400)).await, 200);
    assert_eq!(with(cookie_value_at(TOKEN, now - 8 * 86_400)).await, 401, "an expired cookie");
    assert_eq!(with(cookie_value("another-read-token-42")).await, 401, "a cookie of another token");

    // A fresh server: the login sets a cookie of 7 days.
    let (_d2, pool) = fresh_db().await;
    let url = serve(AppState::new(pool, Config { read_token: Some(TOKEN.into()), ..Config::default() })).await;
    let r = http.get(format!("{url}/login?token={TOKEN}")).send().await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("Max-Age=604800"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();
    let r = http.get(format!("{url}/api/v1/machines")).header("cookie", pair).send().await.unwrap();
    assert_eq!(r.status(), 200);
}
