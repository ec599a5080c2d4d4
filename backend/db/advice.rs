//! What the server reads to say what `cachelens prune` would free on a machine
//! ([`crate::prune::advice`]): every live entry of the machine in one pass, with its bytes, its
//! file count and the hook's events for its key (index seeks per event kind on
//! `events_machine_key`), and the stored per-machine advice the overview sums.

use super::prune::PruneRow;
use sqlx::{SqliteConnection, SqlitePool};

/// One live entry as the advice judges it: prune's row plus where it is and what it holds.
#[derive(Debug, Clone, Default)]
pub struct AdviceRow {
    pub root: String,
    /// Bytes of its files (as scanned).
    pub entry_bytes: i64,
    /// How many files it holds (`entry_files`).
    pub files: i64,
    /// How many of them are group files (`__grp__*`: prune stubs them, they stay).
    pub groups: i64,
    /// The hook's first event for the key on this machine (unix ms).
    pub first_event: Option<i64>,
    pub row: PruneRow,
}

/// Every live entry of the machine, ordered by root and dir. Each hook time is the min or max
/// of three index seeks (one per event kind), never a scan of a hot key's events.
/// The rows leave SQLite as one JSON text (`db::json_rows`): handed over one by one, a
/// 10,000-entry machine's rows took twice as long as SQLite took to read them.
pub async fn live_rows(conn: &mut SqliteConnection, machine_id: i64) -> sqlx::Result<Vec<AdviceRow>> {
    let text: String = sqlx::query_scalar(include_str!("advice_rows.sql")).bind(machine_id).fetch_one(conn).await?;
    Ok(super::json_rows::json_rows::<Wire>(text)?.into_iter().map(AdviceRow::from).collect())
}

/// One row of `advice_rows.sql` as its JSON array holds it, in its order.
#[derive(serde::Deserialize)]
struct Wire {
    root: String,
    entry_bytes: i64,
    files: i64,
    groups: i64,
    dir: String,
    key: String,
    kind: String,
    kernel: Option<String>,
    backend: Option<String>,
    arch: Option<String>,
    warp_size: Option<i64>,
    num_warps: Option<i64>,
    num_stages: Option<i64>,
    num_ctas: Option<i64>,
    triton_version: Option<String>,
    signature: Option<String>,
    shapes: Option<String>,
    created_at: Option<i64>,
    #[serde(deserialize_with = "super::json_rows::int_bool")]
    relocated: bool,
    last_hit: Option<i64>,
    last_event: Option<i64>,
    first_event: Option<i64>,
}

impl From<Wire> for AdviceRow {
    fn from(w: Wire) -> AdviceRow {
        AdviceRow {
            root: w.root,
            entry_bytes: w.entry_bytes,
            files: w.files,
            groups: w.groups,
            first_event: w.first_event,
            row: PruneRow {
                dir: w.dir,
                key: w.key,
                kind: w.kind,
                kernel: w.kernel,
                backend: w.backend,
                arch: w.arch,
                warp_size: w.warp_size,
                num_warps: w.num_warps,
                num_stages: w.num_stages,
                num_ctas: w.num_ctas,
                triton_version: w.triton_version,
                signature: w.signature,
                shapes: w.shapes,
                created_at: w.created_at,
                relocated: w.relocated,
                last_event: w.last_event,
                last_hit: w.last_hit,
            },
        }
    }
}

/// The machine's id, if it is known.
pub async fn machine_id(pool: &SqlitePool, name: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("SELECT id FROM machines WHERE name = ?").bind(name).fetch_optional(pool).await
}

/// Store a machine's advice (JSON of [`crate::prune::advice::Advice`]).
pub async fn store(db: &super::Db, machine_id: i64, at: i64, json: &str) -> sqlx::Result<()> {
    let pool = db.pool();
    let _turn = super::write::turn(db).await;
    sqlx::query(
        "INSERT INTO machine_advice(machine_id, computed_at, advice_json) VALUES (?, ?, ?)
         ON CONFLICT(machine_id) DO UPDATE SET computed_at = excluded.computed_at, advice_json = excluded.advice_json",
    )
    .bind(machine_id)
    .bind(at)
    .bind(json)
    .execute(pool)
    .await?;
    Ok(())
}

/// The machine's stored advice: when it was computed (unix ms) and its JSON, if it has one.
pub async fn stored_of(pool: &SqlitePool, machine_id: i64) -> sqlx::Result<Option<(i64, String)>> {
    sqlx::query_as("SELECT computed_at, advice_json FROM machine_advice WHERE machine_id = ?")
        .bind(machine_id)
        .fetch_optional(pool)
        .await
}

/// Every machine's stored advice (one row per machine), by machine name.
pub async fn stored(pool: &SqlitePool) -> sqlx::Result<Vec<(String, i64, String)>> {
    sqlx::query_as(
        "SELECT m.name, a.computed_at, a.advice_json FROM machine_advice a JOIN machines m ON m.id = a.machine_id
         ORDER BY m.name",
    )
    .fetch_all(pool)
    .await
}
