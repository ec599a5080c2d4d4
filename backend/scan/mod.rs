//! The scanner: reads a Triton cache directory (or an Inductor dir) into [`ScanReport`] values.
//!
//! It only ever opens files for reading. Entries are read on a small pool of threads and
//! handed to a sink one by one, so a 100,000-entry cache never sits in memory at once. Entries
//! whose files (names, sizes, mtimes) are unchanged since the previous scan are not re-read.

pub mod autotune;
pub mod entry;
pub mod events;
pub mod resources;
pub mod ttir;
pub mod walk;

use crate::model::{BestConfig, Entry, EventFileMark, HookEvent, Skip};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
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
}

/// The default cache dir: `$TRITON_CACHE_DIR`, else `~/.triton/cache`.
pub fn default_root() -> PathBuf {
    if let Some(d) = std::env::var_os("TRITON_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"));
    home.join(".triton").join("cache")
}

/// Scan `root`, calling `sink` for every entry read (from several threads, one at a time).
pub fn scan<F>(root: &Path, prev: &Previous, threads: usize, sink: F) -> Tail
where
    F: FnMut(Entry) + Send,
{
    let layout = walk::walk(root);
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
                        let reason = duplicate_key(other);
                        tail.lock().unwrap().skipped.push(Skip { path: dir.clone(), reason });
                        continue;
                    }
                    match read_one(root, dir, prev, &sent) {
                        Ok(Some(e)) => {
                            sent.mark(&e);
                            (sink.lock().unwrap())(e)
                        }
                        Ok(None) => tail.lock().unwrap().unchanged.push(dir.clone()),
                        Err(reason) => tail.lock().unwrap().skipped.push(Skip { path: dir.clone(), reason }),
                    }
                }
            });
        }
    });
    let mut tail = tail.into_inner().unwrap();
    for rel in &layout.best_configs {
        match read_best_config(root, rel) {
            Ok(b) => tail.best_configs.push(b),
            Err(reason) => tail.skipped.push(Skip { path: rel.clone(), reason }),
        }
    }
    let mut budget = prev.max_event_bytes.unwrap_or(u64::MAX);
    for path in &layout.event_files {
        let key = path.display().to_string();
        if let Some(mark) =
            events::read_events(path, prev.event_marks.get(&key), &mut budget, &mut tail.events, &mut tail.skipped)
        {
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

/// Read one entry dir, or `Ok(None)` when it is unchanged since the previous scan.
fn read_one(root: &Path, dir: &str, prev: &Previous, sent: &TextSent) -> Result<Option<Entry>, String> {
    let abs = root.join(dir);
    let mut last = String::new();
    // A cache being written during the scan: a file can vanish or change under us. Try twice.
    for _ in 0..2 {
        let listing = entry::list_files(&abs).map_err(|e| walk::reason(&e))?;
        let sig = entry::signature(&listing);
        if prev.sigs.get(dir) == Some(&sig) {
            return Ok(None);
        }
        match entry::read_entry(root, dir, &listing, sig, sent) {
            Ok(e) => return Ok(Some(e)),
            Err(r) if r.contains("during scan") => last = r,
            Err(r) => return Err(r),
        }
    }
    Err(last)
}

fn read_best_config(root: &Path, rel: &str) -> Result<BestConfig, String> {
    let text = std::fs::read_to_string(root.join(rel)).map_err(|e| walk::reason(&e))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("corrupt best_config JSON: {e}"))?;
    let int = |k: &str| v.get(k).and_then(Value::as_i64);
    Ok(BestConfig {
        path: rel.to_string(),
        triton_cache_hash: v.get("triton_cache_hash").and_then(Value::as_str).map(str::to_string),
        num_warps: int("num_warps"),
        num_stages: int("num_stages"),
        config: v,
    })
}
