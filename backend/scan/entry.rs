//! Reading one entry directory: its files, their sha256, the metadata, the group file,
//! autotune results, resource usage and TTIR facts.
//!
//! Parsing is lenient: whatever Triton version wrote the entry, every field that can be read is
//! kept and the raw metadata JSON is stored as-is. An entry that cannot be fully read is kept and
//! flagged partial with the reason, never dropped silently.

pub use super::autotune::{parse_autotune, parse_py_json};
use super::fsat::{self, Kind};
use super::{limits, resources, ttir};
use crate::model::{Artifact, Entry, EntryKind, GroupInfo, Skip, SkipKind};
use rustix::fs::Dir;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// IR file types whose text is stored (content-addressed) for the IR viewer and the explainer.
pub const TEXT_EXTS: &[&str] = &["source", "ttir", "ttgir", "llir", "ptx", "amdgcn", "json", "grp", "autotune.json"];
/// Text artifacts larger than this are hashed but not stored (see [`super::limits`]).
pub const MAX_TEXT_BYTES: usize = limits::MAX_TEXT_BYTES as usize;

/// One file of an entry dir, as listed before reading.
#[derive(Debug, Clone)]
pub struct FileStat {
    /// The name as shown and stored: UTF-8 as it is, other bytes escaped ([`fsat::display`]).
    pub name: String,
    /// The name as on disk (what is opened).
    pub raw: OsString,
    pub size: u64,
    pub mtime_ms: i64,
}

/// What an entry dir holds, as listed before reading.
#[derive(Debug, Default)]
pub struct Listing {
    /// Plain files, by name.
    pub files: Vec<FileStat>,
    /// Children that could not be stat'ed, and symlinks to anything but a dir: `name: reason`.
    pub bad: Vec<String>,
    /// Every symlink in the dir, `(name, reason)`: never followed, counted as skips.
    pub links: Vec<(String, String)>,
    /// Hard links to files of another owner than the cache dir's, `(name, reason)`: never read
    /// ([`fsat::foreign_link`]), counted as skips (and in `bad`: the entry is partial).
    pub foreign: Vec<(String, String)>,
    /// Triton's in-flight temp dirs (`tmp.pid_<pid>_<uuid>/`): `FileCacheManager.put` writes
    /// each file there, then renames it into the entry dir. Never read.
    pub tmp: Vec<String>,
}

/// List the plain files of an entry dir (the open `dir`, at `abs`) with size and mtime.
/// Files with more than one link whose owner is not `owner` (the cache dir's) are listed in
/// `foreign` and `bad`, not in `files`: they are never opened.
///
/// A symlink is never followed: it is listed in `links` with its reason (and, unless it points
/// to a dir, in `bad`, which makes the entry partial: Triton would read through it). A child
/// that cannot be stat'ed (no permission) does not make the whole entry unreadable: it is
/// returned in `bad` with its reason. A plain file that vanished between the listing and the
/// stat is an error (the entry is being written or deleted: the caller retries).
pub fn list_files(dir: OwnedFd, abs: &Path, root: &Path, owner: u32) -> io::Result<(Dir, Listing)> {
    let (d, children) = fsat::list(dir)?;
    let fd = d.fd()?;
    let mut l = Listing::default();
    for c in children {
        let name = fsat::display(&c.name);
        match c.kind {
            Kind::Symlink => {
                let (why, to_dir) = fsat::symlink_reason(root, &abs.join(&c.name));
                if !to_dir {
                    l.bad.push(format!("{name}: {why}"));
                }
                l.links.push((name, why));
            }
            Kind::Dir if name.starts_with("tmp.") => l.tmp.push(name),
            Kind::File => match fsat::stat_links(fd, &c.name) {
                Ok((_, _, Kind::File, (nlink, uid))) if fsat::foreign_link(nlink, uid, owner).is_some() => {
                    let why = fsat::foreign_link(nlink, uid, owner).unwrap_or_default();
                    l.bad.push(format!("{name}: {why}"));
                    l.foreign.push((name, why));
                }
                Ok((size, mtime_ms, Kind::File, _)) => l.files.push(FileStat { name, raw: c.name, size, mtime_ms }),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
                Err(e) => l.bad.push(format!("{name}: {}", super::walk::reason(&e))),
            },
            _ => {}
        }
    }
    l.bad.sort();
    Ok((d, l))
}

