//! What the pages show, checked against the database and the cache files themselves: kernel
//! list order and filters, charts, the binary-only saving, IR caps and notices, empty states,
//! version links and the entry page's other variants.

use super::{ok, ok_hx};
use crate::common::*;
use cachelens::fmt;
use cachelens::web::{AppState, Config};
use std::path::Path;

/// Kernel names linked from a kernel list (in order).
fn listed(html: &str) -> Vec<String> {
    html.split("class=\"kernel-link\" href=\"/kernels/")
        .skip(1)
        .map(|x| x[..x.find('"').unwrap()].to_string())
        .collect()
}

async fn names(pool: &cachelens::db::Store, sql: &str) -> Vec<String> {
    let v: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string())).fetch_all(pool).await.unwrap();
    v.iter().map(|n| fmt::enc(n)).collect()
}

/// Bytes of the IR files (what `TRITON_STORE_BINARY_ONLY=1` would not write) in the key dirs
/// of a Triton cache dir, read from the files themselves.
fn ir_bytes(cache: &Path) -> i64 {
    let mut sum = 0;
    for d in std::fs::read_dir(cache).unwrap().map(|d| d.unwrap().path()) {
        let n = d.file_name().unwrap().to_string_lossy().to_string();
        if !d.is_dir() || n.starts_with('.') || n.starts_with("tmp.") {
            continue;
        }
        for f in std::fs::read_dir(&d).unwrap().map(|f| f.unwrap().path()) {
            let ext = f.extension().map(|e| e.to_string_lossy().to_string()).unwrap_or_default();
            if ["ttir", "ttgir", "llir", "ptx", "amdgcn"].contains(&ext.as_str()) {
                sum += std::fs::metadata(&f).unwrap().len() as i64;
            }
        }
    }
    sum
}

