//! Hazards of where a cache sits: its file system (type from `statfs`'s magic number, free
//! bytes and inodes from `statvfs`), orphaned temp dirs of writers, and other hosts writing the
//! same cache. Read from the open root and below it only, never through a symlink.

use super::fsat::{self, Kind};
use super::walk;
pub use crate::model::Hazards;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// A temp dir is an orphan when its mtime is older than this (ms): Triton's writer renames
/// each file out of it within one `put`.
pub const ORPHAN_AGE_MS: i64 = 3_600_000;

/// The failure modes of a Triton cache on a network file system, as users report them.
pub const NETWORK_FS_WARNING: &str = "Triton's cache on a network file system: jobs fail with EBUSY, \
FileNotFoundError or \"Stale file handle\" while another node writes or cleans it (triton#11512, \
pytorch#173679), and many small files can exhaust an inode quota long before the bytes (triton#11778); \
set TRITON_CACHE_DIR to node-local disk";

/// A `statfs` magic number's name and whether the file system is reached over a network.
/// FUSE may be either (sshfs, s3fs, GlusterFS: network; others local): counted as network.
pub fn classify(magic: u64) -> (&'static str, bool) {
    match magic {
        0x6969 => ("nfs", true),
        0x517B => ("smb", true),
        0xFF53_4D42 => ("cifs", true),
        0xFE53_4D42 => ("smb2", true),
        0x0BD0_0BD0 => ("lustre", true),
        0x4750_4653 => ("gpfs", true),
        0x00C3_6400 => ("ceph", true),
        0x1983_0326 => ("beegfs", true),
        0xAAD7_AAEA => ("panfs", true),
        0x2003_0528 => ("orangefs", true),
        0x5346_414F => ("afs", true),
        0x0102_1997 => ("9p", true),
        0x6573_5546 => ("fuse", true),
        0xEF53 => ("ext4", false),
        0x5846_5342 => ("xfs", false),
        0x9123_683E => ("btrfs", false),
        0x2FC1_2FC1 => ("zfs", false),
        0x0102_1994 => ("tmpfs", false),
        0x794C_7630 => ("overlayfs", false),
        0xF2F5_2010 => ("f2fs", false),
        _ => ("", false),
    }
}

/// The hazards of the cache at `root` (canonical), scanned for a machine whose hook host names
/// are `mine`: its layout listed and each entry dir stat'ed ([`Seen::of_layout`]).
pub fn of(root: &Path, now_ms: i64, mine: &super::Hosts) -> std::io::Result<Hazards> {
    let fd = fsat::open_root(root)?;
    let layout = walk::walk(root, fd.as_fd());
    of_seen(root, &Seen::of_layout(fd.as_fd(), &layout), now_ms, mine)
}

/// What the hazards read of a root's layout: the writers' temp dirs the walk skipped where it
/// looks for keys, the entry dirs that may hold a dir (and are listed for temp dirs inside),
/// and the hook event files.
#[derive(Debug, Default)]
pub struct Seen {
    pub in_progress: Vec<String>,
    pub may_hold_dirs: Vec<String>,
    pub event_files: Vec<std::path::PathBuf>,
}

impl Seen {
    /// From a walk's layout, every entry dir stat'ed for its link count: one whose count is 2
    /// has no subdir where the file system counts them (ext4, xfs, tmpfs; btrfs and some others
    /// say 1, and are listed), so an unchanged cache of files costs one `fstatat` per entry, not
    /// a listing. A scan's survey has those counts already (`scan::Survey::seen`).
    pub fn of_layout(root: BorrowedFd<'_>, layout: &walk::Layout) -> Seen {
        let (mut parent, mut may_hold_dirs) = (None, vec![]);
        for dir in &layout.entries {
            // (no parent: the entry dir cannot be opened either)
            let Some((at, name)) = fsat::parent_of(root, dir, &mut parent) else { continue };
            let leaf = fsat::stat_links(at, name).ok();
            if !leaf.is_some_and(|(_, _, kind, (links, _))| kind == Kind::Dir && links == 2) {
                may_hold_dirs.push(dir.clone());
            }
        }
        Seen { may_hold_dirs, ..Seen::of_skips(layout) }
    }

    /// The layout's skipped temp dirs and event files (the entry dirs are the caller's).
    pub fn of_skips(layout: &walk::Layout) -> Seen {
        let wip = layout.skipped.iter().filter(|s| s.kind == crate::model::SkipKind::WriteInProgress);
        Seen {
            in_progress: wip.map(|s| s.path.clone()).collect(),
            may_hold_dirs: vec![],
            event_files: layout.event_files.clone(),
        }
    }
}

