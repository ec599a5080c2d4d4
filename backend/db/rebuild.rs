//! The summary tables (`page_*`, migrations 0002/0004/0008/0045): derived data that the dashboard
//! reads instead of aggregating every entry of the fleet per request. This module owns their
//! upkeep and the rule for when a page waits for it; `summaries` reads them.
//!
//! Kept as data arrives (0045): triggers on `entries` and `best_configs` mark the machines and
//! kernels a write touched (`page_dirty_machines`, `page_dirty_kernels`), in the writer's own
//! transaction. An update ([`stage_and_swap`]) sums again only the rows of those machines
//! (per-machine tables) and those kernels (grid cells, autotune timings, kernel totals), and
//! derives the fleet's few rows (bytes by type, filter choices) from per-machine rows. The whole
//! build from the data ([`REBUILD`], every machine and kernel) is the first build of a database
//! and the repair path (delete `page_stats_version`'s row).
//!
//! Sizes are summed with `TOTAL()` cast back to an integer: SQLite's `SUM()` fails on integer
//! overflow (two entries of `i64::MAX` bytes made every page 500), and a cast of a too-large
//! `TOTAL()` saturates at `i64::MAX`. Below 2^53 bytes (8 PiB) the figures are exact.

use super::Db;
use crate::db::Conn;
use std::sync::atomic::{AtomicU64, Ordering};

/// How long a page waits for a rebuild before it shows the previous figures. A small database
/// rebuilds in milliseconds (always fresh); a fleet of a million entries takes seconds, and a
/// page should not hang on it after every upload.
const WAIT_FOR_REBUILD: std::time::Duration = std::time::Duration::from_secs(2);

/// A page waits for a rebuild only where the last one took at most this long. Under a stream of
/// uploads the tables are stale again as soon as they are rebuilt; pages that waited up to 2 s
/// each time answered in 2 s (upload load test), so they show the figures of the last rebuild
/// while the next one runs.
const QUICK_REBUILD_MS: u64 = 300;

/// Data up to this many entries (the highest entry id) rebuilds within seconds (a rebuild reads
/// every live entry: ~27 s per million on the dev machine): a page waits for the first build of
/// such a database in full. Above it the first build of a fleet does not hold a page for half a
/// minute or more: the page waits [`WAIT_FOR_REBUILD`], then says the summary is being built
/// ([`SummaryError::Building`], a 503 that names the wait), and the build goes on in the
/// background. Landings start it at once ([`rebuild_soon`]), so it is normally done before the
/// first visit.
const SMALL_DATA: i64 = 100_000;

/// Rebuild state of one database, owned by its [`Db`] handle.
#[derive(Debug, Default)]
pub struct State {
    /// One rebuild at a time per database; readers go on reading the previous tables.
    running: tokio::sync::Mutex<()>,
    /// How long the last rebuild took (0: none yet).
    last_ms: AtomicU64,
    /// A background rebuild is queued (not yet started): landings meanwhile add no other.
    queued: std::sync::atomic::AtomicBool,
}

/// Why a page cannot read the summary tables.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    /// The tables were never built and the first build of this much data is under way.
    #[error(
        "the dashboard's summary of {entries} entries is being built for the first time (the last build took {last}); \
         this page answers once it is done"
    )]
    Building { entries: i64, last: String },
}

/// How long a background rebuild waits after the landing that queued it.
const LANDING_DEBOUNCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Start a rebuild in the background if none is queued: after a scan lands, and when a server
/// starts on stale tables, so that the next page finds them current instead of waiting.
pub fn rebuild_soon(db: &Db) {
    if db.summaries.queued.swap(true, Ordering::AcqRel) {
        return;
    }
    let d = db.clone();
    tokio::spawn(async move {
        // A burst of landings (a fleet's nodes uploading at once) makes one rebuild, not many.
        tokio::time::sleep(LANDING_DEBOUNCE).await;
        if let Err(e) = rebuild_if_stale(&d).await {
            tracing::warn!("background summary rebuild: {e}");
        }
    });
}

/// The summary tables and the temp-schema tables a rebuild stages them in. The rebuild
/// statements name the staging tables themselves, so no statement is rewritten.
const TABLES: &[(&str, &str)] = &[
    ("page_kernel_stats", "staged_kernel_stats"),
    ("page_kernel_totals", "staged_kernel_totals"),
    ("page_machine_stats", "staged_machine_stats"),
    ("page_ext_stats", "staged_ext_stats"),
    ("page_variant_cells", "staged_variant_cells"),
    ("page_kernel_identical", "staged_kernel_identical"),
    ("page_kernel_shared", "staged_kernel_shared"),
    ("page_autotune_configs", "staged_autotune_configs"),
    ("page_machine_kernels", "staged_machine_kernels"),
    ("page_machine_versions", "staged_machine_versions"),
    ("page_machine_days", "staged_machine_days"),
    ("page_choices", "staged_choices"),
    ("page_machine_ext", "staged_machine_ext"),
];

/// Tables with rows per machine: an update replaces the rows of the marked machines.
const PER_MACHINE: &[&str] = &[
    "page_autotune_configs",
    "page_kernel_stats",
    "page_machine_stats",
    "page_machine_kernels",
    "page_machine_versions",
    "page_machine_days",
    "page_machine_ext",
];

/// Tables with rows per kernel summed over the fleet: an update replaces the marked kernels' rows.
const PER_KERNEL: &[&str] = &["page_variant_cells", "page_kernel_identical", "page_kernel_shared"];

