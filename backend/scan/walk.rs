//! Finding entries: which directories under a root are Triton cache entries, which are
//! Inductor's device dirs, temp dirs, hook event dirs or something else.
//!
//! Depth is fixed by the cache layout (`<root>/<KEY>/` or `<root>/triton/<dev>/<KEY>/`). Dirs
//! are opened from their parent's descriptor and symlinks are never followed (see [`fsat`]):
//! every link met is skipped with its reason ("symlink out of the cache", "dangling symlink",
//! "symlink loop", ...) and counted.

use super::fsat::{self, Kind};
use crate::model::{Skip, SkipKind};
use std::ffi::OsStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Name of the directory (inside a Triton cache dir) where the hook appends its events.
pub const HOOK_DIR: &str = ".cachelens";

/// What the walk found under one root.
#[derive(Debug, Default)]
pub struct Layout {
    /// Entry dirs, relative to the root.
    pub entries: Vec<String>,
    /// Hook event files, relative to the root.
    pub event_files: Vec<PathBuf>,
    /// Inductor `.best_config` files, relative to the root.
    pub best_configs: Vec<PathBuf>,
    /// Inductor's autotune cache files (`cache/<64 hex>`), relative to the root.
    pub inductor_autotune: Vec<PathBuf>,
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
        // a hard link refused by `fsat::open_file`: its reason as it is
        None if e.to_string().starts_with(fsat::HARD_LINK) => e.to_string(),
        _ => match e.kind() {
            io::ErrorKind::PermissionDenied => "permission denied".into(),
            io::ErrorKind::NotFound => "vanished during scan".into(),
            _ => format!("unreadable: {e}"),
        },
    }
}

/// The skip kind and reason of an I/O error on something that was listed.
pub fn why(e: &io::Error) -> (SkipKind, String) {
    let kind = match e.kind() {
        io::ErrorKind::NotFound => SkipKind::Vanished,
        _ if e.to_string() == CHANGED => SkipKind::Changed,
        _ => SkipKind::Unreadable,
    };
    (kind, reason(e))
}

/// The error text of a file whose size changed while it was read.
pub const CHANGED: &str = "file changed during scan";

/// `rel` (below the root) as text, names not UTF-8 escaped (see [`fsat::display`]).
pub fn shown(rel: &Path) -> String {
    let parts: Vec<String> = rel.iter().map(fsat::display).collect();
    parts.join("/")
}

fn skip(out: &mut Layout, rel: &Path, kind: SkipKind, why: impl Into<String>) {
    out.skipped.push(Skip::new(shown(rel), kind, why));
}

/// Open and list the dir `name` of `parent` (`rel` below the root; `None`: the root itself).
/// Symlinks among its children are counted as skips, never followed; an unlistable dir is a
/// skip whose entries the ingest keeps.
fn open_list(
    parent: BorrowedFd<'_>,
    name: Option<&OsStr>,
    root: &Path,
    rel: &Path,
    out: &mut Layout,
) -> Option<(rustix::fs::Dir, Vec<fsat::Child>)> {
    let listed = match name {
        Some(n) => fsat::open_dir(parent, n),
        None => rustix::io::fcntl_dupfd_cloexec(parent, 0).map_err(io::Error::from),
    }
    .and_then(fsat::list);
    let (d, children) = match listed {
        Ok(x) => x,
        Err(e) => {
            let what = if rel.as_os_str().is_empty() { "cache dir" } else { "dir" };
            skip(out, rel, SkipKind::DirUnreadable, format!("{what} {UNREADABLE}: {}", reason(&e)));
            return None;
        }
    };
    let mut kept = Vec::with_capacity(children.len());
    for c in children {
        if c.kind == Kind::Symlink {
            let (why, _) = fsat::symlink_reason(root, &root.join(rel).join(&c.name));
            skip(out, &rel.join(&c.name), SkipKind::Symlink, why);
        } else {
            kept.push(c);
        }
    }
    Some((d, kept))
}

