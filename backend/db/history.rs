//! Hit/miss history: hits, misses, compiles and compile time per time bucket, machine or kernel.
//!
//! Two sources, merged so that no compile is counted twice:
//! - hook events (`events`): exact hits, misses, compiles and compile times;
//! - entry compile times (`entry_compiles`: every metadata mtime seen for an entry, scan after
//!   scan, removed entries included): each is one compile, so without the hook a compile (and
//!   the miss that caused it) still shows, recompiles in place too. Such a compile is
//!   *inferred*; its duration is unknown. An inferred compile that a hook `compile` event of the
//!   same machine and key accounts for is not counted again: the hook logs its event right
//!   after Triton stored the entry, so the metadata was written within the `compile_ms` before
//!   the event (give or take [`MATCH_SLACK_MS`] of clock and file-time granularity); of the
//!   entry's compile times in that window, the event accounts for the nearest one only (two
//!   recompiles a second apart are two compiles). Other compiles of that key (before the hook
//!   was enabled, or by jobs without it) still count.
//!
//! Counting hook events: `hit` is a hit; `miss` is a miss; a `compile` is a compile. The hook
//! logs every lookup that compiles as `miss` then `compile` — with `TRITON_ALWAYS_COMPILE=1` a
//! lookup that finds the entry too, since Triton compiles it again. A `compile` with no `miss`
//! before it (same machine, host, pid and key: the miss was in a rotated-away file, or a hook
//! of another make logged only compiles) is counted as a miss as well. A `miss` with no
//! `compile` (the compile failed or the job died) is a miss without a compile.

use super::Store;
use super::history_agg::grouped;
use crate::model::EntryKind;
use serde::Serialize;
use sqlx::Row;
use std::collections::BTreeMap;

/// Entry kinds that are Triton compiles (launchers are built by the C compiler, autotune
/// files record benchmarks; partial entries never became usable).
const COMPILED_KINDS: &[EntryKind] = &[EntryKind::Kernel, EntryKind::BinaryOnly];

/// How far an entry's metadata mtime may lie outside its hook compile event's window
/// `[ts - compile_ms, ts]` and still be that compile (clock steps, coarse file times).
pub const MATCH_SLACK_MS: i64 = 2_000;

/// `x` (an SQL expression of a REAL) cut toward zero to a whole number, alike on both stores:
/// SQLite's `CAST(x AS INTEGER)` truncates where PostgreSQL's rounds, so a cast that went past
/// `x`, away from zero, is stepped back by one.
pub(crate) fn truncated(x: &str) -> String {
    format!(
        "(CAST({x} AS INTEGER) - CASE WHEN {x} > 0 AND CAST({x} AS INTEGER) > {x} THEN 1
                                      WHEN {x} < 0 AND CAST({x} AS INTEGER) < {x} THEN -1 ELSE 0 END)"
    )
}

