//! `cachelens prune`: what can go from a Triton cache, and taking it out safely.
//!
//! The command scans each root into the local database as `scan` does, reads the root's live
//! entries from it ([`crate::db::prune`]: variant, compile time, the hook's last events) and lists
//! every entry dir on disk ([`disk`]: its file signature, bytes and inodes, its temp dirs). The
//! pure [`decide`] turns both into a [`Plan`]: each item with its class, bytes, inodes and the
//! signature it had. `--apply` ([`apply`]) deletes only the plan's items whose signature is still
//! the same, taking each entry out of Triton's key namespace before removing it.

pub mod advice;
pub mod apply;
pub mod cmd;
pub mod disk;

use crate::db::prune::PruneRow;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Why an item can go. Each entry is in one class at most, the first that applies in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The group file points to another path: Triton misses on the entry where it sits.
    Relocated,
    /// A newer key of the same variant exists, and this one was not hit since it was compiled.
    Superseded,
    /// Neither hit nor compiled for `--unused-for`.
    Unused,
    /// A writer's temp dir (`tmp.pid_*`, or a prune's `tmp.cachelens_prune_*`), or an empty entry
    /// dir (what a lookup or a pruned entry leaves), older than an hour.
    OrphanTemp,
    /// The IR files of a kept entry (what `TRITON_STORE_BINARY_ONLY=1` would not have written).
    Ir,
    /// Least recently used, to fit `--max-bytes` / `--max-inodes`.
    OverBudget,
}

impl Class {
    pub const ALL: [Class; 6] =
        [Class::Relocated, Class::Superseded, Class::Unused, Class::OrphanTemp, Class::Ir, Class::OverBudget];

    pub fn label(self) -> &'static str {
        match self {
            Class::Relocated => "relocated (Triton misses on them here)",
            Class::Superseded => "superseded by a newer key of the same variant",
            Class::Unused => "not hit nor compiled for --unused-for",
            Class::OrphanTemp => "orphaned temp dirs and empty entry dirs (older than an hour)",
            Class::Ir => "IR files of kept entries (--ir)",
            Class::OverBudget => "least recently used, to fit --max-bytes/--max-inodes",
        }
    }
}

/// One thing the plan removes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Item {
    pub class: Class,
    /// The entry dir (or temp dir) relative to the root.
    pub dir: String,
    /// The entry's key ('' for a temp dir directly under the root).
    pub key: String,
    /// What the entry's files were when planned ([`disk::Listed::sig`]); apply skips an item
    /// whose signature changed since.
    pub sig: String,
    pub bytes: i64,
    pub inodes: i64,
    /// For [`Class::Ir`]: the files removed (the group file is rewritten without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Why, for people (e.g. the newer key, the last use).
    pub why: String,
}

/// Per class: how many items, bytes and inodes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Tally {
    pub class: Option<Class>,
    pub items: i64,
    pub bytes: i64,
    pub inodes: i64,
}

/// The plan for one root.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RootPlan {
    pub root: String,
    /// Entries, bytes and inodes under the root now (what was listed).
    pub entries: i64,
    pub bytes: i64,
    pub inodes: i64,
    /// What stands in for an entry's last use, said for people.
    pub last_use: String,
    pub items: Vec<Item>,
}

impl RootPlan {
    /// Per class (in [`Class::ALL`] order, empty classes left out) and the total.
    pub fn tallies(&self) -> (Vec<Tally>, Tally) {
        let mut by: HashMap<Class, Tally> = HashMap::new();
        let mut total = Tally::default();
        for i in &self.items {
            let t = by.entry(i.class).or_insert_with(|| Tally { class: Some(i.class), ..Tally::default() });
            for t in [t, &mut total] {
                t.items += 1;
                t.bytes = t.bytes.saturating_add(i.bytes);
                t.inodes = t.inodes.saturating_add(i.inodes);
            }
        }
        (Class::ALL.iter().filter_map(|c| by.remove(c)).collect(), total)
    }
}

/// The plan file's format (`Plan::format`).
pub const PLAN_FORMAT: &str = "cachelens-prune-plan/1";

/// A dry run's answer, saved for `--apply --plan`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub format: String,
    pub machine: String,
    /// When it was made (unix ms).
    pub made_at: i64,
    pub roots: Vec<RootPlan>,
}

/// What to remove, as the command line says.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Now (unix ms).
    pub now: i64,
    /// `--unused-for` in ms (`None`: the class is off).
    pub unused_for: Option<i64>,
    /// `--ir`: strip IR files of kept kernel entries.
    pub ir: bool,
    pub max_bytes: Option<i64>,
    pub max_inodes: Option<i64>,
}

pub use crate::scan::hazards::ORPHAN_AGE_MS;

