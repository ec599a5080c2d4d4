//! An upload sends what the server lacks: the facts of an entry the server holds from another
//! machine are not sent again (`present` records), and an unchanged node re-reads nothing
//! (`previous`). Real servers on 127.0.0.1, the real `cachelens` binary as the client, real
//! corpus caches; what the server stores is compared row by row with a local scan of the same
//! dirs, which reads every entry whole.

use crate::common::*;
use crate::upload::{cli_upload, server, text};
use cachelens::db::Store;
use cachelens::web::{AppState, Config};
use std::path::Path;

/// What a machine's rows say, as one JSON value a key (ids, scan numbers, scan times and dir
/// stamps left out: those differ between any two databases): the entry row with its texts
/// (kept once per fact), its files, its class and its compile times.
async fn rows_of(pool: &Store, machine: &str) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT e.key, json_array(e.root, e.dir, e.kind, e.kernel, e.backend, e.arch, e.warp_size, e.num_warps,
                e.num_stages, e.num_ctas, e.triton_version, e.meta_hash, e.signature, e.shapes, e.created_at,
                e.bytes, e.registers, e.spills, e.shared_bytes, COALESCE(e.resources_json, t.resources_json),
                COALESCE(e.metadata_json, t.metadata_json), COALESCE(e.group_json, t.group_json),
                e.relocated, e.partial, e.binary_sha256, e.sig, e.fact, e.removed_at IS NULL,
                (SELECT json_group_array(json_array(a.name, a.ext, a.bytes, a.sha256))
                   FROM (SELECT * FROM entry_files WHERE entry_id = e.id ORDER BY name) a),
                (SELECT hex(c.class) FROM fact_classes c WHERE c.fact_id = e.fact_id AND c.relocated = e.relocated),
                (SELECT json_group_array(compiled_at)
                   FROM (SELECT compiled_at FROM entry_compiles WHERE entry_id = e.id ORDER BY 1)),
                (SELECT COUNT(*) FROM fact_autotune WHERE fact_id = e.fact_id))
         FROM entry_rows e JOIN machines m ON m.id = e.machine_id
           LEFT JOIN fact_texts t ON t.fact = e.fact AND t.relocated = e.relocated
         WHERE m.name = ? ORDER BY e.key",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// (entries sent whole, entries sent as present, KiB on the wire) from the upload's line.