/// Staging tables only the whole build fills: an update derives these tables from the others
/// ([`DERIVE`]).
const WHOLE_ONLY: &[&str] = &["staged_kernel_totals", "staged_ext_stats", "staged_choices"];

/// After an update's per-machine and per-kernel rows are in (same write transaction): the rows
/// summed over machines, from the summary rows rather than the entries.
const DERIVE: &[&str] = &[
    "DELETE FROM page_kernel_totals WHERE kernel IN (SELECT kernel FROM temp.dirty_k)",
    "INSERT INTO page_kernel_totals(kernel, entries, machines, bytes, last_compiled)
     SELECT kernel, SUM(entries), COUNT(DISTINCT machine_id), CAST(TOTAL(bytes) AS INTEGER), MAX(last_compiled)
     FROM page_kernel_stats WHERE kernel IN (SELECT kernel FROM temp.dirty_k) GROUP BY kernel",
    "DELETE FROM page_ext_stats",
    "INSERT INTO page_ext_stats(ext, files, bytes)
     SELECT ext, SUM(files), CAST(TOTAL(bytes) AS INTEGER) FROM page_machine_ext GROUP BY ext",
    "DELETE FROM page_choices WHERE col = 'backend'
       AND NOT EXISTS (SELECT 1 FROM page_kernel_stats k WHERE k.backend = page_choices.value)",
    "DELETE FROM page_choices WHERE col = 'arch'
       AND NOT EXISTS (SELECT 1 FROM page_kernel_stats k WHERE k.arch = page_choices.value)",
    "DELETE FROM page_choices WHERE col = 'triton_version'
       AND NOT EXISTS (SELECT 1 FROM page_kernel_stats k WHERE k.triton_version = page_choices.value)",
    "INSERT OR IGNORE INTO page_choices(col, value)
     SELECT 'backend', backend FROM page_kernel_stats
     WHERE machine_id IN (SELECT machine_id FROM temp.dirty_m) AND backend IS NOT NULL
     UNION SELECT 'arch', arch FROM page_kernel_stats
     WHERE machine_id IN (SELECT machine_id FROM temp.dirty_m) AND arch IS NOT NULL
     UNION SELECT 'triton_version', triton_version FROM page_kernel_stats
     WHERE machine_id IN (SELECT machine_id FROM temp.dirty_m) AND triton_version IS NOT NULL",
];

/// Where a [`REBUILD`] statement selects the entries of some machines or kernels: nothing in the
/// whole build, the marked ones in an update.
const MARKS: &[(&str, &str)] = &[
    ("/*machines*/", "AND machine_id IN (SELECT machine_id FROM temp.dirty_m)"),
    ("/*e.machines*/", "AND e.machine_id IN (SELECT machine_id FROM temp.dirty_m)"),
    ("/*kernels*/", "AND kernel IN (SELECT kernel FROM temp.dirty_k)"),
    // the kernels whose set of live facts moved: summed from their facts ([`COUNTED`] sums the others)
    ("/*v.kernels*/", "AND v.kernel IN (SELECT kernel FROM temp.whole_k)"),
    ("/*e.kernels*/", "AND e.kernel IN (SELECT kernel FROM temp.dirty_k)"),
    // the autotune runs of the marked machines, from their entries (not from every run's row)
    (
        "FROM fact_autotune a CROSS JOIN entry_rows e ON e.fact_id = a.fact_id AND a.idx = 0",
        "FROM temp.dirty_m d CROSS JOIN entry_rows e ON e.machine_id = d.machine_id
         CROSS JOIN fact_autotune a ON a.fact_id = e.fact_id AND a.idx = 0",
    ),
];

/// A [`REBUILD`] statement as the whole build (`marked` false) or an update runs it; `None`:
/// not run by an update.
fn statement(sql: &str, marked: bool) -> Option<String> {
    if !marked && sql == COUNTED {
        return None;
    }
    if !marked {
        let mut s = sql.to_string();
        for (mark, _) in MARKS.iter().filter(|(m, _)| m.starts_with("/*")) {
            s = s.replace(mark, "");
        }
        return Some(s);
    }
    if WHOLE_ONLY.iter().any(|t| sql.contains(&format!("INSERT INTO temp.{t}("))) {
        return None;
    }
    let mut s = sql.to_string();
    for (mark, with) in MARKS {
        s = s.replace(mark, with);
    }
    Some(s)
}

/// The highest entry id: how much data a first build reads.
async fn max_entry_id(conn: &mut Conn<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar("SELECT COALESCE((SELECT MAX(id) FROM entry_rows), 0)").fetch_one(conn).await
}

/// Where the tables stand: (built once, changes marked since).
async fn standing(conn: &mut Conn<'_>) -> sqlx::Result<(bool, bool)> {
    sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM page_stats_version WHERE id = 1),
                EXISTS (SELECT 1 FROM page_dirty_machines) OR EXISTS (SELECT 1 FROM page_dirty_kernels)",
    )
    .fetch_one(conn)
    .await
    .map(|(super::Flag(built), super::Flag(dirty))| (built, dirty))
}

