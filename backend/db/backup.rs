//! `cachelens db backup`: an SQLite database copied into a new file while it is served.

use serde::Serialize;
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use std::path::Path;
use std::time::Instant;

/// What a backup wrote.
#[derive(Debug, Serialize)]
pub struct Backup {
    pub bytes: u64,
    pub machines: i64,
    pub entries: i64,
    pub millis: u64,
}

/// Write a backup of the SQLite database at `from` into the new file `to`: `VACUUM INTO` on a
/// read-only connection (one read transaction: a consistent snapshot while writers go on, the
/// database itself untouched, not even migrated), then the copy checked (`PRAGMA
/// integrity_check`) and counted. A failed backup leaves no file behind.
pub async fn backup(from: &Path, to: &Path) -> anyhow::Result<Backup> {
    use sqlx::sqlite::SqliteConnectOptions;
    let t0 = Instant::now();
    anyhow::ensure!(
        !super::is_postgres(from),
        "a PostgreSQL database is backed up by PostgreSQL's own tools (pg_dump, or the managed \
         service's snapshots): see docs/deploy.md"
    );
    anyhow::ensure!(from.is_file(), "no SQLite database at {} (pass --db FILE)", from.display());
    anyhow::ensure!(!to.exists(), "{} exists: a backup goes into a new file", to.display());
    // (a whole-database statement is slow by nature: not logged as slow)
    let opts = SqliteConnectOptions::new()
        .filename(from)
        .read_only(true)
        .busy_timeout(super::BUSY_TIMEOUT)
        .disable_statement_logging();
    let mut conn = SqliteConnection::connect_with(&opts).await?;
    let written = sqlx::query("VACUUM INTO ?").bind(to.to_string_lossy().into_owned()).execute(&mut conn).await;
    conn.close().await?;
    let checked = match written {
        Ok(_) => check_backup(to).await,
        Err(e) => Err(e.into()),
    };
    match checked {
        Ok((machines, entries)) => Ok(Backup {
            bytes: std::fs::metadata(to)?.len(),
            machines,
            entries,
            millis: t0.elapsed().as_millis() as u64,
        }),
        Err(e) => {
            let _ = std::fs::remove_file(to);
            Err(e.context(format!("backing up {} into {}", from.display(), to.display())))
        }
    }
}

/// The backup's integrity, its machines and entries.
async fn check_backup(path: &Path) -> anyhow::Result<(i64, i64)> {
    use sqlx::sqlite::SqliteConnectOptions;
    let opts = SqliteConnectOptions::new().filename(path).read_only(true).disable_statement_logging();
    let mut conn = SqliteConnection::connect_with(&opts).await?;
    let ok: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await?;
    anyhow::ensure!(ok == "ok", "the backup fails its integrity check: {ok}");
    let (machines, entries): (i64, i64) =
        sqlx::query_as("SELECT (SELECT COUNT(*) FROM machines), (SELECT COUNT(*) FROM entries)")
            .fetch_one(&mut conn)
            .await?;
    conn.close().await?;
    Ok((machines, entries))
}