fn sent(stdout: &str) -> (usize, usize, f64) {
    let line = stdout.lines().find(|l| l.starts_with("uploaded ")).unwrap_or_else(|| panic!("{stdout}"));
    let num = |after: &str| -> f64 {
        let rest = &line[line.find(after).unwrap_or_else(|| panic!("{after:?} in {line}")) + after.len()..];
        rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap().parse().unwrap()
    };
    let whole = line.split("): ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let present = line.split("whole, ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    (whole, present, num("uploaded "))
}

async fn upload(url: &str, pool: &Store, machine: &str, dir: &Path) -> String {
    let store = cachelens::db::Db::from(pool.clone());
    let token = cachelens::db::tokens::create(&store, machine).await.unwrap();
    let out = cli_upload(url, &token, machine, dir, &[]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_entries_the_server_holds_sends_only_its_own_part_and_is_stored_exactly() {
    let srv = server(Config::default()).await;
    // Three nodes with the same cache (a fleet running the same jobs), each its own copy.
    let copies: Vec<_> = (0..3).map(|_| unpacked("h100-jit-3.6.0")).collect();
    let dirs: Vec<_> = copies.iter().map(|(_, p)| p.join("triton-cache")).collect();
    let first = upload(&srv.url, &srv.pool, "node-a", &dirs[0]).await;
    let (whole_a, present_a, kib_a) = sent(&first);
    assert_eq!(present_a, 0, "the first node's facts are new to the server: {first}");
    let parts_before = parts_put(&srv.url).await;
    let second = upload(&srv.url, &srv.pool, "node-b", &dirs[1]).await;
    let (whole_b, present_b, kib_b) = sent(&second);
    // Its records close its parts, not the IR text it holds (32 MB here, which the server need
    // not be sent): one part, as the server counted the requests.
    assert_eq!(parts_put(&srv.url).await - parts_before, 1.0, "{second}");
    let report = cachelens::collect::scan_report(&dirs[1], "x").unwrap();
    let content = report.entries.iter().filter(|e| e.facts_are_content()).count();
    assert_eq!(whole_a, report.entries.len());
    assert!(content > 100, "{content}");
    assert_eq!((present_b, whole_b), (content, report.entries.len() - content), "{second}");
    assert!(kib_b * 20.0 < kib_a, "the second node sent {kib_b} KiB, the first {kib_a} KiB");
    println!("first node {kib_a:.1} KiB, second node {kib_b:.1} KiB ({present_b} of {whole_a} entries as present)");

    // The same dirs scanned locally, every entry read whole: the same rows, every column.
    let (_db, local) = fresh_db().await;
    for (m, d) in [("node-a", &dirs[0]), ("node-b", &dirs[1])] {
        scan(&local, d, m).await;
    }
    for m in ["node-a", "node-b"] {
        let (up, loc) = (rows_of(&srv.pool, m).await, rows_of(&local, m).await);
        assert_eq!(up.len(), report.entries.len());
        for (u, l) in up.iter().zip(&loc) {
            assert_eq!(u, l, "{m}: the uploaded row differs from the local scan's");
        }
    }
    // And the API says the same of the node as of the node uploaded whole.
    let api = |url: String| async move { get_json_at_sorted(&url).await };
    let of_b = api(format!("{}/api/v1/entries?machine=node-b&limit=10000", srv.url)).await;
    let of_a = api(format!("{}/api/v1/entries?machine=node-a&limit=10000", srv.url)).await;
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        for e in v.as_array_mut().unwrap() {
            for f in ["machine", "root"] {
                e.as_object_mut().unwrap().remove(f);
            }
        }
        v
    };
    assert_eq!(strip(&of_a), strip(&of_b), "node-b's entries read as node-a's");

    // Unchanged: nothing is read again, a few dozen bytes an entry go out.
    let again = upload(&srv.url, &srv.pool, "node-b", &dirs[1]).await;
    let (whole, present, kib) = sent(&again);
    assert_eq!((whole, present), (0, 0), "{again}");
    assert!(again.contains(&format!("0 new, 0 changed, {} unchanged, 0 removed", report.entries.len())), "{again}");
    let per_entry = kib * 1024.0 / report.entries.len() as f64;
    assert!(per_entry < 100.0, "{per_entry:.0} bytes an unchanged entry: {again}");
    println!("unchanged re-upload: {per_entry:.0} bytes an entry");

    // One entry's files touched (same bytes, new mtime): its facts the server holds go as
    // present; one entry's IR changed: sent whole, and stored as changed.
    let kernels: Vec<&cachelens::model::Entry> =
        report.entries.iter().filter(|e| e.facts_are_content() && e.kernel.is_some()).collect();
    let touched = dirs[2].join(&kernels[0].dir).join(&kernels[0].artifacts[0].name);
    let t = std::fs::metadata(&touched).unwrap().modified().unwrap() + std::time::Duration::from_secs(60);
    std::fs::File::options().write(true).open(&touched).unwrap().set_modified(t).unwrap();
    let ttir = kernels[1].artifacts.iter().find(|a| a.name.ends_with(".ttir")).unwrap();
    let edited = dirs[2].join(&kernels[1].dir).join(&ttir.name);
    let mut ir = std::fs::read_to_string(&edited).unwrap();
    ir.push_str("\n// edited\n");
    std::fs::write(&edited, ir).unwrap();
    let third = upload(&srv.url, &srv.pool, "node-c", &dirs[2]).await;
    let (whole_c, present_c, _) = sent(&third);
    assert_eq!((present_c, whole_c), (content - 1, report.entries.len() - content + 1), "{third}");
    scan(&local, &dirs[2], "node-c").await;
    let (up, loc) = (rows_of(&srv.pool, "node-c").await, rows_of(&local, "node-c").await);
    assert_eq!(up, loc, "node-c: the uploaded rows differ from the local scan's");
    // The counters the triggers on `entries` keep for the rows an ingest adds equal a fresh
    // count, on the server (rows added as present and whole) and locally.
    assert_eq!(live_counter_faults(&srv.pool).await, [0; 4], "the server's live counters");
    assert_eq!(live_counter_faults(&local).await, [0; 4], "the local scans' live counters");
    for pool in [&srv.pool, &local] {
        assert_eq!(fact_file_count_faults(pool).await, 0, "facts' file counts");
    }
    let groups: i64 = sqlx::query_scalar("SELECT SUM(group_files) FROM facts").fetch_one(&local).await.unwrap();
    assert!(groups > 0, "the corpus's group files are counted: {groups}");
}

/// How many parts the server took (`PUT /api/v1/uploads/{id}/parts/{n}`), from `/metrics`.
async fn parts_put(url: &str) -> f64 {
    let resp = cachelens::upload::client().unwrap().get(format!("{url}/metrics")).send().await.unwrap();
    let text = resp.text().await.unwrap();
    text.lines()
        .filter(|l| l.starts_with("cachelens_http_request_duration_seconds_count{"))
        .filter(|l| l.contains("method=\"PUT\"") && l.contains("route=\"/api/v1/uploads/{id}/parts/{n}\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// An API list, its rows sorted by key (two databases break ties in their own row order).
async fn get_json_at_sorted(url: &str) -> serde_json::Value {
    let mut v = crate::upload::get_json_at(url).await;
    v.as_array_mut().unwrap().sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
    v
}

/// Turn a database's rows into what a database made before migration 0032 holds after its
/// migrations: each entry its own fact row without a digest (`facts.fact` NULL), its texts in
/// that row, its files in `artifacts`, no `fact_texts` nor `fact_files`. (The migration itself
/// is `old_db.rs`'s, from a real database of that release.)
async fn back_to_rows_with_their_texts(pool: &Store) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::raw_sql(
        "CREATE TEMP TABLE own_files AS SELECT entry_id, name, ext, bytes, sha256 FROM entry_files;
         INSERT INTO facts(id, fact, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas,
                           triton_version, meta_hash, signature, shapes, registers, spills, shared_bytes, partial,
                           binary_sha256, metadata_json, resources_json, group_json)
           SELECT 1000000 + e.id, NULL, f.key, f.kind, f.kernel, f.backend, f.arch, f.warp_size, f.num_warps,
                  f.num_stages, f.num_ctas, f.triton_version, f.meta_hash, f.signature, f.shapes, f.registers,
                  f.spills, f.shared_bytes, f.partial, f.binary_sha256,
                  COALESCE(f.metadata_json, t.metadata_json), COALESCE(f.resources_json, t.resources_json),
                  COALESCE(f.group_json, t.group_json)
           FROM entries e JOIN facts f ON f.id = e.fact_id
           LEFT JOIN fact_texts t ON t.fact = f.fact AND t.relocated = e.relocated;
         INSERT INTO fact_autotune(fact_id, idx, config_json, num_warps, num_stages, timings_json, best_ms, winner)
           SELECT 1000000 + e.id, a.idx, a.config_json, a.num_warps, a.num_stages, a.timings_json, a.best_ms, a.winner
           FROM entries e JOIN fact_autotune a ON a.fact_id = e.fact_id;
         INSERT INTO fact_modules(fact_id, module)
           SELECT 1000000 + e.id, m.module FROM entries e JOIN fact_modules m ON m.fact_id = e.fact_id;
         UPDATE entries SET fact_id = 1000000 + id, group_sha256 = NULL, group_bytes = NULL;
         DELETE FROM facts WHERE id < 1000000;
         DELETE FROM artifacts;
         INSERT INTO artifacts(entry_id, name, ext, bytes, sha256) SELECT * FROM temp.own_files;
         DROP TABLE temp.own_files;
         DELETE FROM fact_files;
         DELETE FROM fact_texts;",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn rows_stored_before_facts_answer_as_facts_do() {
    // an SQLite file whatever the tests' store: SQLite's migration 0032 runs on it again
    let (db, _work, pool) = crate::blobs::demo_in(sqlite_db().await).await;
    // Every answer about the demo as this release stores it (texts once per fact)...
    let now = AppState::new(pool.clone(), Config::default());
    // (the summaries built first: the entry page's "and N more" reads them without waiting)
    now.db.fresh_summaries().await.unwrap();
    let mut before = crate::blobs::answers(&now, &pool).await;
    let machines: Vec<String> =
        sqlx::query_scalar("SELECT name FROM machines ORDER BY name").fetch_all(&pool).await.unwrap();
    let extra = |ms: &[String]| {
        let mut u: Vec<String> = vec!["/api/v1/machines".into(), "/api/v1/kernels".into(), "/kernels".into()];
        for m in ms {
            u.push(format!("/api/v1/entries?machine={m}&limit=10000"));
            u.push(format!("/machines/{m}"));
        }
        u
    };
    for u in extra(&machines) {
        before.push((u.clone(), get(&now, &u).await.1));
    }
    assert!(count(&pool, "SELECT COUNT(*) FROM entry_rows WHERE metadata_json IS NOT NULL").await == 0);
    // ...and the same data as a database from before 0032 holds it once migrated.
    back_to_rows_with_their_texts(&pool).await;
    pool.close().await;
    let pool = cachelens::db::open(&db.path().join("test.db")).await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM entry_rows WHERE fact IS NOT NULL").await, 0);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM fact_files").await, 0);
    let state = AppState::new(pool.clone(), Config::default());
    state.db.fresh_summaries().await.unwrap();
    let mut after = crate::blobs::answers(&state, &pool).await;
    for u in extra(&machines) {
        after.push((u.clone(), get(&state, &u).await.1));
    }
    assert_eq!(before.len(), after.len());
    for ((u, a), (v, b)) in before.iter().zip(&after) {
        assert_eq!(u, v);
        let (a, b) = (without_ages(a), without_ages(b));
        if a != b {
            let diff: Vec<String> = similar::TextDiff::from_lines(a.as_str(), b.as_str())
                .iter_all_changes()
                .filter(|c| c.tag() != similar::ChangeTag::Equal)
                .map(|c| format!("{}{}", c.tag(), c.value()))
                .take(20)
                .collect();
            panic!("{u}: the answer changed with the migration:\n{}", diff.join(""));
        }
    }
    // A later scan of the same caches stores facts and keeps the texts once per fact: every
    // answer about it reads as before.
    let (_t, cache) = unpacked("h100-jit-3.6.0");
    scan(&pool, &cache.join("triton-cache"), "late").await;
    let facts = count(&pool, "SELECT COUNT(*) FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE m.name = 'late' AND e.fact IS NOT NULL AND e.metadata_json IS NULL").await;
    assert!(facts > 100, "{facts}");
    let by_key = |v: serde_json::Value| -> std::collections::BTreeMap<String, serde_json::Value> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let mut e = e.clone();
                let o = e.as_object_mut().unwrap();
                o.remove("machine");
                o.remove("root");
                (o["key"].as_str().unwrap().to_string(), e)
            })
            .collect()
    };
    let late = by_key(get_json(&state, "/api/v1/entries?machine=late&limit=10000").await);
    let old_rows = by_key(get_json(&state, "/api/v1/entries?machine=h100-a&limit=10000").await);
    assert!(late.len() > 100);
    for (k, e) in &late {
        assert_eq!(Some(e), old_rows.get(k), "{k}: read through fact_texts, not as the old row says");
    }
    let (_, a) = get(&state, &format!("/entries/late/{}", late.keys().next().unwrap())).await;
    let (_, b) = get(&state, &format!("/entries/h100-a/{}", late.keys().next().unwrap())).await;
    let meta = |p: &str| p.split("Metadata").nth(1).map(|s| s.chars().take(3000).collect::<String>());
    assert!(meta(&a).is_some() && meta(&a) == meta(&b), "the entry page's metadata differs");
}

