//! Display formatting shared by the CLI and the pages: sizes, times, ages, durations, URL
//! encoding. Templates get ready strings; nothing here reads the database or the clock but `age`.

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
    ms.map(|ms| stamp(ms, "%Y-%m-%d %H:%M")).unwrap_or_default()
}

/// Unix ms in a chrono `strftime` pattern, UTC (empty when out of range).
pub fn stamp(ms: i64, pattern: &str) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.format(pattern).to_string()).unwrap_or_default()
}

/// A duration for people: `850 ms`, `12.5 s`, `3.2 min`.
pub fn duration_ms(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else if ms < 120_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{:.1} min", ms / 60_000.0)
    }
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
        assert_eq!(super::time(Some(86_400_000 + 90_000)), "1970-01-02 00:01");
        assert_eq!(super::time(None), "");
        assert_eq!(super::duration_ms(12_500.0), "12.5 s");
        assert_eq!(super::duration_ms(192_000.0), "3.2 min");
    }
}