/// Make the summary tables current before a page reads them. Cheap when nothing changed (three
/// index look-ups). When changes are marked an update starts in the background; the page waits
/// for it up to [`WAIT_FOR_REBUILD`] (fully when the tables were never built, not at all when the
/// last update was slow), then reads whatever the tables hold: the previous figures until the
/// update commits.
pub async fn refresh(db: &Db) -> Result<(), SummaryError> {
    let (built, entries) = {
        let mut conn = db.pool().acquire().await?;
        match standing(&mut conn).await? {
            (true, false) => return Ok(()),
            (built, _) => (built, max_entry_id(&mut conn).await?),
        }
    };
    let state = &db.summaries;
    // No update yet in this process: judge by the size of the data.
    let quick = match state.last_ms.load(Ordering::Relaxed) {
        0 => entries <= SMALL_DATA,
        ms => ms <= QUICK_REBUILD_MS,
    };
    if built && !quick && state.running.try_lock().is_err() {
        return Ok(()); // the update under way serves the next pages; this one shows the last figures
    }
    let d = db.clone();
    // (waits for an update under way, then updates only if that one left changes marked)
    let task = tokio::spawn(async move { rebuild_if_stale(&d).await });
    let joined = match (built, quick) {
        (false, _) if entries <= SMALL_DATA => Ok(task.await),
        (false, _) => match tokio::time::timeout(WAIT_FOR_REBUILD, task).await {
            Ok(done) => Ok(done),
            Err(_) => {
                let ms = state.last_ms.load(Ordering::Relaxed);
                let last = if ms == 0 { "none yet".to_string() } else { format!("{:.0} s", ms as f64 / 1000.0) };
                return Err(SummaryError::Building { entries, last });
            }
        },
        (true, true) => tokio::time::timeout(WAIT_FOR_REBUILD, task).await,
        (true, false) => return Ok(()),
    };
    match joined {
        Ok(Ok(r)) => Ok(r?),
        Ok(Err(e)) => Err(sqlx::Error::Protocol(format!("summary rebuild task failed: {e}")).into()),
        Err(_) => {
            tracing::info!("summary tables are being rebuilt: serving the previous figures");
            Ok(())
        }
    }
}

/// Bring the summary tables up to date, unless another update already did: the whole build
/// when they were never built, else the marked machines and kernels only.
///
/// Locking: a whole build of a million entries takes 25-33 s. Run in a write transaction it
/// held SQLite's write lock that long, and an upload waiting for it (busy timeout 30 s) could
/// fail. So the sums are computed inside a read transaction (WAL: writers go on) into staging
/// tables in the connection's private `temp` schema (writing it takes no lock on the main
/// database), and only copying the results into the real tables takes the write lock, in one
/// short transaction (rows per kernel variant, not per entry), which an upload then waits out
/// well within its busy timeout. Pages read the old tables until it commits. An update does the
/// same for the marked machines and kernels only.
pub(crate) async fn rebuild_if_stale(db: &Db) -> sqlx::Result<()> {
    let _running = db.summaries.running.lock().await;
    // From here a landing queues the next background update: this one may not see its data.
    db.summaries.queued.store(false, Ordering::Release);
    let mut conn = db.pool().acquire().await?;
    let started = std::time::Instant::now();
    let result = stage_and_swap(&mut conn, db).await;
    // Drop the staging tables whatever happened: the connection goes back to the pool.
    let scratch =
        [("", "live_facts"), ("", "dup_binaries"), ("", "dup_code"), ("", "dirty_m"), ("", "dirty_k"), ("", "whole_k")];
    for (_, staged) in TABLES.iter().chain(&scratch) {
        let drop = format!("DROP TABLE IF EXISTS temp.{staged}");
        let _ = sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&mut *conn).await;
    }
    if let Some(whole) = result? {
        let ms = started.elapsed().as_millis() as u64;
        db.summaries.last_ms.store(ms, Ordering::Relaxed);
        tracing::info!(ms, whole, "summary tables brought up to date");
        // (a task of its own: a page waiting for the update does not wait for the checkpoint)
        tokio::spawn(checkpoint(db.clone()));
    }
    Ok(())
}

/// Build every summary table again from the data (the repair path: what the first build does),
/// and wait for it.
pub(crate) async fn rebuild_whole(db: &Db) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM page_stats_version").execute(db.pool()).await?;
    rebuild_if_stale(db).await
}

