//! Matching entries: [`nearest`] neighbours of one entry, and [`invalidations`] between an
//! old and a new set (two scans of one machine, or two machines).

use super::compare::{Analysis, Prep, analyse, build};
use super::kept::Kept;
use super::source::is_variant_field;
use super::{Cause, Side};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

pub mod pieces;

/// A new entry that replaced (recompiled) an old one.
#[derive(Debug, Clone, Serialize)]
pub struct Invalidated {
    /// Kernel name.
    pub kernel: String,
    /// Key of the old entry (its predecessor).
    pub old_key: String,
    /// Key of the new entry.
    pub new_key: String,
    /// Headline cause (see [`super::Comparison::cause`]).
    pub cause: Cause,
    /// The comparison's summary.
    pub summary: String,
    /// Same binary under the new key: pure key churn.
    pub identical_binary: bool,
    /// Same machine code under the new key (bytes may differ in debug info): pure key churn.
    pub identical_code: bool,
}

/// An old set of entries against a new one.
#[derive(Debug, Clone, Serialize)]
pub struct Invalidations {
    /// Keys in both sets.
    pub kept: Vec<String>,
    /// More keys in both sets, not listed: kernels whose key sets are equal on both sides,
    /// counted without reading their entries ([`Part::all_kept`]).
    pub kept_unlisted: usize,
    /// New entries matched to the old entry they replace.
    pub invalidated: Vec<Invalidated>,
    /// New entries that replace nothing (new kernels or new variants): (kernel, key).
    pub new: Vec<(String, String)>,
    /// Old entries that are gone and were not replaced: (kernel, key).
    pub removed: Vec<(String, String)>,
    /// Invalidated entries per headline cause, upstream first.
    pub by_cause: Vec<(Cause, usize)>,
    /// One sentence, e.g. "45 of 45 entries recompiled after Triton 3.4.0 → 3.5.1; 0 had
    /// identical binaries".
    pub summary: String,
}

/// Sort key of a candidate: differing key inputs first, then all differing rows.
fn distance(an: &Analysis) -> (usize, usize) {
    (an.causes().count(), an.differing())
}

/// A nearest neighbour of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Near {
    /// Index into the candidates.
    pub index: usize,
    /// Components (compiler, backend, env, source, options) with a differing key input.
    pub components: usize,
    /// Differing key inputs (fields).
    pub differing: usize,
    /// All differing rows (the last ranking criterion before the candidate order).
    pub rows: usize,
    /// Headline cause.
    pub cause: Cause,
}

/// Nearest neighbours: ranks `candidates` (normally the same kernel) by how few components of
/// the key differ from `of`, then how few key inputs (fields), then how few differing rows
/// overall, then the lower index. Best first, at most `limit`.
pub fn nearest(of: &Side, candidates: &[Side], limit: usize) -> Vec<Near> {
    let kept = Kept::default();
    let p = Prep::new(of, &kept);
    let mut ranked: Vec<((usize, usize, usize), Near)> = candidates
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let an = analyse(of, &p, c, &Prep::new(c, &kept), None);
            let (components, differing) = (an.components(), an.causes().count());
            let cause = an.headline().unwrap_or(Cause::None);
            (
                (components, differing, an.differing()),
                Near { index, components, differing, rows: an.differing(), cause },
            )
        })
        .collect();
    ranked.sort_by_key(|r| (r.0, r.1.index));
    ranked.into_iter().take(limit).map(|(_, n)| n).collect()
}

/// [`nearest`] over candidates that come in classes whose members compare alike (every input
/// the analysis reads is equal: key, metadata, IR text, binary, code digest, relocation,
/// recorded key parts; only the machine differs): one analysis per class, and the same answer as
/// [`nearest`] over every member. A class is (a member's side, the candidate indices of all its
/// members); `index` in the answer is such a candidate index. IR texts are prepared through
/// `kept`.
pub fn nearest_classes(
    of: &Side,
    classes: &[(std::sync::Arc<Side>, Vec<usize>)],
    limit: usize,
    kept: &Kept,
) -> Vec<Near> {
    let preps = Prep::shared(classes.iter().map(|(side, _)| &**side), kept);
    ranked_classes(of, &Prep::new(of, kept), classes, &preps, limit).into_iter().map(|(n, _)| n).collect()
}

