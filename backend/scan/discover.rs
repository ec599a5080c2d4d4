//! Finding every Triton cache dir below a path: plain Triton (`<dir>/<KEY>/`), Inductor
//! (`<dir>/triton/<device>/<KEY>/`), vLLM (`torch_compile_cache/<hash>/rank_<i>_<j>/triton_cache/<KEY>/`
//! in its older layout; `.../rank_<i>_<j>/<prefix>/` holding compiled-range artifacts in its
//! current one, where an unpacked artifact is an Inductor dir: [`super::vllm`]) and copies nested
//! anywhere, each then scanned as its own root.
//!
//! The rule: a dir is a Triton cache when one of its children is a key-named dir
//! ([`walk::is_key`]) or the hook's event dir. Its key-named children are entries and are never
//! entered, so a 100,000-entry cache costs one listing (by `d_type`, no stat per entry);
//! only non-key dirs are descended into, at most [`MAX_DEPTH`] levels below the path (below a
//! `torch_compile_cache` dir, whose layout fixes its depth, [`VLLM_DEPTH`] levels below that dir
//! whatever its own depth) and at most [`MAX_DIRS`] dirs in all. A cache whose parent is named `triton` is Inductor's device
//! dir: its root is the Inductor dir above (whose walk reads every `triton/<device>/` and the
//! `.best_config` files), unless that is above the path given. Dirs are opened from their
//! parent's descriptor with `O_NOFOLLOW` ([`fsat`]): symlinks are counted, never followed.

use super::fsat::{self, Kind};
use super::vllm;
use super::walk::{self, HOOK_DIR};
use rustix::fs::Dir;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// How many dir levels below the path the discovery looks (a vLLM cache below a home dir,
/// `.cache/vllm/torch_compile_cache/<hash>/rank_0_0/triton_cache`, is 6).
pub const MAX_DEPTH: usize = 8;
/// How many dir levels below a `torch_compile_cache` dir hold a Triton cache: vLLM's layout,
/// `<hash>/rank_<i>_<j>/<prefix>/artifact_compile_range_<a>_<b>_subgraph_<n>/triton/<device>`,
/// is 6 deep (its older `<hash>/rank_<i>_<j>/triton_cache` is 3). Counted from that dir, so the
/// kernels of an unpacked artifact are found from a home dir (9 levels down) or any path above
/// the vLLM root that reaches `torch_compile_cache` within [`MAX_DEPTH`].
pub const VLLM_DEPTH: usize = 6;
/// At most this many non-key dirs are listed per path (a whole home dir would be many more).
pub const MAX_DIRS: usize = 20_000;

/// What the discovery found below one path.
#[derive(Debug, Default)]
pub struct Found {
    /// Cache roots (absolute: the path given, canonical, joined with plain names), sorted.
    pub roots: Vec<PathBuf>,
    /// Symlinks met (never followed).
    pub symlinks: usize,
    /// Dirs that could not be listed, as `path: reason`.
    pub unreadable: Vec<String>,
    /// Dirs deeper than [`MAX_DEPTH`] that were not looked into.
    pub too_deep: usize,
    /// True when [`MAX_DIRS`] stopped the discovery.
    pub truncated: bool,
}

/// Find the Triton cache roots below `path` (canonical); an error when `path` itself cannot be
/// listed.
pub fn find(path: &Path) -> std::io::Result<Found> {
    let mut out = Found::default();
    let mut roots = BTreeSet::new();
    // (the parent's fd, a dir's path below `path`): a dir is opened from its parent's fd when
    // it is listed, so only the dirs on the way down stay open
    let top = Rc::new(fsat::open_root(path)?);
    // (the parent's fd, a dir's path below `path`, the depth its subdirs may reach)
    let mut stack: Vec<(Option<Rc<OwnedFd>>, PathBuf, usize)> = vec![(None, PathBuf::new(), MAX_DEPTH)];
    let mut listed = 0usize;
    while let Some((parent, rel, limit)) = stack.pop() {
        if listed == MAX_DIRS {
            out.truncated = true;
            break;
        }
        listed += 1;
        let opened = match (&parent, rel.file_name()) {
            (Some(p), Some(name)) => fsat::open_dir(p.as_fd(), name).map(Rc::new),
            _ => Ok(top.clone()),
        };
        let listing = opened.and_then(|fd| Ok((list(&fd, &mut out.symlinks)?, fd)));
        let ((is_cache, subdirs), fd) = match listing {
            Ok(x) => x,
            Err(e) if parent.is_none() => return Err(e),
            Err(e) => {
                out.unreadable.push(format!("{}: {}", path.join(&rel).display(), walk::reason(&e)));
                // an Inductor device dir is a cache whatever it holds: its Inductor dir is
                // scanned, and that scan records it unreadable (keeping its entries)
                if root_of(&rel) != rel {
                    roots.insert(root_of(&rel));
                }
                continue;
            }
        };
        if is_cache {
            roots.insert(root_of(&rel));
        }
        let depth = rel.components().count();
        let limit =
            if rel.file_name().is_some_and(|n| n == "torch_compile_cache") { depth + VLLM_DEPTH } else { limit };
        if depth >= limit {
            out.too_deep += subdirs.len();
            continue;
        }
        for name in subdirs.into_iter().rev() {
            stack.push((Some(fd.clone()), rel.join(name), limit));
        }
    }
    out.roots = roots.into_iter().map(|r| path.join(r)).collect();
    Ok(out)
}

