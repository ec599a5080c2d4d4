//! Shared test helpers: the real Triton caches of `demo/` (through the one corpus helper,
//! backend/test_corpus.rs), scanned into temp-file SQLite databases; requests to the app;
//! cache key names; skipping a test that needs a missing tool.
#![allow(dead_code)]

#[path = "../../backend/test_corpus.rs"]
mod test_corpus;

use cachelens::db::Store;
use cachelens::model::ScanSummary;
use cachelens::web::{AppState, Config};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// A copy of corpus archive `name` at `dest/<name>/...` (mtimes kept), for the test to change.
pub fn unpack(name: &str, dest: &Path) {
    test_corpus::copy_into(name, dest);
}

/// A temp dir with a copy of one corpus archive; returns (tempdir, path to `<name>/`).
pub fn unpacked(name: &str) -> (TempDir, PathBuf) {
    let t = TempDir::new().unwrap();
    let p = test_corpus::copy_into(name, t.path());
    (t, p)
}

/// Corpus archive `name`, unpacked once per test run and shared: read it, never change it.
pub fn corpus_read_only(name: &str) -> PathBuf {
    test_corpus::unpacked(name)
}

/// Whether the tests' databases are PostgreSQL's: `CACHELENS_TEST_STORE=postgres` makes each
/// [`fresh_db`] a new database on the test server (`CACHELENS_TEST_PG`), else an SQLite file.
pub fn on_postgres() -> bool {
    std::env::var("CACHELENS_TEST_STORE").is_ok_and(|s| s == "postgres")
}

/// A new, empty PostgreSQL database on the test server (`CACHELENS_TEST_PG`, which
/// `scripts/pg-temp.sh` starts): its URL. `None` (the test skipped, or failed by
/// [`skip_or_fail`]) when there is no test server.
pub async fn new_pg_database(prefix: &str) -> Option<String> {
    let Ok(base) = std::env::var("CACHELENS_TEST_PG") else {
        skip_or_fail("CACHELENS_TEST_PG is not set (scripts/pg-temp.sh starts a PostgreSQL and prints it)");
        return None;
    };
    let admin =
        sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&base).await.expect("the test PostgreSQL");
    let name = format!("{prefix}_{}_{:x}", std::process::id(), rand::random::<u64>());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&admin).await.unwrap();
    admin.close().await;
    Some(pg_database_url(&base, &name))
}

/// The URL of database `name` on the test server whose URL is `base` (`CACHELENS_TEST_PG`).
fn pg_database_url(base: &str, name: &str) -> String {
    match base.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => panic!("CACHELENS_TEST_PG {base:?} names no database"),
    }
}

/// The server's log on stderr when `RUST_LOG` asks for it (`RUST_LOG=cachelens=debug cargo test
/// … -- --nocapture`): an in-process 500's cause is logged, not answered.
pub fn log_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if std::env::var_os("RUST_LOG").is_some() {
        ONCE.call_once(|| {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_writer(std::io::stderr)
                .try_init();
        });
    }
}

/// A test's database dir: a temp dir, and on PostgreSQL ([`on_postgres`]) the test's own
/// database, dropped with it (a run of every test leaves no database behind: some hold 50,000
/// entries). Reads as its [`TempDir`].
pub struct DbDir {
    dir: TempDir,
    pg: Option<String>,
}

impl std::ops::Deref for DbDir {
    type Target = TempDir;
    fn deref(&self) -> &TempDir {
        &self.dir
    }
}

impl From<TempDir> for DbDir {
    fn from(dir: TempDir) -> DbDir {
        DbDir { dir, pg: None }
    }
}

impl Drop for DbDir {
    fn drop(&mut self) {
        let (Some(url), Ok(base)) = (self.pg.take(), std::env::var("CACHELENS_TEST_PG")) else { return };
        let Some((_, name)) = url.rsplit_once('/') else { return };
        let name = name.to_string();
        // a runtime of its own, on a thread of its own: a drop may run inside the test's runtime
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(async {
                let admin = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&base).await.ok()?;
                let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&admin).await.ok()?;
                admin.close().await;
                Some(())
            })
        });
        let _ = dropped.join();
    }
}