/// IR file extensions: what `TRITON_STORE_BINARY_ONLY=1` does not write (it keeps the binary,
/// the metadata `.json`, the group file and, 3.4+, `.source`).
pub const IR_EXTS: &[&str] = &["ttir", "ttgir", "llir", "ptx", "amdgcn"];

/// The variant an entry compiles: kernel, argument signature, TTIR shapes (constexpr evidence),
/// launch options and target. Two keys of one variant differ by compiler, env or source.
fn variant(r: &PruneRow) -> Option<String> {
    let kernel = r.kernel.as_deref()?;
    // without the TTIR signature two specialisations of one kernel cannot be told apart
    let sig = r.signature.as_deref()?;
    Some(format!(
        "{kernel}\0{sig}\0{}\0{:?}\0{:?}\0{:?}\0{}\0{}\0{:?}",
        r.shapes.as_deref().unwrap_or(""),
        r.num_warps,
        r.num_stages,
        r.num_ctas,
        r.backend.as_deref().unwrap_or(""),
        r.arch.as_deref().unwrap_or(""),
        r.warp_size
    ))
}

/// Whether a row is a compiled kernel (has metadata and a group): the only entries prune judges.
/// Launchers (`*.so`), autotune results and partial entries are kept.
fn is_kernel(r: &PruneRow) -> bool {
    matches!(r.kind.as_str(), "kernel" | "binary_only") && r.kernel.is_some()
}

