//! Tests on the real caches of the corpus (unpacked by [`crate::test_corpus`]). A missing
//! archive fails the test: these tests are the proof of the explain logic.

mod fields;
mod ir;
mod jit;
mod locs;
mod matching;
mod report;

use super::*;
use crate::scan::resources::code_digest;
use serde_json::{Map, Value};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

/// The `triton-cache/` of a corpus archive.
pub(super) fn corpus(archive: &str) -> PathBuf {
    let p = crate::test_corpus::unpacked(archive).join("triton-cache");
    assert!(p.is_dir(), "{} has no triton-cache/", archive);
    p
}

/// A stand-in for sha256 (equality is all the tests need).
fn digest(bytes: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Reads one entry dir into a `Side` (None for entries without kernel metadata).
fn load_entry(machine: &str, dir: &Path) -> Option<Side> {
    let meta = std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).find(|p| {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        n.ends_with(".json") && !n.starts_with("__grp__") && !n.ends_with(".autotune.json")
    })?;
    let stem = meta.file_stem()?.to_string_lossy().to_string();
    let read = |ext: &str| std::fs::read_to_string(dir.join(format!("{stem}.{ext}"))).ok();
    let bin = ["cubin", "hsaco"].iter().find_map(|e| Some((*e, std::fs::read(dir.join(format!("{stem}.{e}"))).ok()?)));
    Some(Side {
        machine: machine.into(),
        key: dir.file_name()?.to_string_lossy().to_string(),
        kernel: Some(stem.clone()),
        metadata: serde_json::from_str(&read("json")?).ok(),
        source: read("source").map(Into::into),
        ttir: read("ttir").map(Into::into),
        binary_sha256: bin.as_ref().map(|b| digest(&b.1)),
        code_sha256: bin.and_then(|(ext, b)| code_digest(ext, &b).ok()),
        parts: None,
        relocated: false,
    })
}

pub(super) fn load_cache(machine: &str, cache: &Path) -> Vec<Side> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cache).unwrap().flatten().map(|e| e.path()).collect();
    dirs.sort();
    dirs.iter().filter_map(|d| load_entry(machine, d)).collect()
}

/// The first add kernel of Triton `v` in `archive`.
pub(super) fn add_entry(archive: &str, v: &str) -> Side {
    let all = load_cache("m", &corpus(archive));
    all.into_iter().find(|s| s.kernel.as_deref() == Some("add_kernel") && version(s) == v).expect("an add kernel")
}

/// A copy of `s` under another key, its metadata edited by `edit` (and another binary, as a
/// recompile with other inputs gives).
pub(super) fn edited(s: &Side, edit: impl FnOnce(&mut Map<String, Value>)) -> Side {
    let mut m = s.metadata.clone().unwrap();
    edit(m.as_object_mut().unwrap());
    Side {
        key: format!("{}-EDITED", s.key),
        metadata: Some(m),
        binary_sha256: s.binary_sha256.as_ref().map(|h| format!("{h}-edited")),
        code_sha256: s.code_sha256.as_ref().map(|h| format!("{h}-edited")),
        ..s.clone()
    }
}

pub(super) fn version(s: &Side) -> &str {
    s.metadata.as_ref().unwrap()["triton_version"].as_str().unwrap()
}

fn check_upgrade(archive: &str, old_v: &str, new_v: &str, n: usize) {
    let cache = corpus(archive);
    let all = load_cache("m", &cache);
    let old: Vec<Side> = all.iter().filter(|s| version(s) == old_v).cloned().collect();
    assert_eq!(old.len(), n);
    let inv = invalidations(&old, &all);
    assert_eq!(inv.kept.len(), n, "{}", inv.summary);
    assert_eq!(inv.invalidated.len(), n, "{} new={:?}", inv.summary, inv.new);
    assert!(inv.new.is_empty() && inv.removed.is_empty(), "{}", inv.summary);
    assert_eq!(inv.by_cause, vec![(Cause::Compiler, n)]);
    let arrow = format!("{old_v} → {new_v}");
    assert!(inv.summary.contains(&arrow), "{}", inv.summary);
    assert!(inv.summary.starts_with(&format!("{n} of {n} entries recompiled")), "{}", inv.summary);
    let by_key: HashMap<&str, &Side> = all.iter().map(|s| (s.key.as_str(), s)).collect();
    let mut olds = HashSet::new();
    for i in &inv.invalidated {
        let (o, nw) = (by_key[i.old_key.as_str()], by_key[i.new_key.as_str()]);
        assert_eq!((version(o), version(nw)), (old_v, new_v));
        assert!(olds.insert(&i.old_key), "old entry matched twice");
        let (mo, mn) = (o.metadata.as_ref().unwrap(), nw.metadata.as_ref().unwrap());
        for f in ["name", "num_warps", "num_stages"] {
            assert_eq!(mo[f], mn[f], "{f} of {}", i.new_key);
        }
        // Same variant: the block sizes and argument types agree.
        let (po, pn) = (
            super::ir::Prepared::new(o.source.as_ref().unwrap()),
            super::ir::Prepared::new(nw.source.as_ref().unwrap()),
        );
        assert_eq!((po.ranges, po.shapes), (pn.ranges, pn.shapes));
        assert!(i.summary.starts_with(&format!("Triton {arrow}; everything else equal")), "{}", i.summary);
        assert_eq!(i.cause, Cause::Compiler);
    }
}

#[test]
fn a100_upgrade_matches_every_entry_to_its_predecessor() {
    check_upgrade("a100-upgrade-2-triton-3.5.1", "3.4.0", "3.5.1", 45);
}

#[test]
fn mi300_upgrade_matches_every_entry_to_its_predecessor() {
    check_upgrade("mi300-upgrade-2-triton-3.9.0", "3.6.0", "3.9.0", 25);
}

#[test]
fn upgrade_compare_shows_version_only_fields_as_consequences() {
    let cache = corpus("a100-upgrade-2-triton-3.5.1");
    let all = load_cache("a100", &cache);
    let old: Vec<Side> = all.iter().filter(|s| version(s) == "3.4.0").cloned().collect();
    let inv = invalidations(&old, &all);
    let i = &inv.invalidated[0];
    let (a, b) = (all.iter().find(|s| s.key == i.old_key).unwrap(), all.iter().find(|s| s.key == i.new_key).unwrap());
    let c = compare(a, b);
    assert_eq!(c.cause, Cause::Compiler);
    let row = |f: &str| c.components.iter().find(|r| r.field == f).unwrap_or_else(|| panic!("no row {f}"));
    let ws = row("warp_size");
    assert!(ws.differs && ws.note.as_deref().unwrap().contains("only in Triton 3.5.1: consequence"), "{ws:?}");
    assert_eq!(row("profile_scratch_size").component, Cause::None);
    let ext = row("extern_libs");
    assert!(ext.differs && ext.note.as_deref().unwrap().contains("not a cause"), "{ext:?}");
    // Differing rows first.
    let first_equal = c.components.iter().position(|r| !r.differs).unwrap();
    assert!(c.components[first_equal..].iter().all(|r| !r.differs));
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["cause"], "compiler");
    assert_eq!(json["components"][0]["component"], "compiler");
}
