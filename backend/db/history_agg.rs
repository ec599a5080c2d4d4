//! History aggregates kept at ingest (migration 0015): counting what landed into the hour tables,
//! and reading them back.
//!
//! What a hook event or an entry compile time counts for depends only on the rows of its own
//! (machine, key) — the lookup before a `compile` in its process, the hook `compile` events near
//! an mtime ([`super::history`] says the rules). Each row records what it was counted as
//! (`events.counted_miss`, NULL until counted; `entry_compiles.inferred_kernel`), and an ingest
//! re-counts every key it touched ([`account`]): the keys' old contributions are subtracted, the
//! rows re-counted, the new ones added, in the ingest's transaction. A line stored once (the
//! event identity of migration 0007) is counted once, however often it is read again.
//!
//! Readers: hour and day buckets over whole hours come from the hour tables
//! (`history_fleet_hours`, `history_machine_hours`, `history_kernel_hours`, `history_hours`),
//! per-machine and per-kernel totals over all time from the roll-ups (`history_machines`,
//! `history_kernels`, `history_machine_kernels`: one row per group, migration 0024), none of which
//! grows with the number of events; minute and second buckets and ranges that cut an hour sum the
//! counted rows of that range ([`Source::Rows`]).

use super::history::{Bucket, Counts, HistoryFilter};
use super::{Conn, Store};
use sqlx::{Any, QueryBuilder, Row};
use std::collections::BTreeMap;

const HOUR: i64 = 3_600_000;

/// The contributions of the touched keys of machine ?1 (`temp.history_touched`) as they are
/// counted now, per kernel and hour: their hook events' (`{events}`: which keys) and their
/// entries' compile times inferred as compiles (`{compiles}`). The keys are joined to the
/// presence rows by `keys` and the machine's (machine, key) index, not through the view
/// `entry_rows` (which joins every row's fact and root: 0.56 s against 0.12 s for 100,000 keys).
const CONTRIB: &str = "
    SELECT COALESCE(kernel, '(unknown)') AS kernel, (ts / 3600000) * 3600000 AS hour,
           SUM(CASE WHEN event = 'hit' THEN 1 ELSE 0 END) AS hits, SUM(counted_miss) AS misses,
           SUM(CASE WHEN event = 'compile' THEN 1 ELSE 0 END) AS compiles, 0 AS inferred,
           TOTAL(CASE WHEN event = 'compile' THEN compile_ms END) AS compile_ms,
           COUNT(CASE WHEN event = 'compile' THEN compile_ms END) AS timed, COUNT(*) AS hook_events,
           TOTAL(saved_ms) AS saved_ms, COUNT(saved_ms) AS saved
    FROM events WHERE machine_id = ?1 AND key IN (SELECT key FROM temp.history_touched WHERE {events})
      AND counted_miss IS NOT NULL
    GROUP BY 1, 2
    UNION ALL
    SELECT c.inferred_kernel, (c.compiled_at / 3600000) * 3600000, 0, COUNT(*), COUNT(*), COUNT(*), 0, 0, 0, 0, 0
    FROM temp.history_touched t JOIN keys k ON k.key = t.key
         JOIN entries en ON en.machine_id = ?1 AND en.key_id = k.id
         JOIN entry_compiles c ON c.entry_id = en.id
    WHERE {compiles} AND c.inferred_kernel IS NOT NULL
    GROUP BY 1, 2";

/// The per-(kernel, hour) differences [`apply`] adds to the tables.
const DELTA_TABLE: &str =
    "CREATE TEMP TABLE IF NOT EXISTS history_delta(kernel TEXT NOT NULL, hour INTEGER NOT NULL, hits INTEGER,
           misses INTEGER, compiles INTEGER, inferred INTEGER, compile_ms REAL, timed INTEGER, hook_events INTEGER,
           saved_ms REAL, saved INTEGER)";

