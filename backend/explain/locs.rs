//! Source locations in Triton IR (`loc("file":line:col)`): where the kernel starts, and whether
//! two IR texts that are equal but for locations differ only because the kernel moved.
//!
//! Triton's source hash (`fn.cache_key`) includes the kernel's first line, so lines added
//! above a kernel (a comment, an import) give a new key while the code and the IR, locations
//! aside, stay the same.

/// File locations of one IR text, in order of appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Locs {
    /// (file name without directories, line) of every `loc("file":line:col)`.
    pub lines: Vec<(String, u32)>,
}

impl Locs {
    pub fn of(ir: &str) -> Locs {
        let mut lines = Vec::new();
        let mut rest = ir;
        while let Some(i) = rest.find("loc(\"") {
            rest = &rest[i + 5..];
            let Some(end) = rest.find('"') else { break };
            let (path, after) = (&rest[..end], &rest[end + 1..]);
            if let Some(num) = after.strip_prefix(':') {
                let digits: &str = &num[..num.find(|c: char| !c.is_ascii_digit()).unwrap_or(num.len())];
                if let Ok(line) = digits.parse() {
                    lines.push((base(path).to_string(), line));
                }
            }
            rest = after;
        }
        Locs { lines }
    }

    /// The kernel's first line: the first file location (`#loc = loc("k.py":12:0)`).
    pub fn kernel(&self) -> Option<&(String, u32)> {
        self.lines.first()
    }
}

fn base(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// How the locations of two otherwise equal IR texts differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Moved {
    /// Every location in the kernel's file shifted by `by` lines (positive: down).
    Kernel { file: String, from: u32, to: u32, by: i64 },
    /// The kernel's lines moved unevenly (lines added or removed inside it, e.g. comments).
    Within { file: String, from: u32, to: u32 },
    /// Only locations in other files (callees) moved.
    Callees { files: Vec<String> },
}

/// What moved between A's and B's locations, when they differ.
pub(crate) fn moved(a: &Locs, b: &Locs) -> Option<Moved> {
    if a == b {
        return None;
    }
    let ((fa, la), (fb, lb)) = (a.kernel()?, b.kernel()?);
    if fa != fb {
        return None;
    }
    let of = |l: &Locs, own: bool| -> Vec<(String, u32)> {
        l.lines.iter().filter(|(f, _)| (f == fa) == own).cloned().collect()
    };
    let (ka, kb) = (of(a, true), of(b, true));
    let by = i64::from(*lb) - i64::from(*la);
    let uniform = ka.len() == kb.len() && ka.iter().zip(&kb).all(|(x, y)| i64::from(y.1) - i64::from(x.1) == by);
    let file = fa.clone();
    if !uniform {
        return Some(Moved::Within { file, from: *la, to: *lb });
    }
    if by != 0 {
        return Some(Moved::Kernel { file, from: *la, to: *lb, by });
    }
    let (oa, ob) = (of(a, false), of(b, false));
    let mut files: Vec<String> =
        oa.iter().chain(&ob).filter(|x| !oa.contains(x) || !ob.contains(x)).map(|x| x.0.clone()).collect();
    files.sort();
    files.dedup();
    Some(Moved::Callees { files })
}

impl Moved {
    /// The summary phrase, in words a user acts on.
    pub fn phrase(&self) -> String {
        match self {
            Moved::Kernel { file, by, .. } => {
                let n = by.unsigned_abs();
                let dir = if *by > 0 { "down" } else { "up" };
                format!(
                    "code unchanged: the kernel moved {n} line{} {dir} in {file}; Triton keys on the kernel's first line",
                    if n == 1 { "" } else { "s" }
                )
            }
            Moved::Within { file, .. } => format!(
                "code unchanged: lines moved inside the kernel in {file} (comments or blank lines); Triton keys on the kernel's source text"
            ),
            Moved::Callees { files } => format!(
                "code unchanged: a called function moved in {}; Triton keys on its callees' source and first lines",
                files.join(", ")
            ),
        }
    }
}
