//! `cachelens db copy --from team.db --to postgres://…`: a team's SQLite database moved into a
//! PostgreSQL database with nothing lost.
//!
//! The target gets the PostgreSQL schema (`migrations-pg/`, numbered as `migrations/`: the same
//! tables, columns, indexes, views and triggers) and must hold no row yet. Every table is copied
//! in one PostgreSQL transaction, from one SQLite read transaction (a consistent snapshot, so a
//! server may go on writing the file meanwhile):
//! - tables in foreign-key order, each streamed with `COPY … FROM STDIN` in bounded pieces
//!   ([`PIECE`]), never a whole table in memory;
//! - the target's own triggers off while copying (`DISABLE TRIGGER USER`): the counters they keep
//!   are copied as they are, not counted twice;
//! - each value converted to its target column's type as SQLite would read it (an integer in a
//!   text column becomes its digits); a value that does not fit (text with a NUL byte, a
//!   non-integral real in a bigint column) stops the copy with the table, row and column named;
//! - identity sequences moved past the copied ids;
//! - then every table read back inside the same transaction and compared with the source: the
//!   row count and an order-independent digest of the rows (the sum of each row's sha256 over
//!   its converted values). Any difference rolls everything back.
//!
//! A failure at any point (a refused value, a lost connection, the process killed) leaves the
//! target as it was: nothing is committed until every table has been compared.

mod values;

use serde::Serialize;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection, Row, SqliteConnection};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::str::FromStr;
use std::time::Instant;
use values::{Digest4, Kind, Val, convert, encode_row, read_lite};

/// The PostgreSQL schema, migration by migration (the same numbers as SQLite's `MIGRATOR`).
use super::PG_MIGRATOR;

/// The one-row tables the schema itself fills (`page_gen`, `blob_totals`): their rows are
/// replaced by the source's, and they do not make a target count as in use.
const SEEDED: [&str; 2] = ["page_gen", "blob_totals"];

/// Bytes of `COPY` text gathered before they are sent.
const PIECE: usize = 1 << 20;

/// What a copy moved.
#[derive(Debug, Serialize)]
pub struct Copied {
    pub from: String,
    pub to: String,
    /// The schema version both stores are at.
    pub version: i64,
    pub tables: Vec<TableCopied>,
    pub rows: u64,
    pub millis: u64,
}

/// One table copied and compared.
#[derive(Debug, Serialize)]
pub struct TableCopied {
    pub table: String,
    pub rows: u64,
}

struct Table {
    name: String,
    columns: Vec<(String, Kind)>,
    /// Its identity column, if any (moved past the copied ids).
    identity: Option<String>,
}

impl Table {
    /// `SELECT` of its columns in order, from the table (the same text on both stores).
    fn select(&self) -> String {
        format!("SELECT {} FROM {}", self.column_list(), ident(&self.name))
    }

    fn column_list(&self) -> String {
        self.columns.iter().map(|c| ident(&c.0)).collect::<Vec<_>>().join(", ")
    }
}

/// Copy the SQLite database at `from` into the PostgreSQL database at `to` (a
/// `postgres://…` URL; its role must be allowed to create tables in it).
pub async fn copy(from: &Path, to: &str) -> anyhow::Result<Copied> {
    let t0 = Instant::now();
    anyhow::ensure!(from.is_file(), "no SQLite database at {} (give --from an existing file)", from.display());
    anyhow::ensure!(
        super::is_postgres(Path::new(to)),
        "--to {:?} is not a PostgreSQL URL (postgres://USER@HOST[:PORT]/DB)",
        redact(to)
    );
    let opts = PgConnectOptions::from_str(to)
        .map_err(|e| {
            anyhow::anyhow!("--to {:?} is not a PostgreSQL URL (postgres://USER@HOST[:PORT]/DB): {e}", redact(to))
        })?
        .disable_statement_logging();
    // the source at the newest schema, as a server opening it would leave it
    let source = super::Db::open_command(from).await?;
    source.pool().close().await;
    // read through SQLite's own driver: values as SQLite stores them, typed or not
    let source = sqlx::SqlitePool::connect_with(
        // each table is read whole, in one statement: no "slow statement" warning for it
        sqlx::sqlite::SqliteConnectOptions::new()
            .filename(from)
            .read_only(true)
            .busy_timeout(super::BUSY_TIMEOUT)
            .disable_statement_logging(),
    )
    .await?;
    let mut pg = PgConnection::connect_with(&opts)
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to {}: {e}", redact(to)))?;
    PG_MIGRATOR.run(&mut pg).await?;
    let version = same_version(&source, &mut pg).await?;
    // one snapshot of the source for the whole copy (a read transaction, rolled back)
    let mut lite = source.begin().await?;
    let tables = tables(&mut pg, &mut lite).await?;
    let copied = copy_tables(&mut lite, &mut pg, &tables).await?;
    lite.rollback().await?;
    let rows = copied.iter().map(|t| t.rows).sum();
    Ok(Copied {
        from: from.display().to_string(),
        to: redact(to),
        version,
        tables: copied,
        rows,
        millis: t0.elapsed().as_millis() as u64,
    })
}

