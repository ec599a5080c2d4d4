//! The IR texts stored once by sha256 (`blobs`), compressed at rest: how a text is written and
//! the one way it is read back.
//!
//! Since migration 0030 a row holds either its text compressed (`z`, one zstd frame, `content`
//! NULL: every row written since) or plain (`content`, rows written before, which SQL cannot
//! compress). `bytes` is always the text's length as written. Every reader of blob text selects
//! [`COLUMNS`] and decodes through [`Stored::text`] (or [`Stored::first_line`]), so both forms
//! read alike; no SQL may look inside `content` or `z` (a SQL function on the text sees NULL in
//! a compressed row).

use sqlx::Row;
use sqlx::any::AnyRow;

/// zstd level of new rows. On the demo corpus's 2,986 distinct texts (95.9 MB): level 1 stores
/// 1/11.2 of the text at 225 MB/s on one busy core, level 3 1/11.0 at 152 MB/s, 9 1/12.7 at 28
/// MB/s, 19 1/13.3 at 2 MB/s (flate2: 1/7.7 fast, 1/10.1 at 45 MB/s by default).
pub const LEVEL: i32 = 1;

/// The columns a reader selects for a text, from `blobs` aliased `b`, in [`Stored::from_row`]'s
/// order (it reads them by name).
pub const COLUMNS: &str = "b.bytes, b.content, b.z";

/// The stored texts of `shas` that the store holds, as stored (not decoded).
pub async fn stored(
    pool: &crate::db::Store,
    shas: impl Iterator<Item = &str>,
) -> sqlx::Result<std::collections::HashMap<String, Stored>> {
    let shas: Vec<&str> = shas.collect();
    let sql = format!("SELECT b.sha256, {COLUMNS} FROM blobs b WHERE b.sha256 IN (SELECT value FROM json_each(?))");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(serde_json::to_string(&shas).unwrap_or_default())
        .fetch_all(pool)
        .await?;
    rows.iter().map(|r| Ok((r.try_get("sha256")?, Stored::from_row(r)?))).collect()
}

/// A text as stored: plain or compressed.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The text's length in bytes as written.
    pub bytes: i64,
    content: Option<String>,
    z: Option<Vec<u8>>,
}

impl Stored {
    /// From a row that selected [`COLUMNS`] (`bytes`, `content`, `z`).
    pub fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self { bytes: row.try_get("bytes")?, content: row.try_get("content")?, z: row.try_get("z")? })
    }

    /// The whole text.
    pub fn text(self) -> sqlx::Result<String> {
        self.decode(false)
    }

    /// The text's first line with its newline (what SQL's `substr(t, 1, instr(t, char(10)))`
    /// gave on the plain column): empty when the text has no newline. Decompresses only as far
    /// as the first newline.
    pub fn first_line(self) -> sqlx::Result<String> {
        self.decode(true)
    }

    /// The one place a stored text is decoded, in either form. A compressed text decodes to at
    /// most `bytes` bytes (a frame that holds more is an error, not an allocation).
    fn decode(self, first_line: bool) -> sqlx::Result<String> {
        let bad = |why: String| sqlx::Error::Decode(why.into());
        match (self.content, self.z) {
            (Some(t), _) if first_line => Ok(first_line_of(&t).to_string()),
            (Some(t), _) => Ok(t),
            (None, Some(z)) => {
                let cap = usize::try_from(self.bytes).map_err(|_| bad(format!("blob length {}", self.bytes)))?;
                let out = if first_line {
                    use std::io::{BufRead, Read};
                    let d = zstd::stream::read::Decoder::with_buffer(&z[..]).map_err(sqlx::Error::Io)?;
                    let mut line = vec![];
                    std::io::BufReader::new(d.take(cap as u64))
                        .read_until(b'\n', &mut line)
                        .map_err(sqlx::Error::Io)?;
                    if line.last() != Some(&b'\n') {
                        return Ok(String::new());
                    }
                    line
                } else {
                    zstd::bulk::decompress(&z, cap).map_err(|e| bad(format!("compressed blob: {e}")))?
                };
                if !first_line && out.len() != cap {
                    return Err(bad(format!("compressed blob holds {} bytes, its row says {cap}", out.len())));
                }
                String::from_utf8(out).map_err(|e| bad(format!("compressed blob is not UTF-8: {e}")))
            }
            (None, None) => Err(bad("blob row with neither text nor compressed text".into())),
        }
    }
}

/// `text` compressed as a new row stores it.
pub fn compress(text: &str) -> std::io::Result<Vec<u8>> {
    zstd::bulk::compress(text.as_bytes(), LEVEL)
}

/// What the blob store holds, whole (a text is stored once for every machine that has it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Totals {
    /// Distinct texts.
    pub texts: i64,
    /// Their length as written.
    pub bytes: i64,
    /// What they take stored: compressed length, or the text's for a plain row.
    pub stored: i64,
    /// Texts kept plain (written before migration 0030).
    pub plain: i64,
}

/// [`Totals`] of the store, read from `blob_totals` (kept by triggers on `blobs`).
pub async fn totals(pool: &crate::db::Store) -> sqlx::Result<Totals> {
    // one row kept by triggers on `blobs` (migration 0049), not a pass over every text
    let (texts, bytes, stored, plain) =
        sqlx::query_as("SELECT texts, bytes, stored, plain FROM blob_totals WHERE id = 1").fetch_one(pool).await?;
    Ok(Totals { texts, bytes, stored, plain })
}

/// A text's first line with its newline, empty when it has none: what [`Stored::first_line`]
/// reads, for a text in hand.
pub fn first_line_of(t: &str) -> &str {
    t.find('\n').map_or("", |i| &t[..=i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(content: Option<&str>, z: Option<Vec<u8>>, bytes: usize) -> Stored {
        Stored { bytes: bytes as i64, content: content.map(str::to_string), z }
    }

    #[test]
    fn both_forms_read_alike() {
        let text = "#loc = loc(\"/tmp/x.py\":1:0)\nmodule {\n  tt.func @k() { tt.return }\n}\n".repeat(50);
        let z = compress(&text).unwrap();
        assert!(z.len() * 5 < text.len(), "{} -> {}", text.len(), z.len());
        for s in [stored(Some(&text), None, text.len()), stored(None, Some(z.clone()), text.len())] {
            assert_eq!(s.clone().text().unwrap(), text);
            assert_eq!(s.first_line().unwrap(), "#loc = loc(\"/tmp/x.py\":1:0)\n");
        }
        // no newline: no first line, as SQL's substr/instr gave
        let one = "no newline here";
        let z1 = compress(one).unwrap();
        assert_eq!(stored(None, Some(z1.clone()), one.len()).first_line().unwrap(), "");
        assert_eq!(stored(Some(one), None, one.len()).first_line().unwrap(), "");
        assert_eq!(stored(None, Some(z1), one.len()).text().unwrap(), one);
        // empty text
        let z0 = compress("").unwrap();
        assert_eq!(stored(None, Some(z0), 0).text().unwrap(), "");
    }

    #[test]
    fn a_frame_longer_than_its_row_says_is_an_error() {
        let text = "x".repeat(10_000);
        let z = compress(&text).unwrap();
        assert!(stored(None, Some(z.clone()), 100).text().is_err());
        assert!(stored(None, Some(z), 20_000).text().is_err());
        assert!(stored(None, Some(b"not zstd".to_vec()), 10).text().is_err());
        assert!(stored(None, None, 0).text().is_err());
    }
}