/// Re-count the given keys of a machine (after their events or compile times changed) and apply
/// the difference to the hour tables. Runs inside the caller's transaction.
///
/// `added` are keys among them whose presence row this transaction inserted and whose events it
/// did not change: they counted nothing before but their events, which are as they were. Their
/// old contribution is not subtracted, their events are not counted again, and only their
/// compile times are added (a cold scan or a new node of 100,000 entries: 1.5 s less).
pub async fn account(
    conn: &mut Conn<'_>,
    machine_id: i64,
    keys: &[&str],
    added: &crate::scan::FastSet<&str>,
) -> sqlx::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    for sql in [
        "CREATE TEMP TABLE IF NOT EXISTS history_touched(key TEXT PRIMARY KEY, added INTEGER NOT NULL) WITHOUT ROWID",
        DELTA_TABLE,
        "DELETE FROM temp.history_touched",
        "DELETE FROM temp.history_delta",
    ] {
        sqlx::query(sql).execute(&mut *conn).await?;
    }
    for part in keys.chunks(500) {
        let mut qb = QueryBuilder::<Any>::new("INSERT OR IGNORE INTO temp.history_touched(key, added) ");
        qb.push_values(part, |mut b, k| {
            b.push_bind(*k).push_bind(i64::from(added.contains(k)));
        });
        qb.build().execute(&mut *conn).await?;
    }
    let contrib = |events: &str, compiles: &str| CONTRIB.replace("{events}", events).replace("{compiles}", compiles);
    let delta = |sign: &str, from: String| {
        format!(
            "INSERT INTO temp.history_delta SELECT kernel, hour, {sign} hits, {sign} misses, {sign} compiles,
               {sign} inferred, {sign} compile_ms, {sign} timed, {sign} hook_events, {sign} saved_ms, {sign} saved
             FROM ({from})"
        )
    };
    // an entry compile time is inferred unless the nearest of its key's hook compile events
    // accounts for it (run after the two of `recount`)
    let window = super::history::truncated("COALESCE(x.compile_ms, 0)");
    let infer = format!(
        "UPDATE entry_compiles SET inferred_kernel = (
           SELECT COALESCE(f.kernel, '(unknown)') FROM entries en JOIN facts f ON f.id = en.fact_id
           WHERE en.id = entry_compiles.entry_id AND f.kind IN ('kernel', 'binary_only')
             AND NOT EXISTS (SELECT 1 FROM events x
                             WHERE x.machine_id = en.machine_id AND x.key = f.key AND x.event = 'compile'
                               AND x.ts BETWEEN entry_compiles.compiled_at - 2000
                                            AND entry_compiles.compiled_at + {window} + 2000
                               AND NOT EXISTS (SELECT 1 FROM entry_compiles o
                                               WHERE o.entry_id = entry_compiles.entry_id
                                                 AND ABS(x.ts - o.compiled_at) < ABS(x.ts - entry_compiles.compiled_at))))
         WHERE entry_id IN (SELECT en.id FROM temp.history_touched t JOIN keys k ON k.key = t.key
                            JOIN entries en ON en.machine_id = ?1 AND en.key_id = k.id)"
    );
    let recount = [
        // what counts as a miss: a `miss`, or a `compile` whose process's lookup before was no miss
        "UPDATE events SET counted_miss = x.m
         FROM (SELECT id, CASE WHEN event = 'miss' OR (event = 'compile' AND prev IS NOT 'miss') THEN 1 ELSE 0 END AS m
               FROM (SELECT id, event,
                            LAG(event) OVER (PARTITION BY host, pid, key ORDER BY ts_us, seq, id) AS prev
                     FROM events WHERE machine_id = ?1
                       AND key IN (SELECT key FROM temp.history_touched WHERE added = 0))) AS x
         WHERE events.id = x.id",
        // what a hit saved: the compile time of its key's latest timed hook compile at or before
        // it, else the first after it (migration 0035)
        "UPDATE events SET saved_ms = COALESCE(
             (SELECT c.compile_ms FROM events c WHERE c.machine_id = events.machine_id AND c.key = events.key AND c.event = 'compile'
               AND c.compile_ms IS NOT NULL AND c.ts_us <= events.ts_us ORDER BY c.ts_us DESC, c.id DESC LIMIT 1),
             (SELECT c.compile_ms FROM events c WHERE c.machine_id = events.machine_id AND c.key = events.key AND c.event = 'compile'
               AND c.compile_ms IS NOT NULL AND c.ts_us > events.ts_us ORDER BY c.ts_us ASC, c.id ASC LIMIT 1))
         WHERE machine_id = ?1 AND key IN (SELECT key FROM temp.history_touched WHERE added = 0) AND event = 'hit'",
    ];
    // the keys counted before: everything they counted goes out
    let before = delta("-", contrib("added = 0", "t.added = 0"));
    sqlx::query(sqlx::AssertSqlSafe(before)).bind(machine_id).execute(&mut *conn).await?;
    for sql in recount {
        sqlx::query(sql).bind(machine_id).execute(&mut *conn).await?;
    }
    sqlx::query(sqlx::AssertSqlSafe(infer)).bind(machine_id).execute(&mut *conn).await?;
    // and comes back as counted now; the added keys' compile times come in
    let after = delta("", contrib("added = 0", "true"));
    sqlx::query(sqlx::AssertSqlSafe(after)).bind(machine_id).execute(&mut *conn).await?;
    apply(conn, machine_id).await
}

