//! Nearest-neighbour ranking and invalidation pairing on real corpus entries, edited.

use super::{add_entry, edited};
use crate::explain::*;
use serde_json::json;

#[test]
fn nearest_ranks_by_components_then_fields() {
    let base = add_entry("h100-fpfusion-off-triton-3.6.0", "3.6.0");
    // Three option fields differ: one component.
    let options = edited(&base, |m| {
        m.insert("num_warps".into(), json!(8));
        m.insert("num_stages".into(), json!(4));
        m.insert("maxnreg".into(), json!(128));
    });
    // Two fields in two components (compiler, options).
    let two = edited(&base, |m| {
        m.insert("triton_version".into(), json!("3.5.1"));
        m.insert("num_warps".into(), json!(8));
    });
    // One field: the nearest.
    let one = edited(&base, |m| {
        m.insert("num_warps".into(), json!(8));
    });
    let cands = [two, options, one];
    let near = nearest(&base, &cands, 10);
    let got: Vec<(usize, usize, usize, Cause)> =
        near.iter().map(|n| (n.index, n.components, n.differing, n.cause)).collect();
    assert_eq!(got, [(2, 1, 1, Cause::Options), (1, 1, 3, Cause::Options), (0, 2, 2, Cause::Compiler)]);
    assert_eq!(nearest(&base, &cands, 1).len(), 1);
}

/// The fp-fusion-off cache's add kernels, and another kernel (to see it left alone).
fn adds_and_softmax() -> (Side, Side) {
    let add = add_entry("h100-fpfusion-off-triton-3.6.0", "3.6.0");
    let all = super::load_cache("m", &super::corpus("h100-fpfusion-off-triton-3.6.0"));
    let soft = all.into_iter().find(|s| s.kernel.as_deref() == Some("softmax_kernel")).unwrap();
    (add, soft)
}

#[test]
fn a_vanished_variant_replaced_by_one_differing_only_in_options_is_a_recompile() {
    let (add, soft) = adds_and_softmax();
    let w8 = edited(&add, |m| {
        m.insert("num_warps".into(), json!(8));
    });
    // add (num_warps 4) gone, add with num_warps 8 in its place: recompiled with other options.
    let inv = invalidations(&[add.clone(), soft.clone()], &[w8.clone(), soft.clone()]);
    assert_eq!((inv.kept.len(), inv.new.len(), inv.removed.len()), (1, 0, 0), "{}", inv.summary);
    assert_eq!(inv.invalidated.len(), 1);
    let i = &inv.invalidated[0];
    assert_eq!((i.old_key.as_str(), i.new_key.as_str(), i.cause), (add.key.as_str(), w8.key.as_str(), Cause::Options));
    assert_eq!(i.summary, "num_warps 4 → 8; everything else equal");
    assert_eq!(inv.summary, "1 of 2 entries recompiled after num_warps 4 → 8; 0 had identical binaries");
    // The old variant still on disk: the new one is another variant beside it.
    let inv = invalidations(std::slice::from_ref(&add), &[add.clone(), w8.clone()]);
    assert!(inv.invalidated.is_empty() && inv.new.len() == 1, "{}", inv.summary);
    // Two new variants for one gone: which one replaced it is a guess, so neither does.
    let w8s4 = edited(&w8, |m| {
        m.insert("num_stages".into(), json!(4));
    });
    let inv = invalidations(std::slice::from_ref(&add), &[w8.clone(), w8s4]);
    assert_eq!((inv.invalidated.len(), inv.new.len(), inv.removed.len()), (0, 2, 1), "{}", inv.summary);
    // A block size change is a new variant even so.
    let all = super::load_cache("m", &super::corpus("h100-fpfusion-off-triton-3.6.0"));
    let block = all
        .iter()
        .find(|s| s.kernel == add.kernel && compare(&add, s).summary.starts_with("constexpr "))
        .expect("the add kernel with another BLOCK");
    let inv = invalidations(std::slice::from_ref(&add), std::slice::from_ref(block));
    assert_eq!((inv.invalidated.len(), inv.new.len(), inv.removed.len()), (0, 1, 1), "{}", inv.summary);
}
