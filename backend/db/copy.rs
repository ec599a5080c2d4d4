//! `cachelens db copy --from team.db --to postgres://…`: a team's SQLite database moved into a
//! PostgreSQL database with nothing lost; and `cachelens db backup`, an SQLite database copied
//! into a new file while it is served ([`backup`]).
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

use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::sqlite::SqliteRow;
use sqlx::{ConnectOptions, Connection, Row, SqliteConnection, TypeInfo, ValueRef};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::str::FromStr;
use std::time::Instant;

/// The PostgreSQL schema, migration by migration (the same numbers as SQLite's `MIGRATOR`).
pub static PG_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-pg");

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

/// A column's type in the target, as values are converted to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Text,
    Bytes,
}

/// One value, converted.
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

struct Table {
    name: String,
    columns: Vec<(String, Kind)>,
    /// Its identity column, if any (moved past the copied ids).
    identity: Option<String>,
}

/// Copy the SQLite database at `from` into the PostgreSQL database at `to` (a
/// `postgres://…` URL; its role must be allowed to create tables in it).
pub async fn copy(from: &Path, to: &str) -> anyhow::Result<Copied> {
    let t0 = Instant::now();
    anyhow::ensure!(from.is_file(), "no SQLite database at {} (give --from an existing file)", from.display());
    anyhow::ensure!(
        to.starts_with("postgres://") || to.starts_with("postgresql://"),
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
    let mut pg = PgConnection::connect_with(&opts)
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to {}: {e}", redact(to)))?;
    PG_MIGRATOR.run(&mut pg).await?;
    let version = same_version(source.pool(), &mut pg).await?;
    // one snapshot of the source for the whole copy (a read transaction, rolled back)
    let mut lite = source.pool().begin().await?;
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

/// The URL without its password (`user:…@host`).
fn redact(url: &str) -> String {
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
    for t in tables {
        let sql = format!("ALTER TABLE {} DISABLE TRIGGER USER", ident(&t.name));
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
    }
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
    for t in tables {
        let sql = format!("ALTER TABLE {} ENABLE TRIGGER USER", ident(&t.name));
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
    }
    crate::failpoint::hit("db_copy_before_commit");
    tx.commit().await?;
    Ok(out)
}

/// Stream one table from SQLite into `COPY`; its row count and digest.
async fn copy_table(lite: &mut SqliteConnection, pg: &mut PgConnection, t: &Table) -> anyhow::Result<(u64, Digest4)> {
    let names: Vec<String> = t.columns.iter().map(|c| ident(&c.0)).collect();
    let mut copy = pg.copy_in_raw(&format!("COPY {} ({}) FROM STDIN", ident(&t.name), names.join(", "))).await?;
    let select = format!("SELECT {} FROM {}", names.join(", "), ident(&t.name));
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(select)).fetch(&mut *lite);
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
    let names: Vec<String> = t.columns.iter().map(|c| ident(&c.0)).collect();
    let select = format!("SELECT {} FROM {}", names.join(", "), ident(&t.name));
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(select)).fetch(&mut *pg);
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

/// A value as SQLite stores it (its own type, whatever the column says).
fn read_lite(row: &SqliteRow, i: usize) -> Result<Val, String> {
    let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
    if raw.is_null() {
        return Ok(Val::Null);
    }
    let ty = raw.type_info().name().to_string();
    let err = |e: sqlx::Error| e.to_string();
    Ok(match ty.as_str() {
        "INTEGER" => Val::Int(row.try_get_unchecked::<i64, _>(i).map_err(err)?),
        "REAL" => Val::Float(row.try_get_unchecked::<f64, _>(i).map_err(err)?),
        "BLOB" => Val::Bytes(row.try_get_unchecked::<Vec<u8>, _>(i).map_err(err)?),
        _ => {
            let bytes = row.try_get_unchecked::<Vec<u8>, _>(i).map_err(err)?;
            Val::Text(String::from_utf8(bytes).map_err(|_| "text that is not UTF-8".to_string())?)
        }
    })
}

/// `v` as a value of `kind`, as SQLite would read it in such a column, or why it cannot be.
fn convert(v: Val, kind: Kind) -> Result<Val, String> {
    Ok(match (v, kind) {
        (Val::Null, _) => Val::Null,
        (Val::Int(i), Kind::Int) => Val::Int(i),
        (Val::Int(i), Kind::Float) => Val::Float(i as f64),
        (Val::Int(i), Kind::Text) => Val::Text(i.to_string()),
        (Val::Float(f), Kind::Float) => Val::Float(f),
        (Val::Float(f), Kind::Int) if f.fract() == 0.0 && f.abs() < 9.2e18 => Val::Int(f as i64),
        (Val::Float(f), Kind::Text) => Val::Text(f.to_string()),
        (Val::Text(s), Kind::Int) => {
            Val::Int(s.trim().parse().map_err(|_| format!("text {s:.40?} in an integer column"))?)
        }
        (Val::Text(s), Kind::Float) => {
            Val::Float(s.trim().parse().map_err(|_| format!("text {s:.40?} in a real column"))?)
        }
        (Val::Text(s), Kind::Text) => Val::Text(s),
        (Val::Text(s), Kind::Bytes) => Val::Bytes(s.into_bytes()),
        (Val::Bytes(b), Kind::Bytes) => Val::Bytes(b),
        (Val::Bytes(b), Kind::Text) => {
            Val::Text(String::from_utf8(b).map_err(|_| "a blob that is not UTF-8 in a text column")?)
        }
        (v, k) => return Err(format!("{v:.60?} does not fit a {k:?} column")),
    })
    .and_then(|v| match &v {
        Val::Text(s) if s.contains('\0') => Err("text with a NUL byte (PostgreSQL text cannot hold one)".to_string()),
        _ => Ok(v),
    })
}

/// One row in `COPY`'s text format.
fn encode_row(vals: &[Val], out: &mut Vec<u8>) {
    use std::io::Write;
    for (i, v) in vals.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        match v {
            Val::Null => out.extend_from_slice(b"\\N"),
            Val::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Val::Float(f) if f.is_nan() => out.extend_from_slice(b"NaN"),
            Val::Float(f) if f.is_infinite() => {
                out.extend_from_slice(if *f > 0.0 { b"Infinity" } else { b"-Infinity" })
            }
            Val::Float(f) => {
                let _ = write!(out, "{f:e}");
            }
            Val::Text(s) => escape(s.as_bytes(), out),
            Val::Bytes(b) => {
                out.extend_from_slice(b"\\\\x");
                for byte in b {
                    let _ = write!(out, "{byte:02x}");
                }
            }
        }
    }
    out.push(b'\n');
}

