//! Answers computed from the ingest-time aggregates, kept for the next reader while nothing
//! landed: the hit/miss history of the whole fleet or one machine is the same page for every
//! member of the team until a scan or hook events land, so it is read from the aggregates once
//! per landing (and per [`TTL`], for the "last N days" windows that move with the clock), not
//! once per visitor.
//!
//! Validity is a stamp of the database read with every request ([`stamp`]: one indexed
//! query): the newest scan and hook event ids, the machines' report generations (moved by
//! triggers on every change to entries, removals and deletions included) and the machine
//! count. Every writer, this server's uploads or a local `cachelens scan` in another process,
//! moves it, since the aggregates are written in the same transaction as the scan. Bounded:
//! at most [`MAX`] answers ([`Bounded`]).

use crate::bounded::Bounded;
use crate::db::Store;
use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the database holds, as far as the memoised answers can tell.
pub type Stamp = (i64, i64, i64, i64);

/// Longest an answer is reused even when nothing landed (windows relative to now move).
pub const TTL: Duration = Duration::from_secs(30);

/// Answers kept at most.
pub const MAX: usize = 512;

type Slot = (Stamp, Instant, Arc<dyn Any + Send + Sync>);

/// The answers of one database, by key (the request's filter, as its callers spell it).
#[derive(Debug)]
pub struct Memo {
    map: Bounded<String, Slot>,
}

impl Default for Memo {
    fn default() -> Memo {
        Memo { map: Bounded::entries(MAX) }
    }
}

/// The stamp of the database now.
pub async fn stamp(pool: &Store) -> sqlx::Result<Stamp> {
    sqlx::query_as(
        "SELECT (SELECT COALESCE(MAX(id), 0) FROM scans), (SELECT COALESCE(MAX(id), 0) FROM events),
                (SELECT COALESCE(SUM(gen), 0) FROM report_gens), (SELECT COUNT(*) FROM machines)",
    )
    .fetch_one(pool)
    .await
}

impl Memo {
    /// Answers kept now.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The answer kept for `key` at `now`, if any and not older than [`TTL`].
    pub fn get<T: Clone + Send + Sync + 'static>(&self, key: &str, now: Stamp) -> Option<T> {
        let (s, at, v) = self.map.get(key)?;
        (s == now && at.elapsed() < TTL).then(|| v.downcast_ref::<T>().cloned()).flatten()
    }

    /// Keep `value` for `key`, computed from the database at `stamp`.
    pub fn put<T: Send + Sync + 'static>(&self, key: String, stamp: Stamp, value: T) {
        self.map.insert(key, (stamp, Instant::now(), Arc::new(value)));
    }
}
