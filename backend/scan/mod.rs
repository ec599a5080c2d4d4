//! The scanner: reads a Triton cache directory (or an Inductor dir) into [`ScanReport`] values.
//!
//! It only ever opens files for reading, and only below the root: symlinks are never followed
//! ([`fsat`]), and what it keeps in memory per file is capped ([`limits`]). Entries are read on a small pool of threads and
//! handed to a sink one by one, so a 100,000-entry cache never sits in memory at once. Entries
//! whose files (names, sizes, mtimes) are unchanged since the previous scan are not re-read;
//! an entry dir whose stamp (inode, mtime, ctime: [`fsat::Stamp`]) is unchanged is not even
//! listed: one `fstatat` instead of one per file (docs/ARCHITECTURE.md, "The re-scan dir
//! stamp", says why that is sound for Triton's writers and where it is not).
//!
//! Bounds of one scan ([`limits`]): each file is hashed up to 256 MiB, a root's entries are read
//! until its time budget ([`Previous::deadline`]) is spent (the rest are counted as skipped and
//! kept as they were), and hard links to files of another owner than the root's are not read.
//! Hook events are credited by their host ([`Hosts`]): a scan reads the event files and lines
//! of its own machine only, so that nodes sharing one cache (NFS) do not count each other's
//! lookups.

pub mod autotune;
pub mod beside;
pub mod discover;
pub mod entry;
pub mod events;
pub mod fsat;
pub mod hazards;
pub mod inductor_autotune;
pub mod limits;
pub mod resources;
pub mod standalone;
pub mod ttir;
pub mod vllm;
pub mod walk;

use crate::model::{BestConfig, Entry, EventFileMark, HookEvent, Skip, SkipKind};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A `HashMap` hashed with foldhash (seeded per process): a scan's maps hold one row per entry
/// (100,000s), and std's SipHash was ~7% of a no-change re-scan.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
/// The `HashSet` of [`FastMap`].
pub type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

/// What the previous scan of this root left behind.
#[derive(Debug, Default)]
pub struct Previous {
    /// entry dir (relative) -> change signature
    pub sigs: FastMap<String, String>,
    /// entry dir (relative) -> its dir stamp when the previous scan trusted it ([`fsat::Stamp::text`])
    pub stamps: FastMap<String, String>,
    /// Check every entry file by file (`scan --full`): ignore `stamps`.
    pub full: bool,
    /// event file path -> (inode signature, offset read up to)
    pub event_marks: HashMap<String, (String, i64)>,
    /// key -> the other root of this machine whose live row holds it: the database has one
    /// row per (machine, key), so a copy under this root is counted as a duplicate, not read.
    pub elsewhere: HashMap<String, String>,
    /// At most this many bytes of event lines per scan (`None`: all). An upload is size-capped
    /// by the server; what is left is read by the next scan, from the mark this one leaves.
    pub max_event_bytes: Option<u64>,
    /// Counted as entry dirs are found and handled, for a progress bar ([`crate::progress`]).
    pub progress: Option<std::sync::Arc<Progress>>,
    /// Whose hook events this scan credits (default: every host's).
    pub hosts: Hosts,
    /// No entry is read after this instant (`scan --time-budget`, counted from the root's
    /// start): the entries not reached are counted as skipped ([`limits::TIME_BUDGET_REASON`])
    /// and the ingest keeps their rows as they were. `None`: no budget.
    pub deadline: Option<std::time::Instant>,
}

/// Whose hook events a scan credits to the machine it scans for.
///
/// The hook writes `<cache>/.cachelens/events-<host>.jsonl` (rotated to `events-<host>.1.jsonl`),
/// each line with its `host`. A cache shared by several nodes (NFS) holds every node's files:
/// credited to whichever machine scans, each lookup would count once per node scanning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Hosts {
    /// Every line, whatever its host: for a cache known to be this machine's alone (the bundled
    /// demo, whose events were recorded on another host; `scan --hook-host '*'`; library callers
    /// that do not say).
    #[default]
    Any,
    /// Lines whose `host` is one of these names (the CLI: the hostname, `CACHELENS_HOSTNAME` if
    /// set, the `--machine` name and each `--hook-host`). Event files named for another host are
    /// not opened and their marks stay where they were; other hosts' lines in a file that is read
    /// are passed over. Both are counted as skipped, "hook events of host X: credited when X
    /// scans this cache" (once per file not opened, once per line passed over).
    Only(Vec<String>),
}

