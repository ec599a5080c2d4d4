//! All SQL lives here, one module per thing stored: `entries`, `scans`, `artifacts` (and blobs),
//! `events` and their `history`, `summaries` (the `page_*` tables, rebuilt by `rebuild`),
//! `tokens`; `ingest` writes a scan, `explain` loads entries for the explainer. This module owns
//! pool setup (WAL, busy timeout, foreign keys), the migrator and the [`Db`] handle.

pub mod advice;
pub mod artifacts;
pub mod backup;
pub mod blobs;
pub mod classes;
pub mod copy;
pub mod decisions;
pub mod entries;
pub mod events;
pub mod explain;
pub mod hazards;
pub mod headline;
pub mod history;
pub mod history_agg;
pub mod inductor;
pub mod ingest;
pub(crate) mod json_rows;
pub mod keys;
pub mod keysets;
pub mod leases;
pub mod memo;
pub mod misses;
pub mod nearest;
pub mod prune;
pub mod rebuild;
pub mod reports;
pub mod retention;
pub mod scans;
pub mod stages;
pub mod staging;
pub mod summaries;
pub mod timeline;
pub mod tokens;
#[cfg(test)]
mod two_databases;
pub mod write;

pub mod dialect;
pub mod store;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
pub use store::{Conn, Flag, Kind, Pooled, Store, Tx};

/// One database: its pool and all the state kept per database (its writers' queue, the summary
/// rebuild's lock and timing, and its caches, each a [`crate::bounded::Bounded`]). Cheap to
/// clone; make one per database and clone it, so that every user of the database shares that
/// state while two databases in one process share nothing.
#[derive(Clone, Debug)]
pub struct Db {
    pool: Store,
    /// This process's writers, one at a time (see [`write`]).
    pub(crate) writers: Arc<tokio::sync::Mutex<()>>,
    summaries: Arc<rebuild::State>,
    memo: Arc<memo::Memo>,
    /// Triton `.autotune.json` texts parsed, by sha256 (see [`inductor::ParsedAutotune`]).
    pub(crate) parsed_autotune: Arc<inductor::ParsedAutotune>,
    /// Candidates' classes and sides of nearest-neighbour requests (see [`nearest::Cache`]).
    nearest: Arc<nearest::Cache>,
    /// IR texts by sha256 (see [`explain::Texts`]).
    pub(crate) texts: Arc<explain::Texts>,
    /// Machines' kernel key sets (see [`keysets::Kept`]).
    pub(crate) keysets: Arc<keysets::Kept>,
    /// IR texts prepared and line diffs made by the explainer (see [`crate::explain::Kept`]).
    explained: Arc<crate::explain::Kept>,
    /// Who this handle is when it claims a report's computation ([`leases`]).
    pub(crate) holder: Arc<str>,
}

impl Db {
    /// A handle on an open (migrated) pool.
    pub fn new(pool: Store) -> Db {
        Db {
            pool,
            writers: Arc::default(),
            summaries: Arc::default(),
            memo: Arc::default(),
            parsed_autotune: Arc::default(),
            nearest: Arc::default(),
            texts: Arc::default(),
            keysets: Arc::default(),
            explained: Arc::default(),
            holder: leases::holder(),
        }
    }

    /// What the explainer keeps for this database ([`crate::explain::Kept`]).
    pub fn explained(&self) -> &Arc<crate::explain::Kept> {
        &self.explained
    }

    /// How many entries each cache of this database holds now: (memo answers, parsed autotune
    /// texts, IR texts, key sets' machines, prepared texts, line diffs, nearest rows and sides).
    pub fn kept(&self) -> [usize; 8] {
        let (prepared, diffs) = self.explained.len();
        let (rows, sides) = self.nearest.kept();
        [
            self.memo.len(),
            self.parsed_autotune.len(),
            self.texts.len(),
            self.keysets.len(),
            prepared,
            diffs,
            rows,
            sides,
        ]
    }

    /// Open (creating and migrating if needed) the database at `path`.
    pub async fn open(path: &Path) -> anyhow::Result<Db> {
        Ok(Db::new(open(path).await?))
    }

