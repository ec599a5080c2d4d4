//! One kernel's pairing in bounded pieces: the matching of [`crate::explain::match_part`] over
//! the kernel's entries, without ever holding more than `Limits::group_entries` entries in full.
//!
//! 1. The kernel's entries are read in full a batch at a time, each reduced to its class (entries
//!    of equal contents analyse alike: `matching::content`) and the class's [`Facts`]; one
//!    member's id is kept per class.
//! 2. The classes are split into sub-groups that pairing never crosses ([`Splitter`]: num_warps,
//!    num_stages, the IR's variant identity, where every class of the kernel knows them).
//! 3. In each sub-group every pair of an old class and a new one is analysed once, one member of
//!    each read, a batch of old classes against a batch of new ones at a time; the entries are
//!    then assigned from the class verdicts ([`pieces::assign`]), the same greedy as the whole
//!    match.
//! 4. The options-only exception (one vanished entry, one added, differing only in launch
//!    options) is decided over the whole kernel once the sub-groups are matched, reading those
//!    two entries; the matched pairs' comparisons are built once per pair of classes, a batch
//!    at a time.
//!
//! Memory: a few words an entry (its class and place), the classes' facts and one sub-group's
//! class verdicts; entries in full only a batch at a time.

use super::{ExplainError, Limits, light};
use crate::db::explain::{LightRow, sides_of_ids};
use crate::explain::pieces::{self, Built, Facts, Splitter, SubKey, Verdict};
use crate::explain::{Invalidated, Part, Shared, Side};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// One side's classes: facts, and one member's id each.
#[derive(Default)]
struct Classes {
    facts: Vec<Facts>,
    rep: Vec<i64>,
    of_content: HashMap<u64, usize>,
}

impl Classes {
    fn add(&mut self, id: i64, f: Facts) -> usize {
        let next = self.facts.len();
        let c = *self.of_content.entry(f.content).or_insert(next);
        if c == next {
            self.facts.push(f);
            self.rep.push(id);
        }
        c
    }
}

/// CPU work off the async workers, with the report's [`Shared`] moved in and back.
async fn blocking<T: Send + 'static>(
    shared: &mut Shared,
    f: impl FnOnce(&mut Shared) -> T + Send + 'static,
) -> Result<T, ExplainError> {
    let mut s = std::mem::replace(shared, Shared::new(shared.kept()));
    let (out, s) = tokio::task::spawn_blocking(move || (f(&mut s), s))
        .await
        .map_err(|e| ExplainError::Db(sqlx::Error::Protocol(format!("report task failed: {e}"))))?;
    *shared = s;
    Ok(out)
}

/// The sides of `ids` (one machine), in order; an id no longer read (an entry deleted meanwhile)
/// as its light row, as the whole match reads a new entry it cannot load.
async fn read(db: &crate::db::Db, machine: &str, rows: &[&LightRow]) -> Result<Vec<Side>, ExplainError> {
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let mut by_id: HashMap<String, Side> =
        sides_of_ids(db, machine, &ids).await?.into_iter().map(|s| (s.key.clone(), s)).collect();
    Ok(rows.iter().map(|r| by_id.remove(&r.key).unwrap_or_else(|| light(machine, r))).collect())
}

/// Each row's class, reading `batch` rows in full at a time.
async fn classify(
    db: &crate::db::Db,
    machine: &str,
    rows: &[&LightRow],
    batch: usize,
    classes: &mut Classes,
    shared: &mut Shared,
) -> Result<Vec<usize>, ExplainError> {
    let mut of = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(batch) {
        let sides = read(db, machine, chunk).await?;
        let facts = blocking(shared, move |sh| sides.iter().map(|s| pieces::facts(s, sh)).collect::<Vec<_>>()).await?;
        for (r, f) in chunk.iter().zip(facts) {
            of.push(classes.add(r.id, f));
        }
    }
    Ok(of)
}

/// One member's side of each class, read when asked for, or all held when the kernel's classes
/// fit in one batch (most kernels: their sub-groups then cost no read each).
struct Reps<'a> {
    machine: &'a str,
    classes: &'a Classes,
    rows: HashMap<i64, &'a LightRow>,
    held: Option<Vec<Arc<Side>>>,
}