/// The change signature of an entry: its file names, sizes and mtimes (and its temp dirs: an
/// entry read mid-write is read again once the write is over).
pub fn signature(l: &Listing) -> String {
    let mut h = Sha256::new();
    for b in &l.bad {
        h.update(b.as_bytes());
        h.update([1]);
    }
    for t in &l.tmp {
        h.update(t.as_bytes());
        h.update([2]);
    }
    for f in &l.files {
        h.update(f.raw.as_bytes());
        h.update([0]);
        h.update(f.size.to_le_bytes());
        h.update(f.mtime_ms.to_le_bytes());
    }
    hex::encode(&h.finalize()[..12])
}

/// How much of a file of this artifact type is kept in memory (see [`super::limits`]).
fn cap(ext: &str) -> u64 {
    match ext {
        "json" | "grp" => limits::MAX_META_BYTES,
        "cubin" | "hsaco" => limits::MAX_CUBIN_BYTES,
        x if TEXT_EXTS.contains(&x) => limits::MAX_TEXT_BYTES,
        _ => 0,
    }
}

/// Open and hash one listed file, keeping its bytes in `buf` when under its cap.
fn read_file(dir: BorrowedFd<'_>, f: &FileStat, cap: u64, owner: u32, buf: &mut Vec<u8>) -> io::Result<fsat::Hashed> {
    let (file, size) = fsat::open_file(dir, &f.raw, owner)?;
    if size != f.size {
        return Err(io::Error::other(super::walk::CHANGED));
    }
    fsat::read_capped(file, size, cap, buf)
}

/// What `cachelens prune --apply` writes over a group file of an entry it takes out (renamed
/// over it, so a reader between Triton's `exists` and `open` still opens a file): no
/// `child_paths`, so Triton's `get_group` answers None, a miss, and a compile writes a real
/// group over it.
pub const PRUNED_GROUP: &[u8] = b"{\"child_paths\": null, \"pruned_by\": \"cachelens prune\"}\n";

/// Whether the dir holds nothing but group files prune stubbed ([`PRUNED_GROUP`]): an entry
/// taken out, as empty as a dir a lookup left. A dir of more than 4 files is an entry (Triton
/// writes one group file per entry): nothing is opened.
pub fn only_pruned_groups(fd: BorrowedFd<'_>, l: &Listing, owner: u32) -> bool {
    if l.files.len() > 4 {
        return false;
    }
    let stub = |f: &FileStat| {
        f.size == PRUNED_GROUP.len() as u64
            && fsat::open_file(fd, &f.raw, owner).is_ok_and(|(file, size)| {
                let mut buf = vec![];
                fsat::read_capped(file, size, 4096, &mut buf).is_ok() && buf == PRUNED_GROUP
            })
    };
    let quiet = l.bad.is_empty() && l.links.is_empty() && l.foreign.is_empty() && l.tmp.is_empty();
    quiet && !l.files.is_empty() && l.files.iter().all(|f| f.name.starts_with("__grp__") && stub(f))
}

