//! Short keys as the grids show them (`a100-1:VURMD4KEVF`): one entry named stands for it in
//! `/compare`, `/api/v1/compare`, entry URLs and `explain`; several are listed (300 on a page,
//! 400 with the candidates on the API and the CLI); the search box finds entries by a key's
//! start. And the invalidations page links its machines and offers a new report's picker.

use crate::common::*;
use cachelens::web::{AppState, Config};

#[tokio::test]
async fn short_keys_resolve_when_unique_and_list_candidates_otherwise() {
    let (_keep, pool) = corpus_db(&[
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
    ])
    .await;
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE m.name = 'a100-1' ORDER BY e.key",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let state = AppState::new(pool, Config::default());
    // A 10-character start that one key has, and a one-character start that several have.
    let short = keys.iter().map(|k| &k[..10]).find(|p| keys.iter().filter(|k| k.starts_with(p)).count() == 1).unwrap();
    let full = keys.iter().find(|k| k.starts_with(short)).unwrap();
    let c = &keys.iter().map(|k| &k[..1]).find(|p| keys.iter().filter(|k| k.starts_with(p)).count() > 1).unwrap();
    let other = keys.iter().find(|k| *k != full).unwrap();

    let v = get_json(&state, &format!("/api/v1/compare?a=a100-1:{short}&b=a100-1:{other}")).await;
    assert_eq!(v["a"], format!("a100-1:{full}"));
    let (st, body) = get(&state, &format!("/api/v1/compare?a=a100-1:{c}&b=a100-1:{other}")).await;
    assert_eq!(st, 400, "{body}");
    let named: Vec<&String> = keys.iter().filter(|k| k.starts_with(c)).take(2).collect();
    assert!(body.contains("give more of the key") && named.iter().all(|k| body.contains(k.as_str())), "{body}");
    // Pages: the whole ids' URL, or the candidates.
    let (st, _) = get(&state, &format!("/compare?a=a100-1:{short}&b=a100-1:{other}&ir=ptx")).await;
    assert_eq!(st, 303);
    let (st, page) = get(&state, &format!("/compare?a=a100-1:{c}&b=a100-1:{other}")).await;
    assert_eq!(st, 300, "{page}");
    assert!(page.contains(&format!("href=\"/compare?a=a100-1:{}&#38;b=a100-1:{other}\"", named[0])), "{page}");
    let (st, _) = get(&state, &format!("/entries/a100-1/{short}")).await;
    assert_eq!(st, 303);
    let (st, page) = get(&state, &format!("/entries/a100-1/{c}")).await;
    assert!(st == 300 && page.contains(&format!("/entries/a100-1/{}", named[0])), "{st} {page}");
    assert_eq!(get(&state, "/entries/a100-1/QQQQQQ").await.0, 404);
    // The search box: across machines, a machine's, one match opens it.
    let (st, page) = get(&state, &format!("/search?key={c}")).await;
    assert!(st == 200 && page.contains("id=\"search-hits\"") && page.contains(named[1].as_str()), "{page}");
    assert_eq!(get(&state, &format!("/search?key=a100-1:{short}")).await.0, 303);
    let (st, page) = get(&state, "/search?key=a100-1:QQQQQQ").await;
    assert!(st == 200 && page.contains("No entry has a key starting with"), "{page}");
    // The CLI, on the same database.
    let db = db_at(state.db.pool()).await;
    let out = std::process::Command::new(bin())
        .args(["explain", "--db", db.to_str().unwrap(), &format!("a100-1:{short}"), &format!("a100-1:{other}")])
        .output()
        .unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains(full.as_str()), "{out:?}");
    let out = std::process::Command::new(bin())
        .args(["explain", "--db", db.to_str().unwrap(), &format!("a100-1:{c}"), &format!("a100-1:{other}")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(&format!("a100-1:{c} names")) && err.contains(named[0].as_str()),
        "{err}"
    );

    // The invalidations page: its machines linked, a picker of two machines.
    let (st, page) = get(&state, "/invalidations?a=a100-1&b=h100-c").await;
    assert_eq!(st, 200);
    assert!(page.contains("<a class=\"machine\" href=\"/machines/a100-1\">a100-1</a>"), "{page}");
    assert!(page.contains("id=\"pick-machines\"") && page.contains("<option value=\"h100-c\" selected>"), "{page}");
    let (_, page) = get(&state, "/invalidations").await;
    assert!(page.contains("id=\"pick-machines\"") && page.contains("id=\"pick-scans\""), "{page}");
}