impl Hosts {
    /// Whether a line of `host` is this machine's.
    pub fn credits(&self, host: &str) -> bool {
        match self {
            Hosts::Any => true,
            Hosts::Only(names) => names.iter().any(|n| n == host),
        }
    }

    /// The host an event file is named for (`events-<host>.jsonl`, `events-<host>.<n>.jsonl`)
    /// when that is not this machine: the file is then not read. `None`: read it (this
    /// machine's, or not named the hook's way: its lines are sorted one by one).
    pub fn foreign_file(&self, file_name: &OsStr) -> Option<String> {
        let Hosts::Only(names) = self else { return None };
        let (mid, unrotated) = event_file_host(file_name)?;
        // the hook's file name: the host with every byte but [A-Za-z0-9._-] made `_`, 128 at most
        let ours = |part: &[u8]| names.iter().any(|n| events::host_file(n).as_bytes() == part);
        (!ours(mid) && !ours(unrotated)).then(|| fsat::display(OsStr::from_bytes(unrotated)))
    }
}

/// The host part of a hook event file's name (`events-<host>.jsonl`, `events-<host>.<n>.jsonl`):
/// (as written, without a rotation number).
fn event_file_host(file_name: &OsStr) -> Option<(&[u8], &[u8])> {
    let mid = file_name.as_bytes().strip_prefix(b"events-")?.strip_suffix(b".jsonl")?;
    let unrotated = match mid.iter().rposition(|&b| b == b'.') {
        Some(i) if i + 1 < mid.len() && mid[i + 1..].iter().all(u8::is_ascii_digit) => &mid[..i],
        _ => mid,
    };
    Some((mid, unrotated))
}

/// The host a hook event file is named for, whoever it is (`None`: not named the hook's way).
pub fn event_file_host_name(file_name: &OsStr) -> Option<String> {
    event_file_host(file_name).map(|(_, h)| fsat::display(OsStr::from_bytes(h)))
}

/// The skip reason of hook events of another host than the scanning machine's.
pub fn other_host(host: &str) -> String {
    format!("hook events of host {host}: credited when {host} scans this cache")
}

/// What every entry read of one scan is bounded by: the root's owner (hard links to another
/// owner's files are not read: [`fsat::foreign_link`]) and the time budget.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub owner: u32,
    pub deadline: Option<std::time::Instant>,
}

impl Bounds {
    /// Whether the time budget is spent.
    pub fn spent(&self) -> bool {
        self.deadline.is_some_and(|d| std::time::Instant::now() >= d)
    }
}

/// How far a scan is: entry dirs found by the walk, and handled so far (read, unchanged or
/// skipped). The scanner threads count; a display thread reads.
#[derive(Debug, Default)]
pub struct Progress {
    pub found: AtomicUsize,
    pub done: AtomicUsize,
}

/// Everything a scan found but its entries (which go to the sink as they are read): what the
/// ingest finishes a scan with (`db::ingest::Finish`), whether the scan was local, one upload or
/// staged parts.
#[derive(Debug, Default)]
pub struct Tail {
    pub unchanged: Vec<String>,
    /// (entry dir, stamp) of unchanged entries whose stamp is new: stored for the next scan.
    pub stamps: Vec<(String, String)>,
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
    match survey(root, threads, false) {
        Ok(s) => scan_surveyed(root, s, prev, threads, sink),
        Err(tail) => *tail,
    }
}

/// A root's entry dirs, listed, and (when asked) each one's stamp taken now: what a scan does
/// that needs nothing of the previous scan, so a local re-scan does it while the database
/// reads what the previous scan left ([`Previous`]).
pub struct Survey {
    root_fd: OwnedFd,
    layout: walk::Layout,
    /// The stamp of each of `layout.entries` (`None`: it could not be had); empty when not
    /// asked for, and then taken in [`scan_surveyed`] where a stored one is compared.
    stamps: Vec<Option<fsat::Stamp>>,
    /// With the stamps: the entries that may hold a dir (not a dir of link count 2).
    may_hold_dirs: Vec<bool>,
}

