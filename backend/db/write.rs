//! One writer at a time per database in this process, served in the order they asked.
//!
//! SQLite's write lock is no queue: a writer that finds it taken sleeps and tries again (the busy
//! handler, up to the pool's 30 s busy timeout), and a writer that commits and begins again at
//! once takes it back before a sleeping one wakes. With 50 uploads ingested back to back (each
//! in one transaction, ~30 s for a 50,000-entry scan), the invalidation reports' and key sets'
//! writes never got their turn, failed after 30 s with "database is locked" and the pages that
//! waited for them answered 500 (`scripts/load-bench.sh --upload-nodes 50 --upload-entries
//! 50000` on the 1.25M-entry fleet: 17 such failures in six minutes). Every write transaction of
//! this process starts with [`begin`] (or holds a [`turn`] around a write of its own): a writer
//! waits in line, however long the ones before it take, and is never refused. The queue is the
//! database's handle's ([`super::Db`]: one per database in a process). SQLite's busy timeout
//! stays for writers in other processes (a `cachelens scan` into the same file).

use super::Db;
use super::Tx;
use tokio::sync::OwnedMutexGuard;

/// A writer's turn: the database's writers after it wait until it is dropped.
pub type Turn = OwnedMutexGuard<()>;

/// Wait for this process's turn to write to `db` (`tokio::sync::Mutex` is fair: first come,
/// first served).
pub async fn turn(db: &Db) -> Turn {
    db.writers.clone().lock_owned().await
}

/// The turn when no writer holds or waits for it now (`None`: someone does).
pub fn turn_now(db: &Db) -> Option<Turn> {
    db.writers.clone().try_lock_owned().ok()
}

/// Wait for the turn, then begin a write transaction (`BEGIN IMMEDIATE`). Keep the turn until
/// the transaction has ended: `let (_turn, mut tx) = write::begin(db).await?;`.
pub async fn begin(db: &Db) -> sqlx::Result<(Turn, Tx<'static>)> {
    let turn = turn(db).await;
    Ok((turn, db.pool().begin_write().await?))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// A writer that asks while a long transaction holds the database (longer than SQLite's busy
    /// timeout, here shortened to 200 ms) waits for it and then writes; a third writer that asks
    /// after it writes after it. Without the queue the second one fails with "database is locked".
    #[tokio::test]
    async fn a_writer_waits_its_turn_past_the_busy_timeout() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("t.db");
        let pool = super::super::open(&path).await.unwrap();
        sqlx::query("CREATE TABLE t(seq INTEGER PRIMARY KEY AUTOINCREMENT, who TEXT)").execute(&pool).await.unwrap();
        // the same file through a pool whose busy timeout is short
        let short = super::super::open_sqlite(&path, super::super::Connections::Server, Duration::from_millis(200))
            .await
            .unwrap();
        let short = super::Db::new(short);

        let (turn, mut long) = super::begin(&short).await.unwrap();
        sqlx::query("INSERT INTO t(who) VALUES ('long')").execute(&mut *long).await.unwrap();
        let (p2, p3) = (short.clone(), short.clone());
        let second = tokio::spawn(async move {
            let (_turn, mut w) = super::begin(&p2).await?;
            sqlx::query("INSERT INTO t(who) VALUES ('second')").execute(&mut *w).await?;
            w.commit().await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let third = tokio::spawn(async move {
            let (_turn, mut w) = super::begin(&p3).await?;
            sqlx::query("INSERT INTO t(who) VALUES ('third')").execute(&mut *w).await?;
            w.commit().await
        });
        // past the busy timeout, twice over
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!second.is_finished() && !third.is_finished(), "they wait for the long transaction");
        long.commit().await.unwrap();
        drop(turn);
        second.await.unwrap().unwrap();
        third.await.unwrap().unwrap();
        let order: Vec<String> = sqlx::query_scalar("SELECT who FROM t ORDER BY seq").fetch_all(&pool).await.unwrap();
        assert_eq!(order, ["long", "second", "third"]);

        // and a plain BEGIN IMMEDIATE, outside the queue, is refused after the busy timeout: what
        // the queue spares this process's writers
        let held = super::begin(&short).await.unwrap();
        let refused = short.pool().begin_write().await;
        assert!(refused.is_err_and(|e| e.to_string().contains("locked")), "SQLite's own lock refuses");
        drop(held);
    }
}
