//! The scanner: reads a Triton cache directory (or an Inductor dir) into [`ScanReport`] values.
//!
//! It only ever opens files for reading, and only below the root: symlinks are never followed
//! ([`fsat`]), and what it keeps in memory per file is capped ([`limits`]). Entries are read on a small pool of threads and
//! handed to a sink one by one, so a 100,000-entry cache never sits in memory at once. Entries
//! whose files (names, sizes, mtimes) are unchanged since the previous scan are not re-read.

pub mod autotune;
pub mod beside;
pub mod discover;
pub mod entry;
pub mod events;
pub mod fsat;
pub mod inductor_autotune;
pub mod limits;
pub mod resources;
pub mod ttir;
pub mod walk;

use crate::model::{BestConfig, Entry, EventFileMark, HookEvent, Skip, SkipKind};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the previous scan of this root left behind.
#[derive(Debug, Default)]
pub struct Previous {
    /// entry dir (relative) -> change signature
    pub sigs: HashMap<String, String>,
    /// event file path -> (inode signature, offset read up to)
    pub event_marks: HashMap<String, (String, i64)>,
    /// key -> the other root of this machine whose live row holds it: the database has one
    /// row per (machine, key), so a copy under this root is counted as a duplicate, not read.
    pub elsewhere: HashMap<String, String>,
    /// At most this many bytes of event lines per scan (`None`: all). An upload is size-capped
    /// by the server; what is left is read by the next scan, from the mark this one leaves.
    pub max_event_bytes: Option<u64>,
}

/// Everything but the entries (which go to the sink as they are read).
#[derive(Debug, Default)]
pub struct Tail {
    pub unchanged: Vec<String>,
    pub skipped: Vec<Skip>,
    pub best_configs: Vec<BestConfig>,
    pub events: Vec<HookEvent>,
    pub event_files: Vec<EventFileMark>,
    pub inductor_autotune: Vec<crate::model::InductorAutotune>,
}

/// The default cache dir: `$TRITON_CACHE_DIR`, else `~/.triton/cache`.
pub fn default_root() -> PathBuf {
    if let Some(d) = std::env::var_os("TRITON_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"));
    home.join(".triton").join("cache")
}

/// Scan `root` (canonical), calling `sink` for every entry read (from several threads, one at
/// a time).
pub fn scan<F>(root: &Path, prev: &Previous, threads: usize, sink: F) -> Tail
where
    F: FnMut(Entry) + Send,
{
    let root_fd = match fsat::open_root(root) {
        Ok(fd) => fd,
        Err(e) => {
            let why = format!("cache dir {}: {}", walk::UNREADABLE, walk::reason(&e));
            return Tail { skipped: vec![Skip::new("", SkipKind::DirUnreadable, why)], ..Tail::default() };
        }
    };
    let rfd = root_fd.as_fd();
    let layout = walk::walk(root, rfd);
    let tail = Mutex::new(Tail { skipped: layout.skipped, ..Tail::default() });
    let sink = Mutex::new(sink);
    let next = AtomicUsize::new(0);
    // IR whose text an entry already handed to `sink` in this scan: later copies carry only the
    // hash (both sinks store a blob once per sha256), sparing a copy of every cloned file.
    let sent = TextSent::default();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(dir) = layout.entries.get(i) else { break };
                    let key = dir.rsplit('/').next().unwrap_or(dir);
                    if let Some(other) = prev.elsewhere.get(key) {
                        let skip = Skip::new(dir.clone(), SkipKind::Duplicate, duplicate_key(other));
                        tail.lock().unwrap().skipped.push(skip);
                        continue;
                    }
                    match read_one(root, rfd, dir, prev, &sent) {
                        Ok((e, mut skips)) => {
                            if !skips.is_empty() {
                                tail.lock().unwrap().skipped.append(&mut skips);
                            }
                            match e {
                                Some(e) => {
                                    sent.mark(&e);
                                    (sink.lock().unwrap())(e)
                                }
                                None => tail.lock().unwrap().unchanged.push(dir.clone()),
                            }
                        }
                        Err((kind, reason)) => tail.lock().unwrap().skipped.push(Skip::new(dir.clone(), kind, reason)),
                    }
                }
            });
        }
    });
    let mut tail = tail.into_inner().unwrap();
    for rel in &layout.best_configs {
        match read_best_config(rfd, rel) {
            Ok(b) => tail.best_configs.push(b),
            Err((kind, reason)) => tail.skipped.push(Skip::new(walk::shown(rel), kind, reason)),
        }
    }
    for rel in &layout.inductor_autotune {
        match read_small(rfd, rel, limits::MAX_INDUCTOR_AUTOTUNE_BYTES, "Inductor autotune cache")
            .and_then(|t| inductor_autotune::parse(&walk::shown(rel), &t).map_err(|e| (SkipKind::Malformed, e)))
        {
            Ok(mut rows) => tail.inductor_autotune.append(&mut rows),
            Err((kind, reason)) => tail.skipped.push(Skip::new(walk::shown(rel), kind, reason)),
        }
    }
    let mut budget = prev.max_event_bytes.unwrap_or(u64::MAX).min(limits::MAX_EVENT_BYTES_PER_SCAN);
    for rel in &layout.event_files {
        let key = root.join(rel).display().to_string();
        let (events, skipped) = (&mut tail.events, &mut tail.skipped);
        let mark = events::read_events(rfd, rel, &key, prev.event_marks.get(&key), &mut budget, events, skipped);
        if let Some(mark) = mark {
            tail.event_files.push(mark);
        }
    }
    tail
}