/// Read and parse one entry dir (open as `fd`, at `abs`; `dir` is relative to the root).
/// `Err` means the entry was not read at all (the reason goes to the scan's skip list): also
/// when the scan's time budget runs out before its last file ([`super::Bounds`]). The skips
/// returned beside the entry are its files' (symlinks, hard links of another owner, files over
/// their cap or hashed only in part).
pub fn read_entry(
    fd: BorrowedFd<'_>,
    abs: &Path,
    dir: &str,
    l: &Listing,
    sig: String,
    sent: &super::TextSent,
    bounds: &super::Bounds,
) -> Result<(Entry, Vec<Skip>), (SkipKind, String)> {
    let key = dir.rsplit('/').next().unwrap_or(dir).to_string();
    let (files, bad) = (&l.files[..], &l.bad[..]);
    let mut skips = listing_skips(dir, l);
    if files.is_empty() && bad.is_empty() {
        return Err(if l.tmp.is_empty() {
            (SkipKind::EmptyDir, "empty entry dir (Triton creates one on every lookup)".into())
        } else {
            (SkipKind::WriteInProgress, WRITING.into())
        });
    }
    if only_pruned_groups(fd, l, u32::MAX) {
        return Err((SkipKind::EmptyDir, "entry taken out by cachelens prune (its group file a stub)".into()));
    }
    let mut e = Entry {
        key,
        dir: dir.to_string(),
        kind: EntryKind::Other,
        kernel: None,
        backend: None,
        arch: None,
        warp_size: None,
        num_warps: None,
        num_stages: None,
        num_ctas: None,
        triton_version: None,
        meta_hash: None,
        signature: None,
        shapes: None,
        created_at: None,
        bytes: files.iter().map(|f| f.size as i64).sum(),
        registers: None,
        spills: None,
        shared_bytes: None,
        resources: None,
        metadata: None,
        group: None,
        partial: None,
        artifacts: Vec::with_capacity(files.len()),
        autotune: None,
        sig,
        dir_stamp: None,
    };
    let mut problems: Vec<String> = bad.iter().map(|b| format!("unreadable {b}")).collect();
    if !l.tmp.is_empty() {
        // Mid-write now (re-read when the temp dir goes), or a write that crashed and left it.
        problems.push(format!("{WRITING}: {}", l.tmp.join(", ")));
    }
    let mut buf = Vec::new();
    // Indices into `e.artifacts` (whose `text` holds the file's text): no copies of file contents.
    let (mut meta_i, mut group_i, mut autotune_i, mut amdgcn_i, mut ir_i) = (None, None, None, None, None);
    let mut cubin: Option<Vec<u8>> = None;
    let mut hsaco: Option<Vec<u8>> = None;
    for f in files {
        if bounds.spent() {
            return Err((SkipKind::Other, limits::TIME_BUDGET_REASON.into()));
        }
        let ext = crate::model::artifact_ext(&f.name);
        let got = match read_file(fd, f, cap(ext), bounds.owner, &mut buf) {
            Ok(h) => h,
            Err(err) => match super::walk::why(&err) {
                (k @ (SkipKind::Vanished | SkipKind::Changed), why) => return Err((k, why)),
                (_, why) => {
                    problems.push(format!("unreadable {}: {why}", f.name));
                    continue;
                }
            },
        };
        let sha = got.sha256;
        if got.prefix {
            let why = limits::hashed_prefix(f.size);
            skips.push(Skip::new(format!("{dir}/{}", f.name), SkipKind::TooLarge, why.clone()));
            problems.push(format!("{}: {why}", f.name));
        }
        if !got.kept && cap(ext) > 0 {
            let what = match ext {
                "json" => "metadata file",
                "grp" => "group file",
                "autotune.json" => "autotune file",
                "cubin" => "cubin",
                "hsaco" => "hsaco",
                _ => "IR text",
            };
            let why = limits::over_cap(what, cap(ext));
            skips.push(Skip::new(format!("{dir}/{}", f.name), SkipKind::TooLarge, why.clone()));
            // IR over the cap is only not stored (the entry page says why); the others were to
            // be parsed: the entry lacks what they hold.
            if matches!(ext, "json" | "grp" | "autotune.json" | "cubin") {
                problems.push(format!("{}: {why}", f.name));
            }
        }
        // The scanner parses these; the other IR is text only to be stored, once per sha256.
        let parsed = matches!(ext, "json" | "grp" | "autotune.json" | "amdgcn" | "source" | "ttir");
        let text = if got.kept && TEXT_EXTS.contains(&ext) && (parsed || !sent.contains(&sha)) {
            std::str::from_utf8(&buf).ok().map(str::to_string)
        } else {
            None
        };
        let i = e.artifacts.len();
        let has_text = text.is_some();
        match ext {
            "grp" if has_text => group_i = Some(i),
            "autotune.json" if has_text => autotune_i = Some(i),
            "json" => {
                if has_text {
                    meta_i = Some(i);
                }
                e.created_at = Some(f.mtime_ms);
            }
            "cubin" if got.kept => cubin = Some(std::mem::take(&mut buf)),
            // Read for its machine-code digest only (`resources::code_digest`).
            "hsaco" if got.kept => hsaco = Some(std::mem::take(&mut buf)),
            "amdgcn" if has_text => amdgcn_i = Some(i),
            "source" if has_text => ir_i = Some(i),
            "ttir" if has_text && ir_i.is_none() => ir_i = Some(i),
            _ => {}
        }
        e.artifacts.push(Artifact { name: f.name.clone(), bytes: f.size as i64, sha256: sha, text });
    }
    if let Some(i) = meta_i {
        let parsed = parse_py_json(e.artifacts[i].text.as_deref().unwrap_or_default());
        let name = e.artifacts[i].name.clone();
        match parsed {
            Ok(v) => apply_metadata(&mut e, v, &name),
            Err(err) => problems.push(format!("corrupt metadata JSON: {err}")),
        }
    }
    if let Some(text) = group_i.and_then(|i| e.artifacts[i].text.as_deref()) {
        match parse_group(text, abs) {
            Ok(mut g) => {
                g.missing = g.children.keys().filter(|c| !files.iter().any(|f| &f.name == *c)).cloned().collect();
                if !g.missing.is_empty() {
                    problems.push(format!("missing children: {}", g.missing.join(", ")));
                }
                e.group = Some(g);
            }
            Err(err) => problems.push(format!("corrupt group file: {err}")),
        }
    }
    if let Some(i) = autotune_i {
        let name = e.artifacts[i].name.trim_end_matches(".autotune.json").to_string();
        let parsed = parse_autotune(e.artifacts[i].text.as_deref().unwrap_or_default());
        e.kernel.get_or_insert(name);
        match parsed {
            Ok(a) => e.autotune = Some(a),
            Err(err) => problems.push(format!("corrupt autotune JSON: {err}")),
        }
    }
    // The machine code's digest (debug info left out): `identical_code` in the explainer. A
    // cubin is parsed once for its resources and the digest.
    let mut code = None;
    if let Some(bytes) = &cubin {
        let (r, digest) = resources::read_cubin(bytes, e.kernel.as_deref());
        code = digest;
        match r {
            Ok(r) => apply_resources(&mut e, r),
            Err(err) => problems.push(format!("unreadable cubin: {err}")),
        }
    } else if let Some(text) = amdgcn_i.and_then(|i| e.artifacts[i].text.as_deref()) {
        let r = resources::from_amdgcn(text, e.kernel.as_deref());
        // The parser reads what it recognises and never fails: no kernel at all is a file
        // that is not AMD GPU assembly, flagged rather than shown as "no resources".
        if r.extra.get("kernels").and_then(Value::as_i64).unwrap_or(0) == 0 {
            problems.push("unreadable amdgcn: no kernel in the assembly (not AMD GPU assembly)".into());
        }
        apply_resources(&mut e, r);
    }
    if let (None, Some(b)) = (&cubin, &hsaco) {
        code = resources::code_digest("hsaco", b).ok();
    }
    if let Some(d) = code {
        let r = e.resources.get_or_insert_with(|| Value::Object(Default::default()));
        if let Some(o) = r.as_object_mut() {
            o.insert("code_sha256".into(), d.into());
        }
    }
    if let Some(ir) = ir_i.and_then(|i| e.artifacts[i].text.as_deref()) {
        let facts = ttir::facts(ir, e.kernel.as_deref());
        e.signature = facts.signature;
        e.shapes = facts.shapes;
    }
    e.kind = classify(&e, files, meta_i.is_some(), autotune_i.is_some());
    problems.extend(incomplete(files, meta_i.is_some(), group_i.is_some(), e.kind));
    if !problems.is_empty() {
        e.kind = EntryKind::Partial;
        e.partial = Some(problems.join("; "));
    }
    Ok((e, skips))
}