/// Text escaped for `COPY`'s text format.
fn escape(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => out.push(b),
        }
    }
}

/// An order-independent digest of a multiset of rows: the wrapping sum of each row's sha256
/// (as four 64-bit words).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Digest4([u64; 4]);

impl Digest4 {
    fn add(&mut self, vals: &[Val]) {
        let mut h = Sha256::new();
        for v in vals {
            match v {
                Val::Null => h.update([0u8]),
                Val::Int(i) => {
                    h.update([1u8]);
                    h.update(i.to_le_bytes());
                }
                Val::Float(f) => {
                    h.update([2u8]);
                    h.update(f.to_bits().to_le_bytes());
                }
                Val::Text(s) => {
                    h.update([3u8]);
                    h.update((s.len() as u64).to_le_bytes());
                    h.update(s.as_bytes());
                }
                Val::Bytes(b) => {
                    h.update([4u8]);
                    h.update((b.len() as u64).to_le_bytes());
                    h.update(b);
                }
            }
        }
        let d = h.finalize();
        for (w, chunk) in self.0.iter_mut().zip(d.chunks(8)) {
            *w = w.wrapping_add(u64::from_le_bytes(chunk.try_into().unwrap_or_default()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_escapes_what_its_format_reads_as_syntax() {
        let mut out = vec![];
        encode_row(
            &[Val::Text("a\tb\\c\nd\re".into()), Val::Null, Val::Bytes(vec![0, 255]), Val::Int(-3), Val::Float(0.1)],
            &mut out,
        );
        assert_eq!(String::from_utf8(out).unwrap(), "a\\tb\\\\c\\nd\\re\t\\N\t\\\\x00ff\t-3\t1e-1\n");
    }

    #[test]
    fn values_convert_as_sqlite_reads_them_or_are_refused() {
        assert_eq!(convert(Val::Int(7), Kind::Text), Ok(Val::Text("7".into())));
        assert_eq!(convert(Val::Text(" 42".into()), Kind::Int), Ok(Val::Int(42)));
        assert_eq!(convert(Val::Float(3.0), Kind::Int), Ok(Val::Int(3)));
        assert!(convert(Val::Float(3.5), Kind::Int).is_err());
        assert!(convert(Val::Text("x\0y".into()), Kind::Text).unwrap_err().contains("NUL"));
        assert!(convert(Val::Bytes(vec![0xff]), Kind::Text).is_err());
        assert_eq!(convert(Val::Null, Kind::Bytes), Ok(Val::Null));
    }

    #[test]
    fn the_digest_ignores_row_order_and_sees_every_value() {
        let (a, b) = (vec![Val::Int(1), Val::Text("x".into())], vec![Val::Int(2), Val::Null]);
        let (mut d1, mut d2, mut d3) = (Digest4::default(), Digest4::default(), Digest4::default());
        d1.add(&a);
        d1.add(&b);
        d2.add(&b);
        d2.add(&a);
        d3.add(&a);
        d3.add(&[Val::Int(2), Val::Text(String::new())]);
        assert_eq!(d1, d2);
        assert_ne!(d1, d3);
    }

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
