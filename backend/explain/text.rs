//! `cachelens explain` output: a [`CompareReport`] as terminal text.
//!
//! Kernel names, metadata fields and values, notes and IR lines come from caches that anyone who
//! can write a cache dir controls: both renderers pass each of them through
//! [`crate::fmt::term`] (control characters, bidi overrides and line breaks shown escaped) so
//! that printing a report cannot move the cursor, retitle the terminal, reorder or hide text, or
//! start a line of its own.

use super::Cause;
use super::report::CompareReport;
use crate::fmt::term;

/// The comparison as terminal text: headline, differing rows, equal rows summarized by
/// component, relocation consequences and IR diff stats.
pub fn render_text(r: &CompareReport) -> String {
    use std::fmt::Write;
    let c = &r.cmp;
    let show = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "-".to_string(),
        serde_json::Value::String(s) if s.is_empty() => "\"\"".into(),
        serde_json::Value::String(s) => term(s).into_owned(),
        o => term(&o.to_string()).into_owned(),
    };
    let clip = |s: String| {
        if s.chars().count() > 60 { format!("{}…", s.chars().take(59).collect::<String>()) } else { s }
    };
    let mut o = String::new();
    let k = |k: &Option<String>| k.as_deref().map(|k| format!(" ({})", term(k))).unwrap_or_default();
    let _ = writeln!(o, "A: {}{}\nB: {}{}", term(&c.a), k(&r.kernel_a), term(&c.b), k(&r.kernel_b));
    let _ = writeln!(o, "\ncause: {}\n{}", c.cause.as_str(), term(&c.summary));
    if c.identical_binary {
        let _ = writeln!(o, "identical binary: the same bytes under both keys, pure key churn");
    } else if c.identical_code {
        let _ = writeln!(o, "same machine code: only debug info differs, pure key churn");
    }
    for x in &r.relocated {
        let _ = writeln!(o, "relocated {}: {}", term(&x.side.to_uppercase()), term(&x.consequence));
    }
    let differing: Vec<_> = c.components.iter().filter(|r| r.differs).collect();
    let _ = writeln!(o, "\ndiffering ({}):", differing.len());
    let w = differing.iter().map(|r| term(&r.field).len()).max().unwrap_or(5).min(32);
    for row in &differing {
        let tag = if row.note.is_none() && row.component != Cause::None { "*" } else { " " };
        let _ = write!(
            o,
            " {tag} {:<9} {:<w$}  {}  →  {}",
            row.component.as_str(),
            term(&row.field),
            clip(show(&row.a)),
            clip(show(&row.b))
        );
        match &row.note {
            Some(n) => {
                let _ = writeln!(o, "   ({})", term(n));
            }
            None => o.push('\n'),
        }
    }
    let equal: Vec<_> = c.components.iter().filter(|r| !r.differs).collect();
    let mut by: Vec<(Cause, usize)> = Vec::new();
    for row in &equal {
        match by.iter_mut().find(|(c, _)| *c == row.component) {
            Some(e) => e.1 += 1,
            None => by.push((row.component, 1)),
        }
    }
    by.sort_by_key(|(c, _)| c.rank());
    let parts: Vec<String> = by.iter().map(|(c, n)| format!("{} {n}", c.as_str())).collect();
    let _ = writeln!(o, "equal ({}): {}", equal.len(), parts.join(", "));
    let ir = &r.ir;
    if ir.a_available && ir.b_available {
        let _ = writeln!(
            o,
            "\nIR .{}{}: {} lines only in A, {} only in B, {} equal",
            ir.kind,
            if ir.strip { " (locations stripped)" } else { "" },
            ir.deleted,
            ir.inserted,
            ir.equal
        );
    } else {
        let _ = writeln!(o, "\nIR .{}: not stored for both entries", ir.kind);
    }
    o
}

/// The IR diff as terminal text: `-`/`+` lines with A's and B's line numbers, equal runs
/// collapsed to a `…` line (the side-by-side rows of the compare page, one column). An IR line's
/// tabs (PTX indents with them) print as four spaces; anything else goes through [`term`].
pub fn render_diff(r: &CompareReport) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    if r.ir_rows.is_empty() {
        return o;
    }
    let line = |s: &str| term(&s.replace('\t', "    ")).into_owned();
    let kind = term(&r.ir.kind);
    let _ = writeln!(o, "\n--- A .{kind}\n+++ B .{kind}");
    if let Some(t) = &r.ir.truncated {
        let _ = writeln!(o, "  (diffed in part: {})", term(t));
    }
    let no = |n: Option<usize>| n.map(|n| n.to_string()).unwrap_or_default();
    for row in &r.ir_rows {
        match row.tag {
            "skip" => {
                let _ = writeln!(o, "  … {}", term(row.a.as_deref().unwrap_or("equal lines")));
            }
            "equal" => {
                let _ =
                    writeln!(o, "  {:>5} {:>5}  {}", no(row.a_no), no(row.b_no), line(row.a.as_deref().unwrap_or("")));
            }
            _ => {
                if let Some(a) = &row.a {
                    let _ = writeln!(o, "- {:>5} {:>5}  {}", no(row.a_no), "", line(a));
                }
                if let Some(b) = &row.b {
                    let _ = writeln!(o, "+ {:>5} {:>5}  {}", "", no(row.b_no), line(b));
                }
            }
        }
    }
    if let Some(t) = &r.ir.rows_cut {
        let _ = writeln!(o, "  (cut: {})", term(t));
    }
    o
}