/// Where a fresh database is to be: `dir/test.db` (not created yet), or on PostgreSQL
/// ([`on_postgres`]) a new, empty database's URL, as a path (`--db` and `db::open` take a
/// `postgres://` URL as one; the dir is then empty), dropped with the dir. For a test that
/// starts the `cachelens` binary on its database.
pub async fn fresh_db_at() -> (DbDir, PathBuf) {
    log_from_env();
    let dir = TempDir::new().unwrap();
    match on_postgres() {
        true => {
            let url = new_pg_database("t").await.expect("CACHELENS_TEST_PG for CACHELENS_TEST_STORE=postgres");
            (DbDir { dir, pg: Some(url.clone()) }, PathBuf::from(url))
        }
        false => {
            let at = dir.path().join("test.db");
            (dir.into(), at)
        }
    }
}

/// [`fresh_db_at`] for a test that is not async.
pub fn fresh_db_at_blocking() -> (DbDir, PathBuf) {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(fresh_db_at())
}

/// A fresh database: a temp file, or on PostgreSQL a new database ([`on_postgres`]; the dir
/// is then empty, and the database is dropped with it). [`db_at`] says where it is.
pub async fn fresh_db() -> (DbDir, Store) {
    let (t, at) = fresh_db_at().await;
    let pool = cachelens::db::open(&at).await.unwrap();
    (t, pool)
}

/// A fresh SQLite file `dir/test.db`, whatever `CACHELENS_TEST_STORE` says: for the tests of
/// the SQLite file itself (backups, a copy from a file, old files migrated).
pub async fn sqlite_db() -> (DbDir, Store) {
    let t = TempDir::new().unwrap();
    let pool = cachelens::db::open(&t.path().join("test.db")).await.unwrap();
    (t.into(), pool)
}

/// Whether nothing was written at `at` (a [`fresh_db_at`]): no file there, or on PostgreSQL a
/// database without a table (looked at without migrating it).
pub async fn untouched(at: &Path) -> bool {
    if !cachelens::db::is_postgres(at) {
        return !at.exists();
    }
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&at.to_string_lossy()).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    n == 0
}

/// Whether the database at `at` holds `needle` anywhere: in its file's bytes, its WAL's
/// included (SQLite), or in a row of any table read as text (PostgreSQL).
pub async fn db_holds(at: &Path, needle: &str) -> bool {
    if !cachelens::db::is_postgres(at) {
        let mut all = std::fs::read(at).unwrap();
        for ext in ["db-wal", "db-shm"] {
            if let Ok(b) = std::fs::read(at.with_extension(ext)) {
                all.extend(b);
            }
        }
        return all.windows(needle.len()).any(|w| w == needle.as_bytes());
    }
    let pool = cachelens::db::open(at).await.unwrap();
    let mut found = false;
    for t in tables(&pool).await {
        let sql = format!("SELECT COUNT(*) FROM {t} r WHERE strpos(CAST(r AS TEXT), ?) > 0");
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(needle).fetch_one(&pool).await.unwrap();
        found |= n > 0;
    }
    pool.close().await;
    found
}

/// Where `pool`'s database is, to pass as a command's `--db` or to open again: its SQLite
/// file, or its PostgreSQL database's URL on the test server.
pub async fn db_at(pool: &Store) -> PathBuf {
    if let Some(file) = pool.file() {
        return file.to_path_buf();
    }
    let name: String = sqlx::query_scalar("SELECT CAST(current_database() AS TEXT)").fetch_one(pool).await.unwrap();
    let base = std::env::var("CACHELENS_TEST_PG").expect("CACHELENS_TEST_PG for a PostgreSQL store");
    PathBuf::from(pg_database_url(&base, &name))
}

