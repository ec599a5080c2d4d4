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