/// The skip reason of a key whose row another copy (in the dir or root `elsewhere`) holds.
pub fn duplicate_key(elsewhere: &str) -> String {
    format!("duplicate key (also in {elsewhere})")
}

/// The sha256s (first 128 bits) of the IR texts already handed to the sink during one scan.
#[derive(Default)]
pub struct TextSent(Mutex<HashSet<u128>>);

impl TextSent {
    fn id(sha: &str) -> Option<u128> {
        u128::from_str_radix(sha.get(..32)?, 16).ok()
    }

    /// Whether an entry handed to the sink already carried this text.
    pub fn contains(&self, sha: &str) -> bool {
        Self::id(sha).is_some_and(|id| self.0.lock().unwrap().contains(&id))
    }

    fn mark(&self, e: &Entry) {
        let mut set = self.0.lock().unwrap();
        set.extend(e.artifacts.iter().filter(|a| a.text.is_some()).filter_map(|a| Self::id(&a.sha256)));
    }
}

/// Read one entry dir, or `Ok(None)` when it is unchanged since the previous scan; with the
/// skips of its files.
fn read_one(
    root: &Path,
    root_fd: BorrowedFd<'_>,
    dir: &str,
    prev: &Previous,
    sent: &TextSent,
) -> Result<(Option<Entry>, Vec<Skip>), (SkipKind, String)> {
    let abs = root.join(dir);
    let mut last = (SkipKind::Vanished, String::new());
    // A cache being written during the scan: a file can vanish or change under us. Try twice.
    for _ in 0..2 {
        let fd = fsat::open_rel(root_fd, Path::new(dir)).map_err(|e| walk::why(&e))?;
        let (d, listing) = entry::list_files(fd, &abs, root).map_err(|e| walk::why(&e))?;
        let sig = entry::signature(&listing);
        if prev.sigs.get(dir) == Some(&sig) {
            let links = listing.links.into_iter();
            return Ok((None, links.map(|(n, why)| Skip::new(format!("{dir}/{n}"), SkipKind::Symlink, why)).collect()));
        }
        let fd = d.fd().map_err(|e| walk::why(&e.into()))?;
        match entry::read_entry(fd, &abs, dir, &listing, sig, sent) {
            Ok((e, skips)) => return Ok((Some(e), skips)),
            Err(r @ (SkipKind::Vanished | SkipKind::Changed, _)) => last = r,
            Err(r) => return Err(r),
        }
    }
    Err(last)
}

/// The text of a small file below the root, refused over `cap` bytes.
fn read_small(root_fd: BorrowedFd<'_>, rel: &Path, cap: u64, what: &str) -> Result<String, (SkipKind, String)> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir = fsat::open_rel(root_fd, parent).map_err(|e| walk::why(&e))?;
    let (f, size) = fsat::open_file(dir.as_fd(), rel.file_name().unwrap_or_default()).map_err(|e| walk::why(&e))?;
    if size > cap {
        return Err((SkipKind::TooLarge, limits::over_cap(what, cap)));
    }
    let mut buf = Vec::new();
    fsat::read_capped(f, size, cap, &mut buf).map_err(|e| walk::why(&e))?;
    String::from_utf8(buf).map_err(|e| (SkipKind::Malformed, format!("{what}: not UTF-8: {e}")))
}

fn read_best_config(root_fd: BorrowedFd<'_>, rel: &Path) -> Result<BestConfig, (SkipKind, String)> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let name = rel.file_name().unwrap_or_default();
    let dir = fsat::open_rel(root_fd, parent).map_err(|e| walk::why(&e))?;
    let (f, size) = fsat::open_file(dir.as_fd(), name).map_err(|e| walk::why(&e))?;
    if size > limits::MAX_BEST_CONFIG_BYTES {
        return Err((SkipKind::TooLarge, limits::over_cap("best_config", limits::MAX_BEST_CONFIG_BYTES)));
    }
    let mut buf = Vec::new();
    fsat::read_capped(f, size, limits::MAX_BEST_CONFIG_BYTES, &mut buf).map_err(|e| walk::why(&e))?;
    let corrupt = |e: String| (SkipKind::Malformed, format!("corrupt best_config JSON: {e}"));
    let text = String::from_utf8(buf).map_err(|e| corrupt(e.to_string()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    let int = |k: &str| v.get(k).and_then(Value::as_i64);
    Ok(BestConfig {
        path: walk::shown(rel),
        triton_cache_hash: v.get("triton_cache_hash").and_then(Value::as_str).map(str::to_string),
        num_warps: int("num_warps"),
        num_stages: int("num_stages"),
        config: v,
    })
}
