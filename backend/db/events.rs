//! Hook events as stored: inserting them (once per line, whatever re-reads it) and how far each
//! event file of a machine has been read (written by an ingest, read by uploading clients).
//! Counting them is `history`'s.

use super::{Conn, Store, Tx};
use crate::model::{EventFileMark, HookEvent};
use sqlx::{Any, QueryBuilder, Row};
use std::collections::BTreeSet;

/// Insert hook events, ignoring lines already stored; returns how many were new. The keys of the
/// new lines and of legacy rows claimed are added to `touched` (their history must be counted
/// again: [`super::history_agg::account`]).
///
/// A line is identified by (host, pid, key, event, µs timestamp, the hook's line counter): the
/// same line read again (a re-scan, a re-upload, a rotated file read anew) is stored once, and
/// two lookups of one key in one process within a millisecond are two events. A line stored
/// before migration 0007 knows only its millisecond (`legacy`): read again, it claims that row.
pub async fn insert_events(
    tx: &mut Tx<'static>,
    machine_id: i64,
    events: &[HookEvent],
    touched: &mut BTreeSet<String>,
) -> sqlx::Result<i64> {
    let crate::db::Flag(legacy) =
        sqlx::query_scalar("SELECT EXISTS(SELECT 1 FROM events WHERE machine_id = ? AND legacy = 1)")
            .bind(machine_id)
            .fetch_one(&mut **tx)
            .await?;
    let mut fresh: Vec<&HookEvent> = Vec::with_capacity(events.len());
    for e in events {
        if legacy && claim_legacy(tx, machine_id, e).await? {
            touched.insert(e.key.clone()); // its order among the key's lines may have changed
        } else {
            fresh.push(e);
        }
    }
    let mut n = 0;
    for part in fresh.chunks(500) {
        let mut qb = QueryBuilder::<Any>::new(
            "INSERT OR IGNORE INTO events(machine_id, ts, ts_us, seq, host, pid, key, kernel, event, compile_ms,
               stages_json, parts_json) ",
        );
        qb.push_values(part, |mut b, e| {
            b.push_bind(machine_id)
                .push_bind(e.ts)
                .push_bind(ts_us(e))
                .push_bind(e.seq.unwrap_or(-1))
                .push_bind(e.host.clone())
                .push_bind(e.pid)
                .push_bind(e.key.clone())
                .push_bind(e.kernel.clone())
                .push_bind(e.event)
                .push_bind(e.compile_ms)
                .push_bind(e.stages_ms.as_ref().map(|v| v.to_string()))
                .push_bind(e.parts.as_ref().map(|v| v.to_string()));
        });
        qb.push(" RETURNING key, kernel, event, stages_json");
        let mut compiles = vec![];
        for row in qb.build().fetch_all(&mut **tx).await? {
            n += 1;
            touched.insert(row.get(0));
            if row.get::<String, _>(2) == "compile" {
                compiles.push((row.get::<Option<String>, _>(1), row.get::<Option<String>, _>(3)));
            }
        }
        super::stages::add(tx, machine_id, &compiles).await?;
    }
    Ok(n)
}

/// How far each hook event file of `machine` has been read (what an uploading client resumes from).
pub async fn event_marks(pool: &Store, machine: &str) -> sqlx::Result<Vec<EventFileMark>> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        r#"SELECT f.path, f.inode_sig, f."offset" FROM event_files f JOIN machines m ON m.id = f.machine_id
           WHERE m.name = ? ORDER BY f.path"#,
    )
    .bind(machine)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(path, inode_sig, offset)| EventFileMark { path, inode_sig, offset }).collect())
}

fn ts_us(e: &HookEvent) -> i64 {
    e.ts_us.unwrap_or(e.ts.saturating_mul(1000))
}

/// Give a legacy row (same line up to the millisecond) this line's full identity, unless the
/// line is stored already. True when a row was claimed (the event is not new).
async fn claim_legacy(tx: &mut Tx<'static>, machine_id: i64, e: &HookEvent) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE events SET ts_us = ?1, seq = ?2, legacy = 0
         WHERE id = (SELECT id FROM events INDEXED BY events_legacy
                     WHERE machine_id = ?3 AND host = ?4 AND pid = ?5 AND key = ?6 AND event = ?7 AND ts = ?8
                       AND legacy = 1 LIMIT 1)
           AND NOT EXISTS (SELECT 1 FROM events WHERE machine_id = ?3 AND host = ?4 AND pid = ?5 AND key = ?6
                             AND event = ?7 AND ts_us = ?1 AND seq = ?2)",
    )
    .bind(ts_us(e))
    .bind(e.seq.unwrap_or(-1))
    .bind(machine_id)
    .bind(&e.host)
    .bind(e.pid)
    .bind(&e.key)
    .bind(e.event)
    .bind(e.ts)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Record how far each event file was read (the next scan or upload resumes there).
pub async fn store_marks(conn: &mut Conn<'_>, machine_id: i64, marks: &[EventFileMark]) -> sqlx::Result<()> {
    for m in marks {
        sqlx::query(
            r#"INSERT INTO event_files(machine_id, path, inode_sig, "offset") VALUES (?, ?, ?, ?)
               ON CONFLICT(machine_id, path) DO UPDATE SET inode_sig = excluded.inode_sig, "offset" = excluded."offset""#,
        )
        .bind(machine_id)
        .bind(&m.path)
        .bind(&m.inode_sig)
        .bind(m.offset)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