/// The best `limit` of the classes' members, each with its class's position in `classes`.
fn ranked_classes(
    of: &Side,
    p: &Prep,
    classes: &[(std::sync::Arc<Side>, Vec<usize>)],
    preps: &[Prep],
    limit: usize,
) -> Vec<(Near, usize)> {
    let mut ranked: Vec<((usize, usize, usize), Near, usize)> = Vec::new();
    for (class, ((side, members), ps)) in classes.iter().zip(preps).enumerate() {
        let an = analyse(of, p, side, ps, None);
        let (components, differing) = (an.components(), an.causes().count());
        let cause = an.headline().unwrap_or(Cause::None);
        for &index in members {
            ranked.push((
                (components, differing, an.differing()),
                Near { index, components, differing, rows: an.differing(), cause },
                class,
            ));
        }
    }
    ranked.sort_by_key(|r| (r.0, r.1.index));
    ranked.into_iter().take(limit).map(|(_, n, class)| (n, class)).collect()
}

fn kernel(s: &Side) -> String {
    s.kernel_name().unwrap_or("?").to_string()
}

/// Which new entries replaced which old ones.
///
/// Keys in both sets are kept. Every other new entry is matched, one to one and most similar
/// first, to an old entry of the same kernel (an old entry that is still present counts: an
/// in-place upgrade keeps the old generation on disk). A match whose differences include the
/// variant's identity (signature, block sizes/shapes, num_warps, num_stages, ...) is a new
/// variant, not a recompile: it is listed as new. One exception: when a kernel's only
/// unmatched old entry is gone and it has exactly one unmatched new entry, differing from it
/// only in launch options, the two are paired (the kernel recompiled with other options).
pub fn invalidations(old: &[Side], new: &[Side]) -> Invalidations {
    let part = match_part(old, new, &mut Budget::unlimited(), &mut Shared::default())
        .unwrap_or_else(|_| unreachable!("no limit"));
    finish(vec![part])
}

/// Work a report may do: pairs of entries analysed. Over it, the report ends with an error
/// instead of growing.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Candidate pairs (same kernel, same variant identity) still allowed to be analysed.
    pub pairs_left: usize,
}

impl Budget {
    pub fn unlimited() -> Budget {
        Budget { pairs_left: usize::MAX }
    }
}

/// The pair budget ran out.
#[derive(Debug, Clone, Copy)]
pub struct OverBudget;

/// One group of entries matched (normally one kernel's), before the totals and the summary
/// of [`finish`]. Groups that share no kernel and no key match independently: the parts of
/// the kernels of two sets, concatenated in kernel order, are the match of the whole sets.
#[derive(Debug, Clone, Default)]
pub struct Part {
    /// Old entries (distinct keys).
    pub old_len: usize,
    pub kept: Vec<String>,
    pub invalidated: Vec<Invalidated>,
    /// The headline phrase of each invalidated entry (for the summary).
    pub phrases: Vec<String>,
    pub new: Vec<(String, String)>,
    pub removed: Vec<(String, String)>,
    /// Kept keys counted, not listed in `kept`.
    pub kept_unlisted: usize,
}

impl Part {
    /// The part of kernels whose distinct keys, `n` of them, are the same on both sides: every
    /// one is kept, nothing is new, removed or invalidated, whatever the entries hold (what
    /// [`match_part`] gives for them, without the keys).
    pub fn all_kept(n: usize) -> Part {
        Part { old_len: n, kept_unlisted: n, ..Part::default() }
    }
}

/// The variant identity a comparison reads from the IR (signature, block sizes, tensor
/// shapes): when it differs, the pair is another variant whatever else differs, so the pair
/// need not be analysed. One hash per IR kind, as [`super::compare`] picks `.source` when both
/// sides have it, else `.ttir`.
fn identity(p: &Option<std::sync::Arc<super::ir::Prepared>>) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let p = p.as_ref()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    p.sig.len().hash(&mut h);
    for a in &p.sig {
        super::source::arg_text(a).hash(&mut h);
    }
    p.ranges.hash(&mut h);
    p.shapes.hash(&mut h);
    Some(h.finish())
}

/// What an analysis of a pair reads of one side, apart from its key and machine: kernel name,
/// metadata, IR texts, binary and code digests, relocation, recorded key parts. Within a report
/// the two keys of a candidate pair always differ, so two pairs of equal contents analyse
/// alike: the analysis and the comparison are done once per pair of contents (a fleet's copies
/// of one compile, e.g. the same kernel cloned under many keys, cost one analysis).
fn content(s: &Side, shared: &mut Shared) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.kernel_name().hash(&mut h);
    s.metadata.hash(&mut h); // the parsed value, not its text: no serialising per entry
    ir_texts(s, shared).hash(&mut h);
    s.binary_sha256.hash(&mut h);
    s.code_sha256.hash(&mut h);
    s.relocated.hash(&mut h);
    s.parts.as_ref().map(|p| p.to_string()).hash(&mut h);
    h.finish()
}