/// Subtract everything machine ?1 contributed to the hour tables and roll-ups (it is being
/// retired: `db::retention::retire`). Its per-(kernel, hour) rows are its whole contribution.
pub(crate) async fn forget_machine(conn: &mut Conn<'_>, machine_id: i64) -> sqlx::Result<()> {
    for sql in [DELTA_TABLE, "DELETE FROM temp.history_delta"] {
        sqlx::query(sql).execute(&mut *conn).await?;
    }
    sqlx::query(
        "INSERT INTO temp.history_delta SELECT kernel, hour, -hits, -misses, -compiles, -inferred, -compile_ms,
           -timed, -hook_events, -saved_ms, -saved FROM history_hours WHERE machine_id = ?1",
    )
    .bind(machine_id)
    .execute(&mut *conn)
    .await?;
    apply(conn, machine_id).await
}

/// Add `temp.history_delta` to the four tables and drop the rows left empty.
async fn apply(conn: &mut Conn<'_>, machine_id: i64) -> sqlx::Result<()> {
    const SUMS: &str =
        "SUM(hits), SUM(misses), SUM(compiles), SUM(inferred), SUM(compile_ms), SUM(timed), SUM(hook_events),
         SUM(saved_ms), SUM(saved)";
    // the row's counts plus the delta's, the row's named by its table (on PostgreSQL a bare
    // name there is ambiguous: the row's or `excluded`'s)
    let add = |table: &str| {
        ["hits", "misses", "compiles", "inferred", "compile_ms", "timed", "hook_events", "saved_ms", "saved"]
            .map(|c| format!("{c} = {table}.{c} + excluded.{c}"))
            .join(", ")
    };
    const EMPTY: &str = "hits = 0 AND misses = 0 AND compiles = 0 AND hook_events = 0";
    let stmts = [
        format!(
            "INSERT INTO history_hours SELECT ?1, kernel, hour, {SUMS} FROM temp.history_delta WHERE true
             GROUP BY kernel, hour ON CONFLICT(machine_id, kernel, hour) DO UPDATE SET {}",
            add("history_hours")
        ),
        format!(
            "INSERT INTO history_machine_hours SELECT ?1, hour, {SUMS} FROM temp.history_delta WHERE true
             GROUP BY hour ON CONFLICT(machine_id, hour) DO UPDATE SET {}",
            add("history_machine_hours")
        ),
        format!(
            "INSERT INTO history_kernel_hours SELECT kernel, hour, {SUMS} FROM temp.history_delta
             WHERE ?1 IS NOT NULL GROUP BY kernel, hour ON CONFLICT(kernel, hour) DO UPDATE SET {}",
            add("history_kernel_hours")
        ),
        format!(
            "INSERT INTO history_kernels SELECT kernel, {SUMS} FROM temp.history_delta WHERE ?1 IS NOT NULL
             GROUP BY kernel ON CONFLICT(kernel) DO UPDATE SET {}",
            add("history_kernels")
        ),
        // the roll-ups of migration 0024: the fleet per hour, the machine, (machine, kernel)
        format!(
            "INSERT INTO history_fleet_hours SELECT hour, {SUMS} FROM temp.history_delta WHERE ?1 IS NOT NULL
             GROUP BY hour ON CONFLICT(hour) DO UPDATE SET {}",
            add("history_fleet_hours")
        ),
        format!(
            "INSERT INTO history_machines SELECT ?1, {SUMS} FROM temp.history_delta WHERE true
             GROUP BY ?1 ON CONFLICT(machine_id) DO UPDATE SET {}",
            add("history_machines")
        ),
        format!(
            "INSERT INTO history_machine_kernels SELECT ?1, kernel, {SUMS} FROM temp.history_delta WHERE true
             GROUP BY kernel ON CONFLICT(machine_id, kernel) DO UPDATE SET {}",
            add("history_machine_kernels")
        ),
        format!(
            "DELETE FROM history_hours WHERE machine_id = ?1
               AND (kernel, hour) IN (SELECT kernel, hour FROM temp.history_delta) AND {EMPTY}"
        ),
        format!(
            "DELETE FROM history_machine_hours WHERE machine_id = ?1
               AND hour IN (SELECT hour FROM temp.history_delta) AND {EMPTY}"
        ),
        format!(
            "DELETE FROM history_kernel_hours WHERE ?1 IS NOT NULL
               AND (kernel, hour) IN (SELECT kernel, hour FROM temp.history_delta) AND {EMPTY}"
        ),
        format!(
            "DELETE FROM history_kernels WHERE ?1 IS NOT NULL
               AND kernel IN (SELECT kernel FROM temp.history_delta) AND {EMPTY}"
        ),
        format!(
            "DELETE FROM history_fleet_hours WHERE ?1 IS NOT NULL
               AND hour IN (SELECT hour FROM temp.history_delta) AND {EMPTY}"
        ),
        format!("DELETE FROM history_machines WHERE machine_id = ?1 AND {EMPTY}"),
        format!(
            "DELETE FROM history_machine_kernels WHERE machine_id = ?1
               AND kernel IN (SELECT kernel FROM temp.history_delta) AND {EMPTY}"
        ),
    ];
    for sql in stmts {
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(machine_id).execute(&mut *conn).await?;
    }
    Ok(())
}

