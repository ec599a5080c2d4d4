//! Removing a plan's items safely for Triton's concurrent readers and writers.
//!
//! Triton finds an entry by its group file and then opens each child by path. So a whole entry
//! goes in three steps: (1) a stub is renamed over each group file ([`PRUNED_GROUP`]), so a new
//! lookup misses (and compiles into the dir, as on any miss) while no group file ever vanishes
//! under a reader; (2) after `grace`, for readers that had already read the group to finish
//! loading, the dir is listed again and, if nothing but step 1 changed it, its other files are
//! moved out of the key namespace into a `tmp.cachelens_prune_<pid>_<n>` sibling (Triton reads
//! no `tmp.` name as a key); (3) that dir is removed. The entry dir and its stubs stay (see
//! [`take_out`]). An IR item rewrites
//! the group file without the IR files (written aside, renamed over it), then removes them after
//! `grace`. Every item is checked against the signature it had in the plan first; one that
//! changed is skipped and reported. Nothing is opened outside the root and no symlink is
//! followed: every dir opens from its parent's descriptor with `O_NOFOLLOW`, every removal is an
//! `unlinkat` in such a dir.

use super::{Class, Item, RootPlan};
use crate::scan::entry::PRUNED_GROUP;
use crate::scan::fsat;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use serde::Serialize;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// What applying one root's plan did.
#[derive(Debug, Default, Serialize)]
pub struct Applied {
    pub root: String,
    pub removed: i64,
    pub bytes: i64,
    pub inodes: i64,
    /// Items left as they were: `(dir, why)`.
    pub skipped: Vec<(String, String)>,
}

/// Prefix of the names prune gives what it takes out of the key namespace.
pub const PREFIX: &str = "tmp.cachelens_prune_";

static SEQ: AtomicU64 = AtomicU64::new(0);