/// The IR texts [`Prep`] reads (`.source`, `.ttir`), hashed.
fn ir_texts(s: &Side, shared: &mut Shared) -> (Option<u64>, Option<u64>) {
    (shared.text(&s.source), shared.text(&s.ttir))
}

/// What the groups of one report share: each distinct IR text hashed once and prepared once.
/// A fleet's entries point at few distinct texts (a pair of 50,000-entry machines on two
/// releases: 100,000 times at 34 `.source` texts of ~18 KB each), and sides that share a text
/// share its allocation (`db::explain::texts_by_sha`): the allocation names the text, and is kept
/// alive here so that its address names nothing else. Texts read apart are hashed apart, to the
/// same hash. Bounded: past [`SHARED_TEXTS`] texts or [`SHARED_PREPS`] prepared IRs (~150 KB
/// each) a map starts over. Texts are prepared, and pairs compared, through its [`Kept`].
#[derive(Default)]
pub struct Shared {
    texts: HashMap<(usize, usize), (std::sync::Arc<str>, u64)>,
    preps: HashMap<(Option<u64>, Option<u64>), std::sync::Arc<Prep>>,
    pub(crate) kept: std::sync::Arc<Kept>,
}

const SHARED_TEXTS: usize = 16_384;
const SHARED_PREPS: usize = 1_024;

impl Shared {
    /// A report's shared state, preparing texts through `kept`.
    pub fn new(kept: std::sync::Arc<Kept>) -> Shared {
        Shared { kept, ..Shared::default() }
    }

    /// What it prepares texts through.
    pub fn kept(&self) -> std::sync::Arc<Kept> {
        self.kept.clone()
    }

    fn text(&mut self, t: &Option<std::sync::Arc<str>>) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let t = t.as_ref()?;
        if self.texts.len() >= SHARED_TEXTS {
            self.texts.clear();
        }
        let (_, h) = self.texts.entry((t.as_ptr() as usize, t.len())).or_insert_with(|| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            t.hash(&mut h);
            (t.clone(), h.finish())
        });
        Some(*h)
    }

    fn prep(&mut self, s: &Side) -> std::sync::Arc<Prep> {
        let k = ir_texts(s, self);
        if self.preps.len() >= SHARED_PREPS && !self.preps.contains_key(&k) {
            self.preps.clear();
        }
        self.preps.entry(k).or_insert_with(|| std::sync::Arc::new(Prep::new(s, &self.kept))).clone()
    }
}

/// Candidate pairs (same kernel, not surely another variant) one group may hold in memory, of
/// which [`Budget`] bounds the distinct ones analysed: ~40 bytes each, 160 MB at most.
const MAX_CANDIDATE_PAIRS: usize = 4_000_000;

/// The first entry of each key; no copy when the keys are distinct already (the common case).
fn dedup(v: &[Side]) -> std::borrow::Cow<'_, [Side]> {
    let mut seen = HashSet::new();
    if v.iter().all(|s| seen.insert(s.key.as_str())) {
        return v.into();
    }
    let mut seen = HashSet::new();
    v.iter().filter(|s| seen.insert(s.key.as_str())).cloned().collect::<Vec<_>>().into()
}

/// Surely another variant: the IR the comparison would read differs in a variant field.
fn surely_variant(a: (Option<u64>, Option<u64>), b: (Option<u64>, Option<u64>)) -> bool {
    match (a, b) {
        ((Some(x), _), (Some(y), _)) => x != y,
        ((_, Some(x)), (_, Some(y))) => x != y,
        _ => false,
    }
}