/// A sum of milliseconds to the nanosecond: a store sums doubles in the order it reads the rows,
/// which PostgreSQL does not keep from one read to the next, so the last bits of a sum differ
/// between two reads of the same rows; rounded, every read answers the same.
pub(crate) fn ms(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Time bucket width (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    Second,
    Minute,
    Hour,
    Day,
}

impl Bucket {
    /// `second|minute|hour|day`.
    pub fn parse(s: &str) -> Option<Bucket> {
        Some(match s {
            "second" => Bucket::Second,
            "minute" => Bucket::Minute,
            "hour" => Bucket::Hour,
            "day" => Bucket::Day,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Bucket::Second => "second",
            Bucket::Minute => "minute",
            Bucket::Hour => "hour",
            Bucket::Day => "day",
        }
    }

    /// Width in milliseconds.
    pub fn ms(self) -> i64 {
        match self {
            Bucket::Second => 1_000,
            Bucket::Minute => 60_000,
            Bucket::Hour => 3_600_000,
            Bucket::Day => 86_400_000,
        }
    }
}

/// What to count: all filters optional (`None` = everything).
#[derive(Debug, Default, Clone)]
pub struct HistoryFilter {
    pub machine: Option<String>,
    pub kernel: Option<String>,
    /// Unix ms, inclusive.
    pub from: Option<i64>,
    /// Unix ms, exclusive.
    pub to: Option<i64>,
}

/// Counts for one bucket, machine or kernel.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize)]
pub struct Counts {
    /// Cache lookups that found a usable entry (hook only).
    pub hits: i64,
    /// Lookups that compiled: hook misses plus inferred compiles.
    pub misses: i64,
    /// Compiles: hook `compile` events plus inferred compiles.
    pub compiles: i64,
    /// Compiles known only from an entry's metadata mtime (no hook compile event near it).
    pub inferred_compiles: i64,
    /// Total compile time of the hook's compiles; `None` when none carried a time.
    pub compile_ms: Option<f64>,
    /// Hook events behind these counts (0: no hook data, so hits are unknown).
    pub hook_events: i64,
    /// Compile time the hits saved: for each hit, the time of its key's compile that the hook
    /// timed on the same machine (the latest at or before it, else the first after it); `None`
    /// when no hit had one.
    pub saved_ms: Option<f64>,
    /// Hits whose compile time is known (the others saved an unknown time).
    pub saved_hits: i64,
}

impl Counts {
    /// hits / (hits + the misses the hook saw), only where the hook was running (else hits are
    /// unknown). Compiles inferred from file times are left out: a machine without the hook has
    /// compiles but no hits, and counting them would read as a hit rate near 0.
    pub fn hit_rate(&self) -> Option<f64> {
        let lookups = self.hits + self.hook_misses();
        (self.hook_events > 0 && lookups > 0).then(|| self.hits as f64 / lookups as f64)
    }

    /// Misses the hook saw (lookups that compiled), without the inferred compiles.
    pub fn hook_misses(&self) -> i64 {
        self.misses - self.inferred_compiles
    }

    fn add(&mut self, o: &Counts) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.compiles += o.compiles;
        self.inferred_compiles += o.inferred_compiles;
        self.compile_ms = match (self.compile_ms, o.compile_ms) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        self.hook_events += o.hook_events;
        self.saved_ms = match (self.saved_ms, o.saved_ms) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        self.saved_hits += o.saved_hits;
    }
}

/// What rows are grouped by.
pub use super::history_agg::By as GroupBy;

fn expr(by: GroupBy) -> String {
    match by {
        GroupBy::Bucket(b) => format!("(ts / {ms}) * {ms}", ms = b.ms()),
        GroupBy::Machine => "machine".into(),
        GroupBy::Kernel => "COALESCE(kernel, '(unknown)')".into(),
    }
}

/// The reference computation: counts grouped by `by` straight from the raw events and compile
/// times, both sources merged (what the aggregates of [`super::history_agg`] must always equal;
/// tests compare the two). `K` is i64 for buckets, String otherwise. It reads every event of the
/// selected machines and kernels: the pages never call it.
pub async fn fresh<K>(pool: &Store, f: &HistoryFilter, by: GroupBy) -> sqlx::Result<BTreeMap<K, Counts>>
where
    K: Ord + for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    let key = expr(by);
    // The window runs over all events of the selected machines and kernels, so that a `miss`
    // just before `from` still pairs with its `compile`; the time filter applies after it.
    let hook = format!(
        "WITH ev AS (
           SELECT e.ts, e.kernel, m.name AS machine, e.event, e.compile_ms,
                  CASE WHEN e.event = 'hit' THEN
                    COALESCE(
                     (SELECT c.compile_ms FROM events c WHERE c.machine_id = e.machine_id AND c.key = e.key AND c.event = 'compile'
                       AND c.compile_ms IS NOT NULL AND c.ts_us <= e.ts_us ORDER BY c.ts_us DESC, c.id DESC LIMIT 1),
                     (SELECT c.compile_ms FROM events c WHERE c.machine_id = e.machine_id AND c.key = e.key AND c.event = 'compile'
                       AND c.compile_ms IS NOT NULL AND c.ts_us > e.ts_us ORDER BY c.ts_us ASC, c.id ASC LIMIT 1)) END AS saved,
                  LAG(e.event) OVER (PARTITION BY e.machine_id, e.host, e.pid, e.key ORDER BY e.ts_us, e.seq, e.id) AS prev
           FROM events e JOIN machines m ON m.id = e.machine_id
           WHERE (?1 IS NULL OR m.name = ?1) AND (?2 IS NULL OR e.kernel = ?2))
         SELECT {key} AS k,
                SUM(CASE WHEN event = 'hit' THEN 1 ELSE 0 END) AS hits,
                SUM(CASE WHEN event = 'miss' OR (event = 'compile' AND prev IS NOT 'miss') THEN 1 ELSE 0 END) AS misses,
                SUM(CASE WHEN event = 'compile' THEN 1 ELSE 0 END) AS compiles,
                SUM(CASE WHEN event = 'compile' THEN compile_ms END) AS compile_ms,
                COUNT(*) AS n, SUM(saved) AS saved_ms, COUNT(saved) AS saved_hits
         FROM ev WHERE (?3 IS NULL OR ts >= ?3) AND (?4 IS NULL OR ts < ?4)
         GROUP BY k"
    );
    let compiled = EntryKind::sql_list(COMPILED_KINDS);
    let window = truncated("COALESCE(x.compile_ms, 0)");
    let inferred = format!(
        "SELECT {key} AS k, COUNT(*) AS n FROM (
           SELECT c.compiled_at AS ts, en.kernel, m.name AS machine
           FROM entry_compiles c JOIN entry_rows en ON en.id = c.entry_id JOIN machines m ON m.id = en.machine_id
           WHERE en.kind IN {compiled}
             AND (?1 IS NULL OR m.name = ?1) AND (?2 IS NULL OR en.kernel = ?2)
             AND (?3 IS NULL OR c.compiled_at >= ?3) AND (?4 IS NULL OR c.compiled_at < ?4)
             AND NOT EXISTS (SELECT 1 FROM events x
                             WHERE x.machine_id = en.machine_id AND x.key = en.key AND x.event = 'compile'
                               AND x.ts BETWEEN c.compiled_at - {MATCH_SLACK_MS}
                                            AND c.compiled_at + {window} + {MATCH_SLACK_MS}
                               AND NOT EXISTS (SELECT 1 FROM entry_compiles o
                                               WHERE o.entry_id = c.entry_id
                                                 AND ABS(x.ts - o.compiled_at) < ABS(x.ts - c.compiled_at))))
         GROUP BY k"
    );
    let mut out: BTreeMap<K, Counts> = BTreeMap::new();
    let bind = |sql: &str| {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .bind(f.machine.clone())
            .bind(f.kernel.clone())
            .bind(f.from)
            .bind(f.to)
    };
    for r in bind(&hook).fetch_all(pool).await? {
        let c = Counts {
            hits: r.get("hits"),
            misses: r.get("misses"),
            compiles: r.get("compiles"),
            inferred_compiles: 0,
            compile_ms: r.get::<Option<f64>, _>("compile_ms").map(ms),
            hook_events: r.get("n"),
            saved_ms: r.get::<Option<f64>, _>("saved_ms").map(ms),
            saved_hits: r.get("saved_hits"),
        };
        out.entry(r.get("k")).or_default().add(&c);
    }
    for r in bind(&inferred).fetch_all(pool).await? {
        let n: i64 = r.get("n");
        let c = Counts { misses: n, compiles: n, inferred_compiles: n, ..Counts::default() };
        out.entry(r.get("k")).or_default().add(&c);
    }
    Ok(out)
}