/// The URL without its password (`user:…@host`).
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let Some((userinfo, host)) = rest.rsplit_once('@') else { return url.to_string() };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:…@{host}"),
        None => url.to_string(),
    }
}

/// The schema version of both stores: the newest migration each has applied, which must be
/// equal (a build whose PostgreSQL schema lags its SQLite one refuses to copy).
async fn same_version(lite: &sqlx::SqlitePool, pg: &mut PgConnection) -> anyhow::Result<i64> {
    let (l,): (i64,) = sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations").fetch_one(lite).await?;
    let (p,): (i64,) = sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations").fetch_one(&mut *pg).await?;
    anyhow::ensure!(
        l == p,
        "the SQLite database is at schema {l} and the PostgreSQL one at {p}: this build cannot copy between them"
    );
    Ok(l)
}

/// The target's tables (less sqlx's own) in foreign-key order, each with its columns' kinds;
/// every one must exist in the source with the same columns, and hold no row in the target.
async fn tables(pg: &mut PgConnection, lite: &mut SqliteConnection) -> anyhow::Result<Vec<Table>> {
    let cols: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text, is_identity::text
         FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name IN
               (SELECT table_name FROM information_schema.tables
                WHERE table_schema = current_schema() AND table_type = 'BASE TABLE')
           AND table_name <> '_sqlx_migrations'
         ORDER BY table_name, ordinal_position",
    )
    .fetch_all(&mut *pg)
    .await?;
    let mut by_name: BTreeMap<String, Table> = BTreeMap::new();
    for (table, column, ty, identity) in cols {
        let kind = match ty.as_str() {
            "bigint" | "integer" | "smallint" => Kind::Int,
            "double precision" | "real" => Kind::Float,
            "text" | "character varying" => Kind::Text,
            "bytea" => Kind::Bytes,
            other => anyhow::bail!("column {table}.{column} has type {other}, which a copy does not convert to"),
        };
        let t = by_name.entry(table.clone()).or_insert_with(|| Table { name: table, columns: vec![], identity: None });
        if identity == "YES" {
            t.identity = Some(column.clone());
        }
        t.columns.push((column, kind));
    }
    for t in by_name.values() {
        let sql = format!("SELECT name FROM pragma_table_info('{}') ORDER BY cid", t.name.replace('\'', "''"));
        let have: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_all(&mut *lite).await?;
        let want: Vec<&str> = t.columns.iter().map(|c| c.0.as_str()).collect();
        anyhow::ensure!(
            have == want,
            "table {} has columns {have:?} in SQLite and {want:?} in PostgreSQL: the schemas differ",
            t.name
        );
        if SEEDED.contains(&t.name.as_str()) {
            continue;
        }
        let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", ident(&t.name));
        let (any,): (bool,) = sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_one(&mut *pg).await?;
        anyhow::ensure!(
            !any,
            "the PostgreSQL database already holds rows (table {}): a copy goes into an empty database only",
            t.name
        );
    }
    let extra: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut *lite)
    .await?;
    if let Some(t) = extra.iter().find(|t| !by_name.contains_key(*t)) {
        anyhow::bail!("table {t} is in the SQLite database and not in the PostgreSQL schema");
    }
    // foreign-key order: a table after every table it references (itself aside)
    let refs: Vec<(String, String)> = sqlx::query_as(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint
         WHERE contype = 'f' AND connamespace = current_schema()::regnamespace",
    )
    .fetch_all(&mut *pg)
    .await?;
    let mut after: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (t, r) in &refs {
        if t != r {
            after.entry(t.as_str()).or_default().insert(r.as_str());
        }
    }
    let mut order: Vec<String> = vec![];
    let mut done: BTreeSet<String> = BTreeSet::new();
    while done.len() < by_name.len() {
        let next: Vec<String> = by_name
            .keys()
            .filter(|t| !done.contains(*t))
            .filter(|t| after.get(t.as_str()).is_none_or(|rs| rs.iter().all(|r| done.contains(*r))))
            .cloned()
            .collect();
        anyhow::ensure!(!next.is_empty(), "the PostgreSQL schema's foreign keys form a cycle");
        for t in next {
            done.insert(t.clone());
            order.push(t);
        }
    }
    Ok(order.into_iter().filter_map(|t| by_name.remove(&t)).collect())
}

/// A quoted identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