#[tokio::test]
async fn lists_charts_and_figures_match_the_database_and_the_files() {
    let (keep, pool) = corpus_db(&[
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
        ("h100-b", "h100-inductor-3.6.0", "inductor"),
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ])
    .await;
    let s = AppState::new(pool.clone(), Config::default());

    // kernel list: sorted by size and by last compile, as the entries say
    let by_size = listed(&ok_hx(&s, "/kernels?sort=size").await);
    let want = names(
        &pool,
        "SELECT kernel FROM entry_rows WHERE removed_at IS NULL AND kernel IS NOT NULL
                              GROUP BY kernel ORDER BY SUM(bytes) DESC, kernel LIMIT 50",
    )
    .await;
    assert!(want.len() > 10);
    assert_eq!(by_size, want, "sort=size");
    let by_last = listed(&ok_hx(&s, "/kernels?sort=last").await);
    let want = names(
        &pool,
        "SELECT kernel FROM entry_rows WHERE removed_at IS NULL AND kernel IS NOT NULL
                              GROUP BY kernel ORDER BY MAX(created_at) DESC, kernel LIMIT 50",
    )
    .await;
    assert_eq!(by_last, want, "sort=last");
    assert_ne!(by_size, by_last, "the two orders differ on this corpus, so both are tested");
    // arch filter
    let sm80 = listed(&ok(&s, "/kernels?arch=sm_80&sort=name").await);
    let want = names(
        &pool,
        "SELECT DISTINCT kernel FROM entry_rows WHERE removed_at IS NULL AND arch = 'sm_80' ORDER BY kernel",
    )
    .await;
    assert_eq!(sm80, want, "arch=sm_80");
    assert!(!sm80.iter().any(|k| k.starts_with("triton_")), "no Inductor (sm_90) kernel on the A100");

    // machine page: the bytes chart has one point per scan with its real size
    let scans: Vec<(i64,)> = sqlx::query_as(
        "SELECT s.bytes FROM scans s JOIN machines m ON m.id = s.machine_id WHERE m.name = 'a100-1' ORDER BY s.id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(scans.len(), 2);
    let m = ok(&s, "/machines/a100-1").await;
    let chart = &m[m.find("aria-label=\"Cache size (all cache dirs)\"").expect("bytes chart")..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(chart.matches("<circle").count(), 2, "one point per scan");
    for (b,) in &scans {
        assert!(chart.contains(&format!(": {}</title>", fmt::bytes(*b))), "scan of {b} bytes plotted: {chart}");
    }
    assert!(scans[1].0 > scans[0].0, "the upgrade added files");

    // overview: what TRITON_STORE_BINARY_ONLY=1 would save = the IR files on disk
    let dirs: Vec<&Path> = keep[1..].iter().map(|t| t.path()).collect();
    let mut want = ir_bytes(&dirs[0].join("cache/triton-cache")) + ir_bytes(&dirs[2].join("cache/triton-cache"));
    for dev in std::fs::read_dir(dirs[1].join("cache/inductor/triton")).unwrap() {
        want += ir_bytes(&dev.unwrap().path());
    }
    let o = ok(&s, "/").await;
    let at = o.find("id=\"binary-only-saving\" data-bytes=\"").expect("saving figure") + 36;
    let shown: i64 = o[at..at + o[at..].find('"').unwrap()].parse().unwrap();
    assert_eq!(shown, want, "binary-only saving = IR bytes in the cache dirs");

    // entry page: the other variants listed resolve, and the rest are counted
    let key: String = sqlx::query_scalar(
        "SELECT e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE m.name = 'h100-a' AND e.kernel = 'matmul_kernel' AND e.kind = 'kernel' LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let e = ok(&s, &format!("/entries/h100-a/{key}")).await;
    let sec = &e[e.find("Other variants of this kernel").unwrap()..];
    let links: Vec<&str> =
        sec.split("<li><a class=\"mono\" href=\"").skip(1).map(|x| &x[..x.find('"').unwrap()]).collect();
    assert_eq!(links.len(), 50);
    for l in &links {
        assert!(ok(&s, l).await.contains("<h1>Entry"), "{l} resolves");
    }
    let live: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM entry_rows WHERE kernel = 'matmul_kernel' AND removed_at IS NULL")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        sec.contains(&format!("and {} more — <a href=\"/kernels/matmul_kernel\">", live - 51)),
        "the entries past the 50 listed are counted ({live} live)"
    );

    // the same for an entry listed among its own kernel's first variants (an A100 one)
    let first: String = sqlx::query_scalar(
        "SELECT e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE m.name = 'a100-1' AND e.kernel = 'matmul_kernel'
         ORDER BY e.triton_version, e.num_warps, e.num_stages, e.id LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let e = ok(&s, &format!("/entries/a100-1/{first}")).await;
    assert!(e.contains(&format!("and {} more — ", live - 51)), "the count does not depend on where the entry sorts");

    // an entry without IR (a launcher)
    let launcher: String = sqlx::query_scalar("SELECT key FROM entry_rows WHERE kind = 'launcher' LIMIT 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    let l = ok(&s, &format!("/entries/h100-a/{launcher}")).await;
    assert!(l.contains("No IR stored for this entry"), "empty IR viewer");
}

/// Versions with a `+` (local builds) link to a filter that finds them; entries with no
/// version are shown, not linked to a filter that could never match.
#[tokio::test]
async fn machine_version_links_encode_and_unknown_is_not_a_link() {
    let (_keep, pool) = corpus_db(&[("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache")]).await;
    // before any page builds the summaries: a local build's version on some entries, none on others
    sqlx::query("UPDATE facts SET triton_version = '3.4.0+gitabc123' WHERE kernel = 'matmul_kernel'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE facts SET triton_version = NULL WHERE kernel = 'softmax_kernel'").execute(&pool).await.unwrap();
    let s = AppState::new(pool, Config::default());
    let m = ok(&s, "/machines/a100-1").await;
    let hrefs: Vec<String> = m
        .split("href=\"/kernels?machine=a100-1")
        .skip(1)
        .map(|x| {
            format!("/kernels?machine=a100-1{}", &x[..x.find('"').unwrap()]).replace("&#38;", "&").replace("&amp;", "&")
        })
        .filter(|h| h.contains("triton_version"))
        .collect();
    assert_eq!(hrefs.len(), 2, "3.4.0 and 3.4.0+gitabc123 are links: {hrefs:?}");
    let plus = hrefs.iter().find(|h| h.contains("gitabc123")).unwrap();
    assert!(plus.ends_with("triton_version=3.4.0%2Bgitabc123"), "{plus}");
    assert_eq!(listed(&ok(&s, plus).await), ["matmul_kernel"], "the link finds the local build's kernels");
    assert!(m.contains("no version recorded") && !m.contains("triton_version=unknown"), "unknown is not a link");
}

/// A machine with no scans; an entry whose IR exceeds the viewer's byte cap, and one whose file
/// was over the scanner's storage limit; compiles on two days with two empty days between.
#[tokio::test]
async fn empty_states_caps_notices_and_day_gaps() {
    let (_t, pool) = fresh_db().await;
    let day = 20_000 * 86_400_000i64;
    for sql in [
        "INSERT INTO machines(id, name, created_at) VALUES (1, 'synth', 0), (2, 'idle', 0)".to_string(),
        "INSERT INTO scans(id, machine_id, client_id, scanned_at, root, entries, new_entries, changed_entries, removed_entries, bytes, skipped, skipped_json, relocated, source)
         VALUES (1, 1, 'c', 1700000000000, '/cache', 2, 2, 0, 0, 10, 0, '{}', 0, 'local')".into(),
        "INSERT INTO roots(id, path) VALUES (1, '/cache')".into(),
        "INSERT INTO facts(id, key, kind, kernel, backend, arch, num_warps, num_stages, triton_version)
         VALUES (1, 'K1', 'kernel', 'wide', 'cuda', 'sm_90', 4, 3, '3.6.0'),
                (2, 'K2', 'kernel', 'wide', 'cuda', 'sm_90', 8, 3, '3.6.0')".into(),
        "INSERT INTO keys(id, key) VALUES (1, 'K1'), (2, 'K2')".into(),
        format!("INSERT INTO entries(id, machine_id, root_id, key_id, fact_id, created_at, bytes, sig, first_scan_id, last_scan_id, first_seen_at, last_seen_at)
         VALUES (1, 1, 1, 1, 1, {day}, 10, 's', 1, 1, 0, 0),
                (2, 1, 1, 2, 2, {}, 10, 's', 1, 1, 0, 0)", day + 3 * 86_400_000),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await.unwrap();
    }
    // 600 lines of 8 KiB: the 2 MiB byte cap stops the viewer before the 20,000-line cap
    let line = "x".repeat(8192);
    let ir: String = (0..600).map(|_| format!("{line}\n")).collect();
    let (sha, huge) = ("cd".repeat(32), "ef".repeat(32));
    sqlx::query("INSERT INTO artifacts(entry_id, name, ext, bytes, sha256) VALUES (1, 'w.ttir', 'ttir', ?, ?), (1, 'w.ttgir', 'ttgir', ?, ?)")
        .bind(ir.len() as i64)
        .bind(&sha)
        .bind(17i64 << 20)
        .bind(&huge)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO blobs(sha256, bytes, content) VALUES (?, ?, ?)")
        .bind(&sha)
        .bind(ir.len() as i64)
        .bind(&ir)
        .execute(&pool)
        .await
        .unwrap();
    let s = AppState::new(pool, Config::default());

    let idle = ok(&s, "/machines/idle").await;
    assert!(idle.contains("No scans yet — run <code>cachelens scan --machine idle</code>"), "{idle}");

    let capped = ok(&s, "/entries/synth/K1?ir=ttir").await;
    let shown = (2 << 20) / (line.len() + 1);
    assert!(capped.contains(&format!("Showing the first {shown} of 600 lines")), "byte cap notice");
    let code = &capped[capped.find("data-file=\"w.ttir\">").unwrap()..];
    assert_eq!(code[..code.find("</pre>").unwrap()].matches('x').count(), shown * 8192);

    let over = ok_hx(&s, "/entries/synth/K1?ir=ttgir").await;
    assert!(
        over.contains("w.ttgir is 17.0 MiB, over the scanner&#39;s 16.0 MiB storage limit")
            || over.contains("w.ttgir is 17.0 MiB, over the scanner's 16.0 MiB storage limit"),
        "{over}"
    );

    let m = ok(&s, "/machines/synth").await;
    let chart = &m[m.find("aria-label=\"Entries compiled per day (UTC)\"").expect("per-day chart")..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(chart.matches("<rect").count(), 4, "four days, two without compiles");
    assert_eq!(chart.matches(": 0</title>").count(), 2, "the empty days are zero bars");
    assert!(m.contains("2 entries compiled on 2 day(s) between"), "the note");
}

/// The compare page offers only the IR tabs its two entries have: `.ptx` for a CUDA pair, never
/// `.amdgcn`; `.amdgcn` for a ROCm pair, never `.ptx`.
#[tokio::test]
async fn compare_offers_the_ir_tabs_the_entries_have() {
    let (_keep, state) = fleet().await;
    for (machine, has, lacks) in [("h100-c", "ptx", "amdgcn"), ("mi300-1", "amdgcn", "ptx")] {
        let v = get_json(&state, &format!("/api/v1/entries?machine={machine}&kernel=add_kernel&limit=2")).await;
        let keys: Vec<&str> = arr(&v).iter().map(|e| e["key"].as_str().unwrap()).collect();
        assert_eq!(keys.len(), 2, "{v}");
        for e in arr(&v) {
            let names: Vec<&str> = arr(&e["artifacts"]).iter().map(|a| a["name"].as_str().unwrap()).collect();
            assert!(names.iter().any(|n| n.ends_with(&format!(".{has}"))), "{names:?}");
            assert!(!names.iter().any(|n| n.ends_with(&format!(".{lacks}"))), "{names:?}");
        }
        let url = format!("/compare?a={machine}:{}&b={machine}:{}", keys[0], keys[1]);
        let (st, html) = get(&state, &url).await;
        assert_eq!(st, 200, "{html}");
        assert!(html.contains(&format!("ir={has}\"")), "{has} tab on {url}");
        assert!(!html.contains(&format!("ir={lacks}")), "no {lacks} tab on {url}");
        assert!(html.contains("ir=ttgir"), "ttgir tab on {url}");
    }
}