/// Where a question is answered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The hour tables: hour and day buckets, a range on whole hours (or none).
    Hours,
    /// The counted rows of the range: finer buckets, or a range that cuts an hour.
    Rows,
}

impl Source {
    pub fn of(f: &HistoryFilter, bucket: Option<Bucket>) -> Source {
        let whole = |t: Option<i64>| t.is_none_or(|t| t.rem_euclid(HOUR) == 0);
        let coarse = bucket.is_none_or(|b| matches!(b, Bucket::Hour | Bucket::Day));
        if coarse && whole(f.from) && whole(f.to) { Source::Hours } else { Source::Rows }
    }
}

/// What rows are grouped by.
#[derive(Debug, Clone, Copy)]
pub enum By {
    Bucket(Bucket),
    Machine,
    Kernel,
}

/// Counts grouped by `by` for the filter, from the hour tables or the counted rows. `K` is i64
/// for buckets, String otherwise. Read a row each: as one JSON text (`db::json_rows::json_rows`)
/// a machine's 721 hours took 2 ms less, but the sums of compile times must equal the reference
/// computation's to the bit, and neither store writes a REAL into JSON with all 17 digits (only
/// SQLite's `printf('%!.17g')` did, which PostgreSQL lacks).
pub async fn grouped<K>(pool: &Store, f: &HistoryFilter, by: By) -> sqlx::Result<BTreeMap<K, Counts>>
where
    K: Ord + for<'r> sqlx::Decode<'r, Any> + sqlx::Type<Any>,
{
    let bucket = match by {
        By::Bucket(b) => Some(b),
        _ => None,
    };
    let sql = match Source::of(f, bucket) {
        Source::Hours => hours_sql(f, by),
        Source::Rows => rows_sql(by),
    };
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(f.machine.clone())
        .bind(f.kernel.clone())
        .bind(f.from)
        .bind(f.to)
        .fetch_all(pool)
        .await?;
    Ok(rows.iter().map(|r| (r.get("k"), counts(r))).collect())
}

/// One row of an hour table or roll-up as [`Counts`] (also the headline's, `db::headline`).
pub(crate) fn counts(r: &sqlx::any::AnyRow) -> Counts {
    let timed: i64 = r.get("timed");
    let saved: i64 = r.get("saved");
    Counts {
        hits: r.get("hits"),
        misses: r.get("misses"),
        compiles: r.get("compiles"),
        inferred_compiles: r.get("inferred"),
        compile_ms: (timed > 0).then(|| super::history::ms(r.get("compile_ms"))),
        hook_events: r.get("hook_events"),
        saved_ms: (saved > 0).then(|| super::history::ms(r.get("saved_ms"))),
        saved_hits: saved,
    }
}

