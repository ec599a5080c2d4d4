//! IR text compressed at rest (migration 0030, `db/blobs.rs`): the demo corpus's texts stored
//! compressed and read back byte for byte, a database made before the migration (plain rows)
//! answering the same after it, and the Inductor module rule moved out of SQL.

use crate::common::*;
use cachelens::db::Store;
use cachelens::db::blobs::{self, Stored};
use cachelens::web::{AppState, Config};
use sha2::{Digest, Sha256};
use sqlx::Row;
use std::path::Path;
use tempfile::TempDir;

/// The whole demo (every archive, as `serve --demo` loads it) in a fresh database:
/// (database dir, the caches' dir, pool).
pub(crate) async fn demo_db() -> (crate::common::DbDir, TempDir, Store) {
    demo_in(fresh_db().await).await
}

/// [`demo_db`] in the database given (dir, pool).
pub(crate) async fn demo_in((dbdir, pool): (crate::common::DbDir, Store)) -> (crate::common::DbDir, TempDir, Store) {
    let store = cachelens::db::Db::from(pool.clone());
    let work = TempDir::new().unwrap();
    cachelens::demo::load(&store, work.path()).await.unwrap();
    (dbdir, work, pool)
}

/// Every blob row decoded through the one reader: (sha256, bytes column, text).
async fn all_texts(pool: &Store) -> Vec<(String, i64, String)> {
    let sql = format!("SELECT b.sha256, {} FROM blobs b ORDER BY b.sha256", blobs::COLUMNS);
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(pool).await.unwrap();
    rows.iter()
        .map(|r| {
            let s = Stored::from_row(r).unwrap();
            (r.get(0), s.bytes, s.text().unwrap())
        })
        .collect()
}