async fn copy_tables(
    lite: &mut SqliteConnection,
    pg: &mut PgConnection,
    tables: &[Table],
) -> anyhow::Result<Vec<TableCopied>> {
    let mut tx = pg.begin().await?;
    user_triggers(&mut tx, tables, "DISABLE").await?;
    for t in SEEDED {
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {}", ident(t)))).execute(&mut *tx).await?;
    }
    let mut out = vec![];
    for t in tables {
        let (rows, digest) = copy_table(lite, &mut tx, t).await?;
        if let Some(col) = &t.identity {
            let sql = format!(
                "SELECT setval(pg_get_serial_sequence($1, $2), COALESCE((SELECT MAX({c}) FROM {t}), 0) + 1, false)",
                c = ident(col),
                t = ident(&t.name)
            );
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(ident(&t.name)).bind(col).execute(&mut *tx).await?;
        }
        let (back, back_digest) = read_back(&mut tx, t).await?;
        anyhow::ensure!(
            back == rows && back_digest == digest,
            "table {}: {rows} rows sent, {back} read back{}: nothing was copied",
            t.name,
            if back == rows { " with other values" } else { "" }
        );
        out.push(TableCopied { table: t.name.clone(), rows });
    }
    user_triggers(&mut tx, tables, "ENABLE").await?;
    crate::failpoint::hit("db_copy_before_commit");
    tx.commit().await?;
    Ok(out)
}

/// `ENABLE` or `DISABLE` the target's own triggers on every table.
async fn user_triggers(pg: &mut PgConnection, tables: &[Table], what: &str) -> sqlx::Result<()> {
    for t in tables {
        let sql = format!("ALTER TABLE {} {what} TRIGGER USER", ident(&t.name));
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *pg).await?;
    }
    Ok(())
}

/// Stream one table from SQLite into `COPY`; its row count and digest.
async fn copy_table(lite: &mut SqliteConnection, pg: &mut PgConnection, t: &Table) -> anyhow::Result<(u64, Digest4)> {
    let mut copy = pg.copy_in_raw(&format!("COPY {} ({}) FROM STDIN", ident(&t.name), t.column_list())).await?;
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(t.select())).fetch(&mut *lite);
    let (mut n, mut digest, mut buf) = (0u64, Digest4::default(), Vec::with_capacity(PIECE + 4096));
    let mut vals = Vec::with_capacity(t.columns.len());
    while let Some(row) = std::future::poll_fn(|cx| rows.as_mut().poll_next(cx)).await.transpose()? {
        n += 1;
        vals.clear();
        for (i, (col, kind)) in t.columns.iter().enumerate() {
            let v = read_lite(&row, i)
                .and_then(|v| convert(v, *kind))
                .map_err(|why| anyhow::anyhow!("table {}, row {n}, column {col}: {why}: nothing was copied", t.name))?;
            vals.push(v);
        }
        digest.add(&vals);
        encode_row(&vals, &mut buf);
        if buf.len() >= PIECE {
            copy.send(std::mem::take(&mut buf)).await?;
            buf.reserve(PIECE + 4096);
        }
    }
    drop(rows);
    if !buf.is_empty() {
        copy.send(buf).await?;
    }
    copy.finish().await?;
    Ok((n, digest))
}

/// Read one table back from the target: its row count and digest.
async fn read_back(pg: &mut PgConnection, t: &Table) -> anyhow::Result<(u64, Digest4)> {
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(t.select())).fetch(&mut *pg);
    let (mut n, mut digest) = (0u64, Digest4::default());
    let mut vals = Vec::with_capacity(t.columns.len());
    while let Some(row) = std::future::poll_fn(|cx| rows.as_mut().poll_next(cx)).await.transpose()? {
        n += 1;
        vals.clear();
        for (i, (_, kind)) in t.columns.iter().enumerate() {
            let v = match kind {
                Kind::Int => row.try_get::<Option<i64>, _>(i)?.map(Val::Int),
                Kind::Float => row.try_get::<Option<f64>, _>(i)?.map(Val::Float),
                Kind::Text => row.try_get::<Option<String>, _>(i)?.map(Val::Text),
                Kind::Bytes => row.try_get::<Option<Vec<u8>>, _>(i)?.map(Val::Bytes),
            };
            vals.push(v.unwrap_or(Val::Null));
        }
        digest.add(&vals);
    }
    Ok((n, digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_reaches_the_output() {
        assert_eq!(redact("postgres://u:secret@h:5432/db"), "postgres://u:…@h:5432/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn both_stores_have_every_migration() {
        let lite: Vec<i64> = super::super::MIGRATOR.iter().map(|m| m.version).collect();
        let pg: Vec<i64> = PG_MIGRATOR.iter().map(|m| m.version).collect();
        assert_eq!(pg.last(), lite.last(), "migrations-pg/ must reach the newest migration of migrations/");
    }
}