/// The skips of an entry's listing, counted on every scan (read or unchanged): its symlinks and
/// its hard links to files of another owner.
pub fn listing_skips(dir: &str, l: &Listing) -> Vec<Skip> {
    let links = l.links.iter().map(|(n, why)| Skip::new(format!("{dir}/{n}"), SkipKind::Symlink, why.clone()));
    let foreign = l.foreign.iter().map(|(n, why)| Skip::new(format!("{dir}/{n}"), SkipKind::Unreadable, why.clone()));
    links.chain(foreign).collect()
}

impl Entry {
    /// The sha256 of the kernel binary (`.cubin` or `.hsaco`), if the entry has one.
    pub fn binary_sha256(&self) -> Option<&str> {
        self.artifacts.iter().find(|a| matches!(a.ext(), "cubin" | "hsaco")).map(|a| a.sha256.as_str())
    }
}

/// Skip reason / partial reason of an entry with Triton's temp dir inside.
pub const WRITING: &str = "write in progress (temp dir inside)";

/// What a kernel entry lacks. Triton writes the IR and binary files, then `<name>.json`, then
/// the group file last, and looks an entry up through its group file only: without it the
/// entry is a miss (recompiled), whatever else is there.
fn incomplete(files: &[FileStat], has_meta: bool, has_group: bool, kind: EntryKind) -> Vec<String> {
    const KERNEL_FILES: &[&str] = &["source", "ttir", "ttgir", "llir", "ptx", "cubin", "amdgcn", "hsaco", "grp"];
    let has = |x: &str| files.iter().any(|f| crate::model::artifact_ext(&f.name) == x);
    let mut out = vec![];
    if !has_meta && kind == EntryKind::Other && KERNEL_FILES.iter().any(|x| has(x)) {
        out.push("no metadata file".to_string());
    }
    if has_meta && !has("cubin") && !has("hsaco") {
        out.push("no binary (.cubin/.hsaco)".to_string());
    }
    if has_meta && !has_group && !has("grp") {
        out.push("no group file: Triton will recompile".to_string());
    }
    out
}

