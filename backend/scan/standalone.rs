//! Inductor's saved compile artifacts, read as data: the binary file of
//! `CompiledArtifact.save(format="binary")` (what vLLM writes as
//! `artifact_compile_range_<a>_<b>_subgraph_<n>`) and PyTorch's "mega-cache" bytes
//! (`torch.compiler.save_cache_artifacts()`), which that file wraps.
//!
//! Both are length-prefixed records (`torch/utils/_appending_byte_serializer.py`): a 4-byte
//! CRC32, then fields of an 8-byte big-endian length and that many bytes (strings base64).
//! The binary file holds a header (`CacheCompiledArtifact` since torch 2.10; older files start
//! with the torch key), the 32-byte torch key, the AOTAutograd key and the mega-cache bytes:
//! a version (1), then per cache kind (`inductor`, `aot_autograd`, `autotune`, `pgo`, ...) its
//! entries, each a key and its content. Inductor entries are pickled `CompiledFxGraph`s that
//! bundle the graph's Triton kernels (`TritonBundler`: each kernel's cache key and its files with
//! their bytes). A pickle is never unpickled: [`pickle_strings`] decodes its opcode stream (a
//! grammar; nothing is imported, called or built) and picks out the bundle's kernel keys, file
//! names and payload sizes, and the kernel name from each metadata JSON payload. What is not
//! read: the rest of the pickles (the generated code, guards, configs), AOTAutograd entries
//! beyond their key and size, and files of another header (`torch.compile(..., aot=True)`).
//!
//! Bounds: the index is read with positioned reads (a few bytes per record); an Inductor entry
//! is read whole only up to [`MAX_PICKLE_BYTES`], at most [`MAX_RECORDS`] records are listed, and
//! only pickle strings up to 256 bytes are remembered for memo lookups.

use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// An Inductor entry larger than this is listed with its size, its kernels not read.
pub const MAX_PICKLE_BYTES: u64 = 64 << 20;
/// At most this many cache records are listed per file.
pub const MAX_RECORDS: u64 = 10_000;
/// The header of a cache-backed binary artifact (torch 2.10+).
pub const CACHE_HEADER: &str = "CacheCompiledArtifact";

/// One record of the mega-cache: its cache kind, key and content size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    pub kind: String,
    pub key: String,
    pub bytes: u64,
}

/// A Triton kernel bundled in an Inductor entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kernel {
    /// Triton's cache key (the entry dir name it is written to).
    pub key: String,
    /// From its metadata JSON (`name`); `None` when that was not readable.
    pub name: Option<String>,
    pub files: Vec<String>,
    pub bytes: u64,
}

/// What a saved artifact holds, as far as it could be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Artifact {
    /// `CacheCompiledArtifact`, or `None` for a file that starts with the torch key (torch ≤
    /// 2.9) or for bare mega-cache bytes.
    pub header: Option<String>,
    /// Hex of the torch build key the file was written by (it loads only under that build).
    pub torch_key: Option<String>,
    /// The AOTAutograd cache key it loads.
    pub key: Option<String>,
    pub records: Vec<Record>,
    pub kernels: Vec<Kernel>,
    /// What could not be read, and why.
    pub unread: Vec<String>,
}

/// Positioned reads of one file, every one inside `[0, len)`.
struct Src<'a> {
    f: &'a File,
    len: u64,
}