/// A page with its coarse ages (`just now`, `5 min ago`: `fmt::ago`) blanked: the two reads of
/// a slow test may fall on either side of a minute.
fn without_ages(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    let mut rest = page.replace("just now", "(age)");
    for unit in [" min ago", " h ago", " days ago"] {
        while let Some(at) = rest.find(unit) {
            let digits = rest[..at].len() - rest[..at].trim_end_matches(|c: char| c.is_ascii_digit()).len();
            out.push_str(&rest[..at - digits]);
            out.push_str("(age)");
            rest = rest[at + unit.len()..].to_string();
        }
        out.push_str(&rest);
        rest = std::mem::take(&mut out);
    }
    rest
}

/// The names of the files in the entry dirs of `root`.
fn walk_files(root: &Path) -> Vec<String> {
    let dirs = std::fs::read_dir(root).unwrap().map(|d| d.unwrap().path());
    dirs.flat_map(|d| std::fs::read_dir(d).into_iter().flatten())
        .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Point every group file of the cache at `root` to where its entries sit now (as Triton
/// writes them there): the entries are no longer relocated, so their facts are new to a
/// server that holds the same cache from elsewhere, while their IR texts are the same.
fn rewrite_group_files(root: &Path, was: &str) {
    rewrite_group_files_to(root, was, &std::fs::canonicalize(root).unwrap());
}

/// Point every group file of the cache at `root` to `now` (the cache written there).
fn rewrite_group_files_to(root: &Path, was: &str, now: &Path) {
    for dir in std::fs::read_dir(root).unwrap() {
        let dir = dir.unwrap().path();
        for f in std::fs::read_dir(&dir).into_iter().flatten() {
            let f = f.unwrap().path();
            if f.file_name().unwrap().to_string_lossy().starts_with("__grp__") {
                let text = std::fs::read_to_string(&f).unwrap();
                std::fs::write(&f, text.replace(was, &now.to_string_lossy())).unwrap();
            }
        }
    }
}

/// A node whose entries are new to the server but whose IR texts the server holds from another
/// node proves it holds each text (hashed with the upload's salt) and sends none of them; the
/// texts read back the same. The proof endpoint holds nothing it cannot check: a wrong proof,
/// a text the server lacks and another upload's salt are all answered "not held".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn texts_the_server_holds_are_proven_not_sent() {
    let srv = server(Config::default()).await;
    let (_a, a) = unpacked("h100-jit-3.6.0");
    let (_b, b) = unpacked("h100-jit-3.6.0");
    let (a, b) = (a.join("triton-cache"), b.join("triton-cache"));
    rewrite_group_files(&b, "/tmp/corpus/h100-a/triton-cache");
    let first = upload(&srv.url, &srv.pool, "node-a", &a).await;
    let lacked = |line: &str| -> (usize, usize, usize) {
        let at = line.find(" IR blobs the server lacked (").unwrap_or_else(|| panic!("{line}"));
        let head: Vec<&str> = line[..at].rsplit(' ').take(3).collect(); // [total, "of", sent]
        let proven = line[at..].split('(').nth(1).unwrap().split(' ').next().unwrap();
        (head[2].parse().unwrap(), head[0].parse().unwrap(), proven.parse().unwrap())
    };
    let (sent_a, total_a, proven_a) = lacked(&first);
    assert!(total_a > 100, "{first}");
    assert_eq!((sent_a, proven_a), (total_a, 0), "the first node sends every text: {first}");
    let second = upload(&srv.url, &srv.pool, "node-b", &b).await;
    let (whole_b, _, kib_b) = sent(&second);
    let group_files = walk_files(&b).iter().filter(|f| f.starts_with("__grp__")).count();
    assert!(whole_b >= group_files && group_files > 100, "entries with a group file are new facts: {second}");
    // the rewritten group files are new texts; every other text is proven, not sent
    let (sent_b, total_b, proven_b) = lacked(&second);
    assert_eq!((sent_b, proven_b), (group_files, total_b - group_files), "{second}");
    let (_, _, kib_a) = sent(&first);
    println!("node-a {kib_a:.1} KiB with {total_a} texts; node-b {kib_b:.1} KiB, {proven_b} texts proven");
    assert!(kib_b * 3.0 < kib_a, "{kib_b} KiB vs {kib_a} KiB");
    // node-b's IR reads back as its files say
    let texts: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT e.root, e.dir, f.name FROM entry_rows e JOIN entry_files f ON f.entry_id = e.id
         JOIN machines m ON m.id = e.machine_id WHERE m.name = 'node-b' AND f.ext IN ('ttir', 'ptx', 'llir')",
    )
    .fetch_all(&srv.pool)
    .await
    .unwrap();
    assert!(texts.len() > 100);
    for (root, dir, name) in &texts {
        let want = std::fs::read_to_string(Path::new(root).join(dir).join(name)).unwrap();
        let sha = sha256_file(&Path::new(root).join(dir).join(name));
        assert_eq!(cachelens::db::artifacts::blob(&srv.pool, &sha).await.unwrap().as_deref(), Some(want.as_str()));
    }

    // The endpoint itself, on an open upload of node-c.
    let token = cachelens::db::tokens::create(&srv.db, "node-c").await.unwrap();
    let begin = |client: &str| serde_json::json!({"format": 2, "client_id": client, "machine": "node-c", "root": "/c", "scanned_at": cachelens::db::now_ms()});
    let post = |path: String, body: serde_json::Value| {
        let (url, token) = (srv.url.clone(), token.clone());
        async move { crate::upload::post_raw(&url, &path, Some(&token), body.to_string().into_bytes(), false).await }
    };
    let (st, s1) = post("/api/v1/uploads".into(), begin("c-1")).await;
    assert_eq!(st, 200, "{s1}");
    let (_, s2) = post("/api/v1/uploads".into(), begin("c-2")).await;
    let (id, salt, other_salt) =
        (s1["upload_id"].as_i64().unwrap(), s1["salt"].as_str().unwrap(), s2["salt"].as_str().unwrap());
    assert_ne!(salt, other_salt, "each upload has its own salt");
    let (held_sha,): (String,) =
        sqlx::query_as("SELECT sha256 FROM blobs ORDER BY sha256 LIMIT 1").fetch_one(&srv.pool).await.unwrap();
    let text = cachelens::db::artifacts::blob(&srv.pool, &held_sha).await.unwrap().unwrap();
    let lacking = "0".repeat(64);
    let proof = |salt: &str, t: &str| cachelens::model::blob_proof(salt, t.as_bytes());
    let path = format!("/api/v1/uploads/{id}/proofs");
    for (proofs, held) in [
        (vec![(held_sha.clone(), proof(salt, &text))], vec![held_sha.clone()]),
        (vec![(held_sha.clone(), proof(salt, &format!("{text} ")))], vec![]),
        (vec![(held_sha.clone(), proof(other_salt, &text))], vec![]),
        (vec![(lacking.clone(), proof(salt, "anything"))], vec![]),
    ] {
        let (st, answer) = post(path.clone(), serde_json::json!({ "proofs": proofs })).await;
        assert_eq!(st, 200, "{answer}");
        assert_eq!(answer["held"], serde_json::json!(held), "{proofs:?}");
    }
    let (st, answer) = post(path.clone(), serde_json::json!({ "proofs": [["abc", "def"]] })).await;
    assert_eq!(st, 422, "{answer}");
}

