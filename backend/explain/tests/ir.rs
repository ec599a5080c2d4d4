//! Unit tests of the IR text handling.

use crate::explain::ir::{blank_specialisation, literals};
use crate::explain::{ir_diff, strip_locations};

const A: &str = "#loc = loc(\"k.py\":1:0)\nmodule {\n  %pid = tt.get_program_id x : i32 loc(#loc1)  \n  %c = arith.constant 256 : i32 loc(callsite(\"a\"(#loc) at #loc2))\n} loc(#loc)\n#loc1 = loc(\"pid\"(#loc))\n";
const B: &str = "module {\n  %0 = tt.get_program_id x : i32 loc(#loc)\n  %1 = arith.constant 1024 : i32 loc(#loc)\n} loc(#loc)\n#loc = loc(unknown)\n";

#[test]
fn strips_locations() {
    assert_eq!(
        strip_locations(A),
        "module {\n  %pid = tt.get_program_id x : i32\n  %c = arith.constant 256 : i32\n}\n"
    );
}

#[test]
fn diff_ignores_names_but_not_literals() {
    let d = ir_diff(A, B, true);
    let tags: Vec<&str> = d.iter().map(|l| l.tag).collect();
    assert_eq!(tags, ["equal", "equal", "delete", "insert", "equal"]);
    assert_eq!((d[2].a_no, d[3].b_no), (Some(4), Some(3)));
    assert!(ir_diff(A, B, false).iter().any(|l| l.tag == "delete" && l.text.contains("%pid")));
}

#[test]
fn shapes_count_as_literals() {
    assert_eq!(literals("%_ = tt.splat %_ : i32 -> tensor<128x64xf16>"), ["128", "64"]);
    assert_eq!(blank_specialisation("tensor<256xbf16>"), blank_specialisation("tensor<1024xf32>"));
}

/// A kept line diff is the diff of those two texts: the same outcome as a fresh one, the same
/// kept copy the second time, another for the reverse pair or another text; a text's id names
/// its bytes, not its allocation. Real `.source` texts of one kernel's variants (H100 corpus).
#[test]
fn a_kept_line_diff_is_the_diff_of_those_two_texts() {
    use crate::explain::ir::Prepared;
    use crate::explain::source::{line_changes, line_changes_kept};
    let sides = super::load_cache("m", &super::corpus("h100-jit-3.6.0"));
    let mut texts: Vec<std::sync::Arc<str>> = sides.iter().filter_map(|s| s.source.clone()).collect();
    texts.sort();
    texts.dedup();
    let preps: Vec<Prepared> = texts.iter().map(Prepared::new).collect();
    // Three texts of one kernel that differ (its variants), so the diffs are not empty.
    let three: Vec<usize> = (0..preps.len()).filter(|i| preps[*i].sig.len() == preps[0].sig.len()).take(3).collect();
    assert_eq!(three.len(), 3, "three texts");
    let (a, b, c) = (&preps[three[0]], &preps[three[1]], &preps[three[2]]);
    assert!(a.canon != b.canon && a.canon != c.canon);
    let k = crate::explain::Kept::default();
    let kept = line_changes_kept(a, b, &k);
    assert_eq!(*kept, line_changes(a, b));
    assert!(kept.0 > 0, "the two texts differ by lines: {kept:?}");
    assert!(std::sync::Arc::ptr_eq(&kept, &line_changes_kept(a, b, &k)), "the second diff is the kept one");
    let back = line_changes_kept(b, a, &k);
    assert!(!std::sync::Arc::ptr_eq(&kept, &back));
    assert_eq!(*back, line_changes(b, a));
    assert_eq!(*line_changes_kept(a, c, &k), line_changes(a, c));
    let other = crate::explain::Kept::default();
    assert!(!std::sync::Arc::ptr_eq(&kept, &line_changes_kept(a, b, &other)), "another Kept shares nothing");
    // The same bytes in another allocation: the same id, the same kept diff.
    let copy = Prepared::new(&std::sync::Arc::from(texts[three[0]].to_string()));
    assert_eq!(copy.id, a.id);
    assert!(std::sync::Arc::ptr_eq(&kept, &line_changes_kept(&copy, b, &k)));
    assert!(preps.iter().map(|p| p.id).collect::<std::collections::HashSet<_>>().len() == preps.len());
}
