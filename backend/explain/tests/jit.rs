//! Tests on the H100 JIT cache (phases from its ground truth) and cross-cache comparisons.

use super::{corpus, load_cache, version};
use crate::explain::*;
use std::collections::HashSet;

/// Entries that the ground truth says one phase compiled or loaded: (phase, metadata hashes).
type Phases = Vec<(String, HashSet<String>)>;

/// The h100 JIT cache, split into phases by the ground truth: (phase label, entries).
fn jit_phases() -> (Vec<Side>, Phases) {
    let cache = corpus("h100-jit-3.6.0");
    let all = load_cache("h100", &cache);
    let events = std::fs::read_to_string(cache.parent().unwrap().join("ground-truth-events.jsonl"))
        .expect("h100-jit-3.6.0/ground-truth-events.jsonl");
    // The run with TRITON_DISABLE_LINE_INFO=1 is labelled "warm" too: tell it apart by its
    // misses (the plain warm run only hits).
    let mut phases: Phases = Vec::new();
    for line in events.lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("ground truth line");
        let mut phase = e["phase"].as_str().expect("phase").to_string();
        if phase == "warm" && e["cache_hit"] == false {
            phase = "line-info".into();
        }
        let hash = e["hash"].as_str().expect("hash").to_string();
        match phases.iter_mut().find(|p| p.0 == phase) {
            Some(p) => {
                p.1.insert(hash);
            }
            None => phases.push((phase, HashSet::from([hash]))),
        }
    }
    (all, phases)
}

fn hash_of(s: &Side) -> String {
    s.metadata.as_ref().unwrap()["hash"].as_str().unwrap().to_string()
}

/// invalidations(entries before the phase, entries before ∪ the phase's).
fn phase_invalidations(phase: &str) -> Invalidations {
    let (all, phases) = jit_phases();
    let idx = phases.iter().position(|p| p.0 == phase).expect("phase");
    let before: HashSet<&String> = phases[..idx].iter().flat_map(|p| p.1.iter()).collect();
    let old: Vec<Side> = all.iter().filter(|s| before.contains(&hash_of(s))).cloned().collect();
    let new: Vec<Side> =
        all.iter().filter(|s| before.contains(&hash_of(s)) || phases[idx].1.contains(&hash_of(s))).cloned().collect();
    invalidations(&old, &new)
}

#[test]
fn jit_warm_run_compiles_nothing() {
    let inv = phase_invalidations("warm");
    assert!(inv.invalidated.is_empty() && inv.new.is_empty() && inv.removed.is_empty(), "{}", inv.summary);
    assert_eq!(inv.kept.len(), 45);
}

#[test]
fn jit_debug_run_is_the_debug_option() {
    let inv = phase_invalidations("debug");
    assert_eq!(inv.invalidated.len(), 17, "{} {:?}", inv.summary, inv.new);
    assert!(inv.new.is_empty());
    for i in &inv.invalidated {
        assert_eq!(i.cause, Cause::Options, "{}", i.summary);
        assert!(i.summary.starts_with("debug false → true; everything else equal"), "{}", i.summary);
    }
    assert!(inv.summary.contains("17 of 45 entries recompiled after debug false → true"), "{}", inv.summary);
}

#[test]
fn jit_edit_run_is_a_source_change() {
    let inv = phase_invalidations("edit");
    assert_eq!(inv.invalidated.len(), 6, "{}", inv.summary);
    for i in &inv.invalidated {
        assert_eq!((i.kernel.as_str(), i.cause), ("add_kernel", Cause::Source), "{}", i.summary);
        assert!(i.summary.starts_with("kernel source changed: "), "{}", i.summary);
    }
}

#[test]
fn jit_line_info_run_is_an_env_change() {
    let inv = phase_invalidations("line-info");
    assert_eq!(inv.invalidated.len(), 45, "{} {:?}", inv.summary, inv.new);
    for i in &inv.invalidated {
        assert_eq!(i.cause, Cause::Env, "{}", i.summary);
        assert!(i.summary.starts_with("TRITON_DISABLE_LINE_INFO=true on B; everything else equal"), "{}", i.summary);
    }
    assert!(inv.summary.contains("after TRITON_DISABLE_LINE_INFO=true set"), "{}", inv.summary);
}

#[test]
fn sm80_vs_sm90_is_compiler_then_backend() {
    let (jit, phases) = jit_phases();
    let a100 = load_cache("a100", &corpus("a100-upgrade-2-triton-3.5.1"));
    let a = a100.iter().find(|s| version(s) == "3.5.1" && s.kernel.as_deref() == Some("add_kernel")).unwrap();
    let cands: Vec<Side> =
        jit.iter().filter(|s| phases[0].1.contains(&hash_of(s)) && s.kernel == a.kernel).cloned().collect();
    let best = nearest(a, &cands, 3);
    assert_eq!(best.len(), 3);
    assert!(best.windows(2).all(|w| (w[0].components, w[0].differing) <= (w[1].components, w[1].differing)));
    let c = compare(a, &cands[best[0].index]);
    assert_eq!(c.cause, Cause::Compiler, "{}", c.summary);
    assert!(c.summary.starts_with("Triton 3.5.1 → 3.6.0; also backend: target sm80 → sm90"), "{}", c.summary);
    let arch = c.components.iter().find(|r| r.field == "target.arch").unwrap();
    assert!(arch.differs && arch.component == Cause::Backend);
    // Per-arch defaults follow the target: shown, not causes.
    let fp8 = c.components.iter().find(|r| r.field == "supported_fp8_dtypes").unwrap();
    assert!(fp8.differs && fp8.note.as_deref().unwrap().contains("consequence of the target change"));
}

#[test]
fn constexpr_and_dtype_changes_are_named() {
    let (all, phases) = jit_phases();
    let adds: Vec<&Side> =
        all.iter().filter(|s| phases[0].1.contains(&hash_of(s)) && s.kernel.as_deref() == Some("add_kernel")).collect();
    let find = |dt: &str, block: u64| {
        *adds
            .iter()
            .find(|s| {
                let p = crate::explain::ir::Prepared::new(s.source.as_ref().unwrap());
                p.ranges.contains(&block) && p.sig[0].short_type() == dt
            })
            .unwrap()
    };
    let c = compare(find("f32", 256), find("f32", 1024));
    assert_eq!((c.cause, c.summary.as_str()), (Cause::Source, "constexpr 256 → 1024; everything else equal"));
    let c = compare(find("f16", 1024), find("bf16", 1024));
    assert_eq!(c.summary, "x_ptr, y_ptr, out_ptr: f16 → bf16; everything else equal");
    // Same entry; and the same metadata and IR under another key.
    let a = find("f16", 1024);
    assert_eq!(compare(a, a).cause, Cause::None);
    let b = Side { key: "OTHER".into(), ..a.clone() };
    let c = compare(a, &b);
    assert_eq!(c.cause, Cause::Compiler);
    assert!(c.summary.starts_with("same Triton version, different compiler build (triton_key)"), "{}", c.summary);
    assert!(c.summary.contains("ptxas"), "{}", c.summary);
    assert!(c.identical_binary);
}
