//! Triton IR text handling: location stripping, name-insensitive diffs, and the parts of a
//! kernel's TTIR that identify its specialisation (signature, tensor shapes).
//!
//! Two IR texts of the same kernel differ in much that is noise: `loc(...)` attributes and
//! `#locN = ...` lines, and SSA value names (Triton names values after Python variables when
//! line info is on, `%0`, `%1`, ... when `TRITON_DISABLE_LINE_INFO=1`, `%arg0` in older
//! releases). Comparisons here ignore all of that.
//!
//! Line diffs read at most the first [`DIFF_MAX_LINES`] lines and [`DIFF_MAX_BYTES`] bytes of
//! each text ([`diff_prefix`]): a diff costs memory and time in the size of its input (two
//! 16 MiB texts took +650 MB and 2.7 s), and past that bound its answer says it covers a part.

use serde::Serialize;
use similar::{Algorithm, DiffOp, capture_diff_slices_deadline};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// Lines of each text that a line diff reads at most ([`diff_prefix`]).
pub const DIFF_MAX_LINES: usize = 20_000;

/// Bytes of each text that a line diff reads at most ([`diff_prefix`]).
pub const DIFF_MAX_BYTES: usize = 2 << 20;

/// The part of `text` that a line diff reads: its first [`DIFF_MAX_LINES`] lines, cut at the
/// end of the last whole line within [`DIFF_MAX_BYTES`] (a first line longer than that is cut
/// at a character boundary); and whether anything was left out.
pub fn diff_prefix(text: &str) -> (&str, bool) {
    let mut end = 0;
    let mut lines = 0;
    for (i, _) in text.match_indices('\n') {
        if i + 1 > DIFF_MAX_BYTES || lines == DIFF_MAX_LINES {
            break;
        }
        end = i + 1;
        lines += 1;
    }
    if lines < DIFF_MAX_LINES && end < text.len() {
        // The last line without its newline, or a line past the byte bound.
        if text.len() <= DIFF_MAX_BYTES {
            end = text.len();
        } else if end == 0 {
            end = text.floor_char_boundary(DIFF_MAX_BYTES);
        }
    }
    (&text[..end], end < text.len())
}

/// IR text with location noise stripped: `loc(...)` attributes, `#locN = ...` lines and
/// trailing whitespace. SSA value names are kept.
pub fn strip_locations(ir: &str) -> String {
    let mut out = String::with_capacity(ir.len());
    for (_, line) in stripped_lines(ir) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Stripped lines with their 1-based line number in the original text.
pub(crate) fn stripped_lines(ir: &str) -> Vec<(usize, String)> {
    ir.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("#loc"))
        .map(|(i, l)| (i + 1, strip_loc_attrs(l).trim_end().to_string()))
        .collect()
}

/// Removes every ` loc(...)` attribute (balanced parentheses, string literals respected).
fn strip_loc_attrs(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    let mut start = 0;
    while i < b.len() {
        if b[i..].starts_with(b" loc(") {
            out.push_str(&line[start..i]);
            let mut j = i + 5;
            let (mut depth, mut in_str) = (1usize, false);
            while j < b.len() && depth > 0 {
                match (in_str, b[j]) {
                    (true, b'\\') => j += 1,
                    (true, b'"') => in_str = false,
                    (false, b'"') => in_str = true,
                    (false, b'(') => depth += 1,
                    (false, b')') => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            i = j.min(b.len());
            start = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&line[start..]);
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '-')
}

/// Replaces every SSA value name (`%x_25`, `%0`, `%arg1`) with `%_`.
pub(crate) fn blank_names(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            out.push('_');
            while chars.peek().is_some_and(|&n| is_name_char(n)) {
                chars.next();
            }
        }
    }
    out
}