    /// [`Db::open`] for a command that runs and exits (`cachelens scan`): one connection
    /// ([`Connections::Command`]).
    pub async fn open_command(path: &Path) -> anyhow::Result<Db> {
        Ok(Db::new(open_with(path, Connections::Command).await?))
    }

    /// What nearest-neighbour requests keep across requests (see [`nearest::Cache`]).
    pub fn nearest_cache(&self) -> &nearest::Cache {
        &self.nearest
    }

    /// The connection pool, for the query functions of the modules below.
    pub fn pool(&self) -> &Store {
        &self.pool
    }

    /// `compute`'s answer for `key`, kept while the database's [`memo::stamp`] stays the same
    /// (at most [`memo::TTL`]): see [`memo`].
    pub async fn memo<T, E, F>(&self, key: String, compute: F) -> Result<T, E>
    where
        T: Clone + Send + Sync + 'static,
        E: From<sqlx::Error>,
        F: std::future::Future<Output = Result<T, E>>,
    {
        let now = memo::stamp(&self.pool).await?;
        if let Some(v) = self.memo.get::<T>(&key, now) {
            return Ok(v);
        }
        let v = compute.await?;
        self.memo.put(key, now, v.clone());
        Ok(v)
    }

    /// Make the summary tables current before reading them (see [`rebuild::refresh`]).
    pub async fn fresh_summaries(&self) -> Result<(), rebuild::SummaryError> {
        rebuild::refresh(self).await
    }

    /// Bring the summary tables up to date now and wait for it, however long it takes (a page
    /// waits at most [`rebuild::refresh`]'s bound).
    pub async fn update_summaries(&self) -> sqlx::Result<()> {
        rebuild::rebuild_if_stale(self).await
    }

    /// Build every summary table again from the data, as a database's first build does (the
    /// repair path), and wait for it.
    pub async fn rebuild_summaries_whole(&self) -> sqlx::Result<()> {
        rebuild::rebuild_whole(self).await
    }

    /// Data landed (or the server started): rebuild the summary tables in the background now
    /// rather than on the next page (see [`rebuild::rebuild_soon`]).
    pub fn rebuild_soon(&self) {
        rebuild::rebuild_soon(self)
    }

    /// Compute in the background the classes of entries stored before migration 0025
    /// ([`classes::fill_pending`]); when some were, what nearest requests kept is dropped, so
    /// that they group by the new classes.
    pub fn fill_classes_soon(&self) {
        let (db, nearest) = (self.clone(), self.nearest.clone());
        tokio::spawn(async move {
            let t = std::time::Instant::now();
            let mut filled = 0;
            // A failed chunk (the write lock held past the busy timeout by a long ingest, say)
            // is tried again later: what was computed stays, the rest stays pending.
            for attempt in 1..=10 {
                match classes::fill_pending(&db).await {
                    Ok(n) => {
                        filled += n;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(attempt, "computing entry classes failed: {e}; trying again in 30 s");
                        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                    }
                }
            }
            if filled > 0 {
                tracing::info!(entries = filled, secs = t.elapsed().as_secs_f64(), "entry classes computed");
                nearest.clear();
            }
        });
    }
}

impl From<Store> for Db {
    fn from(pool: Store) -> Db {
        Db::new(pool)
    }
}

/// Paging for list endpoints: `limit` defaults to 100 and is capped at 10,000.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub limit: i64,
    pub offset: i64,
}

impl Page {
    /// Every row.
    pub const ALL: Page = Page { limit: i64::MAX, offset: 0 };