impl Survey {
    /// What the cache's hazards read of its layout ([`hazards::Seen`]), from this survey's
    /// listing and link counts, so they stat no entry dir again; `None` for a survey without
    /// stamps (`scan --full`: the hazards read the layout themselves).
    pub fn seen(&self) -> Option<hazards::Seen> {
        if self.may_hold_dirs.len() != self.layout.entries.len() {
            return None;
        }
        let dirs = self.layout.entries.iter().zip(&self.may_hold_dirs);
        let may_hold_dirs = dirs.filter(|(_, may)| **may).map(|(d, _)| d.clone()).collect();
        Some(hazards::Seen { may_hold_dirs, ..hazards::Seen::of_skips(&self.layout) })
    }
}

/// List `root` and, with `stamp`, stamp every entry dir (one `fstatat` each, on `threads`
/// threads). `Err`: the root could not be opened (the scan's whole outcome).
pub fn survey(root: &Path, threads: usize, stamp: bool) -> Result<Survey, Box<Tail>> {
    let root_fd = match fsat::open_root(root) {
        Ok(fd) => fd,
        Err(e) => {
            let why = format!("cache dir {}: {}", walk::UNREADABLE, walk::reason(&e));
            return Err(Box::new(Tail {
                skipped: vec![Skip::new("", SkipKind::DirUnreadable, why)],
                ..Tail::default()
            }));
        }
    };
    let layout = walk::walk(root, root_fd.as_fd());
    let (mut stamps, mut may_hold_dirs) = (vec![], vec![]);
    if stamp {
        stamps = vec![None; layout.entries.len()];
        may_hold_dirs = vec![true; layout.entries.len()];
        let (next, rfd, dirs) = (AtomicUsize::new(0), root_fd.as_fd(), &layout.entries);
        let got: Vec<Vec<(usize, (fsat::Stamp, u64))>> = std::thread::scope(|s| {
            let each = (0..threads.max(1)).map(|_| {
                s.spawn(|| {
                    let (mut parent, mut got) = (None, vec![]);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(dir) = dirs.get(i) else { break got };
                        if let Some(st) = stamp_links_now(rfd, dir, &mut parent) {
                            got.push((i, st));
                        }
                    }
                })
            });
            each.collect::<Vec<_>>().into_iter().map(|h| h.join().unwrap_or_default()).collect()
        });
        for (i, (st, links)) in got.into_iter().flatten() {
            stamps[i] = Some(st);
            may_hold_dirs[i] = links != 2;
        }
    }
    Ok(Survey { root_fd, layout, stamps, may_hold_dirs })
}