/// Renames SSA values to `%v0`, `%v1`, ... in order of first appearance (exact comparison
/// modulo naming).
fn canonical_names(lines: &[String]) -> Vec<String> {
    let mut map: HashMap<String, usize> = HashMap::new();
    lines
        .iter()
        .map(|line| {
            let mut out = String::with_capacity(line.len());
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                out.push(c);
                if c == '%' {
                    let mut name = String::new();
                    while let Some(&n) = chars.peek().filter(|&&n| is_name_char(n)) {
                        name.push(n);
                        chars.next();
                    }
                    let next = map.len();
                    out.push_str(&format!("v{}", *map.entry(name).or_insert(next)));
                }
            }
            out
        })
        .collect()
}

/// Replaces standalone integer literals and tensor dimensions with `#`, and element types
/// (`f16`, `bf16`, `f32`, ...) with `T`: what is left is the kernel's structure.
pub(crate) fn blank_specialisation(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for (is_num, tok) in tokens(line) {
        if is_num {
            out.push('#');
        } else if is_elem_type(tok) {
            out.push('T');
        } else {
            out.push_str(tok);
        }
    }
    out
}

fn is_elem_type(tok: &str) -> bool {
    matches!(tok, "f16" | "bf16" | "f32" | "f64" | "i1" | "i8" | "i16" | "i32" | "i64")
        || tok.starts_with("f8")
        || tok.starts_with("fp8")
}

/// Splits a line into (is_integer_literal, text) tokens. Word tokens (identifiers, types) are
/// kept whole; the dimensions of a tensor shape (`128x64xf16`) count as literals.
fn tokens(line: &str) -> Vec<(bool, &str)> {
    let b = line.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out: Vec<(bool, &str)> = Vec::new();
    let (mut i, mut dim_x) = (0, false);
    while i < b.len() {
        let c = b[i];
        let prev_num = out.last().is_some_and(|t| t.0) && i > 0 && b[i - 1].is_ascii_digit();
        if c == b'x' && prev_num {
            out.push((false, "x"));
            dim_x = true;
            i += 1;
            continue;
        }
        let s = i;
        if c.is_ascii_digit() && (dim_x || i == 0 || !word(b[i - 1])) {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            out.push((true, &line[s..i]));
        } else if word(c) {
            while i < b.len() && word(b[i]) {
                i += 1;
            }
            out.push((false, &line[s..i]));
        } else {
            i += 1;
            out.push((false, &line[s..i]));
        }
        dim_x = false;
    }
    out
}

/// Integer literals of a line, in order (see [`tokens`]).
pub(crate) fn literals(line: &str) -> Vec<&str> {
    tokens(line).into_iter().filter(|t| t.0).map(|t| t.1).collect()
}

/// One argument of the kernel's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arg {
    pub name: String,
    pub ty: String,
    pub attrs: String,
}

impl Arg {
    /// A readable name: `argN`/numeric names (older releases, no line info) say nothing.
    pub fn meaningful_name(&self) -> Option<&str> {
        let n = self.name.as_str();
        let generic = n.chars().all(|c| c.is_ascii_digit())
            || n.strip_prefix("arg").is_some_and(|r| r.chars().all(|c| c.is_ascii_digit()));
        (!generic && !n.is_empty()).then_some(n)
    }
    /// The element type for pointers (`!tt.ptr<f16>` → `f16`), else the type.
    pub fn short_type(&self) -> String {
        let t = self.ty.strip_prefix("!tt.ptr<").and_then(|s| s.strip_suffix('>'));
        t.unwrap_or(&self.ty).to_string()
    }
}

