//! Entries' classes (migration 0025): a digest of what the explainer's analysis reads of an
//! entry but its key and machine — kernel, metadata (but its `hash`, which is the key), binary,
//! code digest, relocation and its `.source`/`.ttir` blobs. The analysis reads an entry's key
//! only to ask whether it equals the other side's (`explain::compare`: "same key", "pure key
//! churn"), so two entries of one class compare alike with any entry whose key is neither's: a
//! nearest-neighbour request analyses one member of each class and lists all (`db::nearest`),
//! where a kernel compiled under many keys with the same stored inputs (compiler builds or
//! Python versions at one install path, a ptxas upgrade: in the key, not on disk) was one
//! analysis, one metadata parse and one row read per key.
//!
//! Ingest stores the class with the entry's row, in the same transaction; the rows of a database
//! migrated from before are computed by [`fill_pending`] (a server starts it in the background).
//! [`of_entry`] and [`SideRow`]'s [`of_row`] hash the same fields the same way: a test holds
//! every stored class equal to the class of the row as the explainer reads it.

use super::explain::SideRow;
use crate::model::Entry;
use sqlx::{Any, QueryBuilder};

/// An entry's class: the first 128 bits of a sha256.
pub type Class = [u8; 16];

/// The compared inputs of an entry, as stored.
pub(crate) struct Inputs<'a> {
    pub kernel: Option<&'a str>,
    /// The metadata as stored (`entries.metadata_json`: the scanner's JSON text).
    pub metadata_json: Option<&'a str>,
    pub binary_sha256: Option<&'a str>,
    pub code_sha256: Option<&'a str>,
    pub relocated: bool,
    /// sha256 of the entry's `.source` and `.ttir` files (the first by name of each).
    pub source_sha: Option<&'a str>,
    pub ttir_sha: Option<&'a str>,
}

/// sha256 of `key` (when given) and the inputs, each field length-prefixed so that no two
/// tuples hash the same bytes; 128 bits kept. With a key: entries that compare alike with
/// anything; without: their class, of the metadata without its `hash` (the key again).
pub(crate) fn digest(key: Option<&str>, i: &Inputs) -> [u8; 16] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut field = |v: Option<&str>| match v {
        Some(s) => {
            h.update([1u8]);
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        }
        None => h.update([0u8]),
    };
    let metadata = match key {
        Some(_) => i.metadata_json.map(std::borrow::Cow::Borrowed),
        None => i.metadata_json.map(without_hash),
    };
    if key.is_some() {
        field(key);
    }
    field(i.kernel);
    field(metadata.as_deref());
    field(i.binary_sha256);
    field(i.code_sha256);
    field(Some(if i.relocated { "1" } else { "0" }));
    field(i.source_sha);
    field(i.ttir_sha);
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// The metadata's text without its `hash` field: Triton writes the entry's key there (the
/// sha256 its dir name encodes), and the analysis never reads it (`explain::fields`: "the key
/// itself"); the other fields in the order serde_json writes them (a map's keys sorted, as the
/// scanner stores them). A text that is not a JSON object is kept as it is.
fn without_hash(text: &str) -> std::borrow::Cow<'_, str> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(mut m)) if m.contains_key("hash") => {
            m.remove("hash");
            std::borrow::Cow::Owned(serde_json::Value::Object(m).to_string())
        }
        _ => std::borrow::Cow::Borrowed(text),
    }
}

/// The class of an entry about to be stored: its fields as ingest writes them (the metadata's
/// JSON text, `relocated` from its group, the code digest from its resources) and the artifacts
/// `db::explain` picks (`ORDER BY name LIMIT 1` per extension).
pub fn of_entry(e: &Entry, metadata_json: Option<&str>) -> Class {
    let first = |ext: &str| {
        e.artifacts.iter().filter(|a| a.ext() == ext).min_by(|a, b| a.name.cmp(&b.name)).map(|a| a.sha256.as_str())
    };
    digest(
        None,
        &Inputs {
            kernel: e.kernel.as_deref(),
            metadata_json,
            binary_sha256: e.binary_sha256(),
            code_sha256: e.resources.as_ref().and_then(|r| r.get("code_sha256")).and_then(|v| v.as_str()),
            relocated: e.group.as_ref().is_some_and(|g| g.relocated),
            source_sha: first("source"),
            ttir_sha: first("ttir"),
        },
    )
}

/// The class of an entry's row as the explainer reads it.
pub(crate) fn of_row(r: &SideRow) -> Class {
    digest(None, &r.inputs())
}

/// A class as `fact_classes` keeps it: once per fact and relocation (entries with a kernel
/// name).
pub(crate) struct Stored {
    pub fact_id: i64,
    pub relocated: bool,
    pub class: Class,
}

/// Store the classes of `rows`; a (fact, relocation) that has one keeps it (the same fact read
/// the same way has the same class).
pub(crate) async fn store(conn: &mut crate::db::Conn<'_>, rows: &[Stored]) -> sqlx::Result<()> {
    for part in rows.chunks(300) {
        let mut qb = QueryBuilder::<Any>::new("INSERT OR IGNORE INTO fact_classes(fact_id, relocated, class) ");
        qb.push_values(part, |mut b, s| {
            b.push_bind(s.fact_id).push_bind(i64::from(s.relocated)).push_bind(s.class.to_vec());
        });
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// Entries computed per transaction by [`fill_pending`]: each holds the database's one writer
/// for a few tens of milliseconds, so uploads landing meanwhile wait that long, not the whole
/// fill.
const FILL_CHUNK: i64 = 1000;

/// Compute the classes of the entries listed pending (a database migrated from before 0025),
/// a chunk per transaction, each read and written under the write lock so that no ingest
/// changes an entry between its read and its class. Returns how many were computed.
pub async fn fill_pending(db: &super::Db) -> sqlx::Result<usize> {
    let mut done = 0;
    loop {
        let (_turn, mut tx) = super::write::begin(db).await?;
        let ids: Vec<i64> = sqlx::query_scalar("SELECT entry_id FROM entry_classes_pending ORDER BY entry_id LIMIT ?")
            .bind(FILL_CHUNK)
            .fetch_all(&mut *tx)
            .await?;
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(done);
        }
        let rows = super::explain::side_rows_on(&mut tx, &ids, "").await?;
        let placed: std::collections::HashMap<i64, (i64, bool)> =
            super::json_rows::json_rows_of_ids::<(i64, i64, i64)>(
                &mut tx,
                &ids,
                &format!(
                    "SELECT {} FROM entries e WHERE e.id IN (",
                    super::json_rows::rows_json("json_array(e.id, e.fact_id, e.relocated)")
                ),
                ")",
            )
            .await?
            .into_iter()
            .map(|(id, f, r)| (id, (f, r != 0)))
            .collect();
        let classes: Vec<Stored> = rows
            .iter()
            .filter_map(|r| {
                let (fact_id, relocated) = *placed.get(&r.id)?;
                r.kernel()?;
                Some(Stored { fact_id, relocated, class: of_row(r) })
            })
            .collect();
        store(&mut tx, &classes).await?;
        // `ids` are the lowest pending ones, and nothing else writes meanwhile (the write lock)
        let last = ids[ids.len() - 1];
        sqlx::query("DELETE FROM entry_classes_pending WHERE entry_id <= ?").bind(last).execute(&mut *tx).await?;
        tx.commit().await?;
        done += classes.len();
    }
}
