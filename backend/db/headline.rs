//! The headline of the overview and machine pages: what the hook saw over the last day, the last
//! week and all time — hits, misses, hit rate, compile time spent on misses and saved by hits —
//! with one bar per day for the trend, and which machines have no hook at all.
//!
//! Everything is read from the history aggregates kept at ingest (`history_fleet_hours`,
//! `history_machine_hours`, `history_machines`: migrations 0015, 0024, 0037): a window is at most
//! [`TREND_DAYS`] × 24 hour rows of one machine or of the fleet, or one row per machine, so a
//! request never reads events or entries. Only the hook's lookups count: compiles inferred from
//! file times have no lookup behind them (and no hits beside them).

use super::Store;
use super::history::Counts;
use serde::Serialize;
use sqlx::Row;

const HOUR: i64 = 3_600_000;
const DAY: i64 = 86_400_000;
/// Days in the trend (UTC days, today included).
pub const TREND_DAYS: i64 = 14;

/// The figures of one window, as the hook saw them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Unix ms the window starts at (the start of an hour; `None`: all time).
    pub from: Option<i64>,
    pub hits: i64,
    /// Lookups that compiled (inferred compiles left out).
    pub misses: i64,
    /// hits / (hits + misses); `None` without lookups.
    pub hit_rate: Option<f64>,
    /// Compile time the hook timed on misses (ms); `None` when no compile carried a time.
    pub miss_ms: Option<f64>,
    /// Compile time the hits saved (ms), each at its entry's timed compile; `None`: none known.
    pub saved_ms: Option<f64>,
    /// Hits whose entry's compile time is known (`saved_ms` counts only these).
    pub saved_hits: i64,
    pub hook_events: i64,
}

impl Figures {
    fn of(from: Option<i64>, c: &Counts) -> Figures {
        Figures {
            from,
            hits: c.hits,
            misses: c.hook_misses(),
            hit_rate: c.hit_rate(),
            miss_ms: c.compile_ms,
            saved_ms: c.saved_ms,
            saved_hits: c.saved_hits,
            hook_events: c.hook_events,
        }
    }
}

/// One UTC day of the trend.
#[derive(Debug, Clone, Serialize)]
pub struct TrendDay {
    /// Day start, unix ms.
    pub t: i64,
    pub hits: i64,
    pub misses: i64,
    pub hit_rate: Option<f64>,
}

/// One machine's line in the fleet headline.
#[derive(Debug, Clone, Serialize)]
pub struct MachineLine {
    pub name: String,
    /// The hook ever reported a lookup from this machine.
    pub hook: bool,
    pub day: Figures,
    pub week: Figures,
    pub all: Figures,
}

/// The headline of the fleet (`machine: None`) or of one machine.
#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    pub machine: Option<String>,
    /// The hour the windows end in (its start, unix ms); windows run to now.
    pub now_hour: i64,
    /// The last 24 hours (this one and the 23 before).
    pub day: Figures,
    /// The last 168 hours.
    pub week: Figures,
    pub all: Figures,
    /// The last [`TREND_DAYS`] UTC days, oldest first (days without lookups included).
    pub trend: Vec<TrendDay>,
    /// Start of the latest hour with a hook event; `None`: the hook never reported.
    pub last_hook_hour: Option<i64>,
    /// Fleet only: each machine, those with the hook first (by name), then the others.
    pub machines: Vec<MachineLine>,
}

impl Headline {
    /// The hook reported from this machine (or from any machine of the fleet).
    pub fn hook(&self) -> bool {
        self.last_hook_hour.is_some()
    }
}

/// Hour rows (start, counts) of one machine (or the fleet) from `from` on.
async fn hours(pool: &Store, machine_id: Option<i64>, from: i64) -> sqlx::Result<Vec<(i64, Counts)>> {
    let cols = "hour, hits, misses, compiles, inferred, compile_ms, timed, hook_events, saved_ms, saved";
    let q = match machine_id {
        None => sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {cols} FROM history_fleet_hours WHERE hour >= ?1 AND ?2 IS NULL ORDER BY hour"
        ))),
        Some(_) => sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {cols} FROM history_machine_hours WHERE hour >= ?1 AND machine_id = ?2 ORDER BY hour"
        ))),
    };
    let rows = q.bind(from).bind(machine_id).fetch_all(pool).await?;
    Ok(rows.iter().map(|r| (r.get("hour"), super::history_agg::counts(r))).collect())
}

