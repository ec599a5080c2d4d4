//! What the server reads to say what `cachelens prune` would free on a machine
//! ([`crate::prune::advice`]): every live entry of the machine in one pass, with its bytes, its
//! file count and the hook's events for its key (index seeks per event kind on
//! `events_machine_key`), and the stored per-machine advice the overview sums.

use super::prune::PruneRow;
use super::{Conn, Store};
use sqlx::FromRow;

/// One live entry as the advice judges it: prune's row plus where it is and what it holds.
#[derive(Debug, Clone, FromRow, Default)]
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
    #[sqlx(flatten)]
    pub row: PruneRow,
}

/// A row as [`live_rows`] reads it: the hook's times per event kind, folded in Rust.
#[derive(FromRow)]
struct Read {
    root: String,
    entry_bytes: i64,
    counts: i64,
    hit_last: Option<i64>,
    miss_last: Option<i64>,
    compile_last: Option<i64>,
    hit_first: Option<i64>,
    miss_first: Option<i64>,
    compile_first: Option<i64>,
    #[sqlx(flatten)]
    row: PruneRow,
}

/// Every live entry of the machine, grouped by root (the roots in no order, the rows unsorted
/// within one), handed to `each` as it is read (a machine's 100,000 rows are never held at once
/// here). Each hook time is the min or max of three index seeks (one per event kind), never a
/// scan of a hot key's events; a machine without events costs none.
pub async fn live_rows(conn: &mut Conn<'_>, machine_id: i64, mut each: impl FnMut(AdviceRow)) -> sqlx::Result<()> {
    let (crate::db::Flag(events),): (crate::db::Flag,) =
        sqlx::query_as("SELECT EXISTS (SELECT 1 FROM events WHERE machine_id = ?)")
            .bind(machine_id)
            .fetch_one(&mut *conn)
            .await?;
    let mut rows = sqlx::query_as(include_str!("advice_rows.sql")).bind(machine_id).bind(i64::from(events)).fetch(conn);
    while let Some(r) = std::future::poll_fn(|cx| rows.as_mut().poll_next(cx)).await {
        let r: Read = r?;
        let mut row = r.row;
        row.last_hit = r.hit_last;
        row.last_event = [r.hit_last, r.miss_last, r.compile_last].into_iter().flatten().max();
        each(AdviceRow {
            root: r.root,
            entry_bytes: r.entry_bytes,
            files: r.counts & 0xffff_ffff,
            groups: r.counts >> 32,
            first_event: [r.hit_first, r.miss_first, r.compile_first].into_iter().flatten().min(),
            row,
        });
    }
    Ok(())
}

/// The machine's id, if it is known.
pub async fn machine_id(pool: &Store, name: &str) -> sqlx::Result<Option<i64>> {
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
pub async fn stored_of(pool: &Store, machine_id: i64) -> sqlx::Result<Option<(i64, String)>> {
    sqlx::query_as("SELECT computed_at, advice_json FROM machine_advice WHERE machine_id = ?")
        .bind(machine_id)
        .fetch_optional(pool)
        .await
}

/// Every machine's stored advice (one row per machine), by machine name.
pub async fn stored(pool: &Store) -> sqlx::Result<Vec<(String, i64, String)>> {
    sqlx::query_as(
        "SELECT m.name, a.computed_at, a.advice_json FROM machine_advice a JOIN machines m ON m.id = a.machine_id
         ORDER BY m.name",
    )
    .fetch_all(pool)
    .await
}