fn aside() -> String {
    format!("{PREFIX}{}_{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed))
}

/// Whether the root may be pruned by this user: it must be owned by the effective uid unless
/// `other_owner`.
pub fn check_owner(root: &Path, other_owner: bool) -> anyhow::Result<()> {
    let fd = fsat::open_root(root)?;
    let owner = fsat::owner(fd.as_fd())?;
    let me = rustix::process::geteuid().as_raw();
    anyhow::ensure!(
        other_owner || owner == me,
        "{} is owned by uid {owner}, not by you (uid {me}): its jobs are someone else's; \
         --allow-other-owner prunes it anyway",
        root.display()
    );
    Ok(())
}

/// An entry whose group files were stubbed, waiting out the grace period.
struct Parked {
    item: usize,
    /// The entry dir relative to the root.
    dir: String,
    parent: OwnedFd,
    name: String,
    /// The group files stubbed ([`PRUNED_GROUP`]): they stay.
    groups: Vec<std::ffi::OsString>,
    /// The entry's signature with its groups stubbed.
    sig: String,
}

/// Apply `plan` to its root: every item whose signature still holds is removed.
pub fn apply(plan: &RootPlan, grace: std::time::Duration) -> anyhow::Result<Applied> {
    let root = Path::new(&plan.root);
    let root_fd = fsat::open_root(root)?;
    let rfd = root_fd.as_fd();
    let owner = fsat::owner(rfd)?;
    let mut out = Applied { root: plan.root.clone(), ..Applied::default() };
    let mut parked = vec![];
    let mut stripped = vec![];
    for (i, it) in plan.items.iter().enumerate() {
        let r = match it.class {
            Class::OrphanTemp => continue,
            Class::Ir => strip_group(root, rfd, owner, it).map(|()| stripped.push(i)),
            _ => park(root, rfd, owner, it).map(|p| parked.push(Parked { item: i, ..p })),
        };
        if let Err(why) = r {
            out.skipped.push((it.dir.clone(), why));
        }
    }
    if !parked.is_empty() || !stripped.is_empty() {
        std::thread::sleep(grace);
    }
    for p in parked {
        let it = &plan.items[p.item];
        match take_out(root, rfd, owner, &p) {
            Ok(()) => count(&mut out, it),
            Err(why) => out.skipped.push((it.dir.clone(), why)),
        }
    }
    for i in stripped {
        let it = &plan.items[i];
        match remove_files(rfd, it) {
            Ok(()) => count(&mut out, it),
            Err(why) => out.skipped.push((it.dir.clone(), why)),
        }
    }
    for it in plan.items.iter().filter(|it| it.class == Class::OrphanTemp) {
        match remove_temp(rfd, it) {
            Ok(()) => count(&mut out, it),
            Err(why) => out.skipped.push((it.dir.clone(), why)),
        }
    }
    Ok(out)
}

fn count(out: &mut Applied, it: &Item) {
    out.removed += 1;
    out.bytes += it.bytes;
    out.inodes += it.inodes;
}

const CHANGED: &str = "changed since the dry run (kept)";

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// The parent dir of an entry (opened below the root) and the entry's name.
fn split(rfd: BorrowedFd<'_>, dir: &str) -> Result<(OwnedFd, String), String> {
    let (up, name) = dir.rsplit_once('/').unwrap_or(("", dir));
    if name.is_empty() || name == "." || name == ".." || name.starts_with("tmp.") {
        return Err(format!("{dir:?} is not an entry dir"));
    }
    let parent = fsat::open_rel(rfd, Path::new(up)).map_err(|e| err("cannot open its dir", e))?;
    Ok((parent, name.to_string()))
}

/// Step 1 of a whole entry: check its signature, write [`PRUNED_GROUP`] over each group file
/// (renamed over it: Triton's `get_group` tests `exists` then opens, so a group file must never
/// vanish under it; the stub reads as a miss).
fn park(root: &Path, rfd: BorrowedFd<'_>, owner: u32, it: &Item) -> Result<Parked, String> {
    let (listed, listing) = super::disk::entry_now(root, rfd, &it.dir, owner).map_err(|e| err("gone", e))?;
    if listed.sig != it.sig {
        return Err(CHANGED.into());
    }
    let (parent, name) = split(rfd, &it.dir)?;
    let efd = fsat::open_dir(parent.as_fd(), OsStr::new(&name)).map_err(|e| err("cannot open", e))?;
    let mut groups = vec![];
    for f in listing.files.iter().filter(|f| f.name.starts_with("__grp__")) {
        write_over(efd.as_fd(), &f.raw, PRUNED_GROUP)?;
        groups.push(f.raw.clone());
    }
    let sig = super::disk::entry_now(root, rfd, &it.dir, owner).map_err(|e| err("gone", e))?.0.sig;
    Ok(Parked { item: 0, dir: it.dir.clone(), parent, name, groups, sig })
}

/// Steps 2 and 3: unless a writer changed the entry meanwhile, move its files but the stubbed
/// groups into a `tmp.cachelens_prune_*` sibling, check that what moved is what was checked, and
/// remove them. The entry dir stays with its stubs, as a lookup leaves a dir: a job that missed
/// may be about to put a file into it, and Triton's `put` makes `<KEY>/tmp.pid_*/` and opens a
/// file there by path, so renaming or removing the dir under it would fail that job (a loop of
/// compiles racing prunes did fail so). It goes at a later run once so for an hour
/// ([`remove_temp`]).
fn take_out(root: &Path, rfd: BorrowedFd<'_>, owner: u32, p: &Parked) -> Result<(), String> {
    let (now, listing) = super::disk::entry_now(root, rfd, &p.dir, owner).map_err(|e| err("gone", e))?;
    if now.sig != p.sig {
        // a writer compiles into it (a lookup missed on the stub): leave it to it
        return Err("recompiled while pruning (kept)".into());
    }
    let efd = fsat::open_dir(p.parent.as_fd(), OsStr::new(&p.name)).map_err(|e| err("gone", e))?;
    let to = aside();
    rustix::fs::mkdirat(&p.parent, to.as_str(), Mode::RWXU).map_err(|e| err("cannot make a dir beside it", e))?;
    let afd = fsat::open_dir(p.parent.as_fd(), OsStr::new(&to)).map_err(|e| err("cannot open the dir beside it", e))?;
    // every child but a dir (a writer's temp dir would have changed the signature) and the
    // stubbed groups (a reader may be between `exists` and `open`)
    let (_d, kids) = fsat::open_dir(p.parent.as_fd(), OsStr::new(&p.name))
        .and_then(fsat::list)
        .map_err(|e| err("cannot list it", e))?;
    let mut moved: Vec<&OsStr> = vec![];
    for k in kids.iter().filter(|k| k.kind != fsat::Kind::Dir && !p.groups.contains(&k.name)) {
        match rustix::fs::renameat(&efd, k.name.as_os_str(), &afd, k.name.as_os_str()) {
            Ok(()) => moved.push(k.name.as_os_str()),
            Err(e) => {
                put_back(p, &afd, &moved);
                let _ = remove_tree(p.parent.as_fd(), OsStr::new(&to), 1);
                return Err(err(&format!("cannot move {} out", fsat::display(&k.name)), e));
            }
        }
    }
    // A writer that put a file between the check and its move: what moved is not what was
    // checked. All of it goes back (a writer's newer file already there stays).
    let stamps = |l: &crate::scan::entry::Listing| {
        let files = l.files.iter().filter(|f| !p.groups.contains(&f.raw));
        let mut v: Vec<(std::ffi::OsString, u64, i64)> = files.map(|f| (f.raw.clone(), f.size, f.mtime_ms)).collect();
        v.sort();
        v
    };
    let out_dir = match p.dir.rsplit_once('/') {
        Some((up, _)) => format!("{up}/{to}"),
        None => to.clone(),
    };
    let same = fsat::open_dir(p.parent.as_fd(), OsStr::new(&to))
        .and_then(|fd| crate::scan::entry::list_files(fd, &root.join(&out_dir), root, owner))
        .is_ok_and(|(_, l)| l.tmp.is_empty() && l.bad.is_empty() && stamps(&l) == stamps(&listing));
    if !same {
        put_back(p, &afd, &moved);
        let _ = remove_tree(p.parent.as_fd(), OsStr::new(&to), 1);
        return Err("written to while pruning (put back, kept)".into());
    }
    remove_tree(p.parent.as_fd(), OsStr::new(&to), 1).map_err(|e| err(&format!("moved to {to}, not removed"), e))
}

/// Move `names` back from `from` into the entry dir, never over a file a writer put there
/// meanwhile. The stubbed groups stay: the writer that raced writes its own over them.
fn put_back(p: &Parked, from: &OwnedFd, names: &[&OsStr]) {
    let Ok(efd) = fsat::open_dir(p.parent.as_fd(), OsStr::new(&p.name)) else { return };
    for n in names {
        let _ = rename_noreplace(from.as_fd(), n, efd.as_fd(), n);
    }
}

/// Write `text` to a new file beside `name` in `dir` and rename it over `name` (a reader opens
/// the old file or the new one, never none).
fn write_over(dir: BorrowedFd<'_>, name: &OsStr, text: &[u8]) -> Result<(), String> {
    let to = aside();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, to.as_str(), flags, Mode::from_raw_mode(0o644))
        .map_err(|e| err("cannot write the new group file", e))?;
    let mut file = std::fs::File::from(fd);
    if let Err(e) = file.write_all(text).and_then(|()| file.sync_all()) {
        let _ = rustix::fs::unlinkat(dir, to.as_str(), AtFlags::empty());
        return Err(err("cannot write", e));
    }
    rustix::fs::renameat(dir, to.as_str(), dir, name).map_err(|e| err("cannot replace the group file", e))
}