/// Claim the marks made so far: move the generation on and return the one they carry (and
/// older). Marks made from here carry the new one and outlive this update.
async fn claim(conn: &mut Conn<'_>, db: &Db) -> sqlx::Result<i64> {
    let turn = super::write::turn(db).await;
    let mut tx = conn.begin_write().await?;
    let (claimed,): (i64,) =
        sqlx::query_as("UPDATE page_gen SET gen = gen + 1 WHERE id = 1 RETURNING gen - 1").fetch_one(&mut *tx).await?;
    // the samples of the facts whose oldest or newest live entry went since (`fact_live_unknown`)
    sqlx::query(
        "UPDATE fact_live INDEXED BY fact_live_unknown
         SET lo = (SELECT MIN(e.id) FROM entries e INDEXED BY entries_live WHERE e.fact_id = fact_live.fact_id AND e.removed_at IS NULL),
             hi = (SELECT MAX(e.id) FROM entries e INDEXED BY entries_live WHERE e.fact_id = fact_live.fact_id AND e.removed_at IS NULL)
         WHERE live > 0 AND (lo IS NULL OR hi IS NULL)",
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    drop(turn);
    Ok(claimed)
}

/// Stage (read transaction) then swap (short write transaction). `None` when already current,
/// else whether it was the whole build.
async fn stage_and_swap(conn: &mut Conn<'_>, db: &Db) -> sqlx::Result<Option<bool>> {
    let (built, dirty) = standing(&mut *conn).await?;
    if built && !dirty {
        return Ok(None);
    }
    let claimed = claim(&mut *conn, db).await?;
    let marked = built;
    let mut read = conn.begin().await?;
    let entries = max_entry_id(&mut read).await?;
    for sql in [
        "CREATE TEMP TABLE IF NOT EXISTS dirty_m(machine_id INTEGER PRIMARY KEY)",
        "CREATE TEMP TABLE IF NOT EXISTS dirty_k(kernel TEXT PRIMARY KEY) WITHOUT ROWID",
        "CREATE TEMP TABLE IF NOT EXISTS whole_k(kernel TEXT PRIMARY KEY) WITHOUT ROWID",
        "DELETE FROM temp.dirty_m",
        "DELETE FROM temp.dirty_k",
        "DELETE FROM temp.whole_k",
    ] {
        sqlx::query(sql).execute(&mut *read).await?;
    }
    sqlx::query("INSERT INTO temp.dirty_m SELECT machine_id FROM page_dirty_machines WHERE gen <= ?")
        .bind(claimed)
        .execute(&mut *read)
        .await?;
    sqlx::query("INSERT INTO temp.dirty_k SELECT kernel FROM page_dirty_kernels WHERE gen <= ?")
        .bind(claimed)
        .execute(&mut *read)
        .await?;
    sqlx::query("INSERT INTO temp.whole_k SELECT kernel FROM page_dirty_kernels WHERE gen <= ? AND whole <> 0")
        .bind(claimed)
        .execute(&mut *read)
        .await?;
    for (live, staged) in TABLES {
        // (dropped first in case a failed rebuild left one on this connection)
        let drop = format!("DROP TABLE IF EXISTS temp.{staged}");
        sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&mut *read).await?;
        let sql = format!("CREATE TEMP TABLE {staged} AS SELECT * FROM main.{live} WHERE false");
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *read).await?;
    }
    for sql in REBUILD.iter().filter_map(|s| statement(s, marked)) {
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *read).await?;
    }
    read.commit().await?;
    let turn = super::write::turn(db).await;
    let mut tx = conn.begin_write().await?;
    // Another update (another server on this database) claimed later marks and wrote newer sums
    // of what this one read: keep them.
    let (applied,): (i64,) = sqlx::query_as("SELECT applied FROM page_gen WHERE id = 1").fetch_one(&mut *tx).await?;
    if applied >= claimed {
        return Ok(None);
    }
    // the facts' `dup` as the whole sums of their kernels found them
    sqlx::query(
        "UPDATE main.fact_live SET dup = s.dup FROM temp.live_facts s
         WHERE fact_live.fact_id = s.id AND fact_live.dup IS NOT s.dup",
    )
    .execute(&mut *tx)
    .await?;
    if marked {
        let tables = PER_MACHINE.iter().map(|t| (*t, "machine_id", "dirty_m"));
        let kernels =
            PER_KERNEL.iter().map(|t| (*t, "kernel", if *t == "page_kernel_shared" { "whole_k" } else { "dirty_k" }));
        for (live, col, marks) in tables.chain(kernels) {
            let staged = TABLES.iter().find(|(l, _)| *l == live).map(|(_, s)| *s).unwrap_or_default();
            let sql = format!("DELETE FROM main.{live} WHERE {col} IN (SELECT {col} FROM temp.{marks})");
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
            let sql = format!("INSERT INTO main.{live} SELECT * FROM temp.{staged}");
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
        }
        for sql in DERIVE {
            sqlx::query(*sql).execute(&mut *tx).await?;
        }
    } else {
        for (live, staged) in TABLES {
            sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM main.{live}"))).execute(&mut *tx).await?;
            let sql = format!("INSERT INTO main.{live} SELECT * FROM temp.{staged}");
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
        }
        sqlx::query(
            "INSERT INTO page_stats_version(id, max_scan_id, max_entry_id, built_at)
             VALUES (1, COALESCE((SELECT MAX(id) FROM scans), 0), ?, ?)
             ON CONFLICT(id) DO UPDATE SET max_scan_id = excluded.max_scan_id, max_entry_id = excluded.max_entry_id,
                                           built_at = excluded.built_at",
        )
        .bind(entries)
        .bind(super::now_ms())
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query("DELETE FROM page_dirty_machines WHERE gen <= ?").bind(claimed).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM page_dirty_kernels WHERE gen <= ?").bind(claimed).execute(&mut *tx).await?;
    sqlx::query("UPDATE page_gen SET applied = ? WHERE id = 1").bind(claimed).execute(&mut *tx).await?;
    tx.commit().await?;
    drop(turn);
    Ok(Some(!marked))
}

