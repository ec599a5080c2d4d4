//! The latest misses the hook recorded, each with what it compiled and the key its variant had
//! before: the history page's way from a miss to why it missed (the compare page says why).
//!
//! Reads only indexes: the miss events through the partial indexes of migration 0043 (fleet,
//! machine or kernel), then per miss its entry by `(machine_id, key)` and the earlier keys of its
//! variant through `entries_variant` (kernel, signature, shapes, num_warps, num_stages: a few
//! rows per variant).

use crate::db::Store;
use serde::Serialize;

/// One miss with its entry and the nearest earlier key of its variant.
#[derive(Debug, Clone, Serialize)]
pub struct Miss {
    pub ts: i64,
    pub machine: String,
    pub key: String,
    pub kernel: Option<String>,
    /// Whether the key's entry is stored (live or removed).
    pub stored: bool,
    /// The latest live entry of the same variant compiled before the miss: on the same machine
    /// when there is one, else on another. `None`: the variant's first compile (as far as the
    /// live entries tell).
    pub earlier: Option<(String, String)>,
}

/// The latest `limit` misses (of `machine` and `kernel` when given), newest first.
pub async fn latest(pool: &Store, machine: Option<&str>, kernel: Option<&str>, limit: i64) -> sqlx::Result<Vec<Miss>> {
    let index = match (machine, kernel) {
        (_, Some(_)) => "events_miss_kernel",
        (Some(_), None) => "events_miss_machine",
        (None, None) => "events_miss_ts",
    };
    let rows: Vec<(i64, String, String, Option<String>, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT e.ts, m.name, e.key, e.kernel, e.machine_id FROM events e INDEXED BY {index}
         JOIN machines m ON m.id = e.machine_id
         WHERE e.event = 'miss' AND (?1 IS NULL OR e.machine_id = (SELECT id FROM machines WHERE name = ?1))
           AND (?2 IS NULL OR e.kernel = ?2)
         ORDER BY e.ts DESC LIMIT ?3"
    )))
    .bind(machine)
    .bind(kernel)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for (ts, machine, key, kernel, mid) in rows {
        let entry: Option<(i64,)> = sqlx::query_as("SELECT id FROM entry_rows WHERE machine_id = ? AND key = ?")
            .bind(mid)
            .bind(&key)
            .fetch_optional(pool)
            .await?;
        let earlier: Option<(String, String)> = match entry {
            None => None,
            Some((id,)) => {
                sqlx::query_as(
                    "SELECT m.name, o.key FROM entry_rows e
                 JOIN entry_rows o ON o.kernel = e.kernel AND o.signature IS e.signature
                   AND o.shapes IS e.shapes AND o.num_warps IS e.num_warps AND o.num_stages IS e.num_stages
                   AND o.removed_at IS NULL
                 JOIN machines m ON m.id = o.machine_id
                 WHERE e.id = ?1 AND o.id <> e.id AND o.key <> e.key AND o.created_at < ?2
                 ORDER BY o.machine_id = e.machine_id DESC, o.created_at DESC, o.id DESC LIMIT 1",
                )
                .bind(id)
                .bind(ts)
                .fetch_optional(pool)
                .await?
            }
        };
        out.push(Miss { ts, machine, key, kernel, stored: entry.is_some(), earlier });
    }
    Ok(out)
}