fn sum<'a>(rows: impl Iterator<Item = &'a (i64, Counts)>) -> Counts {
    super::history::total(rows.map(|r| &r.1))
}

/// The windows' starts for `now` (unix ms): (this hour, day from, week from, trend from).
fn starts(now: i64) -> (i64, i64, i64, i64) {
    let hour = now.div_euclid(HOUR) * HOUR;
    let today = now.div_euclid(DAY) * DAY;
    (hour, hour - 23 * HOUR, hour - 167 * HOUR, today - (TREND_DAYS - 1) * DAY)
}

/// The headline of `machine` (`None`: the fleet, with a line per machine) at `now` (unix ms).
/// `Ok(None)`: no machine of that name.
pub async fn headline(pool: &Store, machine: Option<&str>, now: i64) -> sqlx::Result<Option<Headline>> {
    let machine_id: Option<i64> = match machine {
        Some(name) => {
            match sqlx::query_scalar("SELECT id FROM machines WHERE name = ?").bind(name).fetch_optional(pool).await? {
                Some(id) => Some(id),
                None => return Ok(None),
            }
        }
        None => None,
    };
    let (now_hour, day_from, week_from, trend_from) = starts(now);
    let rows = hours(pool, machine_id, week_from.min(trend_from)).await?;
    let all = sum(all_time(pool, machine_id).await?.iter());
    let trend = (0..TREND_DAYS)
        .map(|i| {
            let t = trend_from + i * DAY;
            let c = sum(rows.iter().filter(|r| r.0 >= t && r.0 < t + DAY));
            TrendDay { t, hits: c.hits, misses: c.hook_misses(), hit_rate: c.hit_rate() }
        })
        .collect();
    let last_hook_hour: Option<i64> = match machine_id {
        None => sqlx::query_scalar("SELECT MAX(hour) FROM history_fleet_hours WHERE hook_events > 0"),
        Some(_) => {
            sqlx::query_scalar("SELECT MAX(hour) FROM history_machine_hours WHERE machine_id = ? AND hook_events > 0")
        }
    }
    .bind(machine_id)
    .fetch_one(pool)
    .await?;
    let machines = match machine_id {
        None => machine_lines(pool, day_from, week_from).await?,
        Some(_) => vec![],
    };
    Ok(Some(Headline {
        machine: machine.map(str::to_string),
        now_hour,
        day: Figures::of(Some(day_from), &sum(rows.iter().filter(|r| r.0 >= day_from))),
        week: Figures::of(Some(week_from), &sum(rows.iter().filter(|r| r.0 >= week_from))),
        all: Figures::of(None, &all),
        trend,
        last_hook_hour,
        machines,
    }))
}

/// The hit/miss line of `machine` now (`Ok(None)`: no such machine), as its page headlines it.
pub async fn hit_miss(pool: &Store, machine: &str) -> sqlx::Result<Option<crate::model::HitMiss>> {
    let lookups = |f: &Figures| crate::model::Lookups {
        hits: f.hits,
        misses: f.misses,
        hit_rate: f.hit_rate,
        miss_ms: f.miss_ms,
        saved_ms: f.saved_ms,
    };
    Ok(headline(pool, Some(machine), super::now_ms()).await?.map(|h| crate::model::HitMiss {
        machine: machine.to_string(),
        hook: h.hook(),
        week: lookups(&h.week),
        all_time: lookups(&h.all),
    }))
}

