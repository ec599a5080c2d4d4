//! What is on disk under a root, for prune: every entry dir's files (the scanner's listing and
//! signature, [`crate::scan::entry::list_files`]), bytes and inodes, and the temp dirs of
//! writers. Opened below the root only, never through a symlink ([`crate::scan::fsat`]).

use crate::model::SkipKind;
use crate::scan::{entry, fsat, walk};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// A file of an entry and its size.
#[derive(Debug, Clone)]
pub struct FileSize {
    pub name: String,
    pub size: u64,
}

/// One entry dir as listed now.
#[derive(Debug, Clone)]
pub struct Listed {
    pub dir: String,
    /// [`entry::signature`] of its listing: names, sizes and mtimes (and temp dir names).
    pub sig: String,
    /// Bytes of its files and of its temp dirs' files.
    pub bytes: i64,
    /// The dir, its files, links and temp dirs with what they hold.
    pub inodes: i64,
    pub files: Vec<FileSize>,
    /// Whether it holds a `__grp__*` file (a kernel Triton can load).
    pub has_group: bool,
    /// How many `__grp__*` files it holds.
    pub groups: i64,
    /// Whether it holds nothing but group files prune stubbed: an entry taken out.
    pub pruned: bool,
}

/// A writer's temp dir: `<KEY>/tmp.pid_*` (Triton 3.2+), or `tmp.*` directly in the root.
#[derive(Debug, Clone)]
pub struct Temp {
    pub dir: String,
    pub mtime_ms: i64,
    /// Its [`fsat::Stamp`] text: apply removes it only while this holds.
    pub sig: String,
    pub bytes: i64,
    pub inodes: i64,
}

/// What is under one root: its entry dirs and temp dirs (a budget counts these; hook events
/// and launcher dirs outside the walk's layout are not counted).
#[derive(Debug, Default)]
pub struct Listing {
    pub entries: Vec<Listed>,
    pub temps: Vec<Temp>,
    /// Entry dirs holding nothing (a lookup makes one), or nothing but the group stubs of an
    /// entry prune took out, with their stamp: removed once so for an hour, like a temp dir.
    pub empty: Vec<Temp>,
}

impl Listing {
    pub fn bytes(&self) -> i64 {
        // (saturating: an uploaded entry's bytes are bounded one by one, not their sum)
        self.entries.iter().map(|e| e.bytes).chain(self.temps.iter().map(|t| t.bytes)).fold(0, i64::saturating_add)
    }

    pub fn inodes(&self) -> i64 {
        let (entries, temps) = (self.entries.iter().map(|e| e.inodes), self.temps.iter().map(|t| t.inodes));
        entries.chain(temps).chain(self.empty.iter().map(|t| t.inodes)).fold(0, i64::saturating_add)
    }
}

/// Temp dirs and what they hold are counted this deep at most (Triton's hold plain files).
const TEMP_DEPTH: usize = 3;

/// List every entry dir and temp dir under `root` (canonical). An entry dir that cannot be
/// listed is left out (it is kept).
pub fn list(root: &Path) -> io::Result<Listing> {
    let root_fd = fsat::open_root(root)?;
    let rfd = root_fd.as_fd();
    let layout = walk::walk(root, rfd);
    let owner = fsat::owner(rfd).unwrap_or(u32::MAX);
    let mut out = Listing::default();
    for s in layout.skipped.iter().filter(|s| s.kind == SkipKind::WriteInProgress) {
        // `tmp.*` dirs where the walk looks for keys (the root, `triton/<dev>/`)
        if let Some(t) = temp(rfd, &s.path) {
            out.temps.push(t);
        }
    }
    for dir in &layout.entries {
        let Ok(listed) = entry_now(root, rfd, dir, owner) else { continue };
        let (listed, listing) = listed;
        let nothing = listing.files.is_empty() && listing.bad.is_empty() && listing.links.is_empty();
        let key_dir = walk::is_key(dir.rsplit('/').next().unwrap_or(dir));
        if key_dir && (listed.pruned || (nothing && listing.foreign.is_empty() && listing.tmp.is_empty())) {
            out.empty.extend(temp(rfd, dir));
            continue;
        }
        for t in &listing.tmp {
            if let Some(mut t) = temp(rfd, &format!("{dir}/{t}")) {
                t.dir = format!("{dir}/{}", t.dir.rsplit('/').next().unwrap_or_default());
                out.temps.push(t);
            }
        }
        out.entries.push(listed);
    }
    Ok(out)
}

/// One entry dir as it is now, with the scanner's listing.
pub fn entry_now(root: &Path, root_fd: BorrowedFd<'_>, dir: &str, owner: u32) -> io::Result<(Listed, entry::Listing)> {
    let fd = fsat::open_rel(root_fd, Path::new(dir))?;
    let (d, l) = entry::list_files(fd, &root.join(dir), root, owner)?;
    let dfd = d.fd()?;
    let mut bytes: i64 = l.files.iter().map(|f| f.size as i64).sum();
    let mut inodes = 1 + (l.files.len() + l.links.len() + l.foreign.len()) as i64;
    for t in &l.tmp {
        let (b, n) = count(dfd, OsStr::new(t), TEMP_DEPTH);
        bytes += b;
        inodes += n;
    }
    let files = l.files.iter().map(|f| FileSize { name: f.name.clone(), size: f.size }).collect();
    let pruned = entry::only_pruned_groups(dfd, &l, owner);
    let has_group = !pruned && l.files.iter().any(|f| f.name.starts_with("__grp__"));
    let groups = l.files.iter().filter(|f| f.name.starts_with("__grp__")).count() as i64;
    let sig = entry::signature(&l);
    let listed = Listed { dir: dir.to_string(), sig, bytes, inodes, files, has_group, groups, pruned };
    Ok((listed, l))
}

/// The temp dir at `rel` below the root, with what it holds.
fn temp(root_fd: BorrowedFd<'_>, rel: &str) -> Option<Temp> {
    let (parent, name) = match rel.rsplit_once('/') {
        Some((p, n)) => (Some(fsat::open_rel(root_fd, Path::new(p)).ok()?), n),
        None => (None, rel),
    };
    let pfd = parent.as_ref().map_or(root_fd, |p| p.as_fd());
    let st = fsat::dir_stamp(pfd, OsStr::new(name)).ok()??;
    let (bytes, inodes) = count(pfd, OsStr::new(name), TEMP_DEPTH);
    Some(Temp { dir: rel.to_string(), mtime_ms: st.mtime_ns / 1_000_000, sig: st.text(), bytes, inodes })
}

/// Bytes and inodes of `name` in `parent` and, for a dir, of what it holds (`depth` levels at
/// most), never following a symlink.
pub fn count(parent: BorrowedFd<'_>, name: &OsStr, depth: usize) -> (i64, i64) {
    let Ok((size, _, kind)) = fsat::stat(parent, name) else { return (0, 0) };
    if kind != fsat::Kind::Dir {
        return (if kind == fsat::Kind::File { size as i64 } else { 0 }, 1);
    }
    let (mut bytes, mut inodes) = (0, 1);
    if depth == 0 {
        return (bytes, inodes);
    }
    let Ok(fd) = fsat::open_dir(parent, name) else { return (bytes, inodes) };
    let Ok((d, kids)) = fsat::list(fd) else { return (bytes, inodes) };
    let Ok(dfd) = d.fd() else { return (bytes, inodes) };
    for k in kids {
        let (b, n) = count(dfd, &k.name, depth - 1);
        bytes += b;
        inodes += n;
    }
    (bytes, inodes)
}