impl Src<'_> {
    fn u64_at(&self, at: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        (at.checked_add(8)? <= self.len).then_some(())?;
        self.f.read_exact_at(&mut b, at).ok()?;
        Some(u64::from_be_bytes(b))
    }

    /// The field at `at`: (its content's offset, its length, the offset after it).
    fn field(&self, at: u64) -> Option<(u64, u64, u64)> {
        let n = self.u64_at(at)?;
        let end = at.checked_add(8)?.checked_add(n)?;
        (end <= self.len).then_some((at + 8, n, end))
    }

    fn bytes(&self, at: u64, n: u64) -> Option<Vec<u8>> {
        let mut b = vec![0u8; usize::try_from(n).ok()?];
        self.f.read_exact_at(&mut b, at).ok()?;
        Some(b)
    }

    /// A base64 string field (keys and kinds are short: longer than 4 KiB is not one).
    fn text(&self, at: u64, n: u64) -> Option<String> {
        use base64::Engine;
        (n <= 4096).then_some(())?;
        let raw = base64::engine::general_purpose::STANDARD.decode(self.bytes(at, n)?).ok()?;
        String::from_utf8(raw).ok()
    }
}

/// Read a binary standalone-compile artifact (`file`, `len` bytes).
pub fn read_artifact(file: &File, len: u64) -> Artifact {
    let s = Src { f: file, len };
    let mut a = Artifact::default();
    let Some((h_at, h_len, mut next)) = s.field(4) else {
        a.unread.push("not a standalone-compile artifact (no length-prefixed header)".into());
        return a;
    };
    let head = s.bytes(h_at, h_len.min(64)).unwrap_or_default();
    if head == CACHE_HEADER.as_bytes() {
        a.header = Some(CACHE_HEADER.into());
        match s.field(next) {
            Some((at, 32, end)) => {
                a.torch_key = s.bytes(at, 32).map(hex::encode);
                next = end;
            }
            _ => {
                a.unread.push("no 32-byte torch key after the header".into());
                return a;
            }
        }
    } else if h_len == 32 {
        a.torch_key = Some(hex::encode(&head));
    } else {
        let shown = String::from_utf8_lossy(&head[..head.len().min(40)]).into_owned();
        a.unread.push(format!("header {shown:?}: a format this reader does not know (not read)"));
        return a;
    }
    let Some((k_at, k_len, end)) = s.field(next) else {
        a.unread.push("no cache key after the torch key".into());
        return a;
    };
    a.key = s.text(k_at, k_len);
    let Some((m_at, m_len, _)) = s.field(end) else {
        a.unread.push("no cache artifacts after the key".into());
        return a;
    };
    mega_at(&s, m_at, m_len, &mut a);
    a
}

/// Read bare mega-cache bytes (`torch.compiler.save_cache_artifacts()` written to a file).
pub fn read_mega(file: &File, len: u64) -> Artifact {
    let mut a = Artifact::default();
    mega_at(&Src { f: file, len }, 0, len, &mut a);
    a
}

/// The mega-cache at `[at, at + len)`: CRC (not checked), version, then per kind its records.
fn mega_at(s: &Src<'_>, at: u64, len: u64, a: &mut Artifact) {
    let end = at + len;
    if s.u64_at(at + 4) != Some(1) {
        a.unread.push("cache artifacts of an unknown encoding version (not read)".into());
        return;
    }
    let mut p = at + 12;
    while p < end {
        let Some((kat, klen, after)) = s.field(p).filter(|f| f.2 <= end) else { break };
        let Some(kind) = s.text(kat, klen) else { break };
        let Some(n) = s.u64_at(after) else { break };
        p = after + 8;
        for _ in 0..n {
            if a.records.len() as u64 == MAX_RECORDS {
                a.unread.push(format!("records past the first {MAX_RECORDS} not listed"));
                return;
            }
            let Some((kat, klen, cstart)) = s.field(p).filter(|f| f.2 <= end) else { break };
            let Some((cat, clen, cend)) = s.field(cstart).filter(|f| f.2 <= end) else { break };
            let key = s.text(kat, klen).unwrap_or_default();
            if kind == "inductor" {
                kernels_of(s, cat, clen, &key, a);
            }
            a.records.push(Record { kind: kind.clone(), key, bytes: clen });
            p = cend;
        }
    }
    if p != end {
        a.unread.push(format!("cache artifacts cut short or malformed at byte {p} of {end}"));
    }
}