    pub fn new(limit: Option<i64>, offset: Option<i64>) -> Page {
        Page { limit: limit.unwrap_or(100).clamp(1, 10_000), offset: offset.unwrap_or(0).max(0) }
    }
}

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The migrations in `migrations-pg/` (PostgreSQL's spelling of the same schema), embedded.
pub static PG_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-pg");

/// Whether `path` names a PostgreSQL database (`postgres://…`) rather than a file.
pub fn is_postgres(path: &Path) -> bool {
    let text = path.to_string_lossy();
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// Whether the database `path` names exists: a file, or any PostgreSQL database (a missing one
/// is an error when it is opened).
pub fn exists(path: &Path) -> bool {
    is_postgres(path) || path.exists()
}

/// The embedded default database: `$XDG_DATA_HOME/cachelens/cachelens.db`, else
/// `~/.local/share/cachelens/cachelens.db`.
pub fn default_path() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("cachelens").join("cachelens.db")
}

/// How long a connection waits for another process's write lock (this process's writers queue
/// first, see [`write`]).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many connections a pool opens, each with its page cache (64 MiB at most) and its
/// thread (whose malloc arena keeps what the cache freed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connections {
    /// 8: a server's readers at once, besides its writer.
    Server,
    /// 1: a command's queries run one after another. With more, sqlx hands out its idle
    /// connections oldest first and opens another when a released one is not back yet, so one
    /// after the other they spread over several connections, each keeping a full page cache (a
    /// cold scan of 100,000 entries held its writer's while the advice filled another's: peak
    /// RSS 420 MB).
    ///
    /// Its commits do not checkpoint (`wal_autocheckpoint = 0`): SQLite copies the log into the
    /// database in the committing call once it is past 1,000 pages, and a cold scan's commit then
    /// copied its whole log (4 s for 100,000 entries) while the command waited. The command
    /// checkpoints itself: a scan copies the log on a connection of its own while its advice is
    /// read ([`checkpoint_beside`]), and empties it at its end (`collect::scan_local_opts`).
    Command,
}

/// Open (creating if needed) and migrate the database at `path` ([`Connections::Server`]).
///
/// WAL lets readers go on while one writer ingests; the busy timeout makes a second writer wait
/// instead of failing.
pub async fn open(path: &Path) -> anyhow::Result<Store> {
    open_with(path, Connections::Server).await
}

/// [`open`] with the pool `connections` says. `path` is an SQLite file, or a PostgreSQL
/// database's URL (`postgres://USER@HOST/DB`): see [`open_postgres`].
pub async fn open_with(path: &Path, connections: Connections) -> anyhow::Result<Store> {
    // `--db postgres://u@host/db` once made a file `./postgres:/u@host/db` and served it: a URL
    // of a store is refused here, before anything is created, unless it is PostgreSQL's.
    let text = path.to_string_lossy();
    if is_postgres(path) {
        return open_postgres(&text, connections).await;
    }
    if let Some((scheme, _)) = text.split_once("://")
        && !scheme.is_empty()
        && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
    {
        anyhow::bail!(
            "--db {text:?} is a URL of a {scheme:?} store, which this build does not have: \
             give the path of an SQLite file (e.g. --db team.db) or a postgres:// URL"
        );
    }
    open_sqlite(path, connections, BUSY_TIMEOUT).await
}

/// Open and migrate the SQLite file at `path`, its connections waiting `busy` for another
/// process's write lock.
pub(crate) async fn open_sqlite(path: &Path, connections: Connections, busy: Duration) -> anyhow::Result<Store> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    create_private(path)?;
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?.create_if_missing(true);
    let max = match connections {
        Connections::Server => 8,
        Connections::Command => 1,
    };
    // The Any driver opens SQLite from a URL, which carries no pragmas: each connection is
    // given them as it opens (the statement sqlx's own SQLite connect runs).
    let url = sqlx::ConnectOptions::to_url_lossy(&opts);
    let pragmas = pragma_statement(connections, busy);
    install_drivers();
    let pool = AnyPoolOptions::new()
        .max_connections(max)
        .after_connect(move |conn, _| {
            let pragmas = pragmas.clone();
            Box::pin(async move {
                sqlx::Executor::execute(&mut *conn, sqlx::AssertSqlSafe(pragmas)).await?;
                Ok(())
            })
        })
        .connect_with(quiet_when_slow(url.as_str().parse::<AnyConnectOptions>()?))
        .await?;
    MIGRATOR.run(&pool).await?;
    Ok(Store::sqlite(pool, path))
}