fn classify(e: &Entry, files: &[FileStat], has_meta: bool, has_autotune: bool) -> EntryKind {
    let exts: Vec<&str> = files.iter().map(|f| crate::model::artifact_ext(&f.name)).collect();
    let has = |x: &str| exts.contains(&x);
    if has_autotune {
        EntryKind::Autotune
    } else if has_meta && (has("cubin") || has("hsaco")) {
        // `.source` does not count: Triton 3.4+ stores it even with TRITON_STORE_BINARY_ONLY=1
        if ["ttir", "ttgir", "llir", "ptx", "amdgcn"].iter().any(|x| has(x)) {
            EntryKind::Kernel
        } else {
            EntryKind::BinaryOnly
        }
    } else if !exts.is_empty() && exts.iter().all(|x| *x == "so") {
        EntryKind::Launcher
    } else if has_meta && e.metadata.is_some() {
        // metadata but no binary: interrupted mid-write
        EntryKind::Partial
    } else {
        EntryKind::Other
    }
}

fn as_i64(v: Option<&Value>) -> Option<i64> {
    v.and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

/// Copy the fields the dashboard filters on out of the metadata JSON (any Triton 3.x version).
fn apply_metadata(e: &mut Entry, v: Value, file_name: &str) {
    let target = v.get("target");
    let backend = target.and_then(|t| t.get("backend")).or_else(|| v.get("backend_name")).and_then(Value::as_str);
    e.backend = backend.map(str::to_string);
    let arch = target.and_then(|t| t.get("arch")).or_else(|| v.get("arch"));
    e.arch = arch.map(|a| match a {
        Value::Number(n) => format!("sm_{n}"),
        Value::String(s) if s.starts_with("sm") && !s.contains('_') => format!("sm_{}", &s[2..]),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    e.warp_size = as_i64(target.and_then(|t| t.get("warp_size")).or_else(|| v.get("warp_size")));
    e.num_warps = as_i64(v.get("num_warps"));
    e.num_stages = as_i64(v.get("num_stages"));
    e.num_ctas = as_i64(v.get("num_ctas"));
    e.triton_version = v.get("triton_version").and_then(Value::as_str).map(str::to_string);
    e.meta_hash = v.get("hash").and_then(Value::as_str).map(str::to_string);
    e.shared_bytes = as_i64(v.get("shared"));
    let name = v.get("name").and_then(Value::as_str).map(str::to_string);
    e.kernel = name.or_else(|| Some(file_name.trim_end_matches(".json").to_string()));
    e.metadata = Some(v);
}

fn apply_resources(e: &mut Entry, r: resources::Resources) {
    e.registers = r.registers;
    e.spills = r.spills;
    // Triton allocates shared memory dynamically: the metadata's `shared` is the real figure;
    // the ELF's static size is kept beside the other resource facts.
    let mut extra = r.extra;
    if let Some(s) = r.shared_bytes {
        extra.insert("static_shared_bytes".into(), s.into());
    }
    if e.shared_bytes.is_none() {
        e.shared_bytes = r.shared_bytes;
    }
    if !extra.is_empty() {
        e.resources = Some(Value::Object(extra));
    }
}

/// Parse a group file; `entry_dir` is where the entry sits now (to detect relocated caches).
pub fn parse_group(text: &str, entry_dir: &Path) -> Result<GroupInfo, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut children = BTreeMap::new();
    match v.get("child_paths") {
        Some(Value::Object(m)) => {
            for (k, p) in m {
                children.insert(k.clone(), p.as_str().map(str::to_string));
            }
        }
        Some(Value::Array(a)) => {
            for k in a.iter().filter_map(Value::as_str) {
                children.insert(k.to_string(), None);
            }
        }
        _ => return Err("no child_paths".into()),
    }
    let here = entry_dir.canonicalize().unwrap_or_else(|_| entry_dir.to_path_buf());
    let parents: Vec<&Path> = children.values().flatten().filter_map(|p| Path::new(p).parent()).collect();
    let written_at = parents.first().filter(|p| parents.iter().all(|q| q == *p)).map(|p| p.display().to_string());
    // A recorded dir is "here" when it is this entry dir under another name (the cache written
    // through a symlinked path, e.g. ~/.triton -> /data/triton, and scanned through the real
    // one). Only a dir with the entry's own name is resolved, and only its path: no file at a
    // recorded path is ever opened.
    let same_dir =
        |p: &Path| *p == here || (p.file_name() == here.file_name() && p.canonicalize().is_ok_and(|c| c == here));
    let relocated = !parents.iter().all(|p| same_dir(p));
    Ok(GroupInfo { children, relocated, written_at, missing: vec![] })
}
