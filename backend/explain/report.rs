//! What the compare, nearest and invalidations views show (JSON API, pages and CLI alike):
//! the pure results of [`compare`](super::compare) and [`invalidations`](super::invalidations)
//! dressed with ids, relocation consequences, IR diff rows and counts.

use super::{Cause, Comparison, DiffLine, Invalidations, ir_diff, strip_locations};
use serde::Serialize;

/// IR kinds a comparison can diff, in the order they are offered.
pub const IR_KINDS: &[&str] = &["source", "ttir", "ttgir", "llir", "ptx", "amdgcn"];

/// The consequence of an entry whose group file points elsewhere.
pub fn relocation_consequence(group_at: Option<&str>) -> String {
    let to = group_at.map(str::to_string).unwrap_or_else(|| "another path".into());
    format!("its group file points to {to}: Triton will miss on this entry where it sits now")
}

/// An entry flagged as relocated.
#[derive(Debug, Clone, Serialize)]
pub struct Relocated {
    /// `a` or `b`.
    pub side: &'static str,
    /// `machine:key`.
    pub entry: String,
    /// The writer's directory, when the group file names one.
    pub group_at: Option<String>,
    /// "its group file points to ...: Triton will miss on this entry where it sits now".
    pub consequence: String,
}

impl Relocated {
    pub fn new(side: &'static str, entry: String, group_at: Option<String>) -> Relocated {
        let consequence = relocation_consequence(group_at.as_deref());
        Relocated { side, entry, group_at, consequence }
    }
}

/// Counts of an IR diff.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IrStats {
    /// Which IR (`source`, `ttir`, ...).
    pub kind: String,
    /// Whether locations were stripped (and SSA names ignored).
    pub strip: bool,
    pub a_available: bool,
    pub b_available: bool,
    pub equal: usize,
    /// Lines only in A.
    pub deleted: usize,
    /// Lines only in B.
    pub inserted: usize,
    /// Set when the diff covers only the first part of a text (past
    /// [`DIFF_MAX_LINES`](super::ir::DIFF_MAX_LINES) lines or
    /// [`DIFF_MAX_BYTES`](super::ir::DIFF_MAX_BYTES) bytes a side): says what it covers.
    pub truncated: Option<String>,
    /// Set when the side-by-side rows were cut at [`SHOWN_ROWS`] rows or [`SHOWN_BYTES`] of text
    /// (pages only).
    #[serde(skip)]
    pub rows_cut: Option<String>,
}

/// Side-by-side rows a diff shows at most: the compare page stays small whatever the texts.
pub const SHOWN_ROWS: usize = 4_000;

/// Text of the side-by-side rows shown at most (both sides together).
pub const SHOWN_BYTES: usize = 1 << 20;

/// Characters of one line shown at most (the rest replaced by `…`).
pub const SHOWN_LINE: usize = 1_000;

/// One row of a side-by-side diff (`None` text: nothing on that side).
#[derive(Debug, Clone, Serialize)]
pub struct SbsRow {
    /// `equal`, `change`, `delete`, `insert` or `skip` (a run of equal lines left out).
    pub tag: &'static str,
    pub a_no: Option<usize>,
    pub a: Option<String>,
    pub b_no: Option<usize>,
    pub b: Option<String>,
}

/// The full answer of `/api/v1/compare`.
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    #[serde(flatten)]
    pub cmp: Comparison,
    pub kernel_a: Option<String>,
    pub kernel_b: Option<String>,
    /// Entries whose group file points elsewhere, with the consequence.
    pub relocated: Vec<Relocated>,
    /// The IR diff's counts.
    pub ir: IrStats,
    /// Side-by-side rows (pages only).
    #[serde(skip)]
    pub ir_rows: Vec<SbsRow>,
}

impl CompareReport {
    /// Differing rows (causes and consequences).
    pub fn differing(&self) -> usize {
        self.cmp.components.iter().filter(|r| r.differs).count()
    }
}

