//! Display helpers shared by the pages: sizes, times, ages. Templates get ready strings.

/// `1.5 MiB`, `12.0 KiB`, `900 B`.
pub fn bytes(n: i64) -> String {
    let f = n as f64;
    if n >= 1 << 30 {
        format!("{:.1} GiB", f / (1u64 << 30) as f64)
    } else if n >= 1 << 20 {
        format!("{:.1} MiB", f / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Unix ms as `YYYY-MM-DD HH:MM` UTC (empty when unknown).
pub fn time(ms: Option<i64>) -> String {
    ms.map(crate::run::fmt_time).unwrap_or_default()
}

/// How long ago, coarse: `just now`, `5 min ago`, `3 h ago`, `2 days ago`.
pub fn age(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "never".into() };
    let s = (crate::db::now_ms() - ms).max(0) / 1000;
    match s {
        0..60 => "just now".into(),
        60..3600 => format!("{} min ago", s / 60),
        3600..172800 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86400),
    }
}

/// A unix day number as `YYYY-MM-DD`.
pub fn day(d: i64) -> String {
    chrono::DateTime::from_timestamp(d * 86400, 0).map(|t| t.format("%Y-%m-%d").to_string()).unwrap_or_default()
}

/// An optional number, `–` when unknown.
pub fn num(v: Option<i64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "–".into())
}

/// Percent-encode a path segment or query value (machine names, kernel names, keys).
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats() {
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::bytes(3 << 20), "3.0 MiB");
        assert_eq!(super::enc("a b/<c>"), "a%20b%2F%3Cc%3E");
        assert_eq!(super::day(0), "1970-01-01");
    }
}
