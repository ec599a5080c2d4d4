//! Sizes of what other tools keep beside a Triton cache dir, so "what fills this disk" has one
//! answer: Inductor's FX graph (`fxgraph/`) and AOTAutograd (`aotautograd/`) caches in the
//! Inductor dir, vLLM's compiled graphs (`torch_compile_cache/<hash>/rank_<i>_<j>/` less its
//! `triton_cache/`).
//!
//! Only sizes: files are `stat`ed, never opened. Dirs are opened from their parent's
//! descriptor without following symlinks ([`fsat`]), never above the path the discovery was
//! given (a vLLM rank dir is counted only when that path holds it), at most [`MAX_DEPTH`]
//! levels down and [`MAX_FILES`] files per tool; a count cut short says so (`complete: false`).

use super::fsat::{self, Kind};
use crate::model::ToolSize;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// Dir levels counted below each tool's dir.
pub const MAX_DEPTH: usize = 12;
/// Files counted per tool's dir.
pub const MAX_FILES: i64 = 1_000_000;

/// What sits beside the cache root `rel` below `base` (opened as `base_fd`; `base` is its path).
pub fn sizes(base: &Path, base_fd: BorrowedFd<'_>, rel: &Path) -> Vec<ToolSize> {
    let mut out = vec![];
    for (dir, tool) in [("fxgraph", "inductor-fxgraph"), ("aotautograd", "inductor-aotautograd")] {
        let at = rel.join(dir);
        if let Ok(fd) = fsat::open_rel(base_fd, &at) {
            out.push(count(tool, &base.join(&at), fd.as_fd(), &[]));
        }
    }
    let name = |p: Option<&Path>| p.and_then(Path::file_name).and_then(|n| n.to_str()).map(str::to_string);
    let rank = rel.parent();
    let is_rank = name(rank).is_some_and(|r| super::discover::rank_dir(&r).is_some());
    if name(Some(rel)).as_deref() == Some("triton_cache") && is_rank {
        let rank = rank.unwrap_or(Path::new(""));
        if let Ok(fd) = fsat::open_rel(base_fd, rank) {
            out.push(count("vllm-compiled", &base.join(rank), fd.as_fd(), &["triton_cache"]));
        }
    }
    out
}

/// Count the regular files below `fd` (not the children named in `except`).
fn count(tool: &str, path: &Path, fd: BorrowedFd<'_>, except: &[&str]) -> ToolSize {
    let mut t = ToolSize { tool: tool.into(), path: path.display().to_string(), complete: true, ..Default::default() };
    walk(fd, 0, except, &mut t, &mut 0);
    t
}

/// [`count`] with the inodes below `fd` too (its files, dirs, links and others, `fd` itself
/// included) in [`ToolSize::inodes`].
pub fn count_inodes(tool: &str, path: &Path, fd: BorrowedFd<'_>, except: &[&str]) -> ToolSize {
    let mut t = ToolSize { tool: tool.into(), path: path.display().to_string(), complete: true, ..Default::default() };
    let mut inodes = 1;
    walk(fd, 0, except, &mut t, &mut inodes);
    t.inodes = Some(inodes);
    t
}

fn walk(fd: BorrowedFd<'_>, depth: usize, except: &[&str], t: &mut ToolSize, inodes: &mut i64) {
    let listed = rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(std::io::Error::from).and_then(fsat::list);
    let Ok((d, children)) = listed else {
        t.complete = false;
        return;
    };
    let Ok(dfd) = d.fd() else { return };
    for c in children {
        if !(depth == 0 && except.iter().any(|e| c.name == *e)) {
            *inodes += 1;
        }
        if t.files >= MAX_FILES {
            t.complete = false;
            return;
        }
        match c.kind {
            Kind::File => match fsat::stat(dfd, &c.name) {
                Ok((size, _, Kind::File)) => {
                    t.files += 1;
                    t.bytes += size as i64;
                }
                _ => t.complete = false,
            },
            Kind::Dir if depth == 0 && except.iter().any(|e| c.name == *e) => {}
            Kind::Dir if depth + 1 >= MAX_DEPTH => t.complete = false,
            Kind::Dir => match fsat::open_dir(dfd, &c.name) {
                Ok(sub) => walk(sub.as_fd(), depth + 1, &[], t, inodes),
                Err(_) => t.complete = false,
            },
            // symlinks and others: not followed, not counted
            _ => {}
        }
    }
}