/// Diffs two IR texts into stats and side-by-side rows (equal runs longer than 2×`context`
/// collapsed).
pub fn ir_report(kind: &str, a: Option<&str>, b: Option<&str>, strip: bool, context: usize) -> (IrStats, Vec<SbsRow>) {
    let mut st =
        IrStats { kind: kind.into(), strip, a_available: a.is_some(), b_available: b.is_some(), ..Default::default() };
    let (Some(a), Some(b)) = (a, b) else {
        return (st, vec![]);
    };
    // Only the first part of a long text is diffed (the diff's cost grows with its input).
    let ((a, cut_a), (b, cut_b)) = (super::ir::diff_prefix(a), super::ir::diff_prefix(b));
    if cut_a || cut_b {
        let side = match (cut_a, cut_b) {
            (true, true) => "both texts are",
            (true, false) => "A's text is",
            _ => "B's text is",
        };
        st.truncated = Some(format!(
            "{side} longer than the {} lines or {} MiB a diff reads: this is the diff of the first {} lines ({} MiB at most) of each side",
            super::ir::DIFF_MAX_LINES,
            super::ir::DIFF_MAX_BYTES >> 20,
            super::ir::DIFF_MAX_LINES,
            super::ir::DIFF_MAX_BYTES >> 20,
        ));
    }
    let (a, b) =
        if strip { (debug_info_blanked(kind, a), debug_info_blanked(kind, b)) } else { (a.to_string(), b.to_string()) };
    let (a, b) = (a.as_str(), b.as_str());
    let lines = ir_diff(a, b, strip);
    let b_lines: Vec<&str> = b.lines().collect();
    let b_text = |n: usize| {
        let l = b_lines.get(n - 1).copied().unwrap_or("");
        if strip { strip_locations(l).trim_end().to_string() } else { l.to_string() }
    };
    let mut rows = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = &lines[i];
        if l.tag == "equal" {
            st.equal += 1;
            rows.push(SbsRow {
                tag: "equal",
                a_no: l.a_no,
                a: Some(l.text.clone()),
                b_no: l.b_no,
                b: l.b_no.map(b_text),
            });
            i += 1;
            continue;
        }
        let dels: Vec<&DiffLine> = lines[i..].iter().take_while(|x| x.tag == "delete").collect();
        let ins: Vec<&DiffLine> = lines[i + dels.len()..].iter().take_while(|x| x.tag == "insert").collect();
        st.deleted += dels.len();
        st.inserted += ins.len();
        for k in 0..dels.len().max(ins.len()) {
            let (d, n) = (dels.get(k), ins.get(k));
            let tag = match (d, n) {
                (Some(_), Some(_)) => "change",
                (Some(_), None) => "delete",
                _ => "insert",
            };
            rows.push(SbsRow {
                tag,
                a_no: d.and_then(|x| x.a_no),
                a: d.map(|x| x.text.clone()),
                b_no: n.and_then(|x| x.b_no),
                b: n.map(|x| x.text.clone()),
            });
        }
        i += dels.len() + ins.len();
    }
    let rows = collapse(rows, context);
    let (rows, cut) = shown(rows);
    st.rows_cut = cut;
    (st, rows)
}

/// The rows a page shows: at most [`SHOWN_ROWS`] rows and [`SHOWN_BYTES`] of text, each line at
/// most [`SHOWN_LINE`] characters; and a note when rows were left out.
fn shown(rows: Vec<SbsRow>) -> (Vec<SbsRow>, Option<String>) {
    let total = rows.len();
    let mut bytes = 0;
    let mut out = Vec::with_capacity(total.min(SHOWN_ROWS));
    let cut_line = |t: Option<String>| -> Option<String> {
        t.map(|t| match t.char_indices().nth(SHOWN_LINE) {
            Some((i, _)) => format!("{}…", &t[..i]),
            None => t,
        })
    };
    for mut r in rows {
        if out.len() == SHOWN_ROWS || bytes >= SHOWN_BYTES {
            break;
        }
        r.a = cut_line(r.a.take());
        r.b = cut_line(r.b.take());
        bytes += r.a.as_ref().map_or(0, String::len) + r.b.as_ref().map_or(0, String::len);
        out.push(r);
    }
    let cut = (out.len() < total).then(|| {
        format!(
            "the diff is shown up to its row {} of {total} (a page shows at most {SHOWN_ROWS} rows and {} KiB of text)",
            out.len(),
            SHOWN_BYTES >> 10
        )
    });
    (out, cut)
}

