//! The fleet timeline (migration 0041): what changed across the fleet, newest first — a
//! machine's first scan, a root whose Triton version or Python changed between two of its scans,
//! a scan that invalidated much of what its root held. Written as scans land (one row per event,
//! never recomputed), read a page at a time through the `timeline_at` index.
//!
//! A root's Triton version is that of the newest entry it compiled so far (by compile time), its
//! Python that of the newest compile the hook recorded (`parts.python`); each scan stores both,
//! carried from the root's scan before when it saw nothing newer.

use super::Page;
use super::{Store, Tx};
use crate::db::reports::ReportHead;
use serde::Serialize;
use sqlx::FromRow;

/// What a timeline row records. Stored as its snake_case name (`timeline.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A machine's first scan.
    NewMachine,
    /// The Triton version of a root's newest entry changed.
    Triton,
    /// The Python of a root's newest hook compile changed.
    Python,
    /// A scan invalidated at least [`MASS_MIN`] entries and a quarter of its root's entries.
    Invalidation,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NewMachine => "new_machine",
            Kind::Triton => "triton",
            Kind::Python => "python",
            Kind::Invalidation => "invalidation",
        }
    }
}

crate::stored_as_name!(Kind { Kind::NewMachine, Kind::Triton, Kind::Python, Kind::Invalidation });

/// The fewest invalidated entries that make a mass invalidation (and at least a quarter of the
/// entries of the scan before): a source edit that recompiles a handful is no fleet event.
pub const MASS_MIN: usize = 10;

/// The newest compile a scan saw: (compile time, Triton version) and (event time, Python).
#[derive(Debug, Default)]
pub struct Newest {
    triton: Option<(i64, String)>,
    python: Option<(i64, String)>,
}

fn newer(slot: &mut Option<(i64, String)>, at: i64, v: &str) {
    if slot.as_ref().is_none_or(|(t, _)| at >= *t) {
        *slot = Some((at, v.to_string()));
    }
}

impl Newest {
    /// An entry this scan wrote, compiled at `at` by Triton `version`.
    pub fn entry(&mut self, at: Option<i64>, version: Option<&str>) {
        if let (Some(at), Some(v)) = (at, version) {
            newer(&mut self.triton, at, v);
        }
    }

    /// A hook event at `ts` with the key parts it recorded.
    pub fn event(&mut self, ts: i64, parts: Option<&serde_json::Value>) {
        if let Some(p) = parts.and_then(|p| p.get("python")).and_then(|p| p.as_str()) {
            newer(&mut self.python, ts, p);
        }
    }
}

type Carried = (i64, Option<String>, Option<i64>, Option<String>, Option<i64>);

