//! Finding entries: which directories under a root are Triton cache entries, which are
//! Inductor's device dirs, temp dirs, hook event dirs or something else.
//!
//! Depth is fixed by the cache layout (`<root>/<KEY>/` or `<root>/triton/<dev>/<KEY>/`), so a
//! symlink loop can never make the walk recurse; a link that cannot be resolved is skipped with
//! its reason.

use crate::model::Skip;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Name of the directory (inside a Triton cache dir) where the hook appends its events.
pub const HOOK_DIR: &str = ".cachelens";

/// What the walk found under one root.
#[derive(Debug, Default)]
pub struct Layout {
    /// Entry dirs, relative to the root.
    pub entries: Vec<String>,
    /// Hook event files (absolute paths).
    pub event_files: Vec<PathBuf>,
    /// Inductor `.best_config` files, relative to the root.
    pub best_configs: Vec<String>,
    pub skipped: Vec<Skip>,
}

/// True for names Triton uses as cache keys: base32 without padding (52 chars, 3.3+),
/// urlsafe base64 (43 chars, 3.2) or hex (64 chars, 3.1 and earlier).
pub fn is_key(name: &str) -> bool {
    let ok = |f: fn(u8) -> bool| name.bytes().all(f);
    match name.len() {
        52 => ok(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b)),
        43 => ok(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        64 => ok(|b| b.is_ascii_hexdigit()),
        _ => false,
    }
}

/// Describe an I/O error as a short, stable reason (the summary groups skips by reason).
pub fn reason(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(40) => "symlink loop".into(),
        _ => match e.kind() {
            io::ErrorKind::PermissionDenied => "permission denied".into(),
            io::ErrorKind::NotFound => "vanished during scan".into(),
            _ => format!("unreadable: {e}"),
        },
    }
}

fn skip(out: &mut Layout, path: &Path, root: &Path, why: impl Into<String>) {
    let rel = path.strip_prefix(root).unwrap_or(path);
    out.skipped.push(Skip { path: rel.display().to_string(), reason: why.into() });
}

/// Directory listing as (name, path, is_dir), following symlinks; unreadable children are skipped.
fn list(dir: &Path, root: &Path, out: &mut Layout) -> Vec<(String, PathBuf, bool)> {
    // A dir that cannot be listed is still there: the ingest keeps every entry below it.
    let unreadable = |e: &io::Error| {
        let what = if dir == root { "cache dir" } else { "dir" };
        format!("{what} {UNREADABLE}: {}", reason(e))
    };
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            skip(out, dir, root, unreadable(&e));
            return vec![];
        }
    };
    let mut items = vec![];
    for de in rd {
        let de = match de {
            Ok(de) => de,
            Err(e) => {
                skip(out, dir, root, unreadable(&e));
                continue;
            }
        };
        let path = de.path();
        let name = de.file_name().to_string_lossy().into_owned();
        // The dir entry's type needs no stat (100,000 entries: 100,000 stats saved on every
        // scan); a symlink is followed: a loop or a dangling link surfaces here as an error.
        match de.file_type() {
            Ok(t) if t.is_dir() => {
                items.push((name, path, true));
                continue;
            }
            Ok(t) if t.is_file() => {
                items.push((name, path, false));
                continue;
            }
            _ => {}
        }
        match fs::metadata(&path) {
            Ok(md) => items.push((name, path, md.is_dir())),
            Err(e) if e.kind() == io::ErrorKind::NotFound && fs::symlink_metadata(&path).is_ok() => {
                skip(out, &path, root, "dangling symlink")
            }
            Err(e) => skip(out, &path, root, reason(&e)),
        }
    }
    items.sort();
    items
}

/// In a skip reason: a dir whose listing failed (its entries are kept, not marked removed).
pub const UNREADABLE: &str = "unreadable (its entries kept as they were)";

/// Walk `root` (a Triton cache dir, an Inductor dir holding `triton/<device>/`, or that
/// `triton/` dir itself).
pub fn walk(root: &Path) -> Layout {
    let mut out = Layout::default();
    walk_cache(root, root, "", &mut out);
    dedupe(&mut out);
    out
}

/// One key in several dirs of one root (Inductor keeps a Triton cache per device, so a
/// multi-GPU node holds the same key in `triton/0/` and `triton/1/`): the database holds one
/// row per (machine, key), so the first copy in path order is read and the others are counted
/// as skipped. Always the same copy: a re-scan reads nothing again and moves no row.
fn dedupe(out: &mut Layout) {
    let mut first: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut kept = Vec::with_capacity(out.entries.len());
    for rel in std::mem::take(&mut out.entries) {
        let key = rel.rsplit('/').next().unwrap_or(&rel).to_string();
        if let Some(at) = first.get(&key) {
            let at = at.rsplit_once('/').map_or(".", |(p, _)| p);
            out.skipped.push(Skip { reason: super::duplicate_key(&format!("{at}/")), path: rel });
        } else {
            first.insert(key, rel.clone());
            kept.push(rel);
        }
    }
    out.entries = kept;
}

fn walk_cache(root: &Path, dir: &Path, prefix: &str, out: &mut Layout) {
    // Given `<inductor>/triton` itself: its children are the device caches.
    let devices = prefix.is_empty() && root.file_name().is_some_and(|n| n == "triton");
    for (name, path, is_dir) in list(dir, root, out) {
        let rel = format!("{prefix}{name}");
        if !is_dir {
            if name.ends_with(".best_config") {
                out.best_configs.push(rel);
            }
            continue;
        }
        if name.starts_with("tmp.pid_") || name.starts_with("tmp.") {
            skip(out, &path, root, "temp dir (write in progress)");
        } else if name == HOOK_DIR {
            for (n, p, d) in list(&path, root, out) {
                if !d && n.contains(".jsonl") {
                    out.event_files.push(p);
                }
            }
        } else if is_key(&name) {
            out.entries.push(rel);
        } else if devices && name.bytes().all(|b| b.is_ascii_digit()) {
            walk_cache(root, &path, &format!("{name}/"), out);
        } else if prefix.is_empty() && name == "triton" {
            // Inductor: <dir>/triton/<device>/<KEY>/
            for (dev, dpath, d) in list(&path, root, out) {
                if d {
                    walk_cache(root, &dpath, &format!("triton/{dev}/"), out);
                }
            }
        } else if prefix.is_empty() && fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            // A symlinked dir that is not an entry (e.g. one pointing to its parent): not followed.
        } else if prefix.is_empty() {
            // Inductor's other dirs (`<2 chars>/`, `fxgraph/`, ...): only `.best_config` matters.
            for (n, _, d) in list(&path, root, out) {
                if !d && n.ends_with(".best_config") {
                    out.best_configs.push(format!("{rel}/{n}"));
                }
            }
        }
    }
}
