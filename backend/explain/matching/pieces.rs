//! The pure steps of pairing one kernel's entries in bounded pieces (the loading is
//! `answers::load::pieces`): entries in classes of equal contents ([`Facts`]), classes split into
//! sub-groups that pairing never crosses ([`Splitter`]), each sub-group's class pairs analysed
//! once ([`verdict`]) and its entries assigned from those verdicts ([`assign`]), with the same
//! answer as [`super::match_part`] over the kernel's entries loaded whole.

use super::{Shared, content, distance, identity, is_config_option, surely_variant};
use crate::explain::compare::{analyse, build};
use crate::explain::source::is_variant_field;
use crate::explain::{Cause, Side};
use serde_json::Value;
use std::collections::BTreeSet;

/// What pairing reads of a class of entries (entries of equal [`content`]: they analyse alike).
#[derive(Debug, Clone)]
pub struct Facts {
    /// The class: [`content`].
    pub content: u64,
    /// `num_warps`, `num_stages` of the metadata (as JSON text), its target backend.
    warps: Option<String>,
    stages: Option<String>,
    backend: String,
    /// The variant identity of its `.source` and `.ttir` ([`identity`]).
    ident: (Option<u64>, Option<u64>),
}

/// The facts of a side's class.
pub fn facts(s: &Side, shared: &mut Shared) -> Facts {
    let p = shared.prep(s);
    let m = s.metadata.as_ref().and_then(Value::as_object);
    let field = |k: &str| m.and_then(|m| m.get(k)).map(Value::to_string);
    let backend = m.and_then(|m| m.get("target")).and_then(|t| t.get("backend")).cloned().unwrap_or(Value::Null);
    Facts {
        content: content(s, shared),
        warps: field("num_warps"),
        stages: field("num_stages"),
        backend: backend.to_string(),
        ident: (identity(&p.source), identity(&p.ttir)),
    }
}

/// Which IR's identity splits a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ir {
    Source,
    Ttir,
}

/// The sub-group of a class: entries of different sub-groups are never paired.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubKey(Option<String>, Option<String>, Option<u64>);

/// The finest split of one kernel's classes (old and new) that pairing never crosses, from what
/// every class of the kernel holds. A pair is made only when no cause of its analysis is a
/// variant field or a launch option (or by the options-only exception, which [`verdict`] decides
/// apart, over the whole kernel):
/// - `num_warps` known on both sides and different is always a cause (a user option, set by no
///   env var, with no backend default), so it splits a kernel where every class knows it;
/// - `num_stages` too, unless the backends differ (CUDA's 3 against HIP's 2 is a consequence of
///   the target), so it splits a kernel whose classes all know it and share one backend;
/// - the IR's signature, block sizes and shapes ([`identity`]) of the IR the comparison reads
///   (`.source` when both sides have it, else `.ttir`): a pair whose identities differ is never
///   a candidate ([`surely_variant`]), so it splits a kernel whose classes all have a `.source`,
///   or none has one and all have a `.ttir`.
///
/// A part some class does not know is left out of every key of the kernel.
#[derive(Debug, Clone, Copy)]
pub struct Splitter {
    warps: bool,
    stages: bool,
    ir: Option<Ir>,
}

impl Splitter {
    pub fn of<'a>(classes: impl IntoIterator<Item = &'a Facts>) -> Splitter {
        let (mut warps, mut stages, mut backend) = (true, true, None::<&str>);
        let (mut all_source, mut no_source, mut all_ttir) = (true, true, true);
        for f in classes {
            warps &= f.warps.is_some();
            stages &= f.stages.is_some() && *backend.get_or_insert(&f.backend) == f.backend;
            all_source &= f.ident.0.is_some();
            no_source &= f.ident.0.is_none();
            all_ttir &= f.ident.1.is_some();
        }
        let ir = if all_source {
            Some(Ir::Source)
        } else if no_source && all_ttir {
            Some(Ir::Ttir)
        } else {
            None
        };
        Splitter { warps, stages, ir }
    }

    pub fn key(&self, f: &Facts) -> SubKey {
        SubKey(
            f.warps.clone().filter(|_| self.warps),
            f.stages.clone().filter(|_| self.stages),
            match self.ir {
                Some(Ir::Source) => f.ident.0,
                Some(Ir::Ttir) => f.ident.1,
                None => None,
            },
        )
    }
}

/// The analysis of a candidate pair (old, new): its distance, whether it is another variant,
/// and whether its only differing key inputs are launch options. `None`: surely another
/// variant by its IR alone, never a candidate.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    pub dist: (usize, usize),
    pub variant: bool,
    pub opts: bool,
}

/// [`Verdict`] of an old side and a new one of the same kernel, as [`super::match_part`] decides it.
pub fn verdict(o: &Side, n: &Side, shared: &mut Shared) -> Option<Verdict> {
    let (po, pn) = (shared.prep(o), shared.prep(n));
    if surely_variant((identity(&po.source), identity(&po.ttir)), (identity(&pn.source), identity(&pn.ttir))) {
        return None;
    }
    let an = analyse(o, &po, n, &pn, None);
    let variant = an.causes().any(|f| is_variant_field(&f.row.field) || is_config_option(&f.row.field));
    let opts = variant && an.causes().all(|f| is_config_option(&f.row.field));
    Some(Verdict { dist: distance(&an), variant, opts })
}

/// What an invalidated row says: cause, summary, identical binary, identical code, headline.
pub type Built = (Cause, String, bool, bool, String);

/// The comparison of a matched pair, as [`super::match_part`] builds it.
pub fn built(o: &Side, n: &Side, shared: &mut Shared) -> Built {
    let (po, pn) = (shared.prep(o), shared.prep(n));
    let (cmp, head) = build(o, &po, n, &pn, &shared.kept);
    (cmp.cause, cmp.summary, cmp.identical_binary, cmp.identical_code, head)
}

/// One sub-group's assignment: `news` and `olds` are its entries (index in the kernel's list,
/// class), by index; `table[c]` the non-variant candidates of new class `c`: (distance, old
/// class). The pairs (new, old) that [`super::match_part`]'s greedy makes over the same
/// entries: candidate pairs by distance, then new index, then old index, each entry used once.
/// For one distance that is: each free new entry in order takes the free old entry of lowest
/// index among the classes at that distance; an old class's free entries are taken in order,
/// so the lowest free one is its queue's head. Memory: the entries and the class table, never
/// a pair of entries.
pub fn assign(
    news: &[(usize, usize)],
    olds: &[(usize, usize)],
    old_classes: usize,
    table: &[Vec<((usize, usize), usize)>],
) -> Vec<(usize, usize)> {
    let mut queues: Vec<std::collections::VecDeque<usize>> = vec![Default::default(); old_classes];
    for &(o, c) in olds {
        queues[c].push_back(o);
    }
    let levels: BTreeSet<(usize, usize)> = table.iter().flatten().map(|(d, _)| *d).collect();
    let mut used = vec![false; news.len()];
    let mut out = Vec::new();
    for d in levels {
        for (i, &(n, c)) in news.iter().enumerate() {
            if used[i] {
                continue;
            }
            let best = table[c]
                .iter()
                .filter(|(dd, _)| *dd == d)
                .filter_map(|&(_, oc)| Some((*queues[oc].front()?, oc)))
                .min();
            if let Some((o, oc)) = best {
                queues[oc].pop_front();
                used[i] = true;
                out.push((n, o));
            }
        }
    }
    out
}