/// All-time counts per machine id (one machine, or every machine with any history).
async fn all_time(pool: &Store, machine_id: Option<i64>) -> sqlx::Result<Vec<(i64, Counts)>> {
    let rows = sqlx::query(
        "SELECT machine_id AS hour, hits, misses, compiles, inferred, compile_ms, timed, hook_events, saved_ms, saved
         FROM history_machines WHERE ?1 IS NULL OR machine_id = ?1",
    )
    .bind(machine_id)
    .fetch_all(pool)
    .await?;
    Ok(rows.iter().map(|r| (r.get("hour"), super::history_agg::counts(r))).collect())
}

/// Every machine's figures: the last week's hours of all machines in one read of the index
/// `history_machine_hours_recent` (0037), at most machines × 168 rows, and the all-time roll-up.
async fn machine_lines(pool: &Store, day_from: i64, week_from: i64) -> sqlx::Result<Vec<MachineLine>> {
    let names: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, name FROM machines ORDER BY name").fetch_all(pool).await?;
    let all: std::collections::HashMap<i64, Counts> = all_time(pool, None).await?.into_iter().collect();
    // grouped by (machine, in the last day or not): two rows a machine at most
    let rows = sqlx::query(sqlx::AssertSqlSafe(
        "SELECT machine_id, hour >= ?1 AS recent, SUM(hits) AS hits, SUM(misses) AS misses, 0 AS compiles,
                SUM(inferred) AS inferred, TOTAL(compile_ms) AS compile_ms, SUM(timed) AS timed,
                SUM(hook_events) AS hook_events, TOTAL(saved_ms) AS saved_ms, SUM(saved) AS saved
         FROM history_machine_hours INDEXED BY history_machine_hours_recent WHERE hour >= ?2
         GROUP BY machine_id, recent"
            .to_string(),
    ))
    .bind(day_from)
    .bind(week_from)
    .fetch_all(pool)
    .await?;
    let mut week: std::collections::HashMap<i64, (Counts, Counts)> = Default::default();
    for r in &rows {
        let (id, crate::db::Flag(recent)): (i64, crate::db::Flag) = (r.get("machine_id"), r.get("recent"));
        let c = super::history_agg::counts(r);
        let e = week.entry(id).or_default();
        e.1 = super::history::total([&e.1, &c]);
        if recent {
            e.0 = super::history::total([&e.0, &c]);
        }
    }
    let mut lines: Vec<MachineLine> = names
        .into_iter()
        .map(|(id, name)| {
            let a = all.get(&id).copied().unwrap_or_default();
            let (d, w) = week.get(&id).copied().unwrap_or_default();
            MachineLine {
                name,
                hook: a.hook_events > 0,
                day: Figures::of(Some(day_from), &d),
                week: Figures::of(Some(week_from), &w),
                all: Figures::of(None, &a),
            }
        })
        .collect();
    lines.sort_by_key(|m| !m.hook); // stable: by name within each
    Ok(lines)
}

/// Machines whose caches hold Inductor or vLLM artifacts: Inductor's `.best_config` files were
/// read (`best_configs`), or the latest scan of some root saw Inductor's or vLLM's own caches
/// beside it (FX-graph or AOT-autograd entries, vLLM's compiled artifacts) or was a vLLM rank dir.
/// Kernels loaded from those artifacts need no Triton cache lookup, so warm starts may not show
/// as hits. Per machine: one seek in `best_configs`, else its roots' latest scans through
/// `scans_root_latest`; `machine`: only that one.
pub async fn with_compiled_artifacts(pool: &Store, machine: Option<&str>) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT DISTINCT m.name FROM machines m JOIN scans s ON s.machine_id = m.id
         WHERE (?1 IS NULL OR m.name = ?1)
           AND s.id = (SELECT MAX(t.id) FROM scans t WHERE t.machine_id = s.machine_id AND t.root = s.root)
           AND (EXISTS (SELECT 1 FROM best_configs c WHERE c.machine_id = m.id)
                OR s.root LIKE '%/rank\\_%' ESCAPE '\\'
                OR EXISTS (SELECT 1 FROM json_each(COALESCE(s.beside_json, '[]')) b
                           WHERE CAST(json_extract(b.value, '$.files') AS BIGINT) > 0))
         ORDER BY m.name",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
}
