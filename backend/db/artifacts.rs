//! An entry's files (`artifacts`) and the IR texts stored once by sha256 (`blobs`): writing them
//! (during an ingest) and reading them.

use super::entries::EntryRow;
use super::{Conn, Store};
use crate::model::Artifact;
use serde::Serialize;
use sqlx::{Any, FromRow, QueryBuilder};
use std::collections::{BTreeMap, HashSet};

#[derive(Debug, Serialize, serde::Deserialize, Clone, FromRow)]
pub struct ArtifactRow {
    pub name: String,
    pub ext: String,
    pub bytes: i64,
    pub sha256: String,
}

/// Attach artifact lists to entry rows: one query for the whole page, one JSON text of every
/// entry's files. A query per entry made a page of 100 entries 100 round trips to the database
/// thread, and a row per file 800 rows handed over one by one: most of `/api/v1/entries`' time.
pub async fn with_artifacts(pool: &Store, rows: &mut [EntryRow]) -> sqlx::Result<()> {
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let mut by_entry: std::collections::HashMap<i64, Vec<ArtifactRow>> = std::collections::HashMap::new();
    for part in ids.chunks(10_000) {
        // One text for the page (`db::json_rows::json_rows`), not a row an entry: sqlx's log
        // timed the 100 rows of a machine's deep page at 5.0 ms, the text at 2.5 ms.
        let sql = format!(
            "SELECT {} FROM (SELECT entry_id, json_group_array(json_object('name', name, 'ext', ext, 'bytes', bytes,
                                                                             'sha256', sha256) ORDER BY name) AS list
                              FROM entry_files WHERE entry_id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))
                              GROUP BY entry_id)",
            super::json_rows::rows_json("json_array(entry_id, json(list))")
        );
        let text: String =
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(super::json_rows::json_ids(part)).fetch_one(pool).await?;
        by_entry.extend(super::json_rows::json_rows::<(i64, Vec<ArtifactRow>)>(text)?);
    }
    for r in rows.iter_mut() {
        r.rank = crate::scan::discover::rank_dir(&r.root);
        r.artifacts = by_entry.remove(&r.id).unwrap_or_default();
    }
    Ok(())
}

/// An artifact with the sha256 of its text (IR is stored in `blobs`; binaries are not).
pub async fn artifact(pool: &Store, entry_id: i64, name: &str) -> sqlx::Result<Option<ArtifactRow>> {
    sqlx::query_as("SELECT name, ext, bytes, sha256 FROM entry_files WHERE entry_id = ? AND name = ?")
        .bind(entry_id)
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// Text of a stored artifact (IR), by sha256.
pub async fn blob(pool: &Store, sha256: &str) -> sqlx::Result<Option<String>> {
    let sql = format!("SELECT {} FROM blobs b WHERE b.sha256 = ?", super::blobs::COLUMNS);
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(sha256).fetch_optional(pool).await?;
    row.map(|r| super::blobs::Stored::from_row(&r)?.text()).transpose()
}

/// Of `shas`, those `machine` cannot be told the server has: a blob counts as present only
/// when it is stored and one of this machine's own entries references it. Asking never reveals
/// what other machines uploaded (the store still keeps one copy per sha256 for everyone).
pub async fn missing_blobs(pool: &Store, machine: &str, shas: &[String]) -> sqlx::Result<Vec<String>> {
    let mut missing = vec![];
    for part in shas.chunks(500) {
        // the machine's own files: its entries' facts' files, and the rows from before facts;
        // not the fact's group file where the machine's own differs (it names another
        // machine's paths)
        let have: HashSet<String> = sqlx::query_scalar(
            "SELECT f.sha256 FROM fact_files f INDEXED BY fact_files_sha JOIN entry_rows e ON e.fact = f.fact
             JOIN blobs b ON b.sha256 = f.sha256
             WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?1) AND f.sha256 IN (SELECT value FROM json_each(?2))
               AND NOT (f.ext = 'grp' AND e.group_sha256 IS NOT NULL)
             UNION
             SELECT a.sha256 FROM artifacts a JOIN entry_rows e ON e.id = a.entry_id JOIN blobs b ON b.sha256 = a.sha256
             WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?1) AND a.sha256 IN (SELECT value FROM json_each(?2))",
        )
        .bind(machine)
        .bind(serde_json::to_string(part).unwrap_or_default())
        .fetch_all(pool)
        .await?
        .into_iter()
        .collect();
        missing.extend(part.iter().filter(|s| !have.contains(*s)).cloned());
    }
    Ok(missing)
}

/// Store the files of (re)written entries, `(fact, file)`, once per fact (`fact_files`: the
/// first list stored of a fact stays; the same fact is the same files), and the IR texts not
/// stored yet: from the file itself (local scans) or from the report's `blobs` (uploads).
/// `stored` holds the sha256s this ingest has written, so a text shared by many entries is
/// written once.
pub async fn insert(
    conn: &mut Conn<'_>,
    arts: &[(&str, &Artifact)],
    blobs: &BTreeMap<String, String>,
    stored: &mut HashSet<String>,
) -> sqlx::Result<()> {
    for part in arts.chunks(1000) {
        let mut qb = QueryBuilder::<Any>::new("INSERT OR IGNORE INTO fact_files(fact, name, ext, bytes, sha256) ");
        qb.push_values(part, |mut b, (fact, a)| {
            b.push_bind(fact.to_string())
                .push_bind(a.name.clone())
                .push_bind(a.ext().to_string())
                .push_bind(a.bytes)
                .push_bind(a.sha256.clone());
        });
        qb.build().execute(&mut *conn).await?;
    }
    // The texts this ingest has not written yet, less those already stored (a rescan's changed
    // entries mostly point at stored texts: checked in one query, not compressed again), then
    // compressed ([`super::blobs`]) and written a few hundred rows a statement.
    let mut new: Vec<(&str, &str)> = vec![];
    for (_, a) in arts {
        let text = a.text.as_deref().or_else(|| blobs.get(&a.sha256).map(String::as_str));
        if let Some(text) = text
            && stored.insert(a.sha256.clone())
        {
            new.push((a.sha256.as_str(), text));
        }
    }
    for part in new.chunks(500) {
        let have: HashSet<String> =
            sqlx::query_scalar("SELECT sha256 FROM blobs WHERE sha256 IN (SELECT value FROM json_each(?))")
                .bind(serde_json::to_string(&part.iter().map(|p| p.0).collect::<Vec<_>>()).unwrap_or_default())
                .fetch_all(&mut *conn)
                .await?
                .into_iter()
                .collect();
        let mut rows: Vec<(&str, i64, Vec<u8>)> = vec![];
        for (sha, text) in part.iter().filter(|p| !have.contains(p.0)) {
            rows.push((sha, text.len() as i64, super::blobs::compress(text)?));
        }
        // at most ~32 MiB of compressed text a statement, 3 binds a row
        let mut at = 0;
        while at < rows.len() {
            let (mut end, mut size) = (at, 0);
            while end < rows.len() && end - at < 300 && (end == at || size + rows[end].2.len() <= 32 << 20) {
                size += rows[end].2.len();
                end += 1;
            }
            let mut qb = QueryBuilder::<Any>::new("INSERT OR IGNORE INTO blobs(sha256, bytes, z) ");
            qb.push_values(&rows[at..end], |mut b, (sha, bytes, z)| {
                b.push_bind(*sha).push_bind(*bytes).push_bind(z.as_slice());
            });
            qb.build().execute(&mut *conn).await?;
            at = end;
        }
    }
    Ok(())
}