/// What a server says of one machine's entries, as the entry page and the explainer read them:
/// the row with its files (`/api/v1/entries`), its texts with the group as that machine has it,
/// and the explainer's side and the dir its group names.
async fn seen_as(pool: &Store, machine: &str) -> Vec<(String, String)> {
    let store = cachelens::db::Db::from(pool.clone());
    let keys: Vec<String> = sqlx::query_scalar(
        "SELECT e.key FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE m.name = ? ORDER BY e.key",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut out = vec![];
    for k in keys {
        let row = cachelens::db::entries::entry(pool, machine, &k).await.unwrap().unwrap();
        let d = cachelens::db::entries::entry_detail(pool, row.id).await.unwrap();
        let l = cachelens::db::explain::load(&store, machine, &k).await.unwrap().unwrap();
        let texts = (&d.metadata_json, &d.group_json, &d.resources_json, &d.root, &d.dir);
        let seen = format!("{}\n{texts:?}\n{:?}\n{:?}", serde_json::to_string(&row).unwrap(), l.side, l.group_at);
        out.push((k, seen));
    }
    out
}

/// The same cache at two paths, each node's group files naming its own (as Triton writes
/// them; node-b's through a symlinked path, as `~/.triton -> /data/triton`): the second node's
/// entries are the first's facts (sent as `present`, no new texts or file lists stored), and
/// each node reads as a server that saw only it reads it: its own group paths and files, the
/// relocated entry relocated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_cache_at_another_path_is_one_fact_and_reads_as_its_own() {
    let was = "/tmp/corpus/h100-a/triton-cache";
    let (_a, a) = unpacked("h100-jit-3.6.0");
    let (tb, b) = unpacked("h100-jit-3.6.0");
    let (a, b) = (a.join("triton-cache"), b.join("triton-cache"));
    rewrite_group_files(&a, was);
    let link = tb.path().join("home-triton");
    std::os::unix::fs::symlink(&b, &link).unwrap();
    // one entry of node-b keeps the group it came with: relocated there, not on node-a
    let groups: Vec<std::path::PathBuf> = walk_paths(&b).into_iter().filter(|p| is_group(p)).collect();
    let kept = std::fs::read_to_string(&groups[0]).unwrap();
    rewrite_group_files_to(&b, was, &link);
    std::fs::write(&groups[0], &kept).unwrap();

    let srv = server(Config::default()).await;
    let first = upload(&srv.url, &srv.pool, "node-a", &a).await;
    assert_eq!(sent(&first).1, 0, "{first}");
    let stored = |pool: Store| async move {
        (count(&pool, "SELECT COUNT(*) FROM fact_texts").await, count(&pool, "SELECT COUNT(*) FROM fact_files").await)
    };
    let before = stored(srv.pool.clone()).await;
    let second = upload(&srv.url, &srv.pool, "node-b", &b).await;
    let (whole_b, present_b, _) = sent(&second);
    let report = cachelens::collect::scan_report(&b, "x").unwrap();
    let content = report.entries.iter().filter(|e| e.facts_are_content()).count();
    let kernels = report.entries.iter().filter(|e| e.kind == cachelens::model::EntryKind::Kernel).count();
    let in_dir = report.entries.iter().filter(|e| e.group_in_dir().is_some()).count();
    assert!(kernels > 100 && in_dir + 1 == groups.len(), "{kernels} kernels, {in_dir} groups in their dir");
    // every entry but the relocated one is a fact the server holds from node-a
    assert_eq!((present_b, whole_b), (content - 1, report.entries.len() - content + 1), "{second}");
    let after = stored(srv.pool.clone()).await;
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, groups_files(&groups[0])), "only the relocated one");
    let (kib_a, kib_b) = (sent(&first).2, sent(&second).2);
    println!(
        "node-a {kib_a:.1} KiB, node-b {kib_b:.1} KiB: {present_b} of {} entries as present",
        report.entries.len()
    );

    // Each node as a server that saw only it says it.
    for (m, d) in [("node-a", &a), ("node-b", &b)] {
        let alone = server(Config::default()).await;
        upload(&alone.url, &alone.pool, m, d).await;
        let (both, one) = (seen_as(&srv.pool, m).await, seen_as(&alone.pool, m).await);
        assert_eq!(both.len(), report.entries.len());
        for (x, y) in both.iter().zip(&one) {
            assert_eq!(x, y, "{m}: an entry reads otherwise than on a server that saw only {m}");
        }
    }
    // node-b's groups name its own (symlinked) path; the kept one names where it came from
    let b_rows = seen_as(&srv.pool, "node-b").await;
    let link = link.to_string_lossy().into_owned();
    let own = b_rows.iter().filter(|(_, s)| s.contains(&format!("{link}/"))).count();
    assert_eq!(own, in_dir, "groups naming node-b's path");
    assert_eq!(b_rows.iter().filter(|(_, s)| s.contains(&format!("{was}/"))).count(), 1);
    let a_root = std::fs::canonicalize(&a).unwrap().to_string_lossy().into_owned();
    assert!(b_rows.iter().all(|(_, s)| !s.contains(&a_root)), "node-a's path shows on node-b");

    // An older client names these entries by their files alone (not what it read from them):
    // none is held, so it sends them whole (its rows are facts of their own, as the rows that
    // older clients stored keep theirs).
    let token = cachelens::db::tokens::create(&srv.db, "node-old").await.unwrap();
    let post = |path: String, body: serde_json::Value| {
        let (url, token) = (srv.url.clone(), token.clone());
        async move { crate::upload::post_raw(&url, &path, Some(&token), body.to_string().into_bytes(), false).await }
    };
    let begin = serde_json::json!({"format": 2, "client_id": "old-1", "machine": "node-old", "root": "/old",
                                   "scanned_at": cachelens::db::now_ms()});
    let (st, up) = post("/api/v1/uploads".into(), begin).await;
    assert_eq!(st, 200, "{up}");
    let old_digest = |e: &cachelens::model::Entry| {
        let files = e.artifacts.iter().map(|f| (f.name.as_str(), f.sha256.as_str()));
        cachelens::model::fact_digest(&e.key, e.kind.as_str(), files)
    };
    let asked: Vec<&cachelens::model::Entry> =
        report.entries.iter().filter(|e| e.facts_are_content() && !e.relocated()).collect();
    let facts: Vec<String> = asked.iter().map(|e| old_digest(e)).collect();
    let (st, answer) =
        post(format!("/api/v1/uploads/{}/facts", up["upload_id"]), serde_json::json!({ "facts": facts })).await;
    assert_eq!(st, 200, "{answer}");
    let missing: std::collections::HashSet<&str> =
        answer["missing"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(asked.len() > 100);
    for (e, f) in asked.iter().zip(&facts) {
        assert!(missing.contains(f.as_str()), "{}", e.key);
    }
}