impl<'a> Reps<'a> {
    async fn new(
        db: &crate::db::Db,
        machine: &'a str,
        classes: &'a Classes,
        rows: HashMap<i64, &'a LightRow>,
        hold: bool,
    ) -> Result<Reps<'a>, ExplainError> {
        let mut r = Reps { machine, classes, rows, held: None };
        if hold {
            let all: Vec<usize> = (0..classes.rep.len()).collect();
            r.held = Some(r.get(db, &all).await?);
        }
        Ok(r)
    }

    /// The sides of classes `which`, in order.
    async fn get(&self, db: &crate::db::Db, which: &[usize]) -> Result<Vec<Arc<Side>>, ExplainError> {
        if let Some(h) = &self.held {
            return Ok(which.iter().map(|&c| h[c].clone()).collect());
        }
        let rs: Vec<&LightRow> = which.iter().map(|&c| self.rows[&self.classes.rep[c]]).collect();
        Ok(read(db, self.machine, &rs).await?.into_iter().map(Arc::new).collect())
    }
}

/// The match of one named kernel: `old` and `new` its entries on each side (as listed: by key),
/// the new ones not all kept. Equal to `match_part` of the entries loaded whole.
#[allow(clippy::too_many_arguments)]
pub(super) async fn kernel_part(
    db: &crate::db::Db,
    (old_machine, new_machine): (&str, &str),
    kernel: &str,
    old: &[&LightRow],
    new: &[&LightRow],
    limits: Limits,
    shared: &mut Shared,
) -> Result<Part, ExplainError> {
    let batch = limits.group_entries.max(2);
    // The first old row of each key; a new key's place is its first row, its entry the last
    // (what the whole match reads: the new sides are found by key, the last one read wins).
    let mut seen = HashSet::new();
    let old: Vec<&LightRow> = old.iter().copied().filter(|r| seen.insert(r.key.as_str())).collect();
    let mut last: HashMap<&str, &LightRow> = HashMap::new();
    for r in new {
        last.insert(r.key.as_str(), r);
    }
    let mut seen = HashSet::new();
    let new: Vec<&LightRow> =
        new.iter().filter(|r| seen.insert(r.key.as_str())).map(|r| last[r.key.as_str()]).collect();
    let old_keys: HashSet<&str> = old.iter().map(|r| r.key.as_str()).collect();
    let new_keys: HashSet<&str> = new.iter().map(|r| r.key.as_str()).collect();
    let fresh: Vec<usize> = (0..new.len()).filter(|&i| !old_keys.contains(new[i].key.as_str())).collect();
    let fresh_rows: Vec<&LightRow> = fresh.iter().map(|&i| new[i]).collect();

    // 1. classes
    let (mut oc, mut nc) = (Classes::default(), Classes::default());
    let old_class = classify(db, old_machine, &old, batch, &mut oc, shared).await?;
    let fresh_class = classify(db, new_machine, &fresh_rows, batch, &mut nc, shared).await?;

    // 2. sub-groups: (old classes, new classes)
    let split = Splitter::of(oc.facts.iter().chain(&nc.facts));
    let mut subs: BTreeMap<SubKey, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (c, f) in oc.facts.iter().enumerate() {
        subs.entry(split.key(f)).or_default().0.push(c);
    }
    for (c, f) in nc.facts.iter().enumerate() {
        subs.entry(split.key(f)).or_default().1.push(c);
    }

    let hold = oc.rep.len() + nc.rep.len() <= batch;
    let old_reps = Reps::new(db, old_machine, &oc, old.iter().map(|r| (r.id, *r)).collect(), hold).await?;
    let new_reps = Reps::new(db, new_machine, &nc, fresh_rows.iter().map(|r| (r.id, *r)).collect(), hold).await?;
    // each class's entries: old by index, new by index in the kernel's new list
    let mut old_members: Vec<Vec<usize>> = vec![vec![]; oc.facts.len()];
    for (o, &c) in old_class.iter().enumerate() {
        old_members[c].push(o);
    }
    let mut new_members: Vec<Vec<usize>> = vec![vec![]; nc.facts.len()];
    for (k, &c) in fresh_class.iter().enumerate() {
        new_members[c].push(fresh[k]);
    }

    // 3. each sub-group's class verdicts, then its entries assigned
    let mut matched: Vec<(usize, usize)> = Vec::new(); // (new index, old index) in the kernel
    let half = (batch / 2).max(1);
    for (ocs, ncs) in subs.values().filter(|(o, n)| !o.is_empty() && !n.is_empty()) {
        // new class → (distance, old class) of its non-variant candidates; classes by their
        // place in this sub-group
        let mut table: Vec<Vec<((usize, usize), usize)>> = vec![vec![]; ncs.len()];
        let mut analysed = 0usize;
        for (oi, ochunk) in ocs.chunks(half).enumerate() {
            let os = Arc::new(old_reps.get(db, ochunk).await?);
            for (ni, nchunk) in ncs.chunks(half).enumerate() {
                analysed += ochunk.len() * nchunk.len();
                if analysed > limits.pairs {
                    return Err(ExplainError::OverBudget(super::pairs_over(limits)));
                }
                let ns = new_reps.get(db, nchunk).await?;
                let os = os.clone();
                let found: Vec<(usize, usize, Verdict)> = blocking(shared, move |sh| {
                    let mut v = Vec::new();
                    for (j, n) in ns.iter().enumerate() {
                        for (i, o) in os.iter().enumerate() {
                            if let Some(x) = pieces::verdict(o, n, sh) {
                                v.push((oi * half + i, ni * half + j, x));
                            }
                        }
                    }
                    v
                })
                .await?;
                for (o, n, x) in found.into_iter().filter(|(_, _, x)| !x.variant) {
                    table[n].push((x.dist, o));
                }
            }
        }
        // the sub-group's entries (index in the kernel, class's place), by index
        let members = |cs: &[usize], of: &[Vec<usize>]| -> Vec<(usize, usize)> {
            let mut v: Vec<(usize, usize)> =
                cs.iter().enumerate().flat_map(|(p, &c)| of[c].iter().map(move |&i| (i, p))).collect();
            v.sort_unstable();
            v
        };
        let (olds, news) = (members(ocs, &old_members), members(ncs, &new_members));
        matched.extend(pieces::assign(&news, &olds, ocs.len(), &table));
    }
    let fresh_place: HashMap<usize, usize> = fresh.iter().enumerate().map(|(k, &n)| (n, k)).collect();

    // 4. the options-only exception, over the whole kernel
    let used_new: HashSet<usize> = matched.iter().map(|p| p.0).collect();
    let used_old: HashSet<usize> = matched.iter().map(|p| p.1).collect();
    let gone: Vec<usize> =
        (0..old.len()).filter(|o| !new_keys.contains(old[*o].key.as_str()) && !used_old.contains(o)).collect();
    let added: Vec<usize> = fresh.iter().copied().filter(|n| !used_new.contains(n)).collect();
    if let ([o], [n]) = (gone.as_slice(), added.as_slice()) {
        let os = read(db, old_machine, &[old[*o]]).await?;
        let ns = read(db, new_machine, &[new[*n]]).await?;
        let opts = blocking(shared, move |sh| pieces::verdict(&os[0], &ns[0], sh).is_some_and(|v| v.opts)).await?;
        if opts {
            matched.push((*n, *o));
        }
    }
    matched.sort();

    // 5. the comparisons, once per pair of classes
    let class_pair = |&(n, o): &(usize, usize)| (old_class[o], fresh_class[fresh_place[&n]]);
    let mut needed: Vec<(usize, usize)> = matched.iter().map(class_pair).collect();
    needed.sort();
    needed.dedup();
    let mut built: HashMap<(usize, usize), Built> = HashMap::new();
    for chunk in needed.chunks(half) {
        let ocs: Vec<usize> = chunk.iter().map(|p| p.0).collect();
        let ncs: Vec<usize> = chunk.iter().map(|p| p.1).collect();
        let (os, ns) = (old_reps.get(db, &ocs).await?, new_reps.get(db, &ncs).await?);
        let b =
            blocking(shared, move |sh| os.iter().zip(&ns).map(|(o, n)| pieces::built(o, n, sh)).collect::<Vec<_>>())
                .await?;
        built.extend(chunk.iter().copied().zip(b));
    }

    // the part, in the whole match's order
    let used_new: HashSet<usize> = matched.iter().map(|p| p.0).collect();
    let used_old: HashSet<usize> = matched.iter().map(|p| p.1).collect();
    let mut phrases = Vec::with_capacity(matched.len());
    let invalidated: Vec<Invalidated> = matched
        .iter()
        .map(|p| {
            let (cause, summary, identical_binary, identical_code, head) = built[&class_pair(p)].clone();
            phrases.push(head);
            Invalidated {
                kernel: kernel.to_string(),
                old_key: old[p.1].key.clone(),
                new_key: new[p.0].key.clone(),
                cause,
                summary,
                identical_binary,
                identical_code,
            }
        })
        .collect();
    Ok(Part {
        old_len: old.len(),
        kept: new.iter().filter(|r| old_keys.contains(r.key.as_str())).map(|r| r.key.clone()).collect(),
        invalidated,
        phrases,
        new: fresh
            .iter()
            .filter(|n| !used_new.contains(*n))
            .map(|&n| (kernel.to_string(), new[n].key.clone()))
            .collect(),
        removed: (0..old.len())
            .filter(|o| !new_keys.contains(old[*o].key.as_str()) && !used_old.contains(o))
            .map(|o| (kernel.to_string(), old[o].key.clone()))
            .collect(),
        kept_unlisted: 0,
    })
}
