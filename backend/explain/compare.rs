//! [`compare`]: every difference between two entries, by component, with the headline cause
//! and a one-sentence summary.

use super::fields::{Context, Finding, SET_TO_DEFAULT, metadata_findings, target_field};
use super::ir::Prepared;
use super::kept::Kept;
use super::source::{self, Flags, SourceFacts};
use super::{Cause, Comparison, Row, Side};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// A side's IR, prepared once (comparisons in bulk reuse it; sides with the same IR text can
/// share it, see [`Prep::shared`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Prep {
    pub source: Option<Arc<Prepared>>,
    pub ttir: Option<Arc<Prepared>>,
}

impl Prep {
    pub fn new(side: &Side, kept: &Kept) -> Prep {
        let prep = |ir: &Option<Arc<str>>| ir.as_ref().map(|t| prepared(t, kept));
        Prep { source: prep(&side.source), ttir: prep(&side.ttir) }
    }

    /// The preps of `sides`, each distinct IR text prepared once: the compiles of one variant
    /// on a fleet mostly share their `.source` and `.ttir` (a key changes with the Triton
    /// version, the GPU or an env var while the text stays the same).
    pub fn shared<'a>(sides: impl IntoIterator<Item = &'a Side>, kept: &Kept) -> Vec<Prep> {
        // By allocation, not by text: the sides hold their texts alive meanwhile, and hashing
        // the texts themselves (18 KB a `.source`) was most of this function.
        let mut done: HashMap<(usize, usize), Arc<Prepared>> = HashMap::new();
        let mut prep = |ir: &'a Option<Arc<str>>| {
            let t = ir.as_ref()?;
            Some(done.entry((t.as_ptr() as usize, t.len())).or_insert_with(|| prepared(t, kept)).clone())
        };
        sides.into_iter().map(|s| Prep { source: prep(&s.source), ttir: prep(&s.ttir) }).collect()
    }
}

/// `text` prepared, from `kept` when it was lately ([`Kept`]).
pub(crate) fn prepared(text: &Arc<str>, kept: &Kept) -> Arc<Prepared> {
    let at = (text.as_ptr() as usize, text.len());
    if let Some((_, p)) = kept.prepared_at.get(&at) {
        return p;
    }
    let k = super::ir::text_id(text);
    let p = kept.prepared.get(&k).unwrap_or_else(|| Arc::new(Prepared::with_id(text, k)));
    kept.prepared.insert(k, p.clone());
    kept.prepared_at.insert(at, (text.clone(), p.clone()));
    p
}

/// Everything found about one pair.
pub(crate) struct Analysis {
    pub findings: Vec<Finding>,
    pub source: SourceFacts,
    source_compared: bool,
}

impl Analysis {
    /// Differing key inputs (the rows that are causes).
    pub fn causes(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.cause && f.row.differs)
    }
    /// The most upstream component with a cause.
    pub fn headline(&self) -> Option<Cause> {
        self.causes().map(|f| f.row.component).min_by_key(|c| c.rank())
    }
    /// How many components have a cause.
    pub fn components(&self) -> usize {
        let mut c: Vec<usize> = self.causes().map(|f| f.row.component.rank()).collect();
        c.sort_unstable();
        c.dedup();
        c.len()
    }
    /// Every differing row (causes and consequences).
    pub fn differing(&self) -> usize {
        self.findings.iter().filter(|f| f.row.differs).count()
    }
}

/// The side's metadata object, borrowed (an empty one when it has none).
fn object(side: &Side) -> std::borrow::Cow<'_, Map<String, Value>> {
    side.metadata.as_ref().and_then(|m| m.as_object()).map(std::borrow::Cow::Borrowed).unwrap_or_default()
}

/// Same machine code under different keys: the same bytes, or the same [`crate::scan::resources::code_digest`].
pub(crate) fn identical_code(a: &Side, b: &Side) -> bool {
    let same = |x: &Option<String>, y: &Option<String>| x.is_some() && x == y;
    a.key != b.key && (same(&a.binary_sha256, &b.binary_sha256) || same(&a.code_sha256, &b.code_sha256))
}