/// The database's own tables (SQLite's and sqlx's left out), sorted: `sqlite_master` on
/// SQLite, the catalog of schema `public` on PostgreSQL.
pub async fn tables(pool: &Store) -> Vec<String> {
    let sql = match pool.kind() {
        cachelens::db::Kind::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
               AND name <> '_sqlx_migrations' ORDER BY name"
        }
        cachelens::db::Kind::Postgres => {
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables
             WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> '_sqlx_migrations'
             ORDER BY 1"
        }
    };
    sqlx::query_scalar(sql).fetch_all(pool).await.unwrap()
}

/// `table`'s columns, in order (`pragma_table_info` on SQLite, the catalog on PostgreSQL).
pub async fn columns(pool: &Store, table: &str) -> Vec<String> {
    let sql = match pool.kind() {
        cachelens::db::Kind::Sqlite => "SELECT name FROM pragma_table_info(?) ORDER BY cid",
        cachelens::db::Kind::Postgres => {
            "SELECT CAST(column_name AS TEXT) FROM information_schema.columns
             WHERE table_schema = 'public' AND table_name = ? ORDER BY ordinal_position"
        }
    };
    sqlx::query_scalar(sql).bind(table).fetch_all(pool).await.unwrap()
}

/// SQL quoting `expr`'s value as a literal, NULL as `NULL`: SQLite's `quote()`, PostgreSQL's
/// `quote_nullable()` (the two spell numbers differently: compare within one store).
pub fn quoted(pool: &Store, expr: &str) -> String {
    match pool.kind() {
        cachelens::db::Kind::Sqlite => format!("quote({expr})"),
        cachelens::db::Kind::Postgres => format!("quote_nullable({expr})"),
    }
}

/// A row's identity in its table, which changes when the row is written again (deleted and
/// inserted, or on PostgreSQL updated): (the value as text, what to order by). SQLite's
/// `rowid`; PostgreSQL's `ctid`, its row version's place.
pub fn row_identity(pool: &Store) -> (&'static str, &'static str) {
    match pool.kind() {
        cachelens::db::Kind::Sqlite => ("CAST(rowid AS TEXT)", "rowid"),
        cachelens::db::Kind::Postgres => ("CAST(ctid AS TEXT)", "ctid"),
    }
}