/// One time bucket of `/api/v1/history`.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryPoint {
    /// Bucket start, unix ms (UTC).
    pub t: i64,
    #[serde(flatten)]
    pub counts: Counts,
    pub hit_rate: Option<f64>,
}

/// The buckets with any activity, oldest first.
pub async fn series(pool: &Store, f: &HistoryFilter, bucket: Bucket) -> sqlx::Result<Vec<HistoryPoint>> {
    let rows: BTreeMap<i64, Counts> = grouped(pool, f, GroupBy::Bucket(bucket)).await?;
    Ok(rows.into_iter().map(|(t, counts)| HistoryPoint { t, counts, hit_rate: counts.hit_rate() }).collect())
}

/// Counts of one machine or kernel.
#[derive(Debug, Clone, Serialize)]
pub struct NamedCounts {
    pub name: String,
    #[serde(flatten)]
    pub counts: Counts,
    pub hit_rate: Option<f64>,
}

fn named(rows: BTreeMap<String, Counts>) -> Vec<NamedCounts> {
    rows.into_iter().map(|(name, counts)| NamedCounts { name, counts, hit_rate: counts.hit_rate() }).collect()
}

/// Per machine, by name.
pub async fn by_machine(pool: &Store, f: &HistoryFilter) -> sqlx::Result<Vec<NamedCounts>> {
    Ok(named(grouped(pool, f, GroupBy::Machine).await?))
}

/// Per kernel, the ones that miss most first (then the costliest in compile time).
pub async fn by_kernel(pool: &Store, f: &HistoryFilter) -> sqlx::Result<Vec<NamedCounts>> {
    let mut v = named(grouped(pool, f, GroupBy::Kernel).await?);
    v.sort_by(|a, b| {
        b.counts
            .misses
            .cmp(&a.counts.misses)
            .then(b.counts.compile_ms.unwrap_or(0.0).total_cmp(&a.counts.compile_ms.unwrap_or(0.0)))
            .then(a.name.cmp(&b.name))
    });
    Ok(v)
}

/// One page of [`by_kernel`] (only the kernels with a miss when `missing`), and how many
/// kernels there are in all; sorted and paged in SQL.
pub async fn by_kernel_page(
    pool: &Store,
    f: &HistoryFilter,
    missing: bool,
    page: super::Page,
) -> sqlx::Result<(Vec<NamedCounts>, i64)> {
    let (rows, n) = super::history_agg::kernels_page(pool, f, missing, page).await?;
    Ok((rows.into_iter().map(|(name, counts)| NamedCounts { name, counts, hit_rate: counts.hit_rate() }).collect(), n))
}

/// Sum of all rows.
pub fn total<'a>(rows: impl IntoIterator<Item = &'a Counts>) -> Counts {
    let mut t = Counts::default();
    for c in rows {
        t.add(c);
    }
    t
}

/// Machine names, and the kernels that miss most (at most `limit`), for the filter form.
pub async fn choices(pool: &Store, limit: i64) -> sqlx::Result<(Vec<String>, Vec<String>)> {
    let machines = sqlx::query_scalar("SELECT name FROM machines ORDER BY name").fetch_all(pool).await?;
    // one JSON text, not 200 rows handed over one by one (~0.9 ms of a history page)
    let kernels: String = sqlx::query_scalar(
        "SELECT json_group_array(kernel) FROM (SELECT kernel FROM history_kernels INDEXED BY history_kernels_misses
                                              ORDER BY misses DESC, compile_ms DESC, kernel LIMIT ?)",
    )
    .bind(limit)
    .fetch_one(pool)
    .await?;
    Ok((machines, super::json_rows::json_rows(kernels)?))
}