/// Location noise of the lowered IRs, which [`strip_locations`] (MLIR `loc(...)`) does not know:
/// PTX/AMDGCN `.loc`/`.file` directives and `// file:line` comments, LLVM `!dbg` attachments and
/// debug metadata. Such lines become `#loc` (dropped by the diff, line numbers kept).
fn debug_info_blanked(kind: &str, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let t = line.trim_start();
        let l = match kind {
            "ptx" | "amdgcn" if t.starts_with(".loc") || t.starts_with(".file") => "#loc".to_string(),
            "ptx" => line.split_once("//").map(|(code, _)| code.trim_end()).unwrap_or(line).to_string(),
            "llir" if t.starts_with('!') && t.contains("= !DI") || t.starts_with("#dbg_") => "#loc".to_string(),
            "llir" => match line.find(", !dbg !") {
                Some(i) => {
                    let rest = &line[i + 8..];
                    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                    format!("{}{}", &line[..i], &rest[end..])
                }
                None => line.to_string(),
            },
            _ => line.to_string(),
        };
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// Replaces runs of equal rows longer than `2 * context + 1` by a `skip` row.
fn collapse(rows: Vec<SbsRow>, context: usize) -> Vec<SbsRow> {
    let mut out = Vec::with_capacity(rows.len());
    let mut run: Vec<SbsRow> = Vec::new();
    let flush = |run: &mut Vec<SbsRow>, out: &mut Vec<SbsRow>, first: bool, last: bool| {
        let head = if first { 0 } else { context };
        let tail = if last { 0 } else { context };
        if run.len() > head + tail + 1 {
            let skipped = run.len() - head - tail;
            let rest = run.split_off(head);
            out.append(run);
            out.push(SbsRow {
                tag: "skip",
                a_no: None,
                a: Some(format!("{skipped} equal lines")),
                b_no: None,
                b: None,
            });
            out.extend(rest.into_iter().skip(skipped));
        } else {
            out.append(run);
        }
    };
    let mut first = true;
    for r in rows {
        if r.tag == "equal" {
            run.push(r);
        } else {
            flush(&mut run, &mut out, first, false);
            first = false;
            out.push(r);
        }
    }
    flush(&mut run, &mut out, first, true);
    out
}

/// An invalidated entry, with the ids of its compare view.
#[derive(Debug, Clone, Serialize)]
pub struct InvalidatedRow {
    pub kernel: String,
    pub old_key: String,
    pub new_key: String,
    pub cause: Cause,
    pub summary: String,
    pub identical_binary: bool,
    /// Same machine code (bytes may differ only in debug info): pure key churn.
    pub identical_code: bool,
    /// `machine:key` of the old and new entry (the `a` and `b` of `/compare`).
    pub a: String,
    pub b: String,
    /// The new entry's group file points elsewhere: Triton will miss on it.
    pub relocated: bool,
    /// What compiling it cost, in ms, as the hook measured it: the new key's compile on the new
    /// machine, else the old key's on the old machine (the same kernel compiled before). Null
    /// when the hook saw neither.
    pub compile_ms: Option<f64>,
}

/// What recompiling a set of invalidated entries costs: the compile times the hook measured
/// (their [`InvalidatedRow::compile_ms`]), summed, with how many it timed of how many. The
/// invalidations page and `gate` show this one figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Cost {
    /// Summed compile time of the timed entries.
    pub ms: f64,
    /// Entries the hook timed.
    pub timed: usize,
    /// Entries counted.
    pub of: usize,
}