/// [`invalidations`] of one group, without totals; `budget` bounds the pairs analysed; `shared`
/// is what the groups of one report share (any, or a new one: the same answer).
pub fn match_part(old: &[Side], new: &[Side], budget: &mut Budget, shared: &mut Shared) -> Result<Part, OverBudget> {
    // The first of each key; no copy when the keys are distinct already (the common case).
    let (old, new) = (dedup(old), dedup(new));
    let (old, new) = (&*old, &*new);
    let old_keys: HashSet<&str> = old.iter().map(|s| s.key.as_str()).collect();
    let new_keys: HashSet<&str> = new.iter().map(|s| s.key.as_str()).collect();
    let kept: Vec<String> = new.iter().filter(|s| old_keys.contains(s.key.as_str())).map(|s| s.key.clone()).collect();
    let fresh: Vec<usize> = (0..new.len()).filter(|&i| !old_keys.contains(new[i].key.as_str())).collect();

    let mut by_kernel: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, s) in old.iter().enumerate() {
        if s.kernel_name().is_some() {
            by_kernel.entry(kernel(s)).or_default().push(i);
        }
    }
    // Nothing fresh: nothing to pair, no IR to read.
    // Parsing the IR is most of a report's work: once per distinct pair of texts.
    let old_prep: Vec<std::sync::Arc<Prep>> =
        if fresh.is_empty() { vec![] } else { old.iter().map(|s| shared.prep(s)).collect() };
    let new_prep: HashMap<usize, std::sync::Arc<Prep>> = fresh.iter().map(|&i| (i, shared.prep(&new[i]))).collect();
    let ident = |p: &Prep| (identity(&p.source), identity(&p.ttir));
    let old_ident: Vec<_> = old_prep.iter().map(|p| ident(p)).collect();
    let old_content: Vec<u64> =
        if fresh.is_empty() { vec![] } else { old.iter().map(|s| content(s, shared)).collect() };
    let new_content: HashMap<usize, u64> = fresh.iter().map(|&i| (i, content(&new[i], shared))).collect();
    // (old content, new content) → (distance, another variant, options only)
    type Analysed = ((usize, usize), bool, bool);
    let mut analysed: HashMap<(u64, u64), Analysed> = HashMap::new();
    // Every candidate pair, most similar first; assign greedily one to one.
    let mut pairs: Vec<((usize, usize), usize, usize, bool)> = Vec::new();
    // Pairs whose only differing key inputs are launch options (num_warps, num_stages, ...).
    let mut options_only: HashSet<(usize, usize)> = HashSet::new();
    for &n in &fresh {
        let Some(name) = new[n].kernel_name() else {
            continue;
        };
        let n_ident = ident(&new_prep[&n]);
        for &o in by_kernel.get(name).map(Vec::as_slice).unwrap_or(&[]) {
            // Another variant by its IR alone: never paired, and never options-only (a
            // variant field of the IR differs), so it needs no analysis.
            if surely_variant(old_ident[o], n_ident) {
                continue;
            }
            if pairs.len() >= MAX_CANDIDATE_PAIRS {
                return Err(OverBudget);
            }
            let (dist, variant, opts) = match analysed.entry((old_content[o], new_content[&n])) {
                std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    budget.pairs_left = budget.pairs_left.checked_sub(1).ok_or(OverBudget)?;
                    let an = analyse(&old[o], &old_prep[o], &new[n], &new_prep[&n], None);
                    let variant = an.causes().any(|f| is_variant_field(&f.row.field) || is_config_option(&f.row.field));
                    let opts = variant && an.causes().all(|f| is_config_option(&f.row.field));
                    *e.insert((distance(&an), variant, opts))
                }
            };
            if opts {
                options_only.insert((n, o));
            }
            pairs.push((dist, n, o, variant));
        }
    }
    pairs.sort_by_key(|p| (p.3, p.0, p.1, p.2));
    let (mut used_new, mut used_old) = (HashSet::new(), HashSet::new());
    let mut matched: Vec<(usize, usize)> = Vec::new();
    for (_, n, o, variant) in pairs {
        if variant || used_new.contains(&n) || used_old.contains(&o) {
            continue;
        }
        used_new.insert(n);
        used_old.insert(o);
        matched.push((n, o));
    }
    // A kernel whose one vanished variant was replaced by exactly one new variant that differs
    // only in launch options: that is the kernel recompiled with other options, not a new
    // variant beside an unrelated removal. With more on either side the pairing is a guess.
    let mut gone: HashMap<String, Vec<usize>> = HashMap::new();
    for (o, s) in old.iter().enumerate() {
        if !new_keys.contains(s.key.as_str()) && !used_old.contains(&o) {
            gone.entry(kernel(s)).or_default().push(o);
        }
    }
    let mut added: HashMap<String, Vec<usize>> = HashMap::new();
    for &n in fresh.iter().filter(|n| !used_new.contains(*n)) {
        added.entry(kernel(&new[n])).or_default().push(n);
    }
    for (k, olds) in &gone {
        if let ([o], Some([n])) = (olds.as_slice(), added.get(k).map(Vec::as_slice))
            && options_only.contains(&(*n, *o))
        {
            used_new.insert(*n);
            used_old.insert(*o);
            matched.push((*n, *o));
        }
    }
    matched.sort();
    let mut phrases: Vec<String> = Vec::new();
    // (old content, new content) → (cause, summary, identical binary, identical code, headline)
    type Built = (Cause, String, bool, bool, String);
    let mut built: HashMap<(u64, u64), Built> = HashMap::new();
    let invalidated: Vec<Invalidated> = matched
        .iter()
        .map(|&(n, o)| {
            let (cause, summary, identical_binary, identical_code, head) = built
                .entry((old_content[o], new_content[&n]))
                .or_insert_with(|| {
                    let (cmp, head) = build(&old[o], &old_prep[o], &new[n], &new_prep[&n], &shared.kept);
                    (cmp.cause, cmp.summary, cmp.identical_binary, cmp.identical_code, head)
                })
                .clone();
            phrases.push(head);
            Invalidated {
                kernel: kernel(&new[n]),
                old_key: old[o].key.clone(),
                new_key: new[n].key.clone(),
                cause,
                summary,
                identical_binary,
                identical_code,
            }
        })
        .collect();
    let new_list: Vec<(String, String)> =
        fresh.iter().filter(|n| !used_new.contains(*n)).map(|&n| (kernel(&new[n]), new[n].key.clone())).collect();
    let removed: Vec<(String, String)> = old
        .iter()
        .enumerate()
        .filter(|(i, s)| !new_keys.contains(s.key.as_str()) && !used_old.contains(i))
        .map(|(_, s)| (kernel(s), s.key.clone()))
        .collect();
    Ok(Part { old_len: old.len(), kept, invalidated, phrases, new: new_list, removed, kept_unlisted: 0 })
}