/// Decide a root's plan from its rows (database) and what is on disk now. `hook_since`: the
/// hook's first event for this root (`None`: no hook here).
pub fn decide(
    root: &str,
    rows: &[PruneRow],
    listed: &disk::Listing,
    hook_since: Option<i64>,
    rules: &Rules,
) -> RootPlan {
    let on_disk: HashMap<&str, &disk::Listed> = listed.entries.iter().map(|l| (l.dir.as_str(), l)).collect();
    let rows: Vec<(&PruneRow, &disk::Listed)> =
        rows.iter().filter_map(|r| on_disk.get(r.dir.as_str()).map(|l| (r, *l))).collect();
    // Last use: the hook's last event, else the compile time; with a hook, an entry without events
    // was not looked up since the hook's first event either.
    let last_use = |r: &PruneRow| r.created_at.max(r.last_event).max(hook_since.filter(|_| r.last_event.is_none()));
    let mut take = Taker::default();
    for (r, l) in rows.iter().filter(|(r, _)| r.relocated && is_kernel(r)) {
        take.push(r, l, Class::Relocated, "its group file names another path".into());
    }
    // Superseded: per variant, the newest compile; older keys not hit since it was compiled. With
    // no hook there is no hit to go by: only an older Triton version's key counts (an upgraded
    // Triton never looks it up again).
    let mut newest: HashMap<String, &PruneRow> = HashMap::new();
    for (r, _) in rows.iter().filter(|(r, _)| is_kernel(r)) {
        if let Some(v) = variant(r) {
            let n = newest.entry(v).or_insert(r);
            if r.created_at > n.created_at {
                *n = r;
            }
        }
    }
    for (r, l) in &rows {
        let Some(n) = variant(r).and_then(|v| newest.get(&v).copied()) else { continue };
        let (Some(mine), Some(theirs)) = (r.created_at, n.created_at) else { continue };
        if n.key == r.key || mine >= theirs {
            continue;
        }
        let gone = match hook_since {
            Some(_) => r.last_hit.is_none_or(|h| h < theirs),
            None => r.triton_version.is_some() && r.triton_version != n.triton_version,
        };
        if gone {
            let how = match hook_since {
                Some(_) => "not hit since",
                None => "an older Triton's key (no hook: hits unknown)",
            };
            let why = format!("{} compiled {}; {how}", n.key, crate::fmt::time(Some(theirs)));
            take.push(r, l, Class::Superseded, why);
        }
    }
    if let Some(age) = rules.unused_for {
        for (r, l) in rows.iter().filter(|(r, _)| is_kernel(r)) {
            if let Some(used) = last_use(r).filter(|u| rules.now - u > age) {
                take.push(r, l, Class::Unused, format!("last used {}", crate::fmt::time(Some(used))));
            }
        }
    }
    for (t, what) in
        listed.temps.iter().map(|t| (t, "temp dir")).chain(listed.empty.iter().map(|t| (t, "empty entry dir")))
    {
        // a temp dir inside an entry that goes whole goes with it (counted there)
        let inside = t.dir.rsplit_once('/').is_some_and(|(up, _)| take.taken.contains_key(up));
        if !inside && rules.now - t.mtime_ms > ORPHAN_AGE_MS {
            let why = format!("{what} last changed {}", crate::fmt::time(Some(t.mtime_ms)));
            let key = match what {
                // `<KEY>/tmp.pid_*`: the entry's key; a `tmp.*` in the root: none
                "temp dir" => t.dir.rsplit_once('/').map_or("", |(k, _)| k.rsplit('/').next().unwrap_or(k)),
                _ => t.dir.rsplit('/').next().unwrap_or_default(),
            }
            .to_string();
            take.items.push(Item {
                class: Class::OrphanTemp,
                dir: t.dir.clone(),
                key,
                sig: t.sig.clone(),
                bytes: t.bytes,
                inodes: t.inodes,
                files: vec![],
                why,
            });
        }
    }
    // IR of kept kernel entries: on each entry that stays whole.
    let mut ir_at: HashMap<&str, usize> = HashMap::new();
    if rules.ir {
        for (r, l) in rows.iter().filter(|(r, _)| r.kind == "kernel" && r.kernel.is_some() && !r.relocated) {
            if take.taken.contains_key(r.dir.as_str()) || !l.has_group {
                continue;
            }
            let ir: Vec<&disk::FileSize> = l.files.iter().filter(|f| IR_EXTS.contains(&ext(&f.name))).collect();
            if ir.is_empty() {
                continue;
            }
            ir_at.insert(r.dir.as_str(), take.items.len());
            take.items.push(Item {
                class: Class::Ir,
                dir: r.dir.clone(),
                key: r.key.clone(),
                sig: l.sig.clone(),
                bytes: ir.iter().map(|f| f.size as i64).sum(),
                inodes: ir.len() as i64,
                files: ir.iter().map(|f| f.name.clone()).collect(),
                why: "binary, metadata, group file and .source kept".into(),
            });
        }
    }
    // The budget: least recently used kernel entries first, until what stays fits.
    let (mut bytes, mut inodes) = (listed.bytes(), listed.inodes());
    for i in &take.items {
        bytes = bytes.saturating_sub(i.bytes);
        inodes = inodes.saturating_sub(i.inodes);
    }
    let over = |b: i64, n: i64| rules.max_bytes.is_some_and(|m| b > m) || rules.max_inodes.is_some_and(|m| n > m);
    if over(bytes, inodes) {
        let mut lru: Vec<&(&PruneRow, &disk::Listed)> =
            rows.iter().filter(|(r, _)| is_kernel(r) && !take.taken.contains_key(r.dir.as_str())).collect();
        lru.sort_by_key(|(r, _)| (last_use(r), r.dir.clone()));
        let mut drop_ir = vec![];
        for (r, l) in lru {
            if !over(bytes, inodes) {
                break;
            }
            // an entry whose IR was already counted frees the rest of it now
            let (b, n) = match ir_at.get(r.dir.as_str()) {
                Some(&at) => {
                    drop_ir.push(at);
                    (l.bytes.saturating_sub(take.items[at].bytes), l.inodes.saturating_sub(take.items[at].inodes))
                }
                None => (l.bytes, l.inodes),
            };
            bytes = bytes.saturating_sub(b);
            inodes = inodes.saturating_sub(n);
            let why = format!("last used {}", crate::fmt::time(last_use(r)));
            take.push(r, l, Class::OverBudget, why);
        }
        drop_ir.sort_unstable();
        for at in drop_ir.into_iter().rev() {
            take.items.remove(at);
        }
    }
    let last_use = match hook_since {
        Some(t) => format!(
            "the hook's last event for the key (hook events here since {}; before that, the metadata file's mtime)",
            crate::fmt::time(Some(t))
        ),
        None => "no hook events for this cache: the metadata file's mtime (the compile time) stands in for the \
                 last use, so a kernel only hit since counts as unused (atime is not used: relatime and noatime \
                 mounts do not keep it)"
            .into(),
    };
    RootPlan {
        root: root.to_string(),
        entries: listed.entries.len() as i64,
        bytes: listed.bytes(),
        inodes: listed.inodes(),
        last_use,
        items: take.items,
    }
}

/// The items taken so far, and which entry dirs they hold (an entry is in one class at most).
#[derive(Default)]
struct Taker<'a> {
    items: Vec<Item>,
    taken: HashMap<&'a str, usize>,
}

impl<'a> Taker<'a> {
    fn push(&mut self, r: &'a PruneRow, l: &disk::Listed, class: Class, why: String) {
        if self.taken.contains_key(r.dir.as_str()) {
            return;
        }
        self.taken.insert(r.dir.as_str(), self.items.len());
        let (dir, key, sig) = (r.dir.clone(), r.key.clone(), l.sig.clone());
        // the entry dir and its group files (stubbed) stay (see `apply::take_out`); they go with
        // a later run once so for an hour
        let inodes = (l.inodes - 1 - l.groups).max(0);
        self.items.push(Item { class, dir, key, sig, bytes: l.bytes, inodes, files: vec![], why });
    }
}

/// A file name's extension as Triton writes it (`x.ttgir` → `ttgir`).
fn ext(name: &str) -> &str {
    name.rsplit_once('.').map_or("", |(_, e)| e)
}
