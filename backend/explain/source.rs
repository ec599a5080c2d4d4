//! The `source` component: the kernel's IR (`.source`, else `.ttir`) compared with locations
//! and value names ignored, split into signature, constexpr (block sizes, tensor shapes,
//! literals) and body.

use super::Cause;
use super::fields::Finding;
use super::ir::{Arg, Prepared, diff_ops, literals};
use super::kept::{Kept, LineChanges};
use super::locs::{Locs, moved};
use serde_json::{Value, json};
use similar::DiffTag;

/// What the other components say that the source comparison needs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Flags {
    pub versions_differ: bool,
    pub debug_differs: bool,
}

/// The source component of one comparison.
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceFacts {
    pub findings: Vec<Finding>,
    /// Phrases for the summary, in order: signature, constexpr, body.
    pub phrases: Vec<String>,
    /// Changed lines (name-insensitive diff), when computed.
    pub changed_lines: Option<usize>,
}

/// Fields that identify a kernel variant (a specialisation), not a recompile of one.
pub(crate) fn is_variant_field(field: &str) -> bool {
    field.starts_with("signature") || matches!(field, "make_range ends" | "tensor shapes" | "constexpr values" | "name")
}

fn arg_label(a: &Arg, b: &Arg, i: usize) -> String {
    a.meaningful_name().or(b.meaningful_name()).map(str::to_string).unwrap_or_else(|| format!("arg{i}"))
}

pub(crate) fn arg_text(a: &Arg) -> String {
    if a.attrs.is_empty() { a.short_type() } else { format!("{} {}", a.short_type(), a.attrs) }
}

/// Compares two prepared IR texts. `detailed` also runs the line diff (changed-line count and
/// the literals that changed, kept in it), which ranking does not need.
pub(crate) fn compare_ir(
    evidence: &str,
    pa: &Prepared,
    pb: &Prepared,
    flags: Flags,
    detailed: Option<&Kept>,
) -> SourceFacts {
    let mut facts = SourceFacts::default();
    // Signature, by position (older releases name arguments %arg0...).
    let mut sig_changes: Vec<(String, String, String)> = Vec::new();
    if pa.sig.len() != pb.sig.len() {
        facts.findings.push(
            Finding::new(Cause::Source, "signature", json!(pa.sig.len()), json!(pb.sig.len()))
                .note("number of arguments"),
        );
        facts.phrases.push(format!("signature: {} → {} arguments", pa.sig.len(), pb.sig.len()));
    } else {
        for (i, (a, b)) in pa.sig.iter().zip(&pb.sig).enumerate() {
            if a.ty != b.ty || a.attrs != b.attrs {
                let label = arg_label(a, b, i);
                let (ta, tb) = (arg_text(a), arg_text(b));
                facts.findings.push(Finding::new(Cause::Source, &format!("signature.{label}"), json!(ta), json!(tb)));
                let change = if a.attrs == b.attrs { (a.short_type(), b.short_type()) } else { (ta, tb) };
                sig_changes.push((label, change.0, change.1));
            }
        }
        // The equal signature is a row to show, not to rank by.
        if sig_changes.is_empty() && detailed.is_some() {
            let s: Vec<String> =
                pa.sig.iter().enumerate().map(|(i, a)| format!("{}: {}", arg_label(a, a, i), arg_text(a))).collect();
            facts.findings.push(Finding::new(Cause::Source, "signature", json!(s.join(", ")), json!(s.join(", "))));
        }
    }
    // Group identical changes: "x_ptr, y_ptr, out_ptr: f16 → bf16".
    let mut groups: Vec<(Vec<String>, String, String)> = Vec::new();
    for (label, a, b) in sig_changes {
        match groups.iter_mut().find(|g| g.1 == a && g.2 == b) {
            Some(g) => g.0.push(label),
            None => groups.push((vec![label], a, b)),
        }
    }
    for (labels, a, b) in &groups {
        facts.phrases.push(format!("{}: {a} → {b}", labels.join(", ")));
    }
    // Block sizes and tensor shapes: the visible constexprs.
    let ranges = Finding::new(Cause::Source, "make_range ends", json!(pa.ranges), json!(pb.ranges));
    let shapes = Finding::new(Cause::Source, "tensor shapes", json!(pa.shapes), json!(pb.shapes));
    let shapes_differ = ranges.row.differs || shapes.row.differs;
    let sig_differs = !groups.is_empty() || pa.sig.len() != pb.sig.len();
    facts.findings.push(ranges.note("block sizes (constexpr)"));
    facts.findings.push(shapes);

    let field = format!("body ({evidence})");
    let body = Finding::new(Cause::Source, &field, json!(pa.n_lines), json!(pb.n_lines));
    let (mut pairs, mut changed) = (Vec::new(), None);
    if let Some(kept) = detailed
        && pa.canon != pb.canon
    {
        let d = line_changes_kept(pa, pb, kept);
        changed = Some(d.0);
        pairs = d.1.clone();
    }
    facts.changed_lines = if pa.canon == pb.canon { Some(0) } else { changed };
    let cut = if changed.is_some() && (pa.diff_cut() || pb.diff_cut()) {
        format!(" in the first {} lines", super::ir::DIFF_MAX_LINES)
    } else {
        String::new()
    };
    let lines_note = changed.map(|n| format!("{n} lines changed{cut}")).unwrap_or_else(|| "differs".into());
    let constexpr_phrase = || -> Option<String> {
        if !pairs.is_empty() {
            let p: Vec<String> = pairs.iter().take(3).map(|(a, b)| format!("{a} → {b}")).collect();
            Some(format!("constexpr {}", p.join(", ")))
        } else if pa.ranges != pb.ranges {
            Some(format!("block sizes {:?} → {:?}", pa.ranges, pb.ranges))
        } else if pa.shapes != pb.shapes {
            Some("tensor shapes changed (constexpr)".to_string())
        } else {
            None
        }
    };
    if pa.canon == pb.canon {
        facts.findings.push(
            Finding { row: super::Row { differs: false, ..body.row }, cause: false }
                .note("equal, ignoring locations and value names"),
        );
        // Across Triton versions, callee locations (Triton's own files) move anyway.
        if !flags.versions_differ
            && let Some(m) = moved(&pa.locs, &pb.locs)
        {
            let at = |l: &Locs| l.kernel().map(|(f, n)| json!(format!("{f}:{n}"))).unwrap_or(Value::Null);
            facts.findings.push(
                Finding::new(Cause::Source, "kernel location", at(&pa.locs), at(&pb.locs))
                    .note("the IR is the same but for locations: Triton's source hash (fn.cache_key) includes the kernel's first line and its text"),
            );
            let f = facts.findings.last_mut().expect("just pushed");
            (f.row.differs, f.cause) = (true, true);
            facts.phrases.push(m.phrase());
        }
        return facts;
    }
    if flags.debug_differs && pa.canon_no_assert == pb.canon_no_assert {
        facts.findings.push(
            body.consequence("differs only by the tt.assert lines that debug=True inserts: consequence of debug"),
        );
        return facts;
    }
    if flags.versions_differ {
        if shapes_differ {
            facts.phrases.extend(constexpr_phrase());
        }
        facts.findings.push(body.consequence(format!(
            "{lines_note}; IR written by different Triton versions, whose frontends differ: not evidence of an edit"
        )));
        return facts;
    }
    if pa.structure == pb.structure {
        if let Some(p) = constexpr_phrase() {
            facts.phrases.push(p);
        }
        if sig_differs || shapes_differ {
            facts.findings.push(body.consequence(format!(
                "{lines_note}, only in literals, shapes and types: follows from the signature/constexpr change"
            )));
        } else {
            facts.findings.push(
                Finding::new(
                    Cause::Source,
                    "constexpr values",
                    json!(pairs.iter().map(|p| &p.0).collect::<Vec<_>>()),
                    json!(pairs.iter().map(|p| &p.1).collect::<Vec<_>>()),
                )
                .note("only literals differ: constexpr values changed"),
            );
            facts.findings.push(body.consequence(lines_note));
        }
        return facts;
    }
    if shapes_differ {
        facts.phrases.extend(constexpr_phrase());
    }
    facts.phrases.push(match changed {
        Some(n) => format!("kernel source changed: {n} line{}", if n == 1 { "" } else { "s" }),
        None => "kernel source changed".to_string(),
    });
    facts.findings.push(body.note(format!("{lines_note} (kernel code, callees or specialisation)")));
    facts
}