/// In a skip reason: a dir whose listing failed (its entries are kept, not marked removed).
pub const UNREADABLE: &str = "unreadable (its entries kept as they were)";

/// Walk `root` (canonical; `root_fd` is it opened): a Triton cache dir, an Inductor dir
/// holding `triton/<device>/`, or that `triton/` dir itself.
pub fn walk(root: &Path, root_fd: BorrowedFd<'_>) -> Layout {
    let mut out = Layout::default();
    if let Some((d, children)) = open_list(root_fd, None, root, Path::new(""), &mut out) {
        walk_cache(root, &d, children, "", &mut out);
    }
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
            out.skipped.push(Skip::new(rel, SkipKind::Duplicate, super::duplicate_key(&format!("{at}/"))));
        } else {
            first.insert(key, rel.clone());
            kept.push(rel);
        }
    }
    out.entries = kept;
}

fn walk_cache(root: &Path, dir: &rustix::fs::Dir, children: Vec<fsat::Child>, prefix: &str, out: &mut Layout) {
    let Ok(fd) = dir.fd() else { return };
    // Given `<inductor>/triton` itself: its children are the device caches.
    let devices = prefix.is_empty() && root.file_name().is_some_and(|n| n == "triton");
    let best = |n: &OsStr| n.as_bytes().ends_with(b".best_config");
    for fsat::Child { name, kind } in children {
        let rel = Path::new(prefix).join(&name);
        if kind != Kind::Dir {
            if kind == Kind::File && best(&name) {
                out.best_configs.push(rel);
            }
            continue;
        }
        // Keys and the dir names that matter are ASCII; other names are only listed.
        let text = name.to_str().unwrap_or("");
        if text.starts_with("tmp.") {
            skip(out, &rel, SkipKind::WriteInProgress, "temp dir (write in progress)");
        } else if text == HOOK_DIR {
            if let Some((_, files)) = open_list(fd, Some(&name), root, &rel, out) {
                for f in files {
                    if f.kind == Kind::File && f.name.as_bytes().windows(6).any(|w| w == b".jsonl") {
                        out.event_files.push(rel.join(&f.name));
                    }
                }
            }
        } else if is_key(text) {
            out.entries.push(format!("{prefix}{text}"));
        } else if (devices && !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
            || (prefix.is_empty() && text == "triton")
        {
            // Inductor: <dir>/triton/<device>/<KEY>/
            let Some((d, kids)) = open_list(fd, Some(&name), root, &rel, out) else { continue };
            if text == "triton" {
                let Ok(dfd) = d.fd() else { continue };
                // entry paths are text: a device dir whose name is not UTF-8 is not Inductor's
                for dev in kids.into_iter().filter(|k| k.kind == Kind::Dir && k.name.to_str().is_some()) {
                    let drel = rel.join(&dev.name);
                    if let Some((dd, devkids)) = open_list(dfd, Some(&dev.name), root, &drel, out) {
                        walk_cache(root, &dd, devkids, &format!("{}/", shown(&drel)), out);
                    }
                }
            } else {
                walk_cache(root, &d, kids, &format!("{prefix}{text}/"), out);
            }
        } else if prefix.is_empty() {
            // Inductor's other dirs (`<2 chars>/`, `fxgraph/`, ...): only `.best_config` matters.
            if let Some((_, files)) = open_list(fd, Some(&name), root, &rel, out) {
                for f in files.into_iter().filter(|f| f.kind == Kind::File) {
                    if best(&f.name) {
                        out.best_configs.push(rel.join(&f.name));
                    } else if text == "cache" && f.name.to_str().is_some_and(|n| n.len() == 64 && is_key(n)) {
                        // Inductor's autotune cache: `cache/<sha256 hex>`
                        out.inductor_autotune.push(rel.join(&f.name));
                    }
                }
            }
        }
    }
}