/// Everything about one IR text that the comparisons need, computed once.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The text: its stripped lines are made again when a line diff asks
    /// ([`Prepared::blanked_lines`]); kept, they were ~50 KB per `.source` that ranking never reads.
    text: std::sync::Arc<str>,
    /// How many stripped lines.
    pub n_lines: usize,
    /// The stripped lines with value names blanked, made on the first line diff that asks.
    blanked: std::sync::OnceLock<Vec<String>>,
    /// Hash of the lines with canonical SSA names.
    pub canon: u64,
    /// The same without `tt.assert` lines (what `debug=True` adds).
    pub canon_no_assert: u64,
    /// Hash of the lines with names, literals and element types blanked.
    pub structure: u64,
    /// Signature of the first public function (the kernel).
    pub sig: Vec<Arg>,
    /// `tt.make_range` ends: the block sizes.
    pub ranges: BTreeSet<u64>,
    /// Tensor shapes that occur (`256`, `64x32`).
    pub shapes: BTreeSet<String>,
    /// File locations (where the kernel starts, where each op comes from).
    pub locs: super::locs::Locs,
    /// The text's identity: the first 16 bytes of its sha256 (what a line diff of two texts is
    /// kept under, `source::line_changes`).
    pub id: [u8; 16],
}

/// An IR text's identity: the first 16 bytes of its sha256 ([`Prepared::id`]).
pub(crate) fn text_id(text: &str) -> [u8; 16] {
    use sha2::Digest;
    let mut id = [0u8; 16];
    id.copy_from_slice(&sha2::Sha256::digest(text.as_bytes())[..16]);
    id
}

fn hash_lines<'a>(lines: impl Iterator<Item = &'a String>) -> u64 {
    let mut h = DefaultHasher::new();
    for l in lines {
        l.hash(&mut h);
    }
    h.finish()
}

impl Prepared {
    /// Prepares an IR text (`.source` or `.ttir`) (the server's go through
    /// `compare::prepared`, which keeps them).
    #[cfg(test)]
    pub fn new(ir: &std::sync::Arc<str>) -> Prepared {
        Prepared::with_id(ir, text_id(ir))
    }

    /// Prepares an IR text whose [`text_id`] is `id` (computed once for the lookup and the id).
    pub fn with_id(ir: &std::sync::Arc<str>, id: [u8; 16]) -> Prepared {
        let lines = stripped(ir);
        let canon = canonical_names(&lines);
        let no_assert: Vec<String> =
            lines.iter().filter(|l| !l.trim_start().starts_with("tt.assert")).cloned().collect();
        let structure: Vec<String> = lines.iter().map(|l| blank_specialisation(&blank_names(l))).collect();
        let mut ranges = BTreeSet::new();
        let mut shapes = BTreeSet::new();
        for l in &lines {
            if l.contains("tt.make_range")
                && let Some(end) = l.split("end = ").nth(1)
                && let Some(n) = end.split(|c: char| !c.is_ascii_digit()).next().and_then(|s| s.parse().ok())
            {
                ranges.insert(n);
            }
            for part in l.split("tensor<").skip(1) {
                let dims: Vec<&str> =
                    part.split('x').take_while(|d| d.chars().all(|c| c.is_ascii_digit()) && !d.is_empty()).collect();
                if !dims.is_empty() {
                    shapes.insert(dims.join("x"));
                }
            }
        }
        Prepared {
            canon: hash_lines(canon.iter()),
            canon_no_assert: hash_lines(canonical_names(&no_assert).iter()),
            structure: hash_lines(structure.iter()),
            sig: signature(&lines),
            ranges,
            shapes,
            n_lines: lines.len(),
            text: ir.clone(),
            blanked: Default::default(),
            locs: super::locs::Locs::of(ir),
            id,
        }
    }

    /// The stripped lines of the text's [`diff_prefix`], value names blanked (what a line diff
    /// compares).
    pub fn blanked_lines(&self) -> &[String] {
        self.blanked.get_or_init(|| stripped(diff_prefix(&self.text).0).iter().map(|l| blank_names(l)).collect())
    }

    /// Whether a line diff of this text reads only a part of it ([`diff_prefix`]).
    pub fn diff_cut(&self) -> bool {
        diff_prefix(&self.text).1
    }
}