/// The root a cache dir at `rel` belongs to: Inductor's dir for `<dir>/triton/<device>`.
fn root_of(rel: &Path) -> PathBuf {
    let parent = rel.parent();
    if parent.and_then(Path::file_name).is_some_and(|n| n == "triton") {
        return parent.and_then(Path::parent).unwrap_or(Path::new("")).to_path_buf();
    }
    rel.to_path_buf()
}

/// List a dir: whether it is a Triton cache (or a vLLM prefix dir: [`vllm::marks_prefix_dir`]),
/// and its non-key subdirs to look into (not temp dirs, not the hook's dir). Key names are
/// checked without a copy or a stat.
fn list(fd: &OwnedFd, symlinks: &mut usize) -> std::io::Result<(bool, Vec<OsString>)> {
    let mut d = Dir::read_from(fd)?;
    let mut is_cache = false;
    let mut subdirs = vec![];
    while let Some(de) = d.read() {
        let de = de?;
        let name = de.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if vllm::marks_prefix_dir(name) {
            is_cache = true;
        }
        match fsat::entry_kind(&d, &de)? {
            Kind::Symlink => *symlinks += 1,
            Kind::Dir => {
                let text = std::str::from_utf8(name).unwrap_or("");
                if walk::is_key(text) || text == HOOK_DIR {
                    is_cache = true;
                } else if !text.starts_with("tmp.") {
                    subdirs.push(OsString::from_vec(name.to_vec()));
                }
            }
            _ => {}
        }
    }
    subdirs.sort();
    Ok((is_cache, subdirs))
}

/// The vLLM rank dir (`rank_<i>_<j>`, as `torch_compile_cache/<hash>/rank_<i>_<j>`) a root
/// sits in, if any: the last such path component.
pub fn rank_dir(root: &str) -> Option<String> {
    let parts: Vec<&str> = root.split('/').collect();
    let is_rank = |p: &str| {
        let mut it = p.strip_prefix("rank_").map(|r| r.split('_'));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        it.as_mut().is_some_and(|it| it.clone().count() == 2 && it.all(digits))
    };
    let i = parts.iter().rposition(|p| is_rank(p))?;
    Some(parts[i.saturating_sub(2)..=i].join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_dir_of_vllm_roots() {
        let r = "/h/.cache/vllm/torch_compile_cache/4a1b/rank_1_0/triton_cache";
        assert_eq!(rank_dir(r).as_deref(), Some("torch_compile_cache/4a1b/rank_1_0"));
        assert_eq!(rank_dir("/h/.triton/cache"), None);
        assert_eq!(rank_dir("/x/rank_a_0/triton_cache"), None);
        assert_eq!(rank_dir("/x/rank_1/triton_cache"), None);
    }

    #[test]
    fn inductor_device_dirs_belong_to_the_inductor_dir() {
        assert_eq!(root_of(Path::new("a/inductor/triton/0")), Path::new("a/inductor"));
        assert_eq!(root_of(Path::new("triton/1")), Path::new(""));
        assert_eq!(root_of(Path::new("0")), Path::new("0"));
        assert_eq!(root_of(Path::new("x/triton_cache")), Path::new("x/triton_cache"));
    }

    /// Prints what the discovery adds to a scan of a 100,000-entry plain cache (one listing of
    /// the root, no stat per entry) beside the walk's own listing. A measurement, not a check:
    /// `cargo test --release --lib discovery_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn discovery_cost_on_100k_entries() {
        use sha2::{Digest, Sha256};
        let t = tempfile::TempDir::new().unwrap();
        for i in 0..100_000u32 {
            let h = Sha256::digest(i.to_le_bytes());
            std::fs::create_dir(t.path().join(hex::encode(h))).unwrap();
        }
        let root = t.path().canonicalize().unwrap();
        for _ in 0..3 {
            let t0 = std::time::Instant::now();
            let found = find(&root).unwrap();
            let d = t0.elapsed();
            let fd = fsat::open_root(&root).unwrap();
            let t1 = std::time::Instant::now();
            let layout = walk::walk(&root, fd.as_fd());
            let w = t1.elapsed();
            assert_eq!((found.roots.len(), layout.entries.len()), (1, 100_000));
            println!("discovery {:.1} ms, walk {:.1} ms", d.as_secs_f64() * 1e3, w.as_secs_f64() * 1e3);
        }
    }
}
