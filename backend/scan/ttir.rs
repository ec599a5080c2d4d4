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
pub fn facts(ir: &str, kernel: Option<&str>) -> Facts {
    let header = ir
        .lines()
        .filter(|l| l.trim_start().starts_with("tt.func public @"))
        .find(|l| kernel.is_none_or(|k| l.contains(&format!("@{k}(")) || l.contains(&format!("@\"{k}\"("))))
        .or_else(|| ir.lines().find(|l| l.trim_start().starts_with("tt.func public @")));
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
    let mut set = BTreeSet::new();
    for part in ir.split("tensor<").skip(1) {
        let dims: Vec<&str> = part.split('x').collect();
        // dims are the leading all-digit pieces; the last piece is the element type
        let nums: Vec<u64> = dims.iter().map_while(|d| d.parse::<u64>().ok()).collect();
        if !nums.is_empty() && nums.iter().all(|&n| n > 1) && nums.len() < dims.len() {
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

    #[test]
    fn garbage_gives_nothing() {
        assert_eq!(facts("tt.func public @(", None), Facts::default());
        assert_eq!(facts("", Some("k")), Facts::default());
    }
}
