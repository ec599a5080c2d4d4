//! Full page or fragment: every HTML view answers the whole page to a plain GET and to an htmx
//! history restore (`HX-Request` + `HX-History-Restore-Request`, which htmx swaps into
//! `<body>`), and only its fragment to a plain htmx request.

use crate::common::*;
use cachelens::web::{AppState, Config};

fn whole(body: &str) -> bool {
    body.starts_with("<!doctype html>") && body.contains("<header class=\"top\">") && body.contains("</html>")
}

#[tokio::test]
async fn a_history_restore_gets_the_whole_page_and_htmx_the_fragment() {
    let (_keep, pool) = corpus_db(&[
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let s = AppState::new(pool, Config::default());
    let inv = get_json(&s, "/api/v1/invalidations?machine=a100-1").await;
    let (a, b) = (inv["invalidated"][0]["a"].as_str().unwrap(), inv["invalidated"][0]["b"].as_str().unwrap());
    let (machine, key) = a.split_once(':').unwrap();
    let kernel = inv["invalidated"][0]["kernel"].as_str().unwrap();
    let uris = [
        "/".to_string(),
        "/machines/a100-1".into(),
        "/kernels?q=a".into(),
        format!("/kernels/{kernel}"),
        format!("/compare?a={a}&b={b}"),
        format!("/compare?a={a}&b={b}&ir=ttir"),
        format!("/entries/{machine}/{key}/nearest"),
        "/invalidations?machine=a100-1".into(),
        "/invalidations?machine=a100-1&cause=compiler&page=2".into(),
        "/history?machine=a100-1".into(),
    ];
    let restore = [("HX-Request", "true"), ("HX-History-Restore-Request", "true")];
    for uri in &uris {
        let (st, page) = get_with(&s, uri, &[]).await;
        assert!(st == 200 && whole(&page), "GET {uri}: {st} {page}");
        let (st, restored) = get_with(&s, uri, &restore).await;
        assert!(
            st == 200 && whole(&restored),
            "GET {uri} as an htmx history restore: the whole page, got {st} {restored}"
        );
        let (st, fragment) = get_with(&s, uri, &[("HX-Request", "true")]).await;
        assert!(
            st == 200 && !fragment.contains("<html") && !fragment.contains("<header"),
            "GET {uri} (htmx): {fragment}"
        );
        assert!(
            fragment.len() > 100 && page.contains(fragment.trim()),
            "GET {uri} (htmx): the fragment is part of the page"
        );
    }
}