/// The hazards of the cache at `root` from what was seen of its layout.
pub fn of_seen(root: &Path, seen: &Seen, now_ms: i64, mine: &super::Hosts) -> std::io::Result<Hazards> {
    let fd = fsat::open_root(root)?;
    let fs = rustix::fs::fstatfs(&fd)?;
    let vfs = rustix::fs::fstatvfs(&fd)?;
    #[allow(clippy::unnecessary_cast)] // `f_type`'s width differs by target
    let magic = fs.f_type as u64 & 0xFFFF_FFFF;
    let (name, network) = classify(magic);
    let mut h = Hazards {
        fs_type: if name.is_empty() { format!("{magic:#x}") } else { name.into() },
        network,
        fs_bytes: vfs.f_blocks.saturating_mul(vfs.f_frsize),
        fs_bytes_free: vfs.f_bavail.saturating_mul(vfs.f_frsize),
        fs_inodes: vfs.f_files,
        fs_inodes_free: vfs.f_favail,
        ..Hazards::default()
    };
    h.orphan_temps = orphan_temps(fd.as_fd(), seen, now_ms);
    for f in &seen.event_files {
        let name = f.file_name().unwrap_or_default();
        if let Some(host) = mine.foreign_file(name)
            && !h.other_hosts.contains(&host)
            && h.other_hosts.len() < MAX_HOSTS
        {
            h.other_hosts.push(host);
        }
        if let Some(host) = super::event_file_host_name(name)
            && !h.event_hosts.contains(&host)
            && h.event_hosts.len() < MAX_HOSTS
        {
            h.event_hosts.push(host);
        }
    }
    h.warnings = warnings(&h);
    Ok(h)
}

/// Host names a report of hazards carries at most (per list).
pub const MAX_HOSTS: usize = 64;

/// What to tell people about hazards, one line each, from the figures alone (the server derives
/// them again from what it stored, so the text is always this one).
pub fn warnings(h: &Hazards) -> Vec<String> {
    let mut w = vec![];
    if h.network {
        w.push(format!("on {}: {NETWORK_FS_WARNING}", h.fs_type));
    }
    if !h.other_hosts.is_empty() {
        w.push(format!(
            "shared cache: hook events of {} are here too: several nodes write it{}",
            h.other_hosts.join(", "),
            if h.network { "" } else { " (through a mount this file system type does not show)" }
        ));
    }
    if !h.shared_with.is_empty() {
        w.push(format!(
            "shared cache: machines {} report this root and see the same hook event files",
            h.shared_with.join(", ")
        ));
    }
    if h.fs_inodes > 0 && h.fs_inodes_free.saturating_mul(20) < h.fs_inodes {
        w.push(format!("its file system has {} of {} inodes free (under 5%)", h.fs_inodes_free, h.fs_inodes));
    }
    if h.orphan_temps > 0 {
        w.push(format!(
            "{} temp dirs of writers older than an hour (a crashed job's): `cachelens prune` removes them",
            h.orphan_temps
        ));
    }
    w
}

/// Whether hazards are shared: other hosts' events in the cache, or other machines seeing it.
pub fn shared(h: &Hazards) -> bool {
    !h.other_hosts.is_empty() || !h.shared_with.is_empty()
}

/// An uploaded report of hazards within its bounds (the server's check: a client may send
/// anything): a file system name of 1-64 printable ASCII bytes, free figures within their
/// totals and below 2^63, counts not negative, at most [`MAX_HOSTS`] host names of at most 255
/// bytes each. Its `warnings` and `shared_with` are the server's to derive: they are dropped.
pub fn check(mut h: Hazards) -> Result<Hazards, String> {
    if h.fs_type.is_empty() || h.fs_type.len() > 64 || !h.fs_type.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("hazards: a file system type of 1-64 printable ASCII bytes".into());
    }
    let big = i64::MAX as u64;
    if [h.fs_bytes, h.fs_bytes_free, h.fs_inodes, h.fs_inodes_free].iter().any(|&v| v > big)
        || h.fs_bytes_free > h.fs_bytes
        || h.fs_inodes_free > h.fs_inodes
    {
        return Err("hazards: free bytes and inodes within their totals, below 2^63".into());
    }
    if h.cache_inodes < 0 || h.orphan_temps < 0 {
        return Err("hazards: negative counts".into());
    }
    for hosts in [&h.other_hosts, &h.event_hosts] {
        if hosts.len() > MAX_HOSTS || hosts.iter().any(|n| n.is_empty() || n.len() > 255 || n.contains('\0')) {
            return Err(format!("hazards: at most {MAX_HOSTS} host names of 1-255 bytes"));
        }
    }
    h.warnings.clear();
    h.shared_with.clear();
    Ok(h)
}

