//! Values on their way from SQLite to PostgreSQL ([`super`]): a value as SQLite stores it, converted
//! to its target column's type, written in `COPY`'s text format, and digested row by row.

use sha2::{Digest, Sha256};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, TypeInfo, ValueRef};

/// A column's type in the target, as values are converted to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Int,
    Float,
    Text,
    Bytes,
}

/// One value, converted.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Val {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

/// A value as SQLite stores it (its own type, whatever the column says).
pub(super) fn read_lite(row: &SqliteRow, i: usize) -> Result<Val, String> {
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
pub(super) fn convert(v: Val, kind: Kind) -> Result<Val, String> {
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
pub(super) fn encode_row(vals: &[Val], out: &mut Vec<u8>) {
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
pub(super) struct Digest4([u64; 4]);

impl Digest4 {
    pub(super) fn add(&mut self, vals: &[Val]) {
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
}