/// Scan `(machine, archive, subdir)` triples into one fresh database. Archives of the same
/// machine listed one after another are unpacked into the same path (an in-place upgrade).
pub async fn corpus_db(plan: &[(&str, &str, &str)]) -> (Vec<DbDir>, Store) {
    let (dbdir, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let mut keep = vec![dbdir];
    let mut slot: Option<(String, TempDir)> = None;
    for (machine, archive, sub) in plan {
        let t = match slot.take() {
            Some((m, t)) if m == *machine => t,
            Some((_, t)) => {
                keep.push(t.into());
                TempDir::new().unwrap()
            }
            None => TempDir::new().unwrap(),
        };
        let fixed = t.path().join("cache");
        let _ = std::fs::remove_dir_all(&fixed);
        let staging = t.path().join("staging");
        let _ = std::fs::remove_dir_all(&staging);
        unpack(archive, &staging);
        std::fs::rename(staging.join(archive), &fixed).unwrap();
        cachelens::collect::scan_local(&store, &fixed.join(sub), machine).await.unwrap();
        slot = Some((machine.to_string(), t));
    }
    if let Some((_, t)) = slot {
        keep.push(t.into());
    }
    (keep, pool)
}

/// The standard fleet used by page and API tests: every corpus archive, as the demo loads it.
pub async fn fleet() -> (Vec<DbDir>, AppState) {
    let (keep, pool) = fleet_db().await;
    (keep, AppState::new(pool, Config::default()))
}

/// The database of [`fleet`] (the first dir kept holds it, as `test.db`).
pub async fn fleet_db() -> (Vec<DbDir>, Store) {
    corpus_db(&[
        ("h100-a", "h100-jit-3.6.0", "triton-cache"),
        ("h100-b", "h100-inductor-3.6.0", "inductor"),
        ("h100-c", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
        ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
        ("a100-1", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
        ("mi300-1", "mi300-upgrade-1-triton-3.6.0", "triton-cache"),
        ("mi300-1", "mi300-upgrade-2-triton-3.9.0", "triton-cache"),
    ])
    .await
}

/// GET `uri` through `app(state).oneshot` with extra request headers; returns (status, body text).
/// A 202 with `Retry-After` (an invalidation report still being computed) is asked again, as the
/// page itself does in a browser, until it answers otherwise (60 s at most).
pub async fn get_with(state: &AppState, uri: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let t = std::time::Instant::now();
    loop {
        let (status, body, retry) = get_once(state, uri, headers).await;
        if !(status == 202 && retry && t.elapsed() < std::time::Duration::from_secs(60)) {
            return (status, body);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// One GET: (status, body text, whether it said `Retry-After`).
pub async fn get_once(state: &AppState, uri: &str, headers: &[(&str, &str)]) -> (u16, String, bool) {
    use tower::ServiceExt;
    let mut req = axum::http::Request::builder().uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = cachelens::web::app(state.clone()).oneshot(req.body(axum::body::Body::empty()).unwrap()).await.unwrap();
    let status = resp.status().as_u16();
    let retry = resp.headers().contains_key("retry-after");
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned(), retry)
}

/// GET `uri`; returns (status, body text).
pub async fn get(state: &AppState, uri: &str) -> (u16, String) {
    get_with(state, uri, &[]).await
}

/// GET with `HX-Request: true` (what htmx sends): (status, body).
pub async fn get_hx(state: &AppState, uri: &str) -> (u16, String) {
    get_with(state, uri, &[("HX-Request", "true")]).await
}

/// GET a JSON endpoint, asserting 200.
pub async fn get_json(state: &AppState, uri: &str) -> serde_json::Value {
    let (status, body) = get(state, uri).await;
    assert_eq!(status, 200, "GET {uri}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {uri}: not JSON ({e}): {body}"))
}

/// The cachelens binary built for this test run.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cachelens"))
}

/// A `cachelens serve` child process, killed when dropped.
pub struct Served(pub std::process::Child);
impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cmd` (a `cachelens serve … --listen 127.0.0.1:0`) and wait up to `wait_s` for the URL it
/// says it serves on.
pub fn spawn_served(mut cmd: std::process::Command, wait_s: u64) -> (Served, String) {
    use std::io::{BufRead, BufReader};
    let mut child = cmd.env_remove("CACHELENS_DB").stderr(std::process::Stdio::piped()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("on http://") {
                let _ = tx.send(line[at + 3..].trim().to_string());
            }
        }
    });
    let server = Served(child);
    let url = rx.recv_timeout(std::time::Duration::from_secs(wait_s)).expect("the server never said it is serving");
    (server, url)
}

/// A JSON array, or a panic that shows the value.
pub fn arr(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}"))
}

// ---------------------------------------------------------------------------------------------
// Cache key names, file digests, counting rows, skipping

pub fn sha256_file(p: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

/// Decode a cache key dir name to the hex sha256 it encodes, independently of the scanner:
/// base32 without padding (52 chars, 3.3+), urlsafe base64 (43 chars, 3.2), hex (64, 3.1).
pub fn key_to_hex(key: &str) -> Option<String> {
    fn bits(key: &str, width: u32, val: impl Fn(u8) -> Option<u32>) -> Option<Vec<u8>> {
        let (mut acc, mut n, mut out) = (0u64, 0u32, vec![]);
        for b in key.bytes() {
            acc = (acc << width) | u64::from(val(b)?);
            n += width;
            if n >= 8 {
                n -= 8;
                out.push((acc >> n) as u8);
                acc &= (1 << n) - 1;
            }
        }
        Some(out)
    }
    let bytes = match key.len() {
        52 => bits(key, 5, |b| match b {
            b'A'..=b'Z' => Some(u32::from(b - b'A')),
            b'2'..=b'7' => Some(u32::from(b - b'2') + 26),
            _ => None,
        })?,
        43 => bits(key, 6, |b| match b {
            b'A'..=b'Z' => Some(u32::from(b - b'A')),
            b'a'..=b'z' => Some(u32::from(b - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(b - b'0') + 52),
            b'-' => Some(62),
            b'_' => Some(63),
            _ => None,
        })?,
        64 => hex::decode(key).ok()?,
        _ => return None,
    };
    (bytes.len() == 32).then(|| hex::encode(bytes))
}

pub fn hex_to_b32(hexs: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let (mut acc, mut n, mut out) = (0u64, 0u32, String::new());
    for b in hex::decode(hexs).unwrap() {
        acc = (acc << 8) | u64::from(b);
        n += 8;
        while n >= 5 {
            n -= 5;
            out.push(A[((acc >> n) & 31) as usize] as char);
        }
    }
    if n > 0 {
        out.push(A[((acc << (5 - n)) & 31) as usize] as char);
    }
    out
}

pub fn hex_to_b64url(hexs: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let (mut acc, mut n, mut out) = (0u64, 0u32, String::new());
    for b in hex::decode(hexs).unwrap() {
        acc = (acc << 8) | u64::from(b);
        n += 8;
        while n >= 6 {
            n -= 6;
            out.push(A[((acc >> n) & 63) as usize] as char);
        }
    }
    if n > 0 {
        out.push(A[((acc << (6 - n)) & 63) as usize] as char);
    }
    out
}

pub async fn count(pool: &Store, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Is this dir name a Triton cache key (independent of the scanner's `is_key`)?
/// A test that cannot run here (a tool missing) fails, unless `CACHELENS_ALLOW_SKIP=1`: a
/// silent skip would pass in CI without checking anything.
pub fn skip_or_fail(why: &str) {
    if std::env::var("CACHELENS_ALLOW_SKIP").is_ok_and(|v| v == "1") {
        println!("SKIPPED (CACHELENS_ALLOW_SKIP=1): {why}");
    } else {
        panic!("cannot run: {why} (set CACHELENS_ALLOW_SKIP=1 to skip)");
    }
}

/// Scan `root` into `pool` as `machine` (the CLI's local scan).
pub async fn scan(pool: &Store, root: &Path, machine: &str) -> ScanSummary {
    let store = cachelens::db::Db::from(pool.clone());
    cachelens::collect::scan_local(&store, root, machine).await.unwrap()
}

/// Before a test runs an old migration again (its row deleted from `_sqlx_migrations`): the
/// migrations before 0046 read the wide `entries` table of their time, so a view of the same
/// columns stands in for it while they run ([`restore_presence`] puts the presence table back).
pub async fn stand_in_wide_entries(pool: &Store) {
    sqlx::raw_sql("ALTER TABLE entries RENAME TO entries_presence; CREATE VIEW entries AS SELECT * FROM entry_rows")
        .execute(pool)
        .await
        .unwrap();
}

/// Undo [`stand_in_wide_entries`], once the old migrations ran again.
pub async fn restore_presence(pool: &Store) {
    // one batch on one connection: a pooled connection that had not seen the view yet refused
    // the rename ("already another table ... with this name")
    sqlx::raw_sql("DROP VIEW entries; ALTER TABLE entries_presence RENAME TO entries").execute(pool).await.unwrap();
}

/// Facts whose file counts (`facts.files`, `facts.group_files`, kept when the fact is stored)
/// differ from a count of their files (`fact_files`): 0 when they were kept.
pub async fn fact_file_count_faults(pool: &cachelens::db::Store) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM facts f
         WHERE f.files IS NOT (SELECT COUNT(*) FROM fact_files ff WHERE ff.fact = f.fact)
            OR f.group_files IS NOT (SELECT COALESCE(SUM(CASE WHEN substr(ff.name, 1, 7) = '__grp__' THEN 1 ELSE 0 END), 0)
                                     FROM fact_files ff WHERE ff.fact = f.fact)",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Counters kept per presence row (by the row triggers on `entries`) that differ from a fresh
/// count of the live entries: facts whose live count (`fact_live`), grid cells on a machine whose
/// count (`variant_machines`), machines whose live count (`machine_counts`) and (machine,
/// kernel)s whose count (`entry_counts`) is off.
/// `[0, 0, 0, 0]` when they were kept.
pub async fn live_counter_faults(pool: &cachelens::db::Store) -> [i64; 4] {
    // a fact's live count, and its oldest and newest live entry where kept (NULL: to be looked up)
    let facts = "SELECT COUNT(*) FROM facts f LEFT JOIN fact_live l ON l.fact_id = f.id
                 WHERE l.live IS NOT (SELECT COUNT(*) FROM entries e WHERE e.fact_id = f.id AND e.removed_at IS NULL)
                    OR (l.live > 0 AND l.lo IS NOT NULL
                        AND l.lo IS NOT (SELECT MIN(e.id) FROM entries e WHERE e.fact_id = f.id AND e.removed_at IS NULL))
                    OR (l.live > 0 AND l.hi IS NOT NULL
                        AND l.hi IS NOT (SELECT MAX(e.id) FROM entries e WHERE e.fact_id = f.id AND e.removed_at IS NULL))";
    let cells = "SELECT COUNT(*) FROM (SELECT l.variant_id, e.machine_id, COUNT(*) AS n FROM entries e
                                       JOIN fact_live l ON l.fact_id = e.fact_id
                                       WHERE e.removed_at IS NULL AND l.variant_id IS NOT NULL GROUP BY 1, 2) c
                 FULL JOIN variant_machines vm ON vm.variant_id = c.variant_id AND vm.machine_id = c.machine_id
                 WHERE c.n IS NOT vm.live";
    let machines = "SELECT COUNT(*) FROM (SELECT machine_id, COUNT(*) AS n FROM entries WHERE removed_at IS NULL
                                          GROUP BY 1) c
                    FULL JOIN (SELECT * FROM machine_counts WHERE live != 0) k ON k.machine_id = c.machine_id
                    WHERE c.n IS NOT k.live";
    let kernels =
        "SELECT COUNT(*) FROM (SELECT e.machine_id, CASE WHEN f.kernel IS NOT NULL THEN 1 ELSE 0 END AS named, COALESCE(f.kernel, '') AS kernel,
                                                COUNT(*) AS n
                                         FROM entries e JOIN facts f ON f.id = e.fact_id WHERE e.removed_at IS NULL
                                         GROUP BY 1, 2, 3) c
                   FULL JOIN (SELECT * FROM entry_counts WHERE live != 0) k
                     ON k.machine_id = c.machine_id AND k.named = c.named AND k.kernel = c.kernel
                   WHERE c.n IS NOT k.live";
    let mut out = [0; 4];
    for (o, sql) in out.iter_mut().zip([facts, cells, machines, kernels]) {
        *o = sqlx::query_scalar(sql).fetch_one(pool).await.unwrap();
    }
    out
}

/// A new upload token for `machine` in the database file `db` (created and migrated if need be).
pub async fn token_for(db: &Path, machine: &str) -> String {
    let pool = cachelens::db::open(db).await.unwrap();
    let store = cachelens::db::Db::from(pool.clone());
    let t = cachelens::db::tokens::create(&store, machine).await.unwrap();
    pool.close().await;
    t
}

/// `cachelens db backup --db DB --to TO`, to run.
pub fn backup_cmd(db: &Path, to: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(bin());
    c.args(["db", "backup", "--db"]).arg(db).arg("--to").arg(to);
    c
}