/// Temp dirs (`tmp.*`) older than [`ORPHAN_AGE_MS`] where the walk looks for keys and inside
/// the entry dirs that may hold a dir ([`Seen`]).
fn orphan_temps(root: BorrowedFd<'_>, seen: &Seen, now_ms: i64) -> i64 {
    let old = |parent: BorrowedFd<'_>, name: &OsStr| {
        fsat::dir_stamp(parent, name).ok().flatten().is_some_and(|st| now_ms - st.mtime_ns / 1_000_000 > ORPHAN_AGE_MS)
    };
    let mut n = 0;
    for path in &seen.in_progress {
        let (up, name) = path.rsplit_once('/').unwrap_or(("", path));
        if let Ok(p) = fsat::open_rel(root, Path::new(up))
            && old(p.as_fd(), OsStr::new(name))
        {
            n += 1;
        }
    }
    let mut parent = None;
    for dir in &seen.may_hold_dirs {
        // opened from its parent (kept across a run of entries under it), never through a symlink
        let Some((at, name)) = fsat::parent_of(root, dir, &mut parent) else { continue };
        let Ok((d, kids)) = fsat::open_dir(at, name).and_then(fsat::list) else { continue };
        let Ok(dfd) = d.fd() else { continue };
        for k in kids.iter().filter(|k| k.kind == Kind::Dir && k.name.as_encoded_bytes().starts_with(b"tmp.")) {
            if old(dfd, &k.name) {
                n += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Magic numbers as `statfs(2)` and the file systems' own headers define them.
    #[test]
    fn network_file_systems_are_told_from_local_ones_by_their_magic() {
        for (magic, name) in [
            (0x6969, "nfs"),
            (0x0BD0_0BD0, "lustre"),
            (0x4750_4653, "gpfs"),
            (0x00C3_6400, "ceph"),
            (0xFF53_4D42, "cifs"),
            (0xFE53_4D42, "smb2"),
            (0x1983_0326, "beegfs"),
            (0x6573_5546, "fuse"),
        ] {
            assert_eq!(classify(magic), (name, true), "{magic:#x}");
        }
        for (magic, name) in
            [(0xEF53, "ext4"), (0x5846_5342, "xfs"), (0x0102_1994, "tmpfs"), (0x794C_7630, "overlayfs")]
        {
            assert_eq!(classify(magic), (name, false), "{magic:#x}");
        }
        assert_eq!(classify(0x1234_5678), ("", false));
    }

    /// The root's own file system, read for real: a temp dir's, with its free space and inodes,
    /// and an old writer's temp dir inside an entry counted.
    #[test]
    fn a_real_root_reports_its_file_system_and_old_temp_dirs() {
        let t = tempfile::TempDir::new().unwrap();
        let root = t.path().canonicalize().unwrap();
        let key = root.join("A".repeat(52));
        std::fs::create_dir(&key).unwrap();
        std::fs::write(key.join("k.json"), "{}").unwrap();
        let tmp = key.join("tmp.pid_1_x");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::create_dir(key.join("tmp.pid_2_fresh")).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::open(&tmp).unwrap().set_modified(old).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let h = of(&root, now, &super::super::Hosts::Any).unwrap();
        let want = rustix::fs::statvfs(&root).unwrap();
        assert_eq!(h.fs_inodes, want.f_files);
        assert!(h.fs_bytes > 0 && h.fs_bytes_free <= h.fs_bytes, "{h:?}");
        assert!(!h.fs_type.is_empty());
        assert_eq!(h.orphan_temps, 1, "{h:?}");
        // a scan's survey sees the same: the entry dir holding dirs is listed, a dir of files
        // is not, and an old writer's temp dir where keys are looked for counts too
        let plain = root.join("B".repeat(52));
        std::fs::create_dir(&plain).unwrap();
        std::fs::write(plain.join("k.json"), "{}").unwrap();
        let top = root.join("tmp.pid_3_y");
        std::fs::create_dir(&top).unwrap();
        std::fs::File::open(&top).unwrap().set_modified(old).unwrap();
        let survey = super::super::survey(&root, 2, true).unwrap_or_else(|_| panic!("survey"));
        let seen = survey.seen().unwrap();
        assert_eq!(seen.may_hold_dirs, vec!["A".repeat(52)], "{seen:?}");
        assert_eq!(seen.in_progress.len(), 1, "{seen:?}");
        let from_survey = of_seen(&root, &seen, now, &super::super::Hosts::Any).unwrap();
        let walked = of(&root, now, &super::super::Hosts::Any).unwrap();
        assert_eq!(from_survey.orphan_temps, 2, "{from_survey:?}");
        assert_eq!((from_survey.orphan_temps, &from_survey.warnings), (walked.orphan_temps, &walked.warnings));
        // a survey without stamps (`scan --full`) leaves the hazards to read the layout
        assert!(super::super::survey(&root, 2, false).unwrap_or_else(|_| panic!("survey")).seen().is_none());
    }
}
