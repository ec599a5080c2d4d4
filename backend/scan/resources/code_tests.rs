//! [`code_digest`] against `cuobjdump -sass -res-usage`: on every cubin of the corpus, two
//! cubins of a kernel have the same digest exactly when their SASS and resource usage
//! (registers, stack, shared, the parameter bank `CONSTANT[0]`) are the same. The resource
//! line matters: Triton 3.5 added a kernel parameter that add_kernel never reads, so 3.4.0
//! and 3.5.1 give the same SASS for a kernel with another interface (`.nv.info`,
//! `.nv.constant0`): not the same code to launch.

use super::code_digest;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Every `.cubin`/`.hsaco` under `dir`.
fn binaries(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            binaries(&p, out);
        } else if p.extension().is_some_and(|x| x == "cubin" || x == "hsaco") {
            out.push(p);
        }
    }
}

fn corpus_binaries() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in crate::test_corpus::archives() {
        binaries(&crate::test_corpus::unpacked(&a), &mut out);
    }
    out.sort();
    out
}

/// `$CUOBJDUMP`, else the one in `$CACHELENS_PYTHON`'s Triton wheel; None only when skipping
/// is allowed (`CACHELENS_ALLOW_SKIP=1`).
pub(crate) fn cuobjdump() -> Option<PathBuf> {
    let found = std::env::var_os("CUOBJDUMP").map(PathBuf::from).filter(|p| p.exists()).or_else(|| {
        let py = PathBuf::from(std::env::var_os("CACHELENS_PYTHON")?);
        let lib = py.parent()?.parent()?.join("lib");
        std::fs::read_dir(lib).ok()?.flatten().find_map(|d| {
            let p = d.path().join("site-packages/triton/backends/nvidia/bin/cuobjdump");
            p.exists().then_some(p)
        })
    });
    if found.is_none() {
        let why = "cuobjdump not found ($CUOBJDUMP, or $CACHELENS_PYTHON's triton)";
        assert!(std::env::var("CACHELENS_ALLOW_SKIP").as_deref() == Ok("1"), "{why}; CACHELENS_ALLOW_SKIP=1 skips");
        eprintln!("SKIPPED (CACHELENS_ALLOW_SKIP=1): {why}");
    }
    found
}

/// `cuobjdump -sass -res-usage` of each file, two at a time.
fn sass_of(tool: &Path, files: &[PathBuf]) -> Vec<String> {
    let chunks: Vec<&[PathBuf]> = files.chunks(files.len().div_ceil(2).max(1)).collect();
    std::thread::scope(|s| {
        let hs: Vec<_> = chunks
            .iter()
            .map(|c| {
                s.spawn(move || {
                    c.iter()
                        .map(|f| {
                            let o =
                                std::process::Command::new(tool).args(["-sass", "-res-usage"]).arg(f).output().unwrap();
                            assert!(o.status.success(), "cuobjdump -sass {}", f.display());
                            String::from_utf8(o.stdout).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn every_corpus_binary_has_a_code_digest() {
    let files = corpus_binaries();
    let (mut cubins, mut hsacos) = (0, 0);
    for f in &files {
        let ext = f.extension().unwrap().to_str().unwrap();
        let bytes = std::fs::read(f).unwrap();
        let d = code_digest(ext, &bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(d.len(), 64);
        if ext == "cubin" { cubins += 1 } else { hsacos += 1 }
    }
    assert!(cubins > 300 && hsacos > 50, "{cubins} cubins, {hsacos} hsacos");
    // Not an ELF, or not a kernel binary: a clear error.
    assert!(code_digest("cubin", b"not an elf").is_err());
    assert!(code_digest("ptx", &std::fs::read(&files[0]).unwrap()).is_err());
}

/// A debug section's bytes (what another install path changes) leave the digest alone; a
/// `.text` byte changes it.
#[test]
fn debug_bytes_do_not_change_the_digest_code_bytes_do() {
    let f = corpus_binaries().into_iter().find(|f| f.extension().is_some_and(|x| x == "cubin")).unwrap();
    let bytes = std::fs::read(&f).unwrap();
    let base = code_digest("cubin", &bytes).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    use object::{Object, ObjectSection};
    let range = |name: &str| {
        let s = file.sections().find(|s| s.name().is_ok_and(|n| n.starts_with(name))).unwrap();
        let (off, len) = s.file_range().unwrap();
        off as usize..(off + len) as usize
    };
    let flip = |r: std::ops::Range<usize>| {
        let mut b = bytes.clone();
        b[r.start] ^= 0xff;
        code_digest("cubin", &b).unwrap()
    };
    assert_eq!(flip(range(".debug_line")), base, "debug info is not code");
    assert_ne!(flip(range(".text.")), base, "code is");
    assert_ne!(flip(range(".nv.info.")), base, "kernel info is");
}

/// The rule against the disassembler: among the cubins of one kernel (distinct bytes), the same
/// digest ⇔ the same SASS and resource usage.
#[test]
fn code_digest_agrees_with_cuobjdump_sass() {
    let Some(tool) = cuobjdump() else { return };
    let mut by_kernel: HashMap<String, Vec<(PathBuf, String)>> = HashMap::new();
    let mut seen = HashSet::new();
    for f in corpus_binaries().into_iter().filter(|f| f.extension().is_some_and(|x| x == "cubin")) {
        let bytes = std::fs::read(&f).unwrap();
        if seen.insert(digest(&bytes)) {
            let d = code_digest("cubin", &bytes).unwrap();
            by_kernel.entry(f.file_name().unwrap().to_string_lossy().into()).or_default().push((f, d));
        }
    }
    by_kernel.retain(|_, v| v.len() > 1);
    let files: Vec<PathBuf> = by_kernel.values().flatten().map(|(f, _)| f.clone()).collect();
    let sass: HashMap<PathBuf, String> = files.iter().cloned().zip(sass_of(&tool, &files)).collect();
    let (mut same_code, mut checked, mut interface) = (0, 0, 0);
    for v in by_kernel.values() {
        for (i, (fa, da)) in v.iter().enumerate() {
            for (fb, db) in &v[i + 1..] {
                let same_sass = sass[fa] == sass[fb];
                if da != db && sass_only(&sass[fa]) == sass_only(&sass[fb]) {
                    interface += 1;
                }
                assert_eq!(da == db, same_sass, "{} vs {}: digest equal {}", fa.display(), fb.display(), da == db);
                checked += 1;
                same_code += same_sass as usize;
            }
        }
    }
    eprintln!(
        "{} cubins of {} kernels: {checked} pairs, {same_code} with the same SASS and resources, \
         {interface} more with the same SASS but another interface",
        files.len(),
        by_kernel.len()
    );
    assert!(checked > 100 && same_code > 0, "{checked} pairs, {same_code} the same");
}

/// The SASS part of `cuobjdump -sass -res-usage` (from the first `code for` line).
fn sass_only(s: &str) -> &str {
    s.find("code for").map(|i| &s[i..]).unwrap_or(s)
}