/// `renameat2(RENAME_NOREPLACE)`; where the file system does not have it (some network file
/// systems answer EINVAL), a plain rename to a name checked free (it is ours alone: pid + count).
fn rename_noreplace(from_dir: BorrowedFd<'_>, from: &OsStr, to_dir: BorrowedFd<'_>, to: &OsStr) -> io::Result<()> {
    match rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            match rustix::fs::statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(_) => Err(io::Error::from(rustix::io::Errno::EXIST)),
                Err(_) => Ok(rustix::fs::renameat(from_dir, from, to_dir, to)?),
            }
        }
        r => Ok(r?),
    }
}

/// Remove `name` in `dir` and everything below it (at most `depth` levels), never following a
/// symlink: a link is unlinked, not its target.
pub fn remove_tree(dir: BorrowedFd<'_>, name: &OsStr, depth: usize) -> io::Result<()> {
    match fsat::open_dir(dir, name) {
        Ok(fd) => {
            if depth == 0 {
                return Err(io::Error::other("deeper than a cache entry"));
            }
            let (d, kids) = fsat::list(fd)?;
            let dfd = d.fd()?;
            for k in kids {
                match k.kind {
                    fsat::Kind::Dir => remove_tree(dfd, &k.name, depth - 1)?,
                    _ => rustix::fs::unlinkat(dfd, &k.name, AtFlags::empty())?,
                }
            }
            Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
        }
        // a file or a symlink (O_NOFOLLOW | O_DIRECTORY: ENOTDIR or ELOOP): unlinked as it is
        Err(e) if matches!(e.raw_os_error(), Some(20) | Some(40)) => {
            Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
        }
        Err(e) => Err(e),
    }
}

