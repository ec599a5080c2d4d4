//! The view shapes: side-by-side IR rows, lowered-IR location stripping, terminal text.

use crate::explain::report::{CompareReport, IrStats, ir_report, relocation_consequence};
use crate::explain::{Side, compare, render_text};
use serde_json::json;

#[test]
fn side_by_side_pairs_changes_and_collapses_equal_runs() {
    let a: String = (0..20).map(|i| format!("line {i}\n")).collect();
    let b = a.replace("line 10\n", "line ten\nextra\n");
    let (st, rows) = ir_report("ttir", Some(&a), Some(&b), false, 2);
    assert_eq!((st.deleted, st.inserted, st.equal), (1, 2, 19));
    let tags: Vec<&str> = rows.iter().map(|r| r.tag).collect();
    assert_eq!(tags, ["skip", "equal", "equal", "change", "insert", "equal", "equal", "skip"]);
    assert_eq!(rows[0].a.as_deref(), Some("8 equal lines"));
    assert_eq!((rows[3].a.as_deref(), rows[3].b.as_deref()), (Some("line 10"), Some("line ten")));
    assert_eq!((rows[3].a_no, rows[3].b_no, rows[4].b_no), (Some(11), Some(11), Some(12)));
    let (st, rows) = ir_report("ttir", Some(&a), None, true, 2);
    assert!(st.a_available && !st.b_available && rows.is_empty());
}

#[test]
fn lowered_ir_locations_are_stripped() {
    let a = ".loc 1 43 0\n\tadd.s32 %r1, %r2, 63; // a.py:40:22\n\tret;\n";
    let b = ".loc 1 44 0\n\tadd.s32 %r7, %r8, 63; // a.py:41:22\n.loc 1 45 1\n\tret;\n";
    let (st, _) = ir_report("ptx", Some(a), Some(b), true, 3);
    assert_eq!((st.deleted, st.inserted, st.equal), (0, 0, 2));
    let (st, _) = ir_report("ptx", Some(a), Some(b), false, 3);
    assert!(st.deleted > 0);
    let a = "  %5 = add i32 %3, %4, !dbg !12\n!12 = !DILocation(line: 3, scope: !4)\n";
    let b = "  %5 = add i32 %3, %4, !dbg !15\n!15 = !DILocation(line: 4, scope: !4)\n";
    let (st, _) = ir_report("llir", Some(a), Some(b), true, 3);
    assert_eq!((st.deleted, st.inserted, st.equal), (0, 0, 1));
}

#[test]
fn terminal_text_has_headline_rows_and_stats() {
    let side = |key: &str, v: &str, w: i64| Side {
        machine: "m".into(),
        key: key.into(),
        kernel: Some("k".into()),
        metadata: Some(json!({"name": "k", "triton_version": v, "num_warps": w,
            "target": {"backend": "cuda", "arch": 90, "warp_size": 32}})),
        source: Some("tt.func @k() {\n  tt.return\n}\n".into()),
        ..Side::default()
    };
    let (a, b) = (side("A", "3.5.1", 4), side("B", "3.6.0", 8));
    let (ir, _) = ir_report("source", a.source.as_deref(), b.source.as_deref(), true, 3);
    let r = CompareReport {
        cmp: compare(&a, &b),
        kernel_a: Some("k".into()),
        kernel_b: Some("k".into()),
        relocated: vec![],
        ir,
        ir_rows: vec![],
    };
    let t = render_text(&r);
    assert!(t.contains("cause: compiler\nTriton 3.5.1 → 3.6.0; also options: num_warps 4 → 8"), "{t}");
    assert!(t.contains(" * compiler  triton_version"), "{t}");
    assert!(t.contains(" * options   num_warps"), "{t}");
    assert!(t.contains("IR .source (locations stripped): 0 lines only in A, 0 only in B, 3 equal"), "{t}");
    let _ = IrStats::default();
    assert_eq!(
        relocation_consequence(Some("/old/cache/K")),
        "its group file points to /old/cache/K: Triton will miss on this entry where it sits now"
    );
}