/// [`scan`] of a root already surveyed.
pub fn scan_surveyed<F>(root: &Path, survey: Survey, prev: &Previous, threads: usize, sink: F) -> Tail
where
    F: FnMut(Entry) + Send,
{
    let Survey { root_fd, layout, stamps, .. } = survey;
    let rfd = root_fd.as_fd();
    // Whose files are read: the root's owner (unknown, fstat failed: every hard link is refused).
    let bounds = Bounds { owner: fsat::owner(rfd).unwrap_or(u32::MAX), deadline: prev.deadline };
    if let Some(p) = &prev.progress {
        p.found.fetch_add(layout.entries.len(), Ordering::Relaxed);
    }
    let tail = Mutex::new(Tail { skipped: layout.skipped, ..Tail::default() });
    let sink = Mutex::new(sink);
    let next = AtomicUsize::new(0);
    // IR whose text an entry already handed to `sink` in this scan: later copies carry only the
    // hash (both sinks store a blob once per sha256), sparing a copy of every cloned file.
    let sent = TextSent::default();
    let settled = settled_before();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                // the dir last opened to stat entry dirs in (`triton/0` of an Inductor cache)
                let mut parent: Option<(String, OwnedFd)> = None;
                // entries whose stamp is unchanged, handed over once at the end (no lock per entry)
                let mut same = Vec::new();
                loop {
                    if bounds.spent() {
                        break; // the entries not taken yet are counted below
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(dir) = layout.entries.get(i) else { break };
                    if let Some(p) = &prev.progress {
                        p.done.fetch_add(1, Ordering::Relaxed);
                    }
                    let key = dir.rsplit('/').next().unwrap_or(dir);
                    if let Some(other) = prev.elsewhere.get(key) {
                        let skip = Skip::new(dir.clone(), SkipKind::Duplicate, duplicate_key(other));
                        tail.lock().unwrap().skipped.push(skip);
                        continue;
                    }
                    if !prev.full
                        && let Some(old) = prev.stamps.get(dir)
                        && match stamps.get(i) {
                            Some(st) => *st,
                            None => stamp_now(rfd, dir, &mut parent),
                        }
                        .is_some_and(|st| st.is(old))
                    {
                        same.push(dir.clone());
                        continue;
                    }
                    match read_one(root, rfd, dir, prev, &sent, settled, &bounds) {
                        Ok((e, mut skips)) => {
                            if !skips.is_empty() {
                                tail.lock().unwrap().skipped.append(&mut skips);
                            }
                            match e {
                                // The contract with the server (`rules`): an entry that breaks
                                // a bound is a skip with its reason, on both paths alike.
                                Read::Entry(e) => match crate::rules::entry(&e) {
                                    Ok(()) => {
                                        sent.mark(&e);
                                        (sink.lock().unwrap())(*e)
                                    }
                                    Err(why) => {
                                        tail.lock().unwrap().skipped.push(crate::rules::out_of_bounds(&e.dir, why))
                                    }
                                },
                                Read::Unchanged(restamp) => {
                                    let mut t = tail.lock().unwrap();
                                    t.unchanged.push(dir.clone());
                                    if let Some(st) = restamp {
                                        t.stamps.push((dir.clone(), st));
                                    }
                                }
                            }
                        }
                        Err((kind, reason)) => tail.lock().unwrap().skipped.push(Skip::new(dir.clone(), kind, reason)),
                    }
                }
                tail.lock().unwrap().unchanged.append(&mut same);
            });
        }
    });
    let mut tail = tail.into_inner().unwrap();
    // Past the time budget: the entries no thread took are not read, and kept as they were.
    let taken = next.into_inner().min(layout.entries.len());
    for dir in &layout.entries[taken..] {
        tail.skipped.push(Skip::new(dir.clone(), SkipKind::Other, limits::TIME_BUDGET_REASON));
    }
    for rel in &layout.best_configs {
        match read_best_config(rfd, rel, bounds.owner) {
            Ok(b) => tail.best_configs.push(b),
            Err((kind, reason)) => tail.skipped.push(Skip::new(walk::shown(rel), kind, reason)),
        }
    }
    for rel in &layout.inductor_autotune {
        match read_small(rfd, rel, limits::MAX_INDUCTOR_AUTOTUNE_BYTES, "Inductor autotune cache", bounds.owner)
            .and_then(|t| inductor_autotune::parse(&walk::shown(rel), &t).map_err(|e| (SkipKind::Malformed, e)))
        {
            Ok(mut rows) => tail.inductor_autotune.append(&mut rows),
            Err((kind, reason)) => tail.skipped.push(Skip::new(walk::shown(rel), kind, reason)),
        }
    }
    let mut budget = prev.max_event_bytes.unwrap_or(u64::MAX).min(limits::MAX_EVENT_BYTES_PER_SCAN);
    for rel in &layout.event_files {
        if let Some(host) = prev.hosts.foreign_file(rel.file_name().unwrap_or_default()) {
            // another node's file (a shared cache): left, mark and all, for that node's scan
            tail.skipped.push(Skip::new(walk::shown(rel), SkipKind::Other, other_host(&host)));
            continue;
        }
        let key = root.join(rel).display().to_string();
        let (events, skipped) = (&mut tail.events, &mut tail.skipped);
        let read = events::EventReader { root: rfd, owner: bounds.owner, hosts: &prev.hosts };
        let mark = read.events(rel, &key, prev.event_marks.get(&key), &mut budget, events, skipped);
        if let Some(mark) = mark {
            tail.event_files.push(mark);
        }
    }
    crate::rules::screen_tail(&mut tail);
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

/// A dir stamp is trusted (stored, so that the next scan may skip the dir's files) only when
/// its ctime is this much older than the scan's start: a change made after the listing within
/// the same tick of a coarse file-system clock (1-2 s on some) would leave the stamp as it was.
pub const SETTLE_NS: i64 = 2_000_000_000;

/// Stamps with a ctime before this (ns since the epoch) are trusted: the scan's start less
/// [`SETTLE_NS`].
fn settled_before() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(now.as_nanos()).unwrap_or(i64::MAX) - SETTLE_NS
}