/// The statements that give a new SQLite connection its settings: WAL (readers go on while one
/// writer ingests), a busy timeout (a second writer waits instead of failing), foreign keys, a
/// page cache of 64 MiB, temporary tables in memory, and a log SQLite starts over cut back to
/// [`rebuild::CHECKPOINT_FROM`] (`rebuild::checkpoint`). A command's commits do not checkpoint
/// ([`Connections::Command`]).
fn pragma_statement(connections: Connections, busy: Duration) -> String {
    let mut s = format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = {}; \
         PRAGMA foreign_keys = ON; PRAGMA cache_size = -65536; PRAGMA journal_size_limit = {}; \
         PRAGMA temp_store = memory;",
        busy.as_millis(),
        rebuild::CHECKPOINT_FROM
    );
    if connections == Connections::Command {
        s.push_str(" PRAGMA wal_autocheckpoint = 0;");
    }
    s
}

/// Open and migrate the PostgreSQL database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`,
/// with `sslmode=` and `sslrootcert=` as libpq reads them). Its collation must order text
/// bytewise, as SQLite does (the first migration refuses any other); its functions named as SQLite's come
/// first on the search path (`migrations-pg/0062_sqlite_functions.sql`).
pub async fn open_postgres(url: &str, connections: Connections) -> anyhow::Result<Store> {
    install_drivers();
    let max = match connections {
        Connections::Server => 8,
        Connections::Command => 2,
    };
    let pool = AnyPoolOptions::new()
        .max_connections(max)
        .after_connect(|conn, _| {
            Box::pin(async move {
                // JIT compiles a plan's expressions when its estimated cost is high: ~2 s of LLVM
                // for a page's query of 1 ms once planned well, on every run (plans are cached,
                // compiled code is not). The queries here are short: none gains from it.
                sqlx::Executor::execute(&mut *conn, "SET search_path = public, pg_catalog").await?;
                sqlx::Executor::execute(&mut *conn, "SET jit = off").await?;
                Ok(())
            })
        })
        .connect_with(quiet_when_slow(url.parse::<AnyConnectOptions>()?))
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to {}: {e}", copy::redact(url)))?;
    PG_MIGRATOR.run(&pool).await?;
    Ok(Store::postgres(pool))
}

/// A statement over a second is logged at debug, not as sqlx's warning: a scan or a summary
/// update on a loaded machine runs such statements by design, and a command's stderr is its
/// user's (`CACHELENS_LOG=sqlx=debug` shows them).
fn quiet_when_slow(opts: AnyConnectOptions) -> AnyConnectOptions {
    sqlx::ConnectOptions::log_slow_statements(opts, log::LevelFilter::Debug, Duration::from_secs(1))
}

/// sqlx's Any driver with the two stores built in (once per process).
fn install_drivers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(sqlx::any::install_default_drivers);
}

/// Copy the write-ahead log into the database (a passive checkpoint: what no reader still needs)
/// on a connection of its own, beside the pool's work. Best effort: a failure leaves the log to
/// the next checkpoint.
pub async fn checkpoint_beside(pool: &Store) {
    use sqlx::Connection;
    if pool.kind() != Kind::Sqlite {
        return;
    }
    let t = std::time::Instant::now();
    let Ok(mut conn) = sqlx::AnyConnection::connect_with(&pool.any().connect_options()).await else { return };
    let done: sqlx::Result<(i64, i64, i64)> =
        sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(&mut conn).await;
    tracing::debug!(ms = t.elapsed().as_millis() as u64, ?done, "log copied beside");
    let _ = conn.close().await;
}

/// Create the database file readable by its owner only (0600) when it does not exist yet:
/// it holds every team's scans and the upload tokens' hashes. SQLite gives its -wal and -shm
/// files the same mode. An existing file keeps the mode its owner chose.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    /// The bundled SQLite is built as `.cargo/config.toml` asks: per-connection page caches (no
    /// process-wide LRU mutex) and no memory statistics (no mutex around every allocation). A
    /// build that lost those flags still works, only slower under concurrent readers: this test
    /// is what notices.
    #[tokio::test]
    async fn sqlite_is_built_without_process_wide_mutexes() {
        let dir = tempfile::TempDir::new().unwrap();
        let pool = super::open(&dir.path().join("t.db")).await.unwrap();
        let options: Vec<String> = sqlx::query_scalar("PRAGMA compile_options").fetch_all(&pool).await.unwrap();
        assert!(options.iter().any(|o| o == "THREADSAFE=1"), "{options:?}");
        assert!(!options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"), "{options:?}");
        assert!(options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"), "{options:?}");
    }
}
