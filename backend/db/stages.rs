//! Where compile time goes: the per-stage times the hook records with each compile
//! (`events.stages_json`), for one entry (its compile events) and summed per kernel
//! (`kernel_stages`, migration 0042, added to as events land: [`add`]).

use super::{Store, Tx};
use std::collections::BTreeMap;

/// Stages in pipeline order (the hook names them as Triton's `compile()` does); others follow.
pub const ORDER: &[&str] = &["ir_init", "ttir", "ttgir", "llir", "ptx", "amdgcn", "cubin", "hsaco", "store"];

/// Position of a stage in [`ORDER`] (unknown ones after, by name).
fn rank(stage: &str) -> (usize, String) {
    (ORDER.iter().position(|s| *s == stage).unwrap_or(ORDER.len()), stage.to_string())
}

/// A stages object's numeric fields, in pipeline order.
pub fn parse(json: &str) -> Vec<(String, f64)> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let mut out: Vec<(String, f64)> = v
        .as_object()
        .map(|o| o.iter().filter_map(|(k, v)| Some((k.clone(), v.as_f64()?))).collect())
        .unwrap_or_default();
    out.sort_by_key(|(k, _)| rank(k));
    out
}

/// Adds the compile events just stored (kernel, stages JSON) to their kernel's sums: one upsert
/// per (kernel, stage) of the batch.
pub async fn add(
    tx: &mut Tx<'static>,
    machine_id: i64,
    compiles: &[(Option<String>, Option<String>)],
) -> sqlx::Result<()> {
    let mut sums: BTreeMap<(&str, String), (f64, i64)> = BTreeMap::new();
    for (kernel, stages) in compiles {
        let (Some(k), Some(s)) = (kernel, stages) else { continue };
        for (stage, ms) in parse(s) {
            let x = sums.entry((k.as_str(), stage)).or_default();
            x.0 += ms;
            x.1 += 1;
        }
    }
    for ((kernel, stage), (ms, n)) in sums {
        sqlx::query(
            "INSERT INTO kernel_stages(kernel, machine_id, stage, ms, compiles) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT(kernel, machine_id, stage)
             DO UPDATE SET ms = kernel_stages.ms + excluded.ms, compiles = kernel_stages.compiles + excluded.compiles",
        )
        .bind(kernel)
        .bind(machine_id)
        .bind(stage)
        .bind(ms)
        .bind(n)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// One compile of an entry as the hook timed it.
#[derive(Debug, Clone)]
pub struct Compile {
    pub ts: i64,
    pub compile_ms: Option<f64>,
    pub stages: Vec<(String, f64)>,
}

/// The latest `limit` compiles of `key` on `machine` the hook recorded, newest first
/// (`events_machine_key`: machine, key, event, ts).
pub async fn of_entry(pool: &Store, machine: &str, key: &str, limit: i64) -> sqlx::Result<Vec<Compile>> {
    let rows: Vec<(i64, Option<f64>, Option<String>)> = sqlx::query_as(
        "SELECT e.ts, e.compile_ms, e.stages_json FROM events e INDEXED BY events_machine_key
         WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?) AND e.key = ? AND e.event = 'compile'
         ORDER BY e.ts DESC LIMIT ?",
    )
    .bind(machine)
    .bind(key)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(ts, compile_ms, s)| Compile { ts, compile_ms, stages: s.as_deref().map(parse).unwrap_or_default() })
        .collect())
}

/// One stage's time summed over a kernel's compiles.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StageSum {
    pub stage: String,
    pub ms: f64,
    pub compiles: i64,
}

/// `kernel`'s stage sums (on `machine` only, when given), in pipeline order: its rows of the
/// `kernel_stages` primary key (a few per machine).
pub async fn of_kernel(pool: &Store, kernel: &str, machine: Option<&str>) -> sqlx::Result<Vec<StageSum>> {
    let rows: Vec<(String, f64, i64)> = sqlx::query_as(
        "SELECT k.stage, SUM(k.ms), SUM(k.compiles) FROM kernel_stages k JOIN machines m ON m.id = k.machine_id
         WHERE k.kernel = ?1 AND (?2 IS NULL OR m.name = ?2) GROUP BY k.stage",
    )
    .bind(kernel)
    .bind(machine)
    .fetch_all(pool)
    .await?;
    let mut out: Vec<StageSum> =
        rows.into_iter().map(|(stage, ms, compiles)| StageSum { stage, ms, compiles }).collect();
    out.sort_by_key(|s| rank(&s.stage));
    Ok(out)
}
