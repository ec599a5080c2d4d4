//! Report computations claimed by one server process at a time (`report_leases`, 0061): several
//! servers on one database compute a report once, and one whose process died mid-computation is
//! taken over when its claim lapses.
//!
//! A claim names its holder (a [`super::Db`] handle: pid and a random id) and lasts [`LEASE_MS`]
//! from its last renewal; a [`Lease`] renews it every [`RENEW_MS`] while it is held and deletes
//! it when dropped. A claim is taken over when it has lapsed, or when it is for other generations
//! of the report's sides (that computation's result would be stale). Times are wall-clock ms of
//! the claiming processes: servers on several hosts need clocks within a few seconds.

use super::write;
use std::sync::Arc;

/// How long a claim lasts without renewal (ms).
pub const LEASE_MS: i64 = 10_000;
/// How often a held claim is renewed (ms).
pub const RENEW_MS: u64 = 2_000;

/// A claim held by this process: renewed in the background until dropped, then deleted.
pub struct Lease {
    renew: tokio::task::JoinHandle<()>,
    db: super::Db,
    name: String,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renew.abort();
        let (db, name) = (self.db.clone(), std::mem::take(&mut self.name));
        // (a lease dropped outside a runtime lapses by itself)
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = release(&db, &name).await {
                    tracing::warn!(report = name, error = %e, "report lease not released (it lapses)");
                }
            });
        }
    }
}

/// Claim the computation of report `name` at `gens` for this process: `Some` when it is now
/// this process's (free, lapsed, for other generations, or this process's already), `None`
/// while another process holds it.
pub async fn claim(db: &super::Db, name: &str, gens: (i64, i64)) -> sqlx::Result<Option<Lease>> {
    let now = super::now_ms();
    let _turn = write::turn(db).await;
    let won = sqlx::query(
        "INSERT INTO report_leases(name, gen_a, gen_b, holder, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(name) DO UPDATE SET gen_a = excluded.gen_a, gen_b = excluded.gen_b, holder = excluded.holder,
                                         expires_at = excluded.expires_at
         WHERE report_leases.expires_at < ?6 OR report_leases.holder = excluded.holder
            OR report_leases.gen_a <> excluded.gen_a OR report_leases.gen_b <> excluded.gen_b",
    )
    .bind(name)
    .bind(gens.0)
    .bind(gens.1)
    .bind(db.holder.as_ref())
    .bind(now + LEASE_MS)
    .bind(now)
    .execute(db.pool())
    .await?
    .rows_affected()
        == 1;
    drop(_turn);
    if !won {
        return Ok(None);
    }
    let (rdb, rname) = (db.clone(), name.to_string());
    let renew = tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_millis(RENEW_MS));
        every.tick().await;
        loop {
            every.tick().await;
            if let Err(e) = renew(&rdb, &rname).await {
                tracing::warn!(report = rname, error = %e, "report lease not renewed");
            }
        }
    });
    Ok(Some(Lease { renew, db: db.clone(), name: name.to_string() }))
}

async fn renew(db: &super::Db, name: &str) -> sqlx::Result<()> {
    let _turn = write::turn(db).await;
    sqlx::query("UPDATE report_leases SET expires_at = ? WHERE name = ? AND holder = ?")
        .bind(super::now_ms() + LEASE_MS)
        .bind(name)
        .bind(db.holder.as_ref())
        .execute(db.pool())
        .await?;
    Ok(())
}

async fn release(db: &super::Db, name: &str) -> sqlx::Result<()> {
    let _turn = write::turn(db).await;
    sqlx::query("DELETE FROM report_leases WHERE name = ? AND holder = ?")
        .bind(name)
        .bind(db.holder.as_ref())
        .execute(db.pool())
        .await?;
    Ok(())
}

/// A new holder id for a [`super::Db`] handle.
pub(crate) fn holder() -> Arc<str> {
    format!("pid {} {:016x}", std::process::id(), rand::random::<u64>()).into()
}