/// One page of the kernels in "misses most" order (misses, then compile time, then name;
/// `missing`: only those with a miss), and how many there are in all. Sorted and paged in SQL:
/// the unfiltered fleet view reads its page from the index `history_kernels_misses`, the others
/// sum their hours in SQL and hand over only the page's rows.
pub async fn kernels_page(
    pool: &Store,
    f: &HistoryFilter,
    missing: bool,
    page: super::Page,
) -> sqlx::Result<(Vec<(String, Counts)>, i64)> {
    let cond = if missing { "misses > 0" } else { "true" };
    let all_time = f.kernel.is_none() && f.from.is_none() && f.to.is_none();
    let cols = "kernel AS k, hits, misses, compiles, inferred, compile_ms, timed, hook_events, saved_ms, saved";
    let (sql, count) = if all_time && f.machine.is_none() {
        (
            format!(
                "SELECT {cols} FROM history_kernels INDEXED BY history_kernels_misses WHERE {cond}
                 AND ?1 IS ?1 AND ?2 IS ?2 AND ?3 IS ?3 AND ?4 IS ?4
                 ORDER BY misses DESC, compile_ms DESC, kernel LIMIT ?5 OFFSET ?6"
            ),
            format!(
                "SELECT COUNT(*) FROM history_kernels WHERE {cond} AND ?1 IS ?1 AND ?2 IS ?2 AND ?3 IS ?3 AND ?4 IS ?4"
            ),
        )
    } else if all_time {
        // one machine: its page read in order from `history_machine_kernels_misses` (0024)
        let mine = "machine_id = (SELECT id FROM machines WHERE name = ?1)";
        (
            format!(
                "SELECT {cols} FROM history_machine_kernels INDEXED BY history_machine_kernels_misses
                 WHERE {mine} AND {cond} AND ?2 IS ?2 AND ?3 IS ?3 AND ?4 IS ?4
                 ORDER BY misses DESC, compile_ms DESC, kernel LIMIT ?5 OFFSET ?6"
            ),
            format!(
                "SELECT COUNT(*) FROM history_machine_kernels WHERE {mine} AND {cond} AND ?2 IS ?2 AND ?3 IS ?3 AND ?4 IS ?4"
            ),
        )
    } else {
        let inner = match Source::of(f, None) {
            Source::Hours => hours_sql(f, By::Kernel),
            Source::Rows => rows_sql(By::Kernel),
        };
        (
            format!(
                "SELECT * FROM ({inner}) WHERE {cond}
                 ORDER BY misses DESC, CASE WHEN timed > 0 THEN compile_ms ELSE 0 END DESC, k LIMIT ?5 OFFSET ?6"
            ),
            format!("SELECT COUNT(*) FROM ({inner}) WHERE {cond}"),
        )
    };
    let bind = |q: sqlx::query::Query<'static, Any, sqlx::any::AnyArguments>| {
        q.bind(f.machine.clone()).bind(f.kernel.clone()).bind(f.from).bind(f.to)
    };
    let rows = bind(sqlx::query(sqlx::AssertSqlSafe(sql))).bind(page.limit).bind(page.offset).fetch_all(pool).await?;
    let n: i64 = bind(sqlx::query(sqlx::AssertSqlSafe(count))).fetch_one(pool).await?.get(0);
    Ok((rows.iter().map(|r| (r.get("k"), counts(r))).collect(), n))
}

const SUM_COLS: &str = "SUM(t.hits) AS hits, SUM(t.misses) AS misses, SUM(t.compiles) AS compiles,
    SUM(t.inferred) AS inferred, TOTAL(t.compile_ms) AS compile_ms, SUM(t.timed) AS timed,
    SUM(t.hook_events) AS hook_events, TOTAL(t.saved_ms) AS saved_ms, SUM(t.saved) AS saved";

