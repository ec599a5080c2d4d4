//! Display formatting shared by the CLI and the pages: sizes, times, ages, durations, URL
//! encoding, and [`term`], the one sanitizer for cache text on its way to a terminal or a CI log.
//! Templates get ready strings; nothing here reads the database or the clock but `age`.

use std::borrow::Cow;

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

/// A short duration to a tenth of a millisecond (`2.2 ms`), longer ones as [`duration_ms`].
pub fn ms(ms: f64) -> String {
    if ms < 100.0 { format!("{ms:.1} ms") } else { duration_ms(ms) }
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

/// Cache text (kernel names, keys, dir names, metadata values, IR lines, reasons) as it may be
/// printed on a terminal or into a CI log: every control character (C0 with `\n`, `\r`, `\t`
/// and ESC, DEL, C1), the Unicode bidi overrides and isolates (U+202A-202E, U+2066-2069) and the
/// line and paragraph separators (U+2028, U+2029) shown escaped: `\n`, `\r`, `\t`, `\x1b`,
/// `\u{202e}`. So a name can neither move the cursor or retitle the terminal, nor reorder what is
/// shown, nor start a line of its own (a GitHub Actions workflow command such as `::error::`
/// needs `::` at the start of a line). The one function every human (non `--json`) output of
/// `scan`, `gate`, `explain` and `token list` passes cache text through; borrowed when clean.
pub fn term(s: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
    }
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    use std::fmt::Write;
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii() && unsafe_char(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn term_escapes_control_bidi_and_line_breaks() {
        use super::term;
        assert!(matches!(term("add_kernel ü → ok"), std::borrow::Cow::Borrowed("add_kernel ü → ok")));
        assert_eq!(term("k\n::error title=x::boom"), "k\\n::error title=x::boom");
        assert_eq!(term("a\r\tb\u{1b}]0;t\u{7}\u{7f}"), "a\\r\\tb\\x1b]0;t\\x07\\x7f");
        assert_eq!(term("\u{9b}31m \u{85}"), "\\u{9b}31m \\u{85}");
        assert_eq!(term("x\u{202e}cod.exe\u{2066}\u{2069}\u{2028}"), "x\\u{202e}cod.exe\\u{2066}\\u{2069}\\u{2028}");
        assert!(!term("\u{0}\u{1f}").chars().any(char::is_control));
    }

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