/// The ids and links the search page lists, in order.
fn listed(page: &str) -> Vec<(String, String)> {
    page.split("<td class=\"key\"><a class=\"mono\" href=\"")
        .skip(1)
        .map(|s| {
            let (href, rest) = s.split_once("\">").unwrap();
            (rest[..rest.find("</a>").unwrap()].to_string(), href.to_string())
        })
        .collect()
}

/// `/api/v1/search?key=` answers what the search page lists: the same entries in the same order
/// with the same links, the one entry the page opens, none, and the page's reason for a bad key.
#[tokio::test]
async fn the_search_api_answers_what_the_search_page_lists() {
    let (_keep, pool) = corpus_db(&[
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
    ])
    .await;
    let keys: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id ORDER BY m.name, e.key",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let state = AppState::new(pool, Config::default());
    let ids = |v: &serde_json::Value| -> Vec<(String, String)> {
        arr(&v["entries"])
            .iter()
            .map(|e| (e["id"].as_str().unwrap().to_string(), e["url"].as_str().unwrap().to_string()))
            .collect()
    };
    // every one-character start that several keys have, across machines and on one
    let mut starts: Vec<String> = keys.iter().map(|(_, k)| k[..1].to_string()).collect();
    starts.dedup();
    starts.sort();
    starts.dedup();
    let mut several = 0;
    for c in starts.iter().flat_map(|c| [c.clone(), format!("a100-1:{c}")]) {
        let v = get_json(&state, &format!("/api/v1/search?key={c}")).await;
        let want: Vec<&(String, String)> = keys
            .iter()
            .filter(|(m, k)| match c.split_once(':') {
                Some((mm, p)) => m == mm && k.starts_with(p),
                None => k.starts_with(&c),
            })
            .collect();
        assert_eq!(v["more"], want.len() > 50, "{c}: {v}");
        let got = ids(&v);
        assert_eq!(got.len(), want.len().min(50), "{c}");
        for ((id, url), (m, k)) in got.iter().zip(&want) {
            assert_eq!(id, &format!("{m}:{k}"));
            assert_eq!(url, &format!("/entries/{m}/{k}"));
        }
        let (st, page) = get(&state, &format!("/search?key={c}")).await;
        if got.len() > 1 {
            several += 1;
            assert_eq!(st, 200, "{page}");
            assert_eq!(listed(&page), got, "{c}: the page and the API list differently");
        } else if got.len() == 1 {
            assert_eq!(st, 303, "one match: the page opens it");
        }
    }
    assert!(several > 2, "{several}");
    // one entry: the page opens it, the API lists it
    let (m, k) = &keys[0];
    let v = get_json(&state, &format!("/api/v1/search?key={m}:{}", &k[..12])).await;
    assert_eq!(ids(&v), [(format!("{m}:{k}"), format!("/entries/{m}/{k}"))]);
    assert_eq!(v["machine"], m.as_str());
    assert_eq!(v["key"], &k[..12]);
    // none: both say so
    let v = get_json(&state, "/api/v1/search?key=a100-1:QQQQQQ").await;
    assert!(arr(&v["entries"]).is_empty() && v["more"] == false, "{v}");
    // a bad key: the page's reason, as a 400
    for bad in ["a100-1:%21%21", "%24x"] {
        let (st, body) = get(&state, &format!("/api/v1/search?key={bad}")).await;
        assert_eq!(st, 400, "{body}");
        let why: serde_json::Value = serde_json::from_str(&body).unwrap();
        let (_, page) = get(&state, &format!("/search?key={bad}")).await;
        let note = page.split("<p id=\"search-note\">").nth(1).unwrap().split("</p>").next().unwrap();
        let why = why["error"].as_str().unwrap();
        assert_eq!(note.replace("&#34;", "\""), why, "{page}");
    }
    let (st, body) = get(&state, "/api/v1/search?key=").await;
    assert!(st == 400 && body.contains("missing key="), "{body}");
}