/// The smallest hour table that answers the question. Binds: ?1 machine, ?2 kernel, ?3 from, ?4 to.
fn hours_sql(f: &HistoryFilter, by: By) -> String {
    let (m, k) = (f.machine.is_some(), f.kernel.is_some());
    let ranged = f.from.is_some() || f.to.is_some();
    let key = match by {
        // the hour tables' hours are whole: read in hour order (`history_machine_hours_hour`,
        // migration 0018) instead of sorting every row by an expression
        By::Bucket(Bucket::Hour) => "t.hour".into(),
        By::Bucket(b) => format!("(t.hour / {ms}) * {ms}", ms = b.ms()),
        By::Machine => "m.name".into(),
        By::Kernel => "t.kernel".into(),
    };
    // all time (no range): the roll-ups, one row per group; else the hours of the range
    let table = match (by, m, k, ranged) {
        (By::Kernel, false, _, false) => "history_kernels",
        (By::Machine, _, false, false) => "history_machines",
        (By::Machine | By::Kernel, _, _, false) => "history_machine_kernels",
        (By::Bucket(_), false, false, _) => "history_fleet_hours",
        (By::Kernel, false, _, _) | (By::Bucket(_), false, true, _) => "history_kernel_hours",
        (By::Machine, _, false, _) | (By::Bucket(_), _, false, _) => "history_machine_hours",
        _ => "history_hours",
    };
    let all_time = matches!(table, "history_kernels" | "history_machines" | "history_machine_kernels");
    // the machine's name only where it is the key (a filter reads the machine's id)
    let has_machine = matches!(by, By::Machine);
    let mut wh = vec!["true".to_string()];
    if m {
        wh.push("t.machine_id = (SELECT id FROM machines WHERE name = ?1)".into());
    }
    if k {
        wh.push("t.kernel = ?2".into());
    }
    if !all_time {
        wh.push("(?3 IS NULL OR t.hour >= ?3) AND (?4 IS NULL OR t.hour < ?4)".into());
    }
    let join = if has_machine { " JOIN machines m ON m.id = t.machine_id" } else { "" };
    format!(
        "SELECT {key} AS k, {SUM_COLS} FROM {table} t{join}
         WHERE {} AND ?1 IS ?1 AND ?2 IS ?2 AND ?3 IS ?3 AND ?4 IS ?4 GROUP BY k",
        wh.join(" AND ")
    )
}

/// Sums over the counted rows (hook events, inferred compile times) of the range.
fn rows_sql(by: By) -> String {
    let (ek, ck) = match by {
        By::Bucket(b) => {
            (format!("(e.ts / {ms}) * {ms}", ms = b.ms()), format!("(c.compiled_at / {ms}) * {ms}", ms = b.ms()))
        }
        By::Machine => ("m.name".into(), "m.name".into()),
        By::Kernel => ("COALESCE(e.kernel, '(unknown)')".into(), "c.inferred_kernel".into()),
    };
    format!(
        "SELECT k, {SUM_COLS} FROM (
           SELECT {ek} AS k, SUM(CASE WHEN e.event = 'hit' THEN 1 ELSE 0 END) AS hits, SUM(e.counted_miss) AS misses,
                  SUM(CASE WHEN e.event = 'compile' THEN 1 ELSE 0 END) AS compiles, 0 AS inferred,
                  TOTAL(CASE WHEN e.event = 'compile' THEN e.compile_ms END) AS compile_ms,
                  COUNT(CASE WHEN e.event = 'compile' THEN e.compile_ms END) AS timed, COUNT(*) AS hook_events,
                  TOTAL(e.saved_ms) AS saved_ms, COUNT(e.saved_ms) AS saved
           FROM events e JOIN machines m ON m.id = e.machine_id
           WHERE e.counted_miss IS NOT NULL AND (?1 IS NULL OR m.name = ?1) AND (?2 IS NULL OR e.kernel = ?2)
             AND (?3 IS NULL OR e.ts >= ?3) AND (?4 IS NULL OR e.ts < ?4)
           GROUP BY 1
           UNION ALL
           SELECT {ck}, 0, COUNT(*), COUNT(*), COUNT(*), 0, 0, 0, 0, 0
           FROM entry_compiles c JOIN entry_rows en ON en.id = c.entry_id JOIN machines m ON m.id = en.machine_id
           WHERE c.inferred_kernel IS NOT NULL AND (?1 IS NULL OR m.name = ?1) AND (?2 IS NULL OR en.kernel = ?2)
             AND (?3 IS NULL OR c.compiled_at >= ?3) AND (?4 IS NULL OR c.compiled_at < ?4)
           GROUP BY 1) t
         GROUP BY k"
    )
}