/// In a landing scan's transaction: stores the root's Triton version and Python as of this scan
/// and the events they make (a new machine, a changed version). Two indexed reads of the
/// machine's scans (`scans_machine`), one update, at most three inserts.
pub async fn on_scan(
    tx: &mut Tx<'static>,
    machine_id: i64,
    scan_id: i64,
    root: &str,
    at: i64,
    newest: &Newest,
) -> sqlx::Result<()> {
    let prev: Option<Carried> = sqlx::query_as(
        "SELECT id, triton_version, triton_at, python, python_at FROM scans
         WHERE machine_id = ? AND root = ? AND id < ? ORDER BY id DESC LIMIT 1",
    )
    .bind(machine_id)
    .bind(root)
    .bind(scan_id)
    .fetch_optional(&mut **tx)
    .await?;
    let crate::db::Flag(first) =
        sqlx::query_scalar("SELECT NOT EXISTS(SELECT 1 FROM scans WHERE machine_id = ? AND id < ?)")
            .bind(machine_id)
            .bind(scan_id)
            .fetch_one(&mut **tx)
            .await?;
    let carry = |old: Option<(i64, String)>, new: &Option<(i64, String)>| match (old, new) {
        (Some(o), Some(n)) if o.0 > n.0 => Some(o),
        (o, None) => o,
        (_, n) => n.clone(),
    };
    let (pid, old_t, old_p) = match &prev {
        Some((id, tv, ta, py, pa)) => {
            (Some(*id), tv.clone().map(|v| (ta.unwrap_or(0), v)), py.clone().map(|v| (pa.unwrap_or(0), v)))
        }
        None => (None, None, None),
    };
    let t = carry(old_t.clone(), &newest.triton);
    let p = carry(old_p.clone(), &newest.python);
    sqlx::query("UPDATE scans SET triton_version = ?, triton_at = ?, python = ?, python_at = ? WHERE id = ?")
        .bind(t.as_ref().map(|x| &x.1))
        .bind(t.as_ref().map(|x| x.0))
        .bind(p.as_ref().map(|x| &x.1))
        .bind(p.as_ref().map(|x| x.0))
        .bind(scan_id)
        .execute(&mut **tx)
        .await?;
    let mut events: Vec<(Kind, Option<String>, Option<String>)> = vec![];
    if first {
        events.push((Kind::NewMachine, None, None));
    }
    for (kind, old, new) in [(Kind::Triton, old_t, t), (Kind::Python, old_p, p)] {
        if let (Some((_, a)), Some((_, b))) = (old, new)
            && a != b
        {
            events.push((kind, Some(a), Some(b)));
        }
    }
    for (kind, before, after) in events {
        sqlx::query(
            "INSERT OR IGNORE INTO timeline(at, machine_id, scan_id, from_scan_id, kind, before, after)
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(at)
        .bind(machine_id)
        .bind(scan_id)
        .bind(if kind == Kind::NewMachine { None } else { pid })
        .bind(kind)
        .bind(before)
        .bind(after)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Records the landing report of scan `to` (against `from`) when it is a mass invalidation.
pub async fn on_report(db: &super::Db, to: i64, from: Option<i64>, head: &ReportHead) -> sqlx::Result<()> {
    let (n, base) = (head.invalidated, head.old_entries);
    if n < MASS_MIN || n.saturating_mul(4) < base {
        return Ok(());
    }
    let cause = head.by_cause.iter().max_by_key(|c| (c.count, std::cmp::Reverse(c.cause.rank()))).map(|c| c.cause);
    let (_turn, mut tx) = super::write::begin(db).await?;
    // an event recorded for the scan before is replaced by a new row (a new id: the latest of
    // those at the same time, as the listing orders them)
    sqlx::query("DELETE FROM timeline WHERE scan_id = ?1 AND kind = ?2 AND EXISTS (SELECT 1 FROM scans WHERE id = ?1)")
        .bind(to)
        .bind(Kind::Invalidation)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO timeline(at, machine_id, scan_id, from_scan_id, kind, after, count, base)
         SELECT s.scanned_at, s.machine_id, s.id, ?, ?, ?, ?, ? FROM scans s WHERE s.id = ?",
    )
    .bind(from)
    .bind(Kind::Invalidation)
    .bind(cause.map(|c| c.as_str()))
    .bind(n as i64)
    .bind(base as i64)
    .bind(to)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// One timeline event.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct Event {
    /// When the scan that saw it was made (unix ms).
    pub at: i64,
    pub machine: String,
    pub kind: Kind,
    pub scan: i64,
    /// The root's scan before (what the change is measured against).
    pub from_scan: Option<i64>,
    pub before: Option<String>,
    /// The new version; for an invalidation, its main cause.
    pub after: Option<String>,
    /// Invalidation: entries invalidated, of `base` entries before.
    pub count: Option<i64>,
    pub base: Option<i64>,
}

/// The latest events, newest first: `page.limit + page.offset` rows of `timeline_at`, read
/// backwards, each joined to its machine by primary key.
pub async fn latest(pool: &Store, page: Page) -> sqlx::Result<Vec<Event>> {
    sqlx::query_as(
        "SELECT t.at, m.name AS machine, t.kind, t.scan_id AS scan, t.from_scan_id AS from_scan, t.before, t.after,
                t.count, t.base
         FROM timeline t INDEXED BY timeline_at JOIN machines m ON m.id = t.machine_id
         ORDER BY t.at DESC, t.id DESC LIMIT ? OFFSET ?",
    )
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await
}