fn walk_paths(root: &Path) -> Vec<std::path::PathBuf> {
    let dirs = std::fs::read_dir(root).unwrap().map(|d| d.unwrap().path());
    dirs.flat_map(|d| std::fs::read_dir(d).into_iter().flatten()).map(|f| f.unwrap().path()).collect()
}

fn is_group(p: &Path) -> bool {
    p.file_name().unwrap().to_string_lossy().starts_with("__grp__")
}

/// The number of files in the entry dir of the group file `g`.
fn groups_files(g: &Path) -> i64 {
    std::fs::read_dir(g.parent().unwrap()).unwrap().count() as i64
}

/// Every kernel page of the demo answers, whichever way a kernel's Inductor decisions are read
/// (from its choices, or from its entries when it has fewer entries than the fleet has choices:
/// that second read once still named the table from before facts and answered 500).
#[tokio::test]
async fn every_kernel_page_of_the_demo_answers() {
    let (_db, _work, pool) = crate::blobs::demo_db().await;
    let state = AppState::new(pool.clone(), Config::default());
    state.db.fresh_summaries().await.unwrap();
    let kernels: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT kernel FROM facts WHERE kernel IS NOT NULL ORDER BY kernel")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(kernels.iter().any(|k| k == "softmax_kernel"), "{kernels:?}");
    for k in &kernels {
        let (status, body) = get(&state, &format!("/kernels/{k}")).await;
        assert_eq!(status, 200, "/kernels/{k}: {}", &body[..body.len().min(300)]);
    }
}