/// The Triton kernels bundled in the Inductor entry at `[at, at + len)`.
fn kernels_of(s: &Src<'_>, at: u64, len: u64, key: &str, a: &mut Artifact) {
    if len > MAX_PICKLE_BYTES {
        a.unread.push(format!(
            "Inductor entry {key}: {} over the {} cap, its kernels not read",
            super::limits::size_text(len),
            super::limits::size_text(MAX_PICKLE_BYTES)
        ));
        return;
    }
    let Some(buf) = s.bytes(at, len) else { return };
    let mut cur: Option<Kernel> = None;
    let (mut want, mut file) = (None::<&'static str>, String::new());
    let done = |k: Option<Kernel>, a: &mut Artifact| {
        // the bundle lists a kernel once per use; the first copy is kept
        let new = |k: &Kernel| !k.files.is_empty() && !a.kernels.iter().any(|o| o.key == k.key);
        if let Some(k) = k.filter(new) {
            a.kernels.push(k);
        }
    };
    let res = pickle_strings(&buf, |v| match (want.take(), v) {
        // the bundle's kernel key is Triton's cache key (other objects have a `kernel_hash` too)
        (Some("kernel_hash"), Value::Str(s)) if super::walk::is_key(s) => {
            done(cur.replace(Kernel { key: s.into(), name: None, files: vec![], bytes: 0 }), a);
        }
        (Some("filename"), Value::Str(s)) => {
            file = s.to_string();
            if let Some(k) = cur.as_mut() {
                k.files.push(file.clone());
            }
        }
        (Some("payload"), Value::Bytes(b)) => {
            if let Some(k) = cur.as_mut() {
                k.bytes += b.len() as u64;
                if file.ends_with(".json") && !file.starts_with("__grp__") && k.name.is_none() {
                    k.name = serde_json::from_slice::<serde_json::Value>(b)
                        .ok()
                        .and_then(|m| m.get("name")?.as_str().map(str::to_string));
                }
            }
        }
        (_, Value::Str(s)) => {
            want = ["kernel_hash", "filename", "payload"].into_iter().find(|w| *w == s);
        }
        _ => {}
    });
    done(cur, a);
    if let Err(e) = res {
        a.unread.push(format!("Inductor entry {key}: {e}"));
    }
}

/// A string or bytes constant met in a pickle's opcode stream.
pub enum Value<'a> {
    Str(&'a str),
    Bytes(&'a [u8]),
}

/// Decode the opcode stream of a pickle (protocols 0-5) and call `f` with each string and bytes
/// constant in stream order, a memo lookup of a string counting as that string again. Nothing is
/// executed: opcodes are only decoded, never applied (no import, no call, no object built). An
/// error names the first opcode that could not be decoded.
pub fn pickle_strings<'a>(b: &'a [u8], mut f: impl FnMut(Value<'a>)) -> Result<(), String> {
    let mut memo: Vec<Option<&'a str>> = vec![];
    let mut last: Option<&'a str> = None;
    let mut i = 0usize;
    let take = |i: &mut usize, n: usize| -> Result<&'a [u8], String> {
        let s = b.get(*i..i.checked_add(n).ok_or("length overflow")?).ok_or("pickle cut short")?;
        *i += n;
        Ok(s)
    };
    let uint = |s: &[u8]| s.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64);
    let put = |memo: &mut Vec<Option<&'a str>>, idx: usize, v: Option<&'a str>| {
        if idx < 1 << 24 {
            if memo.len() <= idx {
                memo.resize(idx + 1, None);
            }
            memo[idx] = v;
        }
    };
    while i < b.len() {
        let op = b[i];
        let at = i;
        i += 1;
        let mut pushed: Option<&'a str> = None;
        match op {
            // no argument
            b'(' | b'0' | b'1' | b'2' | b'N' | 0x88 | 0x89 | b'}' | b']' | b')' | 0x8f | b'a' | b'e' | b'b' | b'd'
            | b'l' | b't' | 0x85 | 0x86 | 0x87 | b's' | b'u' | 0x90 | 0x91 | b'R' | 0x81 | 0x92 | 0x93 | b'o'
            | b'Q' | 0x97 | 0x98 => {}
            b'.' => return Ok(()),
            0x94 => {
                let n = memo.len();
                put(&mut memo, n, last)
            }
            // fixed-size arguments
            b'K' | 0x80 | 0x82 => i += 1,
            b'M' | 0x83 => i += 2,
            b'J' | 0x84 => i += 4,
            b'G' | 0x95 => i += 8,
            b'h' | b'j' => {
                let idx = uint(take(&mut i, if op == b'h' { 1 } else { 4 })?) as usize;
                if let Some(Some(s)) = memo.get(idx) {
                    f(Value::Str(s));
                    pushed = Some(s);
                }
            }
            b'q' | b'r' => {
                let idx = uint(take(&mut i, if op == b'q' { 1 } else { 4 })?) as usize;
                put(&mut memo, idx, last);
            }
            // length-prefixed: longs, strings, bytes
            0x8a | 0x8b | b'U' | b'T' | 0x8c | b'X' | 0x8d | b'C' | b'B' | 0x8e | 0x96 => {
                let w = match op {
                    0x8a | b'U' | 0x8c | b'C' => 1,
                    0x8b | b'T' | b'X' | b'B' => 4,
                    _ => 8,
                };
                let n = usize::try_from(uint(take(&mut i, w)?)).map_err(|_| "length overflow")?;
                let data = take(&mut i, n)?;
                match op {
                    0x8c | b'X' | 0x8d => {
                        let s = std::str::from_utf8(data).map_err(|_| format!("string not UTF-8 at byte {at}"))?;
                        f(Value::Str(s));
                        pushed = (s.len() <= 256).then_some(s);
                    }
                    b'C' | b'B' | 0x8e | 0x96 => f(Value::Bytes(data)),
                    _ => {}
                }
            }
            // protocol 0: one or two newline-terminated lines
            b'I' | b'L' | b'F' | b'S' | b'V' | b'g' | b'p' | b'P' | b'c' | b'i' => {
                let lines = if op == b'c' || op == b'i' { 2 } else { 1 };
                for _ in 0..lines {
                    let n = b[i..].iter().position(|&c| c == b'\n').ok_or("pickle cut short")?;
                    i += n + 1;
                }
            }
            _ => return Err(format!("pickle opcode 0x{op:02x} at byte {at} not known: rest not read")),
        }
        last = pushed;
    }
    Err("pickle without its STOP opcode".into())
}

