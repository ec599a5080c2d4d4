//! What the `/autotune` pages read beyond the API's rows ([`super::inductor::rows`]): one
//! Inductor decision with each choice's linked cache entries, the decisions a kernel took part
//! in, and how many decisions a machine holds. A choice links to the live entries compiled
//! from the Inductor module its name ends with (`fact_modules`, `inductor_choices`: migration
//! 0016); every query goes through those tables' indexes and is bounded by a page.

use super::Page;
use crate::db::Store;
use crate::model::AutotuneChoice;

/// One Inductor decision and the entries each choice was compiled into.
pub struct Decision {
    pub row: super::inductor::AutotuneRow,
    /// Per choice (in `row.choices` order): the live entries compiled from its module.
    pub linked: Vec<Vec<LinkedEntry>>,
}

/// A cache entry a choice was compiled into, with what it says about its config.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LinkedEntry {
    /// The choice's rank in its decision.
    pub rank: i64,
    pub key: String,
    pub kernel: Option<String>,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub shapes: Option<String>,
}

/// The decision `id` (Inductor's), or `None`.
pub async fn decision(pool: &Store, id: i64) -> sqlx::Result<Option<Decision>> {
    let Some(row) = super::inductor::decision(pool, id).await? else { return Ok(None) };
    let links: Vec<LinkedEntry> = sqlx::query_as(
        "SELECT c.rank, e.key, e.kernel, e.num_warps, e.num_stages, e.shapes FROM inductor_choices c
         JOIN fact_modules fm ON fm.module = c.module
         JOIN entry_rows e ON e.fact_id = fm.fact_id AND e.machine_id = c.machine_id
         WHERE c.decision_id = ? AND e.removed_at IS NULL ORDER BY c.rank, e.key",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let mut linked = vec![vec![]; row.choices.len()];
    for l in links {
        if let Some(at) = linked.get_mut(l.rank as usize) {
            at.push(l);
        }
    }
    Ok(Some(Decision { row, linked }))
}

/// A decision a kernel took part in: the kernel's best choice there and the winner.
pub struct KernelDecision {
    pub id: i64,
    pub machine: String,
    pub op: String,
    pub key: String,
    pub precision: String,
    /// The kernel's fastest choice in the decision.
    pub mine: AutotuneChoice,
    pub winner: String,
    /// The decision's choices, fastest first.
    pub choices: Vec<AutotuneChoice>,
}

/// The Inductor decisions in which a choice compiled into a live entry of `kernel` took part,
/// by machine, op and shape key.
///
/// `entries` is how many live entries the kernel has (the summary's count; any estimate keeps
/// the answer the same): the join starts from the smaller side. From the kernel's entries it
/// probes `fact_modules` once per entry (10,480 probes, ~4 ms, for a bench kernel of the
/// 1.25M-entry fleet whose entries no choice was compiled into); from the choices that name a
/// module it probes once per choice (84 in that fleet).
pub async fn kernel_decisions(
    pool: &Store,
    kernel: &str,
    entries: i64,
    page: Page,
) -> sqlx::Result<Vec<KernelDecision>> {
    type Row = (i64, String, String, String, String, String, String, String, Option<f64>, i64);
    // the module-naming choices, counted only as far as the kernel's entries (bounded both ways)
    let choices: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM (SELECT 1 FROM inductor_choices WHERE module IS NOT NULL LIMIT ?)")
            .bind(entries.max(0) + 1)
            .fetch_one(pool)
            .await?;
    // CROSS JOIN fixes SQLite's join order to the order written
    let from = if choices <= entries {
        "inductor_choices c CROSS JOIN fact_modules fm ON fm.module = c.module
         CROSS JOIN entry_rows e ON e.fact_id = fm.fact_id AND e.machine_id = c.machine_id"
    } else {
        "entry_rows e JOIN fact_modules fm ON fm.fact_id = e.fact_id
         JOIN inductor_choices c ON c.machine_id = e.machine_id AND c.module = fm.module"
    };
    // each decision once, with the best-ranked of its choices compiled into the kernel
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT id, machine, op, key, precision, choices_json, winner, choice, ms, rank FROM (
           SELECT a.id, m.name AS machine, a.op, a.key, a.precision, a.choices_json, a.winner,
                  c.name AS choice, c.ms, c.rank, ROW_NUMBER() OVER (PARTITION BY a.id ORDER BY c.rank) AS nth
           FROM {from}
           JOIN inductor_autotune a ON a.id = c.decision_id JOIN machines m ON m.id = a.machine_id
           WHERE e.kernel = ? AND e.removed_at IS NULL)
         WHERE nth = 1 ORDER BY machine, op, key, precision, id LIMIT ? OFFSET ?"
    )))
    .bind(kernel)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, machine, op, key, precision, choices, winner, name, ms, _)| KernelDecision {
            id,
            machine,
            op,
            key,
            precision,
            mine: AutotuneChoice { name, ms },
            winner,
            choices: serde_json::from_str(&choices).unwrap_or_default(),
        })
        .collect())
}

/// How many autotune decisions a machine holds: Inductor's, and Triton's `.autotune.json`
/// entries (live).
pub async fn machine_count(pool: &Store, machine: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        // Triton's: the autotune facts (`facts_autotune`), each probing the machine's live
        // presence (`entries_fact`); through `entry_rows` SQLite read every entry of the machine
        "SELECT (SELECT COUNT(*) FROM inductor_autotune a WHERE a.machine_id = m.id)
              + (SELECT COUNT(*) FROM facts f INDEXED BY facts_autotune
                 CROSS JOIN entries e INDEXED BY entries_fact
                 WHERE f.kind = 'autotune' AND e.fact_id = f.id AND e.machine_id = m.id AND e.removed_at IS NULL)
         FROM machines m WHERE m.name = ?",
    )
    .bind(machine)
    .fetch_optional(pool)
    .await
    .map(Option::unwrap_or_default)
}

/// The Inductor decisions in which the choice compiled into entry `entry_id` took part:
/// (decision id, op, shape key, choice name, its rank, its time, the winner's time, choices).
pub async fn entry_choices(pool: &Store, entry_id: i64) -> sqlx::Result<Vec<EntryChoice>> {
    sqlx::query_as(
        "SELECT a.id, a.op, a.key, c.name, c.rank, c.ms, (SELECT w.ms FROM inductor_choices w
                WHERE w.decision_id = a.id AND w.rank = 0) AS winner_ms,
                (SELECT COUNT(*) FROM inductor_choices n WHERE n.decision_id = a.id) AS choices
         FROM entries e JOIN fact_modules fm ON fm.fact_id = e.fact_id
         JOIN inductor_choices c ON c.machine_id = e.machine_id AND c.module = fm.module
         JOIN inductor_autotune a ON a.id = c.decision_id
         WHERE e.id = ? ORDER BY a.op, a.key, a.id LIMIT 50",
    )
    .bind(entry_id)
    .fetch_all(pool)
    .await
}

/// One decision an entry's choice took part in ([`entry_choices`]).
#[derive(Debug, sqlx::FromRow)]
pub struct EntryChoice {
    pub id: i64,
    pub op: String,
    pub key: String,
    pub name: String,
    pub rank: i64,
    pub ms: Option<f64>,
    pub winner_ms: Option<f64>,
    pub choices: i64,
}