/// Copy the write-ahead log into the database and empty it, right after a rebuild, when it has
/// grown past [`CHECKPOINT_FROM`]. SQLite checkpoints on its own after each commit, but only up
/// to the oldest snapshot a reader still holds, and starts the log over only after one reached
/// its end: the rebuild reads one snapshot for minutes at a million entries, and with scans
/// landing all the while the log never started over (50 uploads of 50,000 entries into the
/// 1.25M-entry fleet: 8.4 GB of log after twelve, ~1.7 GB a minute, toward a full disk; every
/// page read also searches the log's index, `walFindFrame` 11 % of the server's time).
///
/// Two steps, so that writers do not wait on the copy: a passive checkpoint first, outside the
/// writers' turn (it copies what no reader still needs, seconds for GBs, and waits for no one);
/// then, in the writers' turn, a truncating one, which copies the few frames written meanwhile
/// and starts the log over once the readers of older snapshots are done, waiting for them at
/// most [`TRUNCATE_WAIT`]. Done in one step in the turn, with 5 s for the readers, writers
/// waited the whole copy and the 5 s each time a new rebuild's snapshot was already open (twice
/// in the first minutes of the load bench's routes: report stores waited, pages answered 202).
/// A log the truncation could not start over is started over by SQLite's next checkpoint once
/// those readers end, and cut to [`CHECKPOINT_FROM`] then (`journal_size_limit`, `db::open`).
async fn checkpoint(db: Db) {
    let pool = db.pool();
    let Some(file) = pool.file() else { return }; // PostgreSQL keeps its own log
    let wal = format!("{}-wal", file.display());
    if std::fs::metadata(&wal).map_or(true, |m| m.len() < CHECKPOINT_FROM) {
        return;
    }
    let t = std::time::Instant::now();
    let Ok(mut conn) = pool.acquire().await else { return };
    let copied: sqlx::Result<(i64, i64, i64)> =
        sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(&mut *conn).await;
    let passive_ms = t.elapsed().as_millis() as u64;
    let turn = super::write::turn(&db).await;
    let wait = format!("PRAGMA busy_timeout = {}", TRUNCATE_WAIT.as_millis());
    let _ = sqlx::query(sqlx::AssertSqlSafe(wait)).execute(&mut *conn).await;
    let done: sqlx::Result<(i64, i64, i64)> =
        sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(&mut *conn).await;
    drop(turn);
    let restore = format!("PRAGMA busy_timeout = {}", super::BUSY_TIMEOUT.as_millis());
    let _ = sqlx::query(sqlx::AssertSqlSafe(restore)).execute(&mut *conn).await;
    match (copied, done) {
        (Ok((_, log, copied)), Ok((busy, _, _))) => tracing::info!(
            log,
            copied,
            passive_ms,
            truncated = busy == 0,
            ms = t.elapsed().as_millis() as u64,
            "write-ahead log checkpointed after the rebuild"
        ),
        (Err(e), _) | (_, Err(e)) => tracing::warn!(error = %e, "checkpoint after the rebuild failed"),
    }
}

/// How long the truncating checkpoint waits for readers of older snapshots, in the writers' turn.
const TRUNCATE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// The log's size from which a rebuild checkpoints it (SQLite's own checkpoints keep it near
/// 4 MB when no reader holds an old snapshot).
pub(crate) const CHECKPOINT_FROM: u64 = 64 << 20;