/// Compares two sides. `detailed` runs the IR line diff too (kept in it) and keeps the rows of
/// equal fields (for a comparison shown); without it only the differing rows are built (for
/// ranking).
pub(crate) fn analyse(a: &Side, pa: &Prep, b: &Side, pb: &Prep, detailed: Option<&Kept>) -> Analysis {
    let (ma, mb) = (object(a), object(b));
    let cx = Context::of(&ma, &mb);
    let mut findings = if a.metadata.is_some() || b.metadata.is_some() {
        metadata_findings(&cx, detailed.is_none())
    } else {
        Vec::new()
    };
    if !ma.contains_key("name") && !mb.contains_key("name") {
        let k = |s: &Side| s.kernel_name().map(|n| json!(n)).unwrap_or(Value::Null);
        findings.push(Finding::new(Cause::Source, "name", k(a), k(b)).note("the kernel's name"));
    }
    let flags = Flags { versions_differ: cx.versions_differ(), debug_differs: ma.get("debug") != mb.get("debug") };
    let pair = match (&pa.source, &pb.source, &pa.ttir, &pb.ttir) {
        (Some(x), Some(y), _, _) => Some((".source", x, y)),
        (_, _, Some(x), Some(y)) => Some((".ttir", x, y)),
        _ => None,
    };
    let source = match pair {
        Some((ev, x, y)) => source::compare_ir(ev, x, y, flags, detailed),
        None => SourceFacts {
            findings: vec![source::unavailable(
                pa.source.is_some() || pa.ttir.is_some(),
                pb.source.is_some() || pb.ttir.is_some(),
            )],
            ..SourceFacts::default()
        },
    };
    findings.extend(source.findings.iter().cloned());
    let rec = super::recorded::findings(a, b, &findings);
    findings.extend(rec);
    // Bookkeeping rows: the binary, and whether Triton can find the entry at all.
    let sha = |s: &Side| s.binary_sha256.as_ref().map(|h| json!(h)).unwrap_or(Value::Null);
    let mut bin = Finding::new(Cause::None, "binary sha256", sha(a), sha(b)).consequence("output of the compile");
    if a.binary_sha256.is_some() && a.binary_sha256 == b.binary_sha256 && a.key != b.key {
        bin.row.note = Some("same bytes under different keys: pure key churn".into());
    }
    findings.push(bin);
    if a.code_sha256.is_some() || b.code_sha256.is_some() {
        let code = |s: &Side| s.code_sha256.as_ref().map(|h| json!(h)).unwrap_or(Value::Null);
        let mut f = Finding::new(Cause::None, "machine code sha256", code(a), code(b))
            .consequence("output of the compile (code and kernel info sections, debug info left out)");
        if identical_code(a, b) && a.binary_sha256 != b.binary_sha256 {
            f.row.note = Some("same machine code: the bytes differ only in debug info".into());
        }
        findings.push(f);
    }
    if a.relocated || b.relocated {
        let who = match (a.relocated, b.relocated) {
            (true, true) => "both group files point",
            (true, false) => "A's group file points",
            _ => "B's group file points",
        };
        findings.push(
            Finding::new(Cause::None, "group file paths", json!(a.relocated), json!(b.relocated))
                .consequence(format!("{who} to another path: Triton misses on such an entry (cache copied or moved)")),
        );
    }
    Analysis { findings, source, source_compared: pair.is_some() }
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "unset".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value as a summary line shows it: [`show`], with a long hex digest (a recorded hash, a
/// sha256) cut to its first 10 digits, so no summary carries a 64-digit hash.
fn brief(v: &Value) -> String {
    let s = show(v);
    if s.len() >= 32 && s.bytes().all(|b| b.is_ascii_hexdigit()) { format!("{}…", &s[..10]) } else { s }
}

/// What an env var row set, when it set an option that differs: `sets enable_fp_fusion false`
/// (set on one side), `enable_fp_fusion true → false` (set on both, differently).
fn env_sets(an: &Analysis, r: &Row) -> Option<String> {
    let o = super::fields::option_of_env(&r.field)?;
    let opt = an.findings.iter().find(|f| f.row.field == o && f.row.differs && f.row.component == Cause::Env)?;
    Some(match (&r.a, &r.b) {
        (Value::Null, _) => format!("sets {o} {}", show(&opt.row.b)),
        (_, Value::Null) => format!("sets {o} {}", show(&opt.row.a)),
        _ => format!("{o} {} → {}", show(&opt.row.a), show(&opt.row.b)),
    })
}

fn arch_label(m: &Map<String, Value>) -> String {
    m.get("arch").map(show).unwrap_or_else(|| show(&target_field(m, "arch")))
}

/// The summary phrase of one component.
fn phrase(c: Cause, an: &Analysis, a: &Side, b: &Side) -> String {
    let rows: Vec<&Row> = an.causes().filter(|f| f.row.component == c).map(|f| &f.row).collect();
    let list = |rows: &[&Row]| {
        let mut p: Vec<String> =
            rows.iter().take(3).map(|r| format!("{} {} → {}", r.field, brief(&r.a), brief(&r.b))).collect();
        if rows.len() > 3 {
            p.push(format!("{} more", rows.len() - 3));
        }
        p.join(", ")
    };
    match c {
        Cause::Compiler => match rows.iter().find(|r| r.field == "triton_version") {
            Some(r) => format!("Triton {} → {}", show(&r.a), show(&r.b)),
            None => {
                let mut p = "same Triton version, different compiler build (triton_key, recorded)".to_string();
                let row = |k: &str| an.findings.iter().find(|f| f.row.field == k && f.row.differs).map(|f| &f.row);
                if let Some(r) = row("python") {
                    p.push_str(&format!(": Python {} → {}", show(&r.a), show(&r.b)));
                } else if row("triton_dir").is_some() {
                    p.push_str(": Triton installed at another path");
                }
                p
            }
        },
        Cause::Backend => {
            let (ma, mb) = (object(a), object(b));
            let mut p = Vec::new();
            if rows.iter().any(|r| r.field == "target.backend") {
                p.push(format!(
                    "backend {} → {}",
                    show(&target_field(&ma, "backend")),
                    show(&target_field(&mb, "backend"))
                ));
            }
            if rows.iter().any(|r| r.field == "target.arch") {
                p.push(format!("target {} → {}", arch_label(&ma), arch_label(&mb)));
            }
            if rows.iter().any(|r| r.field == "target.warp_size") {
                p.push(format!(
                    "warp size {} → {}",
                    show(&target_field(&ma, "warp_size")),
                    show(&target_field(&mb, "warp_size"))
                ));
            }
            if let Some(r) = rows.iter().find(|r| r.field == "backend_hash")
                && p.is_empty()
            {
                p.push(format!(
                    "toolchain {} → {} (recorded backend hash)",
                    super::recorded::short_backend(&r.a),
                    super::recorded::short_backend(&r.b)
                ));
            }
            if p.is_empty() { list(&rows) } else { p.join(", ") }
        }
        Cause::Env => rows
            .iter()
            .map(|r| {
                let p = match (&r.a, &r.b) {
                    (Value::Null, v) => format!("{}={} on B", r.field, show(v)),
                    (v, Value::Null) => format!("{}={} on A", r.field, show(v)),
                    (x, y) => format!("{} {} → {}", r.field, show(x), show(y)),
                };
                if r.note.as_deref().is_some_and(|n| n.contains(SET_TO_DEFAULT)) {
                    format!("{p} ({SET_TO_DEFAULT})")
                } else if let Some(set) = env_sets(an, r) {
                    format!("{p} ({set})")
                } else {
                    p
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        Cause::Source => {
            let mut p: Vec<String> = Vec::new();
            if let Some(r) = rows.iter().find(|r| r.field == "name") {
                p.push(format!("kernel {} → {}", show(&r.a), show(&r.b)));
            }
            p.extend(an.source.phrases.iter().cloned());
            if p.is_empty() && rows.iter().any(|r| r.field == "source_hash") {
                p.push(
                    "kernel source text changed (recorded source hash), not its IR: comments, formatting or a callee"
                        .into(),
                );
            }
            if p.is_empty() { list(&rows) } else { p.join(", ") }
        }
        _ => list(&rows),
    }
}

/// Builds the comparison; also returns the headline phrase (for grouping invalidations).
pub(crate) fn build(a: &Side, pa: &Prep, b: &Side, pb: &Prep, kept: &Kept) -> (Comparison, String) {
    let mut an = analyse(a, pa, b, pb, Some(kept));
    let identical_binary = a.binary_sha256.is_some() && a.binary_sha256 == b.binary_sha256 && a.key != b.key;
    let (cause, head, rest) = match an.headline() {
        Some(h) => {
            let others: Vec<String> = Cause::ORDER[..5]
                .iter()
                .filter(|c| **c != h && an.causes().any(|f| f.row.component == **c))
                .map(|c| format!("{}: {}", c.as_str(), phrase(*c, &an, a, b)))
                .collect();
            let rest = if others.is_empty() {
                "everything else equal".to_string()
            } else {
                format!("also {}", others.join("; "))
            };
            (h, phrase(h, &an, a, b), rest)
        }
        None => unexplained(a, b, &mut an),
    };
    let mut summary = if rest.is_empty() { head.clone() } else { format!("{head}; {rest}") };
    let identical_code = identical_code(a, b);
    summary.push_str(churn_note(identical_binary, identical_code));
    let mut rows: Vec<(usize, Finding)> = an.findings.into_iter().enumerate().collect();
    rows.sort_by_key(|(i, f)| (!f.row.differs, !f.cause, f.row.component.rank(), *i));
    let cmp = Comparison {
        a: a.label(),
        b: b.label(),
        cause,
        summary,
        components: rows.into_iter().map(|(_, f)| f.row).collect(),
        evidence: if super::recorded::both(a, b) { "recorded" } else { "inferred" },
        identical_binary,
        identical_code,
        source_changed_lines: an.source.changed_lines,
    };
    (cmp, head)
}

/// The note a summary ends with when the new key's binary is the old one's (or its machine
/// code is): none otherwise.
pub fn churn_note(identical_binary: bool, identical_code: bool) -> &'static str {
    if identical_binary {
        " (identical binary: pure key churn)"
    } else if identical_code {
        " (same machine code: only debug info differs, pure key churn)"
    } else {
        ""
    }
}

/// A summary less its [`churn_note`]: the reason a change's entries share (one change is one
/// reason, whichever of its entries compiled to the same bytes).
pub fn reason(summary: &str) -> &str {
    [churn_note(true, true), churn_note(false, true)].iter().find_map(|n| summary.strip_suffix(n)).unwrap_or(summary)
}

/// Nothing on disk explains the difference: the same entry, or a change that left no trace.
fn unexplained(a: &Side, b: &Side, an: &mut Analysis) -> (Cause, String, String) {
    if a.key == b.key {
        let rest =
            if a.relocated || b.relocated { "but a group file points elsewhere, so Triton misses on it" } else { "" };
        return (Cause::None, "same key: the same compile".into(), rest.into());
    }
    if a.metadata.is_none() || b.metadata.is_none() {
        return (Cause::Unknown, "no metadata to compare".into(), String::new());
    }
    let cuda = object(a).get("target").and_then(|t| t.get("backend")).and_then(|v| v.as_str()) == Some("cuda");
    let toolchain = if cuda { "ptxas's version" } else { "the backend toolchain's version" };
    if !an.source_compared {
        let head = "metadata equal; no IR on disk to compare the source".to_string();
        return (
            Cause::Unknown,
            head,
            format!(
                "a source edit, a compiler build or {toolchain} (in the key, not on disk) changed; \
                 the entries' IR (.source/.ttir) would tell, or enable the hook to record the key's parts"
            ),
        );
    }
    let mut f = Finding::new(Cause::Compiler, "triton_key", Value::Null, Value::Null);
    f.row.differs = true;
    f.row.note = Some(format!(
        "not on disk; inferred because nothing else explains the new key. {toolchain} is also in the key but not on disk, \
         and a source edit that leaves the IR unchanged (comments, formatting) changes it too. \
         Enable the hook (hook/README.md) to record the key's parts at compile time: then they are measured"
    ));
    an.findings.insert(0, f);
    let head = "same Triton version, different compiler build (triton_key)".to_string();
    (
        Cause::Compiler,
        head,
        format!(
            "everything else equal; inferred: {toolchain} and the source text are in the key but not on disk \
             (enable the hook to record the key's parts)"
        ),
    )
}

/// Why two entries differ: every field by component, the most upstream differing component
/// as the headline, and a one-sentence summary. Nothing is kept across calls (see
/// [`compare_kept`]).
pub fn compare(a: &Side, b: &Side) -> Comparison {
    compare_kept(a, b, &Kept::default())
}

/// [`compare`], with the prepared texts and line diffs of `kept`.
pub fn compare_kept(a: &Side, b: &Side, kept: &Kept) -> Comparison {
    build(a, &Prep::new(a, kept), b, &Prep::new(b, kept), kept).0
}