/// An IR item, step 1: check the signature, then write the group file without the IR files
/// aside and rename it over the old one (a reader sees the old group or the new, whole).
fn strip_group(root: &Path, rfd: BorrowedFd<'_>, owner: u32, it: &Item) -> Result<(), String> {
    let (listed, listing) = super::disk::entry_now(root, rfd, &it.dir, owner).map_err(|e| err("gone", e))?;
    if listed.sig != it.sig {
        return Err(CHANGED.into());
    }
    let efd = fsat::open_rel(rfd, Path::new(&it.dir)).map_err(|e| err("cannot open", e))?;
    for g in listing.files.iter().filter(|f| f.name.starts_with("__grp__")) {
        let (f, size) = fsat::open_file(efd.as_fd(), &g.raw, owner).map_err(|e| err("group file", e))?;
        let mut buf = vec![];
        fsat::read_capped(f, size, crate::scan::limits::MAX_META_BYTES, &mut buf).map_err(|e| err("group file", e))?;
        let mut v: serde_json::Value = serde_json::from_slice(&buf).map_err(|e| err("group file", e))?;
        let drop = |name: &str| it.files.iter().any(|f| f == name);
        match v.get_mut("child_paths") {
            Some(serde_json::Value::Object(m)) => m.retain(|k, _| !drop(k)),
            _ => match &mut v {
                // Triton's RemoteCacheManager writes a plain list of names
                serde_json::Value::Array(a) => a.retain(|n| !n.as_str().is_some_and(drop)),
                _ => return Err("group file: not a group Triton writes".into()),
            },
        }
        write_over(efd.as_fd(), &g.raw, serde_json::to_string(&v).unwrap_or_default().as_bytes())?;
    }
    Ok(())
}

/// An IR item, step 2 (after the grace period): unlink the IR files named in the plan.
fn remove_files(rfd: BorrowedFd<'_>, it: &Item) -> Result<(), String> {
    let efd = fsat::open_rel(rfd, Path::new(&it.dir)).map_err(|e| err("gone", e))?;
    for f in &it.files {
        match rustix::fs::unlinkat(&efd, f.as_str(), AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(err(&format!("cannot remove {f}"), e)),
        }
    }
    Ok(())
}

/// An orphaned temp dir, or an empty entry dir: removed while its stamp is as planned. An entry
/// dir goes only while empty (`rmdir`): a writer that put a file into it since keeps it.
fn remove_temp(rfd: BorrowedFd<'_>, it: &Item) -> Result<(), String> {
    let (up, name) = it.dir.rsplit_once('/').unwrap_or(("", &it.dir));
    let empty_entry = crate::scan::walk::is_key(name);
    if !name.starts_with("tmp.") && !empty_entry {
        return Err(format!("{:?} is not a temp dir", it.dir));
    }
    let parent = fsat::open_rel(rfd, Path::new(up)).map_err(|e| err("gone", e))?;
    match fsat::dir_stamp(parent.as_fd(), OsStr::new(name)) {
        Ok(Some(st)) if st.text() == it.sig => {}
        Ok(_) => return Err(CHANGED.into()),
        Err(e) => return Err(err("gone", e)),
    }
    if empty_entry {
        // prune's stubbed groups first (checked again: only the stub's bytes), then the dir,
        // which `rmdir` takes only while empty
        let owner = fsat::owner(rfd).map_err(|e| err("gone", e))?;
        let (d, listing) = fsat::open_dir(parent.as_fd(), OsStr::new(name))
            .and_then(|fd| crate::scan::entry::list_files(fd, Path::new(name), Path::new(up), owner))
            .map_err(|e| err("gone", e))?;
        let efd = d.fd().map_err(|e| err("gone", e))?;
        if crate::scan::entry::only_pruned_groups(efd, &listing, owner) {
            for f in &listing.files {
                rustix::fs::unlinkat(efd, &f.raw, AtFlags::empty()).map_err(|e| err("cannot remove its stub", e))?;
            }
        }
        return rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).map_err(|e| err("kept (not empty)", e));
    }
    remove_tree(parent.as_fd(), OsStr::new(name), 3).map_err(|e| err("cannot remove", e))
}