impl Cost {
    /// Counts one entry and its compile time, if timed.
    pub fn add(&mut self, compile_ms: Option<f64>) {
        self.of += 1;
        if let Some(t) = compile_ms {
            self.ms += t;
            self.timed += 1;
        }
    }

    /// The cost of `rows`.
    pub fn of_rows<'a>(rows: impl IntoIterator<Item = &'a InvalidatedRow>) -> Cost {
        let mut c = Cost::default();
        rows.into_iter().for_each(|r| c.add(r.compile_ms));
        c
    }

    /// `32.4 s`, or `unknown` when the hook timed none.
    pub fn text(&self) -> String {
        if self.timed == 0 { "unknown".into() } else { crate::fmt::duration_ms(self.ms) }
    }
}

/// A kernel entry (`new`, `removed`).
#[derive(Debug, Clone, Serialize)]
pub struct KernelKey {
    pub kernel: String,
    pub key: String,
}

/// Invalidated entries of one cause.
#[derive(Debug, Clone, Serialize)]
pub struct CauseCount {
    pub cause: Cause,
    pub count: usize,
}

/// The full answer of `/api/v1/invalidations`.
#[derive(Debug, Clone, Serialize)]
pub struct InvalidationsReport {
    /// Old side: `machine` (scan mode) or machine A.
    pub old_machine: String,
    pub new_machine: String,
    /// Scan ids compared (scan mode only; `from` is null when `to` is the first scan).
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub old_entries: usize,
    pub new_entries: usize,
    /// Entries (keys) in both sets.
    pub kept: usize,
    pub invalidated: Vec<InvalidatedRow>,
    pub new: Vec<KernelKey>,
    pub removed: Vec<KernelKey>,
    pub by_cause: Vec<CauseCount>,
    /// Invalidated pairs with the same machine code (identical binaries included).
    pub identical_code: usize,
    pub summary: String,
    /// New-side entries whose group file points elsewhere.
    pub relocated: usize,
    /// What that means, when any are.
    pub relocated_consequence: Option<String>,
}

/// Dresses [`Invalidations`] for the views. `relocated(key)` says whether a new-side entry is
/// relocated.
pub fn invalidations_report(
    inv: Invalidations,
    (old_machine, new_machine): (&str, &str),
    (old_n, new_n): (usize, usize),
    relocated: impl Fn(&str) -> bool,
    relocated_total: usize,
) -> InvalidationsReport {
    let kk = |v: Vec<(String, String)>| v.into_iter().map(|(kernel, key)| KernelKey { kernel, key }).collect();
    let identical_code = inv.invalidated.iter().filter(|i| i.identical_code).count();
    let invalidated = inv
        .invalidated
        .into_iter()
        .map(|i| InvalidatedRow {
            a: format!("{old_machine}:{}", i.old_key),
            b: format!("{new_machine}:{}", i.new_key),
            relocated: relocated(&i.new_key),
            kernel: i.kernel,
            old_key: i.old_key,
            new_key: i.new_key,
            cause: i.cause,
            summary: i.summary,
            identical_binary: i.identical_binary,
            identical_code: i.identical_code,
            compile_ms: None,
        })
        .collect();
    let mut summary = inv.summary;
    if relocated_total > 0 {
        summary.push_str(&format!(
            "; {relocated_total} entries have group files pointing to another path: Triton will miss on them where they sit now"
        ));
    }
    InvalidationsReport {
        old_machine: old_machine.into(),
        new_machine: new_machine.into(),
        from: None,
        to: None,
        old_entries: old_n,
        new_entries: new_n,
        kept: inv.kept.len() + inv.kept_unlisted,
        invalidated,
        new: kk(inv.new),
        removed: kk(inv.removed),
        by_cause: inv.by_cause.into_iter().map(|(cause, count)| CauseCount { cause, count }).collect(),
        identical_code,
        summary,
        relocated: relocated_total,
        relocated_consequence: (relocated_total > 0).then(|| {
            "their group files point to another path (the cache was copied or moved): Triton will miss on them where they sit now"
                .to_string()
        }),
    }
}