fn stripped(ir: &str) -> Vec<String> {
    stripped_lines(ir).into_iter().map(|(_, l)| l).collect()
}

/// Parses the arguments of the first `tt.func public` (the kernel itself).
fn signature(lines: &[String]) -> Vec<Arg> {
    let Some(line) = lines.iter().find(|l| l.contains("tt.func public")) else {
        return Vec::new();
    };
    let Some(open) = line.find('(') else {
        return Vec::new();
    };
    let mut depth = 0i32;
    let mut args = Vec::new();
    let mut cur = String::new();
    for c in line[open + 1..].chars() {
        match c {
            '(' | '<' | '{' | '[' => depth += 1,
            ')' if depth == 0 => break,
            ')' | '>' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                args.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        args.push(cur);
    }
    args.iter()
        .filter_map(|a| {
            let (name, rest) = a.trim().split_once(':')?;
            let rest = rest.trim();
            let (ty, attrs) = match rest.find(" {") {
                Some(p) => (&rest[..p], rest[p + 1..].trim()),
                None => (rest, ""),
            };
            Some(Arg {
                name: name.trim().trim_start_matches('%').to_string(),
                ty: ty.to_string(),
                attrs: attrs.to_string(),
            })
        })
        .collect()
}

/// One line of an IR diff.
#[derive(Debug, Clone, Serialize)]
pub struct DiffLine {
    /// `"equal"`, `"delete"` (only in A) or `"insert"` (only in B).
    pub tag: &'static str,
    /// 1-based line number in A's original text.
    pub a_no: Option<usize>,
    /// 1-based line number in B's original text.
    pub b_no: Option<usize>,
    /// The line (stripped when asked; for equal lines, A's text).
    pub text: String,
}

/// The diff ops between two line lists compared by a key.
pub(crate) fn diff_ops(a: &[String], b: &[String]) -> Vec<DiffOp> {
    let deadline = Some(Instant::now() + Duration::from_secs(2));
    capture_diff_slices_deadline(Algorithm::Myers, a, b, deadline)
}

/// Line diff of two IR texts. With `strip`, locations are stripped and lines are aligned
/// ignoring SSA value names, so renumbered values and line-info on/off do not show as
/// changes; line numbers still refer to the original texts.
pub fn ir_diff(a: &str, b: &str, strip: bool) -> Vec<DiffLine> {
    let prep = |s: &str| -> Vec<(usize, String)> {
        if strip { stripped_lines(s) } else { s.lines().enumerate().map(|(i, l)| (i + 1, l.to_string())).collect() }
    };
    let (la, lb) = (prep(a), prep(b));
    let key = |v: &[(usize, String)]| -> Vec<String> {
        v.iter().map(|(_, l)| if strip { blank_names(l) } else { l.clone() }).collect()
    };
    let mut out = Vec::new();
    for op in diff_ops(&key(&la), &key(&lb)) {
        let (tag, ra, rb) = op.as_tag_tuple();
        let del = |out: &mut Vec<DiffLine>| {
            for (n, t) in &la[ra.clone()] {
                out.push(DiffLine { tag: "delete", a_no: Some(*n), b_no: None, text: t.clone() });
            }
        };
        let ins = |out: &mut Vec<DiffLine>| {
            for (n, t) in &lb[rb.clone()] {
                out.push(DiffLine { tag: "insert", a_no: None, b_no: Some(*n), text: t.clone() });
            }
        };
        match tag {
            similar::DiffTag::Equal => {
                for ((na, t), (nb, _)) in la[ra.clone()].iter().zip(&lb[rb.clone()]) {
                    out.push(DiffLine { tag: "equal", a_no: Some(*na), b_no: Some(*nb), text: t.clone() });
                }
            }
            similar::DiffTag::Delete => del(&mut out),
            similar::DiffTag::Insert => ins(&mut out),
            similar::DiffTag::Replace => {
                del(&mut out);
                ins(&mut out);
            }
        }
    }
    out
}