/// The parts of one report joined in order, with the counts by cause and the summary.
pub fn finish(parts: Vec<Part>) -> Invalidations {
    let mut all = Part::default();
    for p in parts {
        all.old_len += p.old_len;
        all.kept.extend(p.kept);
        all.invalidated.extend(p.invalidated);
        all.phrases.extend(p.phrases);
        all.new.extend(p.new);
        all.removed.extend(p.removed);
        all.kept_unlisted += p.kept_unlisted;
    }
    let Part { old_len, kept, invalidated, phrases, new, removed, kept_unlisted } = all;
    let by_cause: Vec<(Cause, usize)> = Cause::ORDER
        .iter()
        .map(|c| (*c, invalidated.iter().filter(|i| i.cause == *c).count()))
        .filter(|(_, n)| *n > 0)
        .collect();
    let n_kept = kept.len() + kept_unlisted;
    let summary = summarize(old_len, &invalidated, &phrases, &by_cause, n_kept, new.len(), removed.len());
    Invalidations { kept, kept_unlisted, invalidated, new, removed, by_cause, summary }
}

/// Options that pick a launch configuration (autotuner configs differ in these): a
/// different value means another variant, not a recompile of the same one.
fn is_config_option(field: &str) -> bool {
    matches!(
        field,
        "num_warps"
            | "num_stages"
            | "num_ctas"
            | "maxnreg"
            | "cluster_dims"
            | "waves_per_eu"
            | "matrix_instr_nonkdim"
            | "kpack"
    )
}

fn summarize(
    old: usize,
    inv: &[Invalidated],
    phrases: &[String],
    by_cause: &[(Cause, usize)],
    kept: usize,
    new: usize,
    removed: usize,
) -> String {
    let mut s = if inv.is_empty() {
        format!("nothing recompiled; {kept} kept")
    } else {
        let first = &phrases[0];
        let why = if phrases.iter().all(|p| p == first) {
            // "X=1 on B" reads as "X=1 set" in a report about the new set.
            let p = first.replace(" on B", " set").replace(" on A", " unset");
            match p.strip_prefix("code unchanged: ") {
                Some(rest) => format!("after {rest} (code unchanged)"),
                None => format!("after {p}"),
            }
        } else if let [(c, _)] = by_cause {
            let mut kernels: Vec<&str> = inv.iter().map(|i| i.kernel.as_str()).collect();
            kernels.dedup();
            let more = if kernels.len() > 3 { ", ..." } else { "" };
            format!("after {} changes ({}{more})", c.as_str(), kernels[..kernels.len().min(3)].join(", "))
        } else {
            let c: Vec<String> = by_cause.iter().map(|(c, n)| format!("{} {n}", c.as_str())).collect();
            format!("by cause: {}", c.join(", "))
        };
        let same = inv.iter().filter(|i| i.identical_binary).count();
        let code = inv.iter().filter(|i| i.identical_code && !i.identical_binary).count();
        let code = if code > 0 {
            format!(", {code} more the same machine code (only debug info differs)")
        } else {
            String::new()
        };
        format!("{} of {old} entries recompiled {why}; {same} had identical binaries{code}", inv.len())
    };
    if new > 0 || removed > 0 {
        s.push_str(&format!("; {new} new, {removed} removed"));
    }
    s
}
