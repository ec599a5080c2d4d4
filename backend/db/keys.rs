//! Entries found by the start of their key: the short keys the pages show (`a100-1:VURMD4KEVF`)
//! resolved to whole keys, and the search box. Every lookup is a range on an index
//! (`key >= prefix AND key < next(prefix)` on the facts' `facts_key`, each fact probing the
//! machine's presence) with a bound on the rows read: never a scan of the entries.

use super::Store;
use sqlx::FromRow;

/// An entry whose key starts with the prefix asked for.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct KeyHit {
    pub machine: String,
    pub key: String,
    pub kernel: Option<String>,
    /// Still in the cache (not removed).
    #[sqlx(try_from = "crate::db::Flag")]
    pub live: bool,
}

/// The first string after every string that starts with `prefix` (its last byte raised by one),
/// for a range `key >= prefix AND key < upper`. `None` when no such string exists.
fn upper(prefix: &str) -> Option<String> {
    let mut b = prefix.as_bytes().to_vec();
    while let Some(last) = b.pop() {
        if last < 0x7f {
            b.push(last + 1);
            return String::from_utf8(b).ok();
        }
    }
    None
}

/// Entries of `machine` (every machine when `None`) whose key starts with `prefix` (ASCII, as
/// keys are), at most `limit`, in (machine, key) order. On every machine the range is read
/// machine by machine through the same index (a few hundred machines at most on a fleet), so a
/// one-letter prefix reads at most `limit` rows, not half the entries.
pub async fn by_prefix(pool: &Store, machine: Option<&str>, prefix: &str, limit: i64) -> sqlx::Result<Vec<KeyHit>> {
    let Some(hi) = upper(prefix).filter(|_| prefix.is_ascii()) else {
        return Ok(vec![]);
    };
    let machines: Vec<String> = match machine {
        Some(m) => vec![m.to_string()],
        None => sqlx::query_scalar("SELECT name FROM machines ORDER BY name").fetch_all(pool).await?,
    };
    let mut hits = Vec::new();
    for m in machines {
        let left = limit - hits.len() as i64;
        if left <= 0 {
            break;
        }
        // the facts of the key range in key order (`facts_key`), each probing the machine's
        // presence (`entries_fact`), stopping at the limit; through `entry_rows` (whose key is its
        // fact's) SQLite read and sorted every entry of the machine
        let rows: Vec<KeyHit> = sqlx::query_as(
            "SELECT m.name AS machine, f.key, f.kernel, e.removed_at IS NULL AS live
             FROM machines m CROSS JOIN facts f INDEXED BY facts_key
               CROSS JOIN entries e INDEXED BY entries_fact ON e.fact_id = f.id AND e.machine_id = m.id
             WHERE m.name = ?1 AND f.key >= ?2 AND f.key < ?3 ORDER BY f.key LIMIT ?4",
        )
        .bind(&m)
        .bind(prefix)
        .bind(&hi)
        .bind(left)
        .fetch_all(pool)
        .await?;
        hits.extend(rows);
    }
    Ok(hits)
}

#[cfg(test)]
mod tests {
    #[test]
    fn upper_bounds_every_key_with_the_prefix() {
        assert_eq!(super::upper("VURMD").as_deref(), Some("VURME"));
        assert_eq!(super::upper("AZ").as_deref(), Some("A["));
        assert_eq!(super::upper("a9").as_deref(), Some("a:"));
        assert_eq!(super::upper("").as_deref(), None);
        for k in ["VURMD", "VURMD4KEVF", "VURMDZZZZZ"] {
            assert!(k >= "VURMD" && k < super::upper("VURMD").unwrap().as_str());
        }
        assert!("VURME" >= super::upper("VURMD").unwrap().as_str());
    }
}
