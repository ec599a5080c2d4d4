//! Rows read as one JSON text: a query selects its rows as one JSON array ([`rows_json`]) and
//! Rust reads it back ([`json_rows`]), and id lists are bound as one JSON array ([`json_ids`]).
//! sqlx hands each row over from its SQLite thread on its own (a channel send, a wake-up and a
//! row copy): for the many-row reads of ingest, reports and nearest requests that hand-over was
//! most of the time. Used by every `db/` module; `explain.rs` is only one of them.

/// The rows a query selects for `ids` as one JSON text ([`rows_json`]), 500 ids a query, on
/// one connection: `head` ends where the list of ids opens (`… IN (`), `tail` goes on from
/// where it closes. Both are written in code, never from input. The ids are bound as one JSON
/// array (`IN (SELECT CAST(value AS BIGINT) FROM json_each(?))`, the same plan as a list of
/// `?`s; cast because PostgreSQL's `json_each` gives its values as text), so the statement's
/// text is one for any number of ids and sqlx prepares it once a connection: a list of `?`s
/// was a new statement for each count, prepared every time (~0.2 ms for the side rows' query,
/// several times a nearest request).
pub(crate) async fn json_rows_of_ids<T: serde::de::DeserializeOwned>(
    conn: &mut crate::db::Conn<'_>,
    ids: &[i64],
    head: &str,
    tail: &str,
) -> sqlx::Result<Vec<T>> {
    let sql = format!("{head}SELECT CAST(value AS BIGINT) FROM json_each(?){tail}");
    let mut rows = Vec::with_capacity(ids.len());
    for part in ids.chunks(500) {
        let text: String =
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql.as_str())).bind(json_ids(part)).fetch_one(&mut *conn).await?;
        rows.extend(json_rows::<T>(text)?);
    }
    Ok(rows)
}

/// `ids` as a JSON array (bound to `json_each`).
pub(crate) fn json_ids(ids: &[i64]) -> String {
    serde_json::Value::from(ids).to_string()
}

/// The rows of a query that selected a JSON array of rows ([`rows_json`]): one row, one text,
/// however many rows it holds. sqlx hands each row over from its SQLite thread on its own
/// (a channel send, a wake-up and a row copy): the release pair's 100,000 entries, which SQLite
/// reads in ~0.5 s, took 3.0 s to load as rows and 2.45 s as JSON texts.
pub(crate) fn json_rows<T: serde::de::DeserializeOwned>(text: String) -> sqlx::Result<Vec<T>> {
    serde_json::from_str(&text).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// SQLite's 0/1 as a bool (in a JSON array of a row).
pub(crate) fn int_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(<i64 as serde::Deserialize>::deserialize(d)? != 0)
}

/// A JSON array of the rows' JSON values `row` (an SQL expression of one row), as [`json_rows`]
/// reads it: the rows' texts joined by `group_concat`, not `json_group_array` (which takes each
/// row's array apart again: ~40% slower on 100,000 rows, and part of every nearest request's row
/// reads); `[]` when there is no row.
pub(crate) fn rows_json(row: &str) -> String {
    format!("'[' || coalesce(group_concat({row}), '') || ']'")
}