/// The stamp of the entry dir `dir` now (one `fstatat`; the dir above it is opened once per run
/// of entries under it, never through a symlink). `None` when it cannot be had.
fn stamp_now(root_fd: BorrowedFd<'_>, dir: &str, parent: &mut Option<(String, OwnedFd)>) -> Option<fsat::Stamp> {
    stamp_links_now(root_fd, dir, parent).map(|(st, _)| st)
}

/// [`stamp_now`] with the dir's link count.
fn stamp_links_now(
    root_fd: BorrowedFd<'_>,
    dir: &str,
    parent: &mut Option<(String, OwnedFd)>,
) -> Option<(fsat::Stamp, u64)> {
    let (fd, name) = fsat::parent_of(root_fd, dir, parent)?;
    fsat::dir_stamp_links(fd, name).ok().flatten()
}

/// What reading one entry dir came to.
enum Read {
    Entry(Box<Entry>),
    /// Its files are as the previous scan saw them; with the dir's stamp when it is new.
    Unchanged(Option<String>),
}

/// Read one entry dir listed and stat'ed file by file (the caller tried its stamp first); with
/// the skips of its files.
fn read_one(
    root: &Path,
    root_fd: BorrowedFd<'_>,
    dir: &str,
    prev: &Previous,
    sent: &TextSent,
    settled: i64,
    bounds: &Bounds,
) -> Result<(Read, Vec<Skip>), (SkipKind, String)> {
    let abs = root.join(dir);
    let mut last = (SkipKind::Vanished, String::new());
    // A cache being written during the scan: a file can vanish or change under us. Try twice.
    for _ in 0..2 {
        let fd = fsat::open_rel(root_fd, Path::new(dir)).map_err(|e| walk::why(&e))?;
        // Taken before the listing: a change during it moves the dir past this stamp.
        let stamp = fsat::fd_stamp(fd.as_fd()).map_err(|e| walk::why(&e))?;
        let (d, listing) = entry::list_files(fd, &abs, root, bounds.owner).map_err(|e| walk::why(&e))?;
        // Only a plain listing is stamped: symlinks are counted as skips on every scan, and
        // bad children and Triton's temp dirs are looked at again.
        let plain = listing.links.is_empty() && listing.bad.is_empty() && listing.tmp.is_empty();
        let stamp = (plain && stamp.ctime_ns < settled).then(|| stamp.text());
        let sig = entry::signature(&listing);
        if prev.sigs.get(dir) == Some(&sig) {
            let skips = entry::listing_skips(dir, &listing);
            return Ok((Read::Unchanged(stamp.filter(|s| prev.stamps.get(dir) != Some(s))), skips));
        }
        let fd = d.fd().map_err(|e| walk::why(&e.into()))?;
        match entry::read_entry(fd, &abs, dir, &listing, sig, sent, bounds) {
            Ok((mut e, skips)) => {
                e.dir_stamp = stamp;
                return Ok((Read::Entry(Box::new(e)), skips));
            }
            Err(r @ (SkipKind::Vanished | SkipKind::Changed, _)) => last = r,
            Err(r) => return Err(r),
        }
    }
    Err(last)
}

/// The text of a small file below the root, refused over `cap` bytes (or when it is a hard
/// link to a file of another owner than `owner`).
fn read_small(
    root_fd: BorrowedFd<'_>,
    rel: &Path,
    cap: u64,
    what: &str,
    owner: u32,
) -> Result<String, (SkipKind, String)> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir = fsat::open_rel(root_fd, parent).map_err(|e| walk::why(&e))?;
    let name = rel.file_name().unwrap_or_default();
    let (f, size) = fsat::open_file(dir.as_fd(), name, owner).map_err(|e| walk::why(&e))?;
    if size > cap {
        return Err((SkipKind::TooLarge, limits::over_cap(what, cap)));
    }
    let mut buf = Vec::new();
    fsat::read_capped(f, size, cap, &mut buf).map_err(|e| walk::why(&e))?;
    String::from_utf8(buf).map_err(|e| (SkipKind::Malformed, format!("{what}: not UTF-8: {e}")))
}

fn read_best_config(root_fd: BorrowedFd<'_>, rel: &Path, owner: u32) -> Result<BestConfig, (SkipKind, String)> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let name = rel.file_name().unwrap_or_default();
    let dir = fsat::open_rel(root_fd, parent).map_err(|e| walk::why(&e))?;
    let (f, size) = fsat::open_file(dir.as_fd(), name, owner).map_err(|e| walk::why(&e))?;
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
