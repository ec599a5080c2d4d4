//! Facts read from a kernel's TTIR (`.source` or `.ttir`): the argument signature and the tile
//! shapes. Triton's metadata JSON carries neither constexpr values nor argument types, so this
//! is where variants that differ by dtype or by tile constants become visible.

use std::collections::BTreeSet;

/// What the TTIR says about an entry's specialization.
#[derive(Debug, Default, PartialEq)]
pub struct Facts {
    /// Argument types of the public function, `*f16:16` for a 16-byte aligned f16 pointer.
    pub signature: Option<String>,
    /// Distinct tensor shapes with every dimension > 1 (tile sizes), e.g. `128x64,64x256`.
    pub shapes: Option<String>,
}

/// Extract [`Facts`] from TTIR text. `kernel` picks the public function when several exist.
/// Every entry's IR passes here: the text is searched for its few patterns (SIMD `memmem`), not
/// split into lines or pieces (3.5 % of a cold scan's CPU went to that).
pub fn facts(ir: &str, kernel: Option<&str>) -> Facts {
    const FUNC: &str = "tt.func public @";
    // the lines that start with `tt.func public @` (after their indentation)
    let headers: Vec<&str> = memchr::memmem::find_iter(ir.as_bytes(), FUNC)
        .filter_map(|at| {
            let start = ir[..at].rfind('\n').map_or(0, |i| i + 1);
            if !ir[start..at].trim_start().is_empty() {
                return None;
            }
            let end = ir[at..].find('\n').map_or(ir.len(), |i| at + i);
            Some(ir[start..end].strip_suffix('\r').unwrap_or(&ir[start..end]))
        })
        .collect();
    let header = headers
        .iter()
        .find(|l| kernel.is_none_or(|k| l.contains(&format!("@{k}(")) || l.contains(&format!("@\"{k}\"("))))
        .or(headers.first())
        .copied();
    Facts { signature: header.and_then(signature), shapes: shapes(ir) }
}

fn signature(header: &str) -> Option<String> {
    let open = header.find('(')?;
    let args = top_level_split(&header[open + 1..]);
    let sig: Vec<String> = args
        .iter()
        .filter_map(|a| {
            let (_, rest) = a.split_once(':')?;
            let rest = rest.trim();
            let ty = rest.split([' ', '{']).next()?.trim();
            let ty = match ty.strip_prefix("!tt.ptr<") {
                Some(inner) => format!("*{}", inner.trim_end_matches('>').split(',').next().unwrap_or("")),
                None => ty.to_string(),
            };
            let div = rest
                .split("tt.divisibility = ")
                .nth(1)
                .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
                .map(|d| format!(":{d}"))
                .unwrap_or_default();
            Some(format!("{ty}{div}"))
        })
        .collect();
    (!sig.is_empty()).then(|| sig.join(","))
}

/// Split the argument list at top-level commas, stopping at the closing parenthesis.
fn top_level_split(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0usize, vec![]);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '<' | '{' | '[' => depth += 1,
            ')' if depth == 0 => {
                out.push(&s[start..i]);
                return out;
            }
            ')' | '>' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

