//! Corpus tests read the real Triton caches of the corpus (see [`crate::test_corpus`]); a
//! missing corpus fails them.
//! `cubins_match_cuobjdump` also needs `cuobjdump` (see `scripts/check-cuobjdump.sh`).
use super::amdgcn::*;
use super::cubin::*;
use super::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Every corpus archive, unpacked (see [`crate::test_corpus`]).
fn corpus_dirs() -> Vec<PathBuf> {
    crate::test_corpus::archives().iter().map(|a| crate::test_corpus::unpacked(a)).collect()
}

fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, ext, out);
        } else if p.extension().and_then(|e| e.to_str()) == Some(ext) {
            out.push(p);
        }
    }
}

fn files(ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in corpus_dirs() {
        walk(&dir, ext, &mut out);
    }
    out
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

fn int(r: &Resources, key: &str) -> Option<i64> {
    r.extra.get(key).and_then(Value::as_i64)
}

/// Deterministic pseudo-random bytes (no rand dependency).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// ----- CUDA --------------------------------------------------------------------------

#[test]
fn nv_info_record_encoding() {
    // REGCOUNT SVAL (sym 9, 26 regs), MAXREG HVAL 0xff, NVAL, BVAL 1.
    let bytes = [
        0x04, 0x2f, 0x08, 0x00, 9, 0, 0, 0, 26, 0, 0, 0, //
        0x03, 0x1b, 0xff, 0x00, //
        0x01, 0x35, 0x00, 0x00, //
        0x02, 0x4c, 0x01, 0x00,
    ];
    let (recs, err) = parse_nv_info(&bytes);
    assert!(err.is_none());
    assert_eq!(recs.len(), 4);
    assert_eq!((recs[0].attr, u32_at(recs[0].payload, 4)), (EIATTR_REGCOUNT, Some(26)));
    assert_eq!(record_value(&recs[1]), Some(255));
    assert_eq!(recs[2].format, EIFMT_NVAL);
    assert_eq!(record_value(&recs[3]), Some(1));
    // Overrunning SVAL and unknown format stop cleanly.
    let (recs, err) = parse_nv_info(&[0x04, 0x2f, 0xff, 0xff, 1, 2]);
    assert!(recs.is_empty() && err.is_some());
    let (recs, err) = parse_nv_info(&[0x03, 0x1b, 0xff, 0x00, 0x09, 0x00]);
    assert_eq!(recs.len(), 1);
    assert!(err.is_some());
}

#[test]
fn cuda_arch_from_flags() {
    assert_eq!(cuda_arch(0x500550, 7), (Some("sm_80".into()), Some("compute_80".into())));
    assert_eq!(cuda_arch(0x5a0d5a, 7), (Some("sm_90a".into()), Some("compute_90".into())));
    assert_eq!(cuda_arch(0x9005a04, 8).0, Some("sm_90".into()));
    assert_eq!(cuda_arch(0x6006408, 8).0, Some("sm_100a".into()));
}

#[test]
fn corpus_cubins_parse() {
    let cubins = files("cubin");
    if cubins.is_empty() {
        eprintln!("skipping: no .cubin files in the corpus");
        return;
    }
    for path in &cubins {
        let bytes = std::fs::read(path).unwrap();
        let name = stem(path);
        let r = from_cubin(&bytes, Some(&name)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(r.extra.get("kernel").and_then(Value::as_str), Some(name.as_str()), "{}", path.display());
        assert!(!r.extra.contains_key("kernel_not_found"));
        assert!(!r.extra.contains_key("warnings"), "{}: {:?}", path.display(), r.extra.get("warnings"));
        let regs = r.registers.unwrap_or_else(|| panic!("{}: no REGCOUNT", path.display()));
        assert!((1..=255).contains(&regs), "{}: {regs} registers", path.display());
        let stack = int(&r, "stack_bytes").expect("stack_bytes");
        assert_eq!(r.spills, Some((stack + int(&r, "local_bytes").unwrap()) / 4));
        assert!(r.shared_bytes.is_some());
        assert!(r.extra.get("cuda_arch").and_then(Value::as_str).is_some_and(|a| a.starts_with("sm_")));
        // The kernel name is optional for single-kernel cubins.
        assert_eq!(from_cubin(&bytes, None).unwrap(), r);
        let other = from_cubin(&bytes, Some("no_such_kernel")).unwrap();
        assert_eq!(other.registers, r.registers);
        assert_eq!(other.extra.get("kernel_not_found").and_then(Value::as_str), Some("no_such_kernel"));
    }
    eprintln!("parsed {} cubins", cubins.len());
}

/// Compare with `cuobjdump -res-usage` through `scripts/check-cuobjdump.sh`.
#[test]
fn cubins_match_cuobjdump() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-cuobjdump.sh");
    let (mut matched, mut mismatched) = (0, Vec::new());
    for dir in corpus_dirs() {
        let out = std::process::Command::new("bash").arg(&script).arg(&dir).output().unwrap();
        if out.status.code() == Some(2) {
            let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if std::env::var_os("CACHELENS_ALLOW_SKIP").is_some_and(|v| v == "1") {
                eprintln!("SKIPPED (CACHELENS_ALLOW_SKIP=1): {why}");
                return;
            }
            panic!("{why} (scripts/test.sh sets CUOBJDUMP; CACHELENS_ALLOW_SKIP=1 to skip)");
        }
        assert!(out.status.success(), "{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines() {
            let mut parts = line.split(' ');
            let file = parts.next().unwrap();
            let kv: HashMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
            assert!(!kv.contains_key("ERROR"), "cuobjdump failed: {line}");
            let num = |k: &str| kv.get(k).and_then(|v| v.parse::<i64>().ok());
            let bytes = std::fs::read(file).unwrap();
            let r = from_cubin(&bytes, kv.get("KERNEL").copied()).unwrap();
            let ours = (
                r.registers,
                int(&r, "stack_bytes"),
                r.shared_bytes,
                int(&r, "local_bytes"),
                int(&r, "const0_bytes"),
                int(&r, "global_bytes"),
            );
            let theirs = (num("REG"), num("STACK"), num("SHARED"), num("LOCAL"), num("CONST0"), num("GLOBAL"));
            if ours == theirs {
                matched += 1;
            } else {
                mismatched.push(format!("{file}: ours {ours:?} cuobjdump {theirs:?}"));
            }
        }
    }
    eprintln!("{matched} kernels match cuobjdump, {} differ", mismatched.len());
    assert!(mismatched.is_empty(), "{}", mismatched.join("\n"));
    // The corpus holds CUDA caches from sm_80 and sm_90: 45 + 45 ahead-of-time kernels alone.
    assert!(matched >= 90, "only {matched} cubins compared");
}

#[test]
fn cubin_garbage_is_an_error_not_a_panic() {
    assert!(from_cubin(&[], None).is_err());
    assert!(from_cubin(b"\x7fELF", None).is_err());
    assert!(from_cubin(b"hello world, definitely not an ELF file", None).is_err());
    for seed in 0..200 {
        let mut junk = noise(seed, (seed as usize * 37) % 4096);
        let _ = from_cubin(&junk, None);
        // Same junk behind a plausible ELF64 header.
        if junk.len() >= 64 {
            junk[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x33");
            junk[18] = 190;
            junk[19] = 0;
            let _ = from_cubin(&junk, Some("k"));
        }
    }
    let err = from_cubin(b"\x7fELF\x02\x01\x01\x00", None).unwrap_err();
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn corrupt_real_cubins_do_not_panic() {
    let cubins = files("cubin");
    let Some(path) = cubins.first() else {
        eprintln!("skipping: no .cubin files in the corpus");
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    // Every truncation of the header area, then sparser ones.
    let mut cut = 0;
    while cut < bytes.len() {
        let r = from_cubin(&bytes[..cut], None);
        if cut < 64 {
            assert!(r.is_err());
        }
        cut += if cut < 512 { 1 } else { 257 };
    }
    // Flip bytes all over the file, including the section header table.
    for (i, seed) in (0..bytes.len()).step_by(61).zip(1u64..) {
        let mut b = bytes.clone();
        b[i] ^= noise(seed, 1)[0] | 1;
        let _ = from_cubin(&b, Some("matmul_kernel"));
    }
    // A non-CUDA ELF.
    let mut b = bytes.clone();
    b[18] = 62; // EM_X86_64
    b[19] = 0;
    let err = from_cubin(&b, None).unwrap_err();
    assert!(err.contains("not a CUDA cubin"), "{err}");
}

// ----- AMD ---------------------------------------------------------------------------

#[test]
fn corpus_amdgcn_parse() {
    let files = files("amdgcn");
    if files.is_empty() {
        eprintln!("skipping: no .amdgcn files in the corpus");
        return;
    }
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let name = stem(path);
        let r = from_amdgcn(&text, Some(&name));
        let p = path.display();
        assert_eq!(r.extra.get("kernel").and_then(Value::as_str), Some(name.as_str()), "{p}");
        assert!(r.registers.is_some_and(|v| v > 0 && v <= 512), "{p}: {:?}", r.registers);
        assert!(r.spills.is_some(), "{p}");
        assert!(r.shared_bytes.is_some(), "{p}");
        for key in [
            "sgprs",
            "agprs",
            "total_vgprs",
            "vgpr_count",
            "scratch_bytes",
            "occupancy",
            "code_bytes",
            "wavefront_size",
        ] {
            assert!(int(&r, key).is_some(), "{p}: no {key}");
        }
        assert_eq!(r.extra.get("arch").and_then(Value::as_str), Some("gfx942"), "{p}");
        // Consistency between the three sources.
        assert_eq!(int(&r, "total_vgprs"), int(&r, "vgpr_count"), "{p}");
        assert_eq!(int(&r, "sgprs"), int(&r, "sgpr_count"), "{p}");
        assert_eq!(r.spills, Some(int(&r, "vgpr_spill_count").unwrap() + int(&r, "sgpr_spill_count").unwrap()));
        // VGPR spills go to scratch: 4 bytes per spilled VGPR per lane.
        assert!(int(&r, "scratch_bytes").unwrap() >= 4 * int(&r, "vgpr_spill_count").unwrap(), "{p}");
        assert_eq!(from_amdgcn(&text, None), r);
    }
    eprintln!("parsed {} .amdgcn files", files.len());
}

#[test]
fn amdgcn_synthetic() {
    let text = "\t.amdgcn_target \"amdgcn-amd-amdhsa--gfx942\"\n\
        \t.type\tk1,@function\nk1:\n\ts_endpgm\n\
        \t.amdhsa_kernel k1\n\t\t.amdhsa_group_segment_fixed_size 512\n\t\t.amdhsa_next_free_vgpr 40\n\t.end_amdhsa_kernel\n\
        \t.set k1.num_vgpr, 33\n\
        ; Kernel info:\n; codeLenInByte = 100\n; NumVgprs: 33\n; ScratchSize: 8\n; Occupancy: 8\n; COMPUTE_PGM_RSRC2:SCRATCH_EN: 1\n\
        \t.type\tk2,@function\nk2:\n\
        \t.amdhsa_kernel k2\n\t.end_amdhsa_kernel\n\
        ; Kernel info:\n; NumVgprs: 7\n\
        \t.amdgpu_metadata\n---\namdhsa.kernels:\n\
        \x20 - .args:\n      - .offset: 0\n        .size: 8\n\
        \x20   .group_segment_fixed_size: 512\n    .name: k1\n    .sgpr_spill_count: 3\n    .vgpr_spill_count: 2\n\
        \x20 - .name: k2\n    .vgpr_spill_count: 0\n\
        amdhsa.target: amdgcn-amd-amdhsa--gfx942\n...\n\t.end_amdgpu_metadata\n";
    let r = from_amdgcn(text, None);
    assert_eq!(r.registers, Some(33));
    assert_eq!(r.spills, Some(5));
    assert_eq!(r.shared_bytes, Some(512));
    assert_eq!(int(&r, "kernels"), Some(2));
    assert_eq!(int(&r, "occupancy"), Some(8));
    assert_eq!(int(&r, "code_bytes"), Some(100));
    let r2 = from_amdgcn(text, Some("k2"));
    assert_eq!((r2.registers, r2.spills, r2.shared_bytes), (Some(7), Some(0), None));
    let r3 = from_amdgcn(text, Some("nope"));
    assert_eq!(r3.registers, Some(33));
    assert_eq!(r3.extra.get("kernel_not_found").and_then(Value::as_str), Some("nope"));
}

#[test]
fn amdgcn_garbage_does_not_panic() {
    assert_eq!(from_amdgcn("", None).registers, None);
    assert_eq!(from_amdgcn("random text\n; Kernel info:\n; NumVgprs: x\n", None).registers, None);
    for seed in 0..100 {
        let junk = String::from_utf8_lossy(&noise(seed, 2000)).into_owned();
        let _ = from_amdgcn(&junk, Some("k"));
    }
    let pathological = [
        ".amdgpu_metadata\n  - .name:\n  -\n- .name: x\n    .vgpr_spill_count: 99999999999999999999999\n",
        ".amdhsa_kernel\n.amdhsa_\n.end_amdhsa_kernel\n.set ., 1\n.set a.b\n.type ,@function\n",
        "; Kernel info:\n; NumVgprs: 0x\n; : \n;=\n; ScratchSize: -\n",
    ];
    for p in pathological {
        let _ = from_amdgcn(p, None);
        let _ = from_amdgcn(p, Some("x"));
    }
    // Every truncation of a real file (at char boundaries) parses without panicking.
    if let Some(path) = files("amdgcn").first() {
        let text = std::fs::read_to_string(path).unwrap();
        let mut cut = 0;
        while cut < text.len() {
            if text.is_char_boundary(cut) {
                let _ = from_amdgcn(&text[..cut], None);
            }
            cut += 97;
        }
    }
}