/// The statements of a rebuild, in order (later staging tables read earlier ones). They read
/// the data tables and write only the staging tables of [`TABLES`].
const REBUILD: &[&str] = &[
    "INSERT INTO temp.staged_kernel_stats(kernel, machine_id, backend, arch, triton_version, entries, bytes, last_compiled)
     SELECT kernel, machine_id, backend, arch, triton_version, COUNT(*), CAST(TOTAL(bytes) AS INTEGER), MAX(created_at)
     FROM entry_rows WHERE removed_at IS NULL AND kernel IS NOT NULL /*machines*/
     GROUP BY kernel, machine_id, backend, arch, triton_version",
    "INSERT INTO temp.staged_kernel_totals(kernel, entries, machines, bytes, last_compiled)
     SELECT kernel, SUM(entries), COUNT(DISTINCT machine_id), CAST(TOTAL(bytes) AS INTEGER), MAX(last_compiled)
     FROM temp.staged_kernel_stats GROUP BY kernel",
    "INSERT INTO temp.staged_machine_stats(machine_id, entries, kernels, bytes, relocated, versions)
     SELECT e.machine_id, COUNT(*), COUNT(DISTINCT e.kernel), CAST(TOTAL(e.bytes) AS INTEGER), SUM(e.relocated),
            (SELECT GROUP_CONCAT(v, ',' ORDER BY v)
             FROM (SELECT DISTINCT triton_version AS v FROM temp.staged_kernel_stats k
                   WHERE k.machine_id = e.machine_id AND triton_version IS NOT NULL))
     FROM entry_rows e WHERE e.removed_at IS NULL /*e.machines*/ GROUP BY e.machine_id",
    "INSERT INTO temp.staged_ext_stats(ext, files, bytes)
     SELECT ext, SUM(files), CAST(TOTAL(bytes) AS INTEGER) FROM (
       SELECT a.ext, COUNT(*) AS files, TOTAL(a.bytes) AS bytes FROM artifacts a JOIN entry_rows e ON e.id = a.entry_id
       WHERE e.removed_at IS NULL GROUP BY a.ext
       UNION ALL
       -- a fact's files count once for each live entry holding them
       SELECT f.ext, SUM(n.live), TOTAL(f.bytes * n.live) FROM fact_files f
       JOIN (SELECT fact, COUNT(*) AS live FROM entry_rows WHERE removed_at IS NULL AND fact IS NOT NULL GROUP BY fact) n
         ON n.fact = f.fact
       GROUP BY f.ext
       UNION ALL
       -- a machine's own group file (its paths) where its size is not the fact's
       SELECT 'grp', 0, TOTAL(e.group_bytes - f.bytes) FROM entry_rows e
       JOIN fact_files f ON f.fact = e.fact AND f.ext = 'grp'
       WHERE e.removed_at IS NULL AND e.group_sha256 IS NOT NULL HAVING COUNT(*) > 0)
     GROUP BY ext",
    // The live facts of the kernels (`fact_live`, kept by triggers on `entries`): the cells are
    // summed from these, one row per distinct fact however many machines hold it, with the
    // machine code's digest stored when the fact was made (0052).
    "CREATE TEMP TABLE IF NOT EXISTS live_facts(id INTEGER PRIMARY KEY, kernel TEXT NOT NULL, key TEXT NOT NULL,
                                               variant_id INTEGER NOT NULL, live INTEGER NOT NULL, registers INTEGER,
                                               spills INTEGER, shared_bytes INTEGER, binary_sha256 TEXT, code TEXT,
                                               lo INTEGER, hi INTEGER, best INTEGER, dup INTEGER NOT NULL DEFAULT 0)",
    "DELETE FROM temp.live_facts",
    "INSERT INTO temp.live_facts
     SELECT f.id, v.kernel, f.key, v.id, l.live, f.registers, f.spills, f.shared_bytes, f.binary_sha256,
            l.code,
            -- (kept by the entries' triggers; looked up where a landing since the claim left them unknown)
            COALESCE(l.lo, (SELECT MIN(e.id) FROM entries e INDEXED BY entries_live WHERE e.fact_id = f.id AND e.removed_at IS NULL)),
            COALESCE(l.hi, (SELECT MAX(e.id) FROM entries e INDEXED BY entries_live WHERE e.fact_id = f.id AND e.removed_at IS NULL)),
            0, 0
     FROM variants v CROSS JOIN fact_live l INDEXED BY fact_live_variant ON l.variant_id = v.id AND l.live > 0
          CROSS JOIN facts f ON f.id = l.fact_id
     WHERE true /*v.kernels*/",
    // live entries an Inductor .best_config names, from the configs' side (few keys have one);
    // an entry of the fact has the fact's key, so its machine's config names it
    "UPDATE temp.live_facts SET best = (
         SELECT COUNT(DISTINCT b.machine_id) FROM best_configs b
         WHERE b.triton_cache_hash = live_facts.key
           AND EXISTS (SELECT 1 FROM entries e
                       WHERE e.fact_id = live_facts.id AND e.machine_id = b.machine_id AND e.removed_at IS NULL))
     WHERE key IN (SELECT triton_cache_hash FROM best_configs)",
    // binaries that two or more keys of a kernel share (pure key churn)
    "CREATE TEMP TABLE IF NOT EXISTS dup_binaries(kernel TEXT NOT NULL, sha TEXT NOT NULL, PRIMARY KEY (kernel, sha))
     WITHOUT ROWID",
    "DELETE FROM temp.dup_binaries",
    "INSERT INTO temp.dup_binaries(kernel, sha)
     SELECT kernel, binary_sha256 FROM temp.live_facts WHERE binary_sha256 IS NOT NULL
     GROUP BY kernel, binary_sha256 HAVING COUNT(DISTINCT key) > 1",
    // machine code that two or more keys of a kernel share (bytes may differ in debug info only)
    "CREATE TEMP TABLE IF NOT EXISTS dup_code(kernel TEXT NOT NULL, code TEXT NOT NULL, PRIMARY KEY (kernel, code))
     WITHOUT ROWID",
    "DELETE FROM temp.dup_code",
    "INSERT INTO temp.dup_code(kernel, code)
     SELECT kernel, code FROM temp.live_facts WHERE code IS NOT NULL GROUP BY kernel, code HAVING COUNT(DISTINCT key) > 1",
    // the facts' flags, which [`COUNTED`] sums while the kernel's live facts stay these (0059)
    "UPDATE temp.live_facts
     SET dup = CASE WHEN EXISTS (SELECT 1 FROM temp.dup_binaries d
                                 WHERE d.kernel = live_facts.kernel AND d.sha = live_facts.binary_sha256) THEN 1 ELSE 0 END
             + CASE WHEN EXISTS (SELECT 1 FROM temp.dup_code d
                                 WHERE d.kernel = live_facts.kernel AND d.code = live_facts.code) THEN 2 ELSE 0 END",
    // kept for the kernel's page on one machine (`kernel_cells_on.sql`, 0058)
    "INSERT INTO temp.staged_kernel_shared(kernel, what, digest)
     SELECT kernel, 'binary', sha FROM temp.dup_binaries UNION ALL SELECT kernel, 'code', code FROM temp.dup_code",
    // a cell names its variant, whose machines a page reads from its counters
    // (`variant_machines`, 0053: not written here, or a new node joining every cell would write
    // every cell's list again); its samples are its oldest and newest live entries, named by
    // machine and key
    "INSERT INTO temp.staged_variant_cells(kernel, backend, arch, triton_version, signature, shapes, num_warps, num_stages, kind,
                                    entries, machines, reg_min, reg_max, spill_min, spill_max, shared_min, shared_max,
                                    shared_binary, best_config, sample_min, sample_max, shared_code,
                                    sample_min_ref, sample_max_ref, variant_id)
     SELECT c.kernel, c.backend, c.arch, c.triton_version, c.signature, c.shapes, c.num_warps, c.num_stages, c.kind,
            c.entries, '', c.reg_min, c.reg_max, c.spill_min, c.spill_max, c.shared_min, c.shared_max, c.shared_binary, c.best_config,
            c.lo, c.hi, c.shared_code,
            (SELECT m.name || char(9) || k.key FROM entries e JOIN machines m ON m.id = e.machine_id
             JOIN keys k ON k.id = e.key_id WHERE e.id = c.lo),
            (SELECT m.name || char(9) || k.key FROM entries e JOIN machines m ON m.id = e.machine_id
             JOIN keys k ON k.id = e.key_id WHERE e.id = c.hi),
            c.variant_id
     FROM (SELECT v.id AS variant_id, v.kernel, v.backend, v.arch, v.triton_version, v.signature, v.shapes, v.num_warps,
                  v.num_stages, v.kind, SUM(l.live) AS entries, MIN(l.registers) AS reg_min, MAX(l.registers) AS reg_max,
                  MIN(l.spills) AS spill_min, MAX(l.spills) AS spill_max, MIN(l.shared_bytes) AS shared_min,
                  MAX(l.shared_bytes) AS shared_max,
                  SUM(CASE WHEN l.dup & 1 <> 0 THEN l.live ELSE 0 END) AS shared_binary,
                  SUM(l.best) AS best_config, MIN(l.lo) AS lo, MAX(l.hi) AS hi,
                  SUM(CASE WHEN l.dup & 2 <> 0 THEN l.live ELSE 0 END) AS shared_code
           FROM temp.live_facts l JOIN variants v ON v.id = l.variant_id GROUP BY v.id) c",
    COUNTED,
    "INSERT INTO temp.staged_kernel_identical(kernel, identical, same_code)
     SELECT kernel, SUM(shared_binary), SUM(shared_code) FROM temp.staged_variant_cells
     GROUP BY kernel HAVING SUM(shared_binary) > 0 OR SUM(shared_code) > 0",
    // An autotune run's file names no backend, arch or version: it belongs to the (backend, arch,
    // version) of the kernel's entries in the same cache (machine + root), whose compiles it
    // timed. A cache dir holding several versions of the kernel (an in-place upgrade) is narrowed
    // to those whose entries first appeared in the same scan as the autotune file; a run with no
    // compiled entries beside it keeps NULLs (listed below the grids, in none of them). One row
    // per machine, which depends on that machine's entries alone: an update replaces the marked
    // machines' rows (0051). (The joins are pinned: from the runs, then the kernel's facts probing
    // that machine's presence — not every entry of the cache dir per run.)
    "INSERT INTO temp.staged_autotune_configs(kernel, backend, arch, triton_version, config_json, num_warps, num_stages,
                                       runs, machines, best_ms, wins, machine_id)
     WITH runs AS (
         SELECT DISTINCT e.id, e.machine_id, e.root_id, e.kernel, e.first_scan_id
         FROM fact_autotune a CROSS JOIN entry_rows e ON e.fact_id = a.fact_id AND a.idx = 0 WHERE e.removed_at IS NULL AND e.kernel IS NOT NULL),
     cand AS (
         SELECT r.id, f.backend, f.arch, f.triton_version,
                MAX(CASE WHEN k.first_scan_id = r.first_scan_id THEN 1 ELSE 0 END) AS same_scan
         FROM runs r CROSS JOIN facts f INDEXED BY facts_kernel ON f.kernel = r.kernel
              CROSS JOIN entries k INDEXED BY entries_fact ON k.fact_id = f.id AND k.machine_id = r.machine_id
         WHERE k.root_id = r.root_id AND k.removed_at IS NULL AND f.backend IS NOT NULL
         GROUP BY r.id, f.backend, f.arch, f.triton_version),
     pick AS (
         SELECT c.id, c.backend, c.arch, c.triton_version FROM cand c
         WHERE c.same_scan = (SELECT MAX(c2.same_scan) FROM cand c2 WHERE c2.id = c.id)
         UNION ALL
         SELECT r.id, NULL, NULL, NULL FROM runs r WHERE NOT EXISTS (SELECT 1 FROM cand c WHERE c.id = r.id))
     SELECT e.kernel, p.backend, p.arch, p.triton_version, a.config_json, MIN(a.num_warps), MIN(a.num_stages),
            COUNT(*), MIN(m.name), MIN(a.best_ms), SUM(a.winner), e.machine_id
     FROM pick p JOIN entry_rows e ON e.id = p.id JOIN fact_autotune a ON a.fact_id = e.fact_id JOIN machines m ON m.id = e.machine_id
     GROUP BY e.kernel, p.backend, p.arch, p.triton_version, e.machine_id, a.config_json",
    "INSERT INTO temp.staged_machine_kernels(machine_id, kernel, entries, bytes, last_compiled)
     SELECT machine_id, kernel, SUM(entries), CAST(TOTAL(bytes) AS INTEGER), MAX(last_compiled) FROM temp.staged_kernel_stats GROUP BY machine_id, kernel",
    "INSERT INTO temp.staged_machine_versions(machine_id, triton_version, entries, bytes)
     SELECT machine_id, triton_version, SUM(entries), CAST(TOTAL(bytes) AS INTEGER) FROM temp.staged_kernel_stats GROUP BY machine_id, triton_version",
    // removed entries count too: they were compiled all the same
    "INSERT INTO temp.staged_machine_days(machine_id, day, entries)
     SELECT machine_id, created_at / 86400000, COUNT(*) FROM entry_rows WHERE created_at IS NOT NULL /*machines*/
     GROUP BY machine_id, created_at / 86400000",
    "INSERT INTO temp.staged_choices(col, value)
     SELECT DISTINCT 'backend', backend FROM temp.staged_kernel_stats WHERE backend IS NOT NULL
     UNION SELECT DISTINCT 'arch', arch FROM temp.staged_kernel_stats WHERE arch IS NOT NULL
     UNION SELECT DISTINCT 'triton_version', triton_version FROM temp.staged_kernel_stats WHERE triton_version IS NOT NULL",
    // bytes by artifact type per machine, as `staged_ext_stats` counts them for the fleet: from
    // the base tables, one pass over the machine's live entries probing their facts' bytes by
    // type (`fact_exts`, by fact id), a machine's own group file counted at its own size
    "INSERT INTO temp.staged_machine_ext(machine_id, ext, files, bytes)
     SELECT machine_id, ext, SUM(files), CAST(TOTAL(bytes) AS INTEGER) FROM (
       SELECT e.machine_id, a.ext, COUNT(*) AS files, TOTAL(a.bytes) AS bytes
       FROM entries e JOIN artifacts a ON a.entry_id = e.id
       WHERE e.removed_at IS NULL /*e.machines*/ GROUP BY e.machine_id, a.ext
       UNION ALL
       SELECT e.machine_id, x.ext, SUM(x.files),
              TOTAL(CASE WHEN x.ext = 'grp' AND e.group_sha256 IS NOT NULL AND e.group_bytes IS NOT NULL
                         THEN x.files * e.group_bytes ELSE x.bytes END)
       FROM entries e JOIN fact_exts x ON x.fact_id = e.fact_id
       WHERE e.removed_at IS NULL /*e.machines*/ GROUP BY e.machine_id, x.ext)
     GROUP BY machine_id, ext",
];
/// The grid cells of the kernels marked for their counts only (`page_dirty_kernels.whole` 0: a
/// landing moved how many live entries their facts have, not which facts are live). Such a
/// kernel keeps its cells, their contents' ranges and its shared binaries and code; each cell's
/// entries, shared counts and samples are summed again from its facts' counters (`fact_live`:
/// live, lo, hi, dup), its best-config count from the keys of its facts a best config names, and a
/// sample's name is looked up only where the sample changed. Reads the facts' counter rows, not
/// their entries or contents: a node of known keys costs its kernels' facts, not the fleet's
/// entries of them. Run by an update only (the whole build sums every kernel whole), before the
/// statements that read every staged cell.
const COUNTED: &str = "
    INSERT INTO temp.staged_variant_cells(kernel, backend, arch, triton_version, signature, shapes, num_warps, num_stages, kind,
                                    entries, machines, reg_min, reg_max, spill_min, spill_max, shared_min, shared_max,
                                    shared_binary, best_config, sample_min, sample_max, shared_code,
                                    sample_min_ref, sample_max_ref, variant_id)
    WITH counted(kernel) AS (SELECT kernel FROM temp.dirty_k EXCEPT SELECT kernel FROM temp.whole_k),
    sums AS (
        SELECT l.variant_id, SUM(l.live) AS entries,
               SUM(CASE WHEN l.dup & 1 <> 0 THEN l.live ELSE 0 END) AS shared_binary,
               SUM(CASE WHEN l.dup & 2 <> 0 THEN l.live ELSE 0 END) AS shared_code,
               MIN(COALESCE(l.lo, (SELECT MIN(e.id) FROM entries e INDEXED BY entries_live
                                   WHERE e.fact_id = l.fact_id AND e.removed_at IS NULL))) AS lo,
               MAX(COALESCE(l.hi, (SELECT MAX(e.id) FROM entries e INDEXED BY entries_live
                                   WHERE e.fact_id = l.fact_id AND e.removed_at IS NULL))) AS hi
        FROM counted k CROSS JOIN variants v INDEXED BY variants_kernel ON v.kernel = k.kernel
             CROSS JOIN fact_live l INDEXED BY fact_live_variant ON l.variant_id = v.id AND l.live > 0
        GROUP BY l.variant_id),
    -- the live entries an Inductor .best_config names: (fact, machine) once each, as REBUILD counts
    -- them; from the kernels' facts (their keys in `facts_kernel`), not from every config's row
    best AS (
        SELECT l.variant_id, COUNT(*) AS n
        FROM (SELECT DISTINCT f.id, b.machine_id
              FROM counted k CROSS JOIN facts f INDEXED BY facts_kernel ON f.kernel = k.kernel
                   CROSS JOIN best_configs b INDEXED BY best_configs_key ON b.triton_cache_hash = f.key
              WHERE EXISTS (SELECT 1 FROM entries e WHERE e.fact_id = f.id AND e.machine_id = b.machine_id
                                                      AND e.removed_at IS NULL)) p
        CROSS JOIN fact_live l ON l.fact_id = p.id
        WHERE l.live > 0
        GROUP BY l.variant_id)
    SELECT c.kernel, c.backend, c.arch, c.triton_version, c.signature, c.shapes, c.num_warps, c.num_stages, c.kind,
           s.entries, '', c.reg_min, c.reg_max, c.spill_min, c.spill_max, c.shared_min, c.shared_max, s.shared_binary,
           COALESCE((SELECT n FROM best WHERE best.variant_id = s.variant_id), 0), s.lo, s.hi, s.shared_code,
           CASE WHEN s.lo = c.sample_min THEN c.sample_min_ref
                ELSE (SELECT m.name || char(9) || k.key FROM entries e JOIN machines m ON m.id = e.machine_id
                      JOIN keys k ON k.id = e.key_id WHERE e.id = s.lo) END,
           CASE WHEN s.hi = c.sample_max THEN c.sample_max_ref
                ELSE (SELECT m.name || char(9) || k.key FROM entries e JOIN machines m ON m.id = e.machine_id
                      JOIN keys k ON k.id = e.key_id WHERE e.id = s.hi) END,
           c.variant_id
    FROM counted k CROSS JOIN page_variant_cells c INDEXED BY page_variant_cells_kernel ON c.kernel = k.kernel
         CROSS JOIN sums s ON s.variant_id = c.variant_id";

#[cfg(test)]
mod tests;