fn shapes(ir: &str) -> Option<String> {
    const TENSOR: &str = "tensor<";
    let mut set = BTreeSet::new();
    for at in memchr::memmem::find_iter(ir.as_bytes(), TENSOR) {
        // the leading all-digit pieces of `AxBx...xTYPE` are the dims; a piece must follow them
        // (the element type)
        let (mut nums, mut typed) = (Vec::new(), false);
        for d in ir[at + TENSOR.len()..].split('x') {
            match d.parse::<u64>() {
                Ok(n) => nums.push(n),
                Err(_) => {
                    typed = true;
                    break;
                }
            }
        }
        if !nums.is_empty() && nums.iter().all(|&n| n > 1) && typed {
            set.insert(nums.iter().map(u64::to_string).collect::<Vec<_>>().join("x"));
        }
    }
    let mut v: Vec<String> = set.into_iter().collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.split('x').map(|d| d.parse::<u64>().unwrap_or(0)).product::<u64>()));
    v.truncate(6);
    (!v.is_empty()).then(|| v.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_signature_and_shapes() {
        let ir = r#"module {
  tt.func public @add_kernel(%x_ptr: !tt.ptr<f16> {tt.divisibility = 16 : i32} loc("x_ptr"), %n: i32 loc("n")) attributes {noinline = false} {
    %8 = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32> loc(#loc)
    %9 = tt.splat %7 : i32 -> tensor<1x1024xi32>
"#;
        let f = facts(ir, Some("add_kernel"));
        assert_eq!(f.signature.as_deref(), Some("*f16:16,i32"));
        assert_eq!(f.shapes.as_deref(), Some("1024"));
    }

    /// The reading before the `memmem` search, line by line and piece by piece.
    fn facts_by_lines(ir: &str, kernel: Option<&str>) -> Facts {
        let header = ir
            .lines()
            .filter(|l| l.trim_start().starts_with("tt.func public @"))
            .find(|l| kernel.is_none_or(|k| l.contains(&format!("@{k}(")) || l.contains(&format!("@\"{k}\"("))))
            .or_else(|| ir.lines().find(|l| l.trim_start().starts_with("tt.func public @")));
        let mut set = BTreeSet::new();
        for part in ir.split("tensor<").skip(1) {
            let dims: Vec<&str> = part.split('x').collect();
            let nums: Vec<u64> = dims.iter().map_while(|d| d.parse::<u64>().ok()).collect();
            if !nums.is_empty() && nums.iter().all(|&n| n > 1) && nums.len() < dims.len() {
                set.insert(nums.iter().map(u64::to_string).collect::<Vec<_>>().join("x"));
            }
        }
        let mut v: Vec<String> = set.into_iter().collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.split('x').map(|d| d.parse::<u64>().unwrap_or(0)).product::<u64>()));
        v.truncate(6);
        Facts { signature: header.and_then(signature), shapes: (!v.is_empty()).then(|| v.join(",")) }
    }

    /// Every `.source` and `.ttir` of the real corpora, with and without the kernel's name, and
    /// odd texts (several functions, indented and CRLF headers, a header mid-line, shapes cut
    /// short), read the same as line by line.
    #[test]
    fn reads_every_corpus_ir_as_line_by_line() {
        let mut read = 0;
        for archive in crate::test_corpus::archives() {
            let root = crate::test_corpus::unpacked(&archive);
            let mut stack = vec![root];
            while let Some(d) = stack.pop() {
                for f in std::fs::read_dir(&d).unwrap().map(|f| f.unwrap().path()) {
                    if f.is_dir() {
                        stack.push(f);
                        continue;
                    }
                    let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
                    if !matches!(ext, "source" | "ttir") {
                        continue;
                    }
                    let ir = std::fs::read_to_string(&f).unwrap();
                    let name = f.file_stem().and_then(|n| n.to_str());
                    for k in [None, name, Some("not_there")] {
                        assert_eq!(facts(&ir, k), facts_by_lines(&ir, k), "{} as {k:?}", f.display());
                    }
                    read += 1;
                }
            }
        }
        assert!(read > 500, "{read} IR files");
        let odd = [
            "  tt.func public @a(%x: i32) {\r\n tt.func public @b(%y: f32) {\n",
            "x tt.func public @a(%x: i32)\n\ttt.func public @a(%z: i64) tensor<4x8xf16> tensor<2x",
            "tensor<64x128> tensor<128x!tt.ptr<f16>> tensor<1x4xf32> tensor<",
            "tt.func public @",
        ];
        for ir in odd {
            for k in [None, Some("a"), Some("b")] {
                assert_eq!(facts(ir, k), facts_by_lines(ir, k), "{ir:?} as {k:?}");
            }
        }
    }

    #[test]
    fn garbage_gives_nothing() {
        assert_eq!(facts("tt.func public @(", None), Facts::default());
        assert_eq!(facts("", Some("k")), Facts::default());
    }
}