/// What a read artifact holds, in words (one line, for "what fills this disk").
pub fn holds(a: &Artifact) -> String {
    let mut parts = vec![];
    let count = |kind: &str| a.records.iter().filter(|r| r.kind == kind).count();
    let fx = count("inductor");
    if fx > 0 {
        parts.push(format!("{fx} Inductor FX graph{}", if fx == 1 { "" } else { "s" }));
    }
    let mut names: Vec<String> =
        a.kernels.iter().map(|k| format!("{} [{}]", k.name.as_deref().unwrap_or("name not read"), k.key)).collect();
    names.dedup();
    if !names.is_empty() {
        parts.push(format!(
            "{} Triton kernel{} ({})",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        ));
    }
    for kind in ["aot_autograd", "autotune", "pgo", "precompile"] {
        let n = count(kind);
        if n > 0 {
            parts.push(format!("{n} {kind} entr{}", if n == 1 { "y" } else { "ies" }));
        }
    }
    let mut other: Vec<&str> = a
        .records
        .iter()
        .map(|r| r.kind.as_str())
        .filter(|k| !["inductor", "aot_autograd", "autotune", "pgo", "precompile"].contains(k))
        .collect();
    other.dedup();
    for k in other {
        parts.push(format!("{} {k} entries", count(k)));
    }
    if let Some(k) = &a.key {
        parts.push(format!("AOTAutograd key {k}"));
    }
    if let Some(t) = &a.torch_key {
        parts.push(format!("torch key {}", &t[..t.len().min(12)]));
    }
    for u in &a.unread {
        parts.push(format!("not read: {u}"));
    }
    if parts.is_empty() {
        return "nothing readable".into();
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pickle_strings_follow_memo_lookups_and_stop_at_unknown_opcodes() {
        // PROTO 4, SHORT_BINUNICODE "kernel_hash", MEMOIZE, SHORT_BINUNICODE "K1", BINGET 0,
        // SHORT_BINBYTES b"ab", STOP
        let p = b"\x80\x04\x8c\x0bkernel_hash\x94\x8c\x02K1h\x00C\x02ab.";
        let mut seen = vec![];
        pickle_strings(p, |v| {
            seen.push(match v {
                Value::Str(s) => s.to_string(),
                Value::Bytes(b) => format!("{b:?}"),
            })
        })
        .unwrap();
        assert_eq!(seen, ["kernel_hash", "K1", "kernel_hash", "[97, 98]"]);
        let e = pickle_strings(b"\x80\x04\xff", |_| {}).unwrap_err();
        assert!(e.contains("0xff at byte 2"), "{e}");
        assert!(pickle_strings(b"\x8c\x09short", |_| {}).unwrap_err().contains("cut short"));
    }

    /// `torch.compiler.save_cache_artifacts()` bytes of the torch 2.11 fixture: the records the
    /// GPU run's `CacheInfo` named, and the Triton kernels bundled in the Inductor entry.
    #[test]
    fn mega_cache_of_the_fixture_lists_what_torch_recorded() {
        let fx = crate::test_corpus::unpacked("h200-vllm-standalone-torch-2.11");
        let gt: serde_json::Value =
            serde_json::from_slice(&std::fs::read(fx.join("ground-truth.json")).unwrap()).unwrap();
        let f = File::open(fx.join("torch-megacache/cache_artifacts.bin")).unwrap();
        let len = f.metadata().unwrap().len();
        assert_eq!(len, gt["compile"]["mega"][1].as_u64().unwrap());
        let a = read_mega(&f, len);
        assert_eq!(a.unread, Vec::<String>::new());
        let mut want: Vec<(String, String)> = vec![];
        for (kind, keys) in gt["compile"]["mega"][0].as_object().unwrap() {
            for k in keys.as_array().unwrap() {
                want.push((kind.clone(), k.as_str().unwrap().into()));
            }
        }
        let mut got: Vec<(String, String)> = a.records.iter().map(|r| (r.kind.clone(), r.key.clone())).collect();
        want.sort();
        got.sort();
        assert_eq!(got, want);
        assert!(!a.kernels.is_empty());
        for k in &a.kernels {
            assert!(super::super::walk::is_key(&k.key), "{k:?}");
            assert!(k.name.as_deref().is_some_and(|n| n.starts_with("triton_")), "{k:?}");
            assert!(k.files.iter().any(|f| f.ends_with(".cubin")) && k.bytes > 10_000, "{k:?}");
        }
        // the standalone artifact wraps such bytes: a file cut short says so, lists what it could
        let bin =
            fx.join("vllm/torch_compile_cache/9a3a45d015/rank_0_0/backbone/artifact_compile_range_1_512_subgraph_1");
        let f = File::open(bin).unwrap();
        let full = read_artifact(&f, f.metadata().unwrap().len());
        assert_eq!((full.header.as_deref(), full.unread.len(), full.kernels.len()), (Some(CACHE_HEADER), 0, 1));
        let cut = read_artifact(&f, 200_000);
        assert!(cut.unread.iter().any(|u| u.contains("no cache artifacts")), "{cut:?}");
    }
}