/// [`line_changes`] of two texts, from `kept` when they were diffed lately ([`Kept`]).
pub(crate) fn line_changes_kept(pa: &Prepared, pb: &Prepared, kept: &Kept) -> LineChanges {
    let k = (pa.id, pb.id);
    if let Some(d) = kept.diffs.get(&k) {
        return d;
    }
    let d = std::sync::Arc::new(line_changes(pa, pb));
    kept.diffs.insert(k, d.clone());
    d
}

/// Changed-line count of the name-insensitive diff (a replaced line counts once), and the
/// distinct integer-literal changes on lines that only differ in literals (block sizes first).
pub(crate) fn line_changes(pa: &Prepared, pb: &Prepared) -> (usize, Vec<(String, String)>) {
    let (ka, kb) = (pa.blanked_lines(), pb.blanked_lines());
    let mut changed = 0;
    let mut pairs: Vec<(bool, String, String)> = Vec::new();
    for op in diff_ops(ka, kb) {
        let (tag, ra, rb) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            continue;
        }
        changed += ra.len().max(rb.len());
        if ra.len() != rb.len() {
            continue;
        }
        for (la, lb) in ka[ra.clone()].iter().zip(&kb[rb.clone()]) {
            let (na, nb) = (literals(la), literals(lb));
            if na.len() != nb.len() {
                continue;
            }
            let block = la.contains("tt.make_range");
            for (x, y) in na.iter().zip(&nb) {
                if x != y && !pairs.iter().any(|p| p.1 == *x && p.2 == *y) {
                    pairs.push((block, x.to_string(), y.to_string()));
                }
            }
        }
    }
    pairs.sort_by_key(|p| !p.0);
    (changed, pairs.into_iter().map(|p| (p.1, p.2)).collect())
}

/// The row when the IR cannot be compared (missing on a side).
pub(crate) fn unavailable(has_a: bool, has_b: bool) -> Finding {
    let mut f = Finding::new(Cause::Source, "body", Value::Null, Value::Null);
    f.row.note = Some(match (has_a, has_b) {
        (false, false) => "no .source or .ttir on either side: not compared".to_string(),
        (true, false) => "no comparable IR on B: not compared".to_string(),
        _ => "no comparable IR on A: not compared".to_string(),
    });
    f.cause = false;
    f
}