/// The totals of `blobs` counted afresh (texts, bytes, stored, plain).
async fn fresh_totals(pool: &Store) -> (i64, i64, i64, i64) {
    sqlx::query_as(
        "SELECT COUNT(*), COALESCE(SUM(bytes), 0), COALESCE(SUM(COALESCE(length(z), bytes)), 0),
                COUNT(content) FROM blobs",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Turn the database into what it was before migration 0030: `blobs` with plain, NOT NULL
/// `content`, and 0030 not applied (the next open applies it).
async fn back_to_plain_rows(pool: &Store) {
    let texts = all_texts(pool).await;
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("CREATE TABLE blobs_old (sha256 TEXT PRIMARY KEY, bytes INTEGER NOT NULL, content TEXT NOT NULL)")
        .execute(&mut *tx)
        .await
        .unwrap();
    for (sha, bytes, text) in &texts {
        sqlx::query("INSERT INTO blobs_old(sha256, bytes, content) VALUES (?, ?, ?)")
            .bind(sha)
            .bind(bytes)
            .bind(text)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    sqlx::raw_sql(
        "DROP TABLE blobs; ALTER TABLE blobs_old RENAME TO blobs;
         DELETE FROM _sqlx_migrations WHERE version IN (30, 49)",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

/// One stored artifact of each distinct text that still sits on disk as it was scanned:
/// (machine, key, artifact name, the file's bytes).
async fn on_disk(pool: &Store) -> Vec<(String, String, String, Vec<u8>)> {
    let rows: Vec<(String, String, String, String, String, String)> = sqlx::query_as(
        "SELECT m.name, e.key, e.root, e.dir, a.name, a.sha256 FROM entry_files a
         JOIN entry_rows e ON e.id = a.entry_id JOIN machines m ON m.id = e.machine_id
         WHERE e.removed_at IS NULL AND a.sha256 IN (SELECT sha256 FROM blobs)
         ORDER BY a.sha256, m.name, e.key, a.name",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    for (m, key, root, dir, name, sha) in rows {
        if seen.contains(&sha) {
            continue;
        }
        let Ok(bytes) = std::fs::read(Path::new(&root).join(&dir).join(&name)) else { continue };
        if sha256(&bytes) == sha {
            seen.insert(sha);
            out.push((m, key, name, bytes));
        }
    }
    out
}

#[tokio::test]
async fn demo_ir_is_stored_compressed_and_reads_back_as_written() {
    let (_db, _work, pool) = demo_db().await;
    // every row written compressed, none plain
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM blobs WHERE z IS NULL OR content IS NOT NULL").await, 0);
    let texts = all_texts(&pool).await;
    assert!(texts.len() > 500, "{} texts", texts.len());
    for (sha, bytes, text) in &texts {
        assert_eq!((sha256(text.as_bytes()), text.len() as i64), (sha.clone(), *bytes));
    }
    // the IR viewer's raw text is the file's, byte for byte
    let state = AppState::new(pool.clone(), Config::default());
    let files = on_disk(&pool).await;
    assert!(files.len() * 10 > texts.len() * 9, "{} of {} texts found on disk", files.len(), texts.len());
    for (m, key, name, bytes) in &files {
        let (status, body) = get(&state, &format!("/entries/{m}/{key}/raw/{}", cachelens::fmt::enc(name))).await;
        assert_eq!(status, 200, "{m}:{key}/{name}");
        assert!(body.as_bytes() == bytes.as_slice(), "{m}:{key}/{name}: raw text differs from the file");
    }
    // stored: at most 1/5 of the text (measured: 1/11.2 at zstd level 1)
    let t = blobs::totals(&pool).await.unwrap();
    assert_eq!(fresh_totals(&pool).await, (t.texts, t.bytes, t.stored, t.plain), "the kept totals are a fresh count");
    let ratio = t.bytes as f64 / t.stored as f64;
    let ir: (i64, i64) = sqlx::query_as(
        "SELECT SUM(bytes), SUM(length(z)) FROM blobs WHERE sha256 IN
         (SELECT sha256 FROM entry_files WHERE ext IN ('source', 'ttir', 'ttgir', 'llir', 'ptx', 'amdgcn'))",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    println!(
        "demo blobs: {} texts, {} bytes as written, {} stored: 1/{ratio:.2}; IR files alone {} -> {}: 1/{:.2}",
        t.texts,
        t.bytes,
        t.stored,
        ir.0,
        ir.1,
        ir.0 as f64 / ir.1 as f64
    );
    assert_eq!((t.texts, t.plain), (texts.len() as i64, 0));
    assert!(ratio >= 5.0, "stored 1/{ratio:.2} of the text");
    assert!(ir.0 as f64 / ir.1 as f64 >= 5.0);
    // the machine page says what is kept
    let (_, page) = get(&state, "/machines/a100-1").await;
    let kept = format!(
        "{} distinct texts, {} as written, {} stored compressed",
        t.texts,
        cachelens::fmt::bytes(t.bytes),
        cachelens::fmt::bytes(t.stored)
    );
    assert!(page.contains(&kept), "{kept:?} not on the machine page");
    assert!(page.contains("are hashed and listed, not stored"));
}

/// Answers that read blob text: the IR viewer (page and raw), compare's IR diff (page and API),
/// the explainer's reports, nearest (IR texts by sha256), autotune results (`.autotune.json`).
pub(crate) async fn answers(state: &AppState, pool: &Store) -> Vec<(String, String)> {
    let mut uris = vec![];
    // two entries of each kernel (other machines or releases): compared, with their IR diff
    let pairs: Vec<(String, String)> = sqlx::query_as(
        "SELECT MIN(m.name || ':' || e.key), MAX(m.name || ':' || e.key) FROM entry_rows e JOIN machines m ON m.id = e.machine_id
         WHERE e.kind = 'kernel' GROUP BY e.kernel HAVING COUNT(*) > 1 ORDER BY e.kernel LIMIT 12",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(pairs.len() >= 8, "{pairs:?}");
    for (a, b) in &pairs {
        let (a, b) = (cachelens::fmt::enc(a), cachelens::fmt::enc(b));
        uris.push(format!("/compare?a={a}&b={b}"));
        uris.push(format!("/api/v1/compare?a={a}&b={b}"));
    }
    let arts: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT m.name, e.key, a.name, a.ext FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id
         JOIN machines m ON m.id = e.machine_id WHERE a.sha256 IN (SELECT sha256 FROM blobs)
         ORDER BY a.sha256, m.name, e.key, a.name LIMIT 40",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (m, key, name, ext) in &arts {
        uris.push(format!("/entries/{m}/{key}/raw/{}", cachelens::fmt::enc(name)));
        uris.push(format!("/entries/{m}/{key}?ir={}", cachelens::fmt::enc(ext)));
        uris.push(format!("/entries/{m}/{key}/nearest"));
    }
    uris.push("/api/v1/invalidations?a=h100-a&b=h100-c".into());
    uris.push("/api/v1/invalidations?a=a100-1&b=h100-a".into());
    uris.push("/api/v1/autotune?limit=1000".into());
    uris.push("/autotune?machine=h100-a".into());
    let mut out = vec![];
    for u in uris {
        let (status, body) = get(state, &u).await;
        assert_eq!(status, 200, "{u}: {body}");
        out.push((u, body));
    }
    out
}

#[tokio::test]
async fn a_database_made_before_0030_reads_the_same_after_it() {
    // an SQLite file whatever the tests' store: SQLite's migration 0030 runs on it again
    let (db, _work, pool) = demo_in(sqlite_db().await).await;
    let before = answers(&AppState::new(pool.clone(), Config::default()), &pool).await;
    let modules = count(&pool, "SELECT COUNT(*) FROM fact_modules").await;
    let texts = all_texts(&pool).await;
    back_to_plain_rows(&pool).await;
    pool.close().await;
    // the migration keeps the plain rows as they are (SQL cannot compress them)
    let pool = cachelens::db::open(&db.path().join("test.db")).await.unwrap();
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM blobs WHERE content IS NOT NULL AND z IS NULL").await,
        texts.len() as i64
    );
    assert_eq!(all_texts(&pool).await, texts);
    let state = AppState::new(pool.clone(), Config::default());
    let after = answers(&state, &pool).await;
    assert_eq!(before.len(), after.len());
    for ((u, a), (_, b)) in before.iter().zip(&after) {
        assert!(a == b, "{u}: the answer changed with plain rows");
    }
    // a later scan writes compressed rows beside the plain ones: an Inductor cache whose every
    // text file gained a line (new texts), its modules still linked
    let (_t, cache) = unpacked("h100-inductor-3.6.0");
    let mut changed = 0;
    for f in walk(&cache.join("inductor")) {
        let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ["ttir", "source", "ttgir", "llir", "ptx"].contains(&ext) {
            let mut t = std::fs::read_to_string(&f).unwrap();
            t.push_str("// copied\n");
            std::fs::write(&f, t).unwrap();
            changed += 1;
        }
    }
    assert!(changed > 50, "{changed}");
    scan(&pool, &cache.join("inductor"), "late").await;
    let plain = count(&pool, "SELECT COUNT(*) FROM blobs WHERE content IS NOT NULL").await;
    let z = count(&pool, "SELECT COUNT(*) FROM blobs WHERE z IS NOT NULL").await;
    assert_eq!(plain, texts.len() as i64);
    assert!(z >= changed as i64 / 2, "{z} compressed rows");
    assert!(count(&pool, "SELECT COUNT(*) FROM fact_modules").await > modules, "the late machine's modules linked");
    let t = blobs::totals(&pool).await.unwrap();
    assert_eq!(fresh_totals(&pool).await, (t.texts, t.bytes, t.stored, t.plain), "plain and compressed rows counted");
    assert_eq!(t.plain, texts.len() as i64);
    let late = "SELECT COUNT(*) FROM entry_rows e JOIN fact_modules fm ON fm.fact_id = e.fact_id
                JOIN machines m ON m.id = e.machine_id WHERE m.name = 'late'";
    assert!(count(&pool, late).await > 50, "the late machine's entries reach their modules");
    for (sha, bytes, text) in all_texts(&pool).await {
        assert_eq!((sha256(text.as_bytes()), text.len() as i64), (sha, bytes));
    }
    let files = on_disk(&pool).await;
    assert!(files.iter().any(|f| f.0 == "late"));
    for (m, key, name, bytes) in files.iter().filter(|f| f.0 == "late") {
        let (_, body) = get(&state, &format!("/entries/{m}/{key}/raw/{}", cachelens::fmt::enc(name))).await;
        assert!(body.as_bytes() == bytes.as_slice(), "{m}:{key}/{name}");
    }
    let (_, page) = get(&state, "/machines/late").await;
    assert!(page.contains(&format!("{plain} of them written before compression, kept as plain text")));
}

/// Regular files below `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Migration 0016's SQL rule, as it ran on the plain text (its positions cast to INT, which
/// changes nothing on SQLite: PostgreSQL's substr takes 4-byte integers, its instr gives 8).
async fn module_by_sql(pool: &Store, text: &str) -> Option<String> {
    sqlx::query_scalar(
        "SELECT substr(l, p - 52, 52) FROM (
             SELECT l, CAST(instr(l, '.py\"') AS INT) AS p FROM (SELECT substr(?1, 1, CAST(instr(?1, char(10)) AS INT)) AS l))
         WHERE l LIKE '#loc = loc(\"%' AND p > 56 AND substr(l, p - 53, 1) = '/' AND substr(l, p - 56, 1) = '/'
           AND substr(l, p - 52, 1) = 'c' AND substr(l, p - 55, 2) = substr(l, p - 51, 2)",
    )
    .bind(text)
    .fetch_optional(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn inductor_module_rule_is_migration_0016s_sql() {
    let (_db, _work, pool) = demo_db().await;
    let sql = format!(
        "SELECT b.sha256, {} FROM blobs b WHERE b.sha256 IN (SELECT sha256 FROM entry_files WHERE ext IN ('source', 'ttir'))",
        blobs::COLUMNS
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&pool).await.unwrap();
    let mut texts: Vec<String> = rows.iter().map(|r| Stored::from_row(r).unwrap().text().unwrap()).collect();
    let real = texts.len();
    let module = "cabcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmno";
    assert_eq!(module.len(), 52);
    let m2 = &module[1..3];
    for t in [
        format!("#loc = loc(\"/tmp/torchinductor_u/{m2}/{module}.py\":18:0)\nmodule {{}}\n"),
        format!("#LOC = LOC(\"/tmp/é/{m2}/{module}.py\":18:0)\n"),
        format!("#loc = loc(\"/tmp/x/{m2}/{module}.py\":18:0)"),
        format!("#loc = loc(\"/tmp/x/zz/{module}.py\":18:0)\n"),
        format!("#loc = loc(\"/{m2}/{module}.py\":1:0)\n"),
        format!("#loc = loc(\"{m2}/{module}.py\":1:0)\n"),
        format!("#loc = loc(\"/tmp/éé/{m2}/{}.py\":1:0)\n", &module[..51]),
        "#loc = loc(\"/tmp/x.py\":1:0)\n".to_string(),
        String::new(),
    ] {
        texts.push(t);
    }
    let mut found = 0;
    for t in &texts {
        let line = t.find('\n').map(|i| t[..=i].to_string()).unwrap_or_default();
        let rust = cachelens::db::inductor::module_of_first_line(&line);
        assert_eq!(rust, module_by_sql(&pool, t).await, "{line:?}");
        found += rust.is_some() as usize;
    }
    assert!(real > 100 && found > 20, "{real} texts, {found} with a module");
    assert!(count(&pool, "SELECT COUNT(*) FROM fact_modules").await > 20);
}
