//! Locations of two IR texts that are equal but for them: which kind of move.

use super::super::locs::{Locs, Moved, moved};

fn ir(kernel: u32, body: &[u32], callee: u32) -> String {
    let mut s = format!(
        "#loc = loc(\"/src/kernels.py\":{kernel}:0)\n#loc9 = loc(\"/venv/triton/language/standard.py\":{callee}:0)\n"
    );
    for (i, l) in body.iter().enumerate() {
        s.push_str(&format!("#loc{} = loc(\"/src/kernels.py\":{l}:12)\n#n{i} = loc(\"x\"(#loc))\n", i + 1));
    }
    s
}

#[test]
fn a_uniform_shift_is_the_kernel_moving() {
    let (a, b) = (Locs::of(&ir(10, &[11, 12, 14], 177)), Locs::of(&ir(13, &[14, 15, 17], 177)));
    assert_eq!(a.kernel(), Some(&("kernels.py".to_string(), 10)));
    let m = moved(&a, &b).unwrap();
    assert_eq!(m, Moved::Kernel { file: "kernels.py".into(), from: 10, to: 13, by: 3 });
    assert_eq!(
        m.phrase(),
        "code unchanged: the kernel moved 3 lines down in kernels.py; Triton keys on the kernel's first line"
    );
    let up = moved(&b, &a).unwrap().phrase();
    assert!(up.contains("moved 3 lines up"), "{up}");
    assert_eq!(moved(&a, &a), None);
}

#[test]
fn uneven_shifts_and_callee_moves() {
    let a = Locs::of(&ir(10, &[11, 12, 14], 177));
    let within = moved(&a, &Locs::of(&ir(10, &[11, 13, 15], 177))).unwrap();
    assert!(matches!(within, Moved::Within { .. }), "{within:?}");
    assert!(within.phrase().contains("lines moved inside the kernel"), "{}", within.phrase());
    let callee = moved(&a, &Locs::of(&ir(10, &[11, 12, 14], 180))).unwrap();
    assert_eq!(callee, Moved::Callees { files: vec!["standard.py".into()] });
    // Another file altogether: not a move.
    let other = Locs::of(&ir(10, &[11, 12, 14], 177).replace("kernels.py", "other.py"));
    assert_eq!(moved(&a, &other), None);
}
