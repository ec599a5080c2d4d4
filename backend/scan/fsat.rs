//! Reading beneath the scanned root without ever following a symlink, and reading files with
//! bounded memory.
//!
//! The root is canonicalized once by the caller and opened; below it every dir is opened from
//! its parent's descriptor with `O_NOFOLLOW | O_DIRECTORY` and every file from its dir's
//! descriptor with `O_NOFOLLOW | O_NONBLOCK`. So a symlink anywhere below the root (an entry
//! file `x.ttgir -> /etc/shadow`, a key dir pointing to `/`, a `.best_config` or hook event file
//! that is a link) fails to open instead of being followed, and a link swapped in between the
//! listing and the open cannot redirect the read: no path below the root is resolved by name.
//! Links are reported with [`symlink_reason`] and counted as skips. A FIFO or device swapped in
//! for a file neither blocks the open nor is read ([`open_file`] checks it is a regular file).
//! A hard link to a file of another owner than the cache dir's is not read either
//! ([`foreign_link`]): `O_NOFOLLOW` does not see hard links.
//!
//! Names are bytes: a name that is not UTF-8 is opened as it is and shown with [`display`].

use super::limits;
use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, openat, statat};
use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path};

/// What a dir entry is, from its `d_type` (a `statat` without following only where the file
/// system does not fill it in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

/// One child of a dir.
#[derive(Debug, Clone)]
pub struct Child {
    pub name: OsString,
    pub kind: Kind,
}

/// Open the (canonical) root dir.
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    Ok(openat(CWD, root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

/// Open the dir `name` of `parent`, failing (ELOOP/ENOTDIR) if it is a symlink.
pub fn open_dir(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(openat(parent, name, flags, Mode::empty())?)
}

/// The dir holding `dir` (relative to `root`) and `dir`'s last name: the root itself for a top
/// dir, else its parent opened below the root ([`open_rel`]) and kept in `held` for the next
/// call, so a run of entry dirs under one parent opens it once (an Inductor root's entries share
/// a few). `None` when that parent cannot be opened.
pub fn parent_of<'a>(
    root: BorrowedFd<'a>,
    dir: &'a str,
    held: &'a mut Option<(String, OwnedFd)>,
) -> Option<(BorrowedFd<'a>, &'a OsStr)> {
    match dir.rsplit_once('/') {
        None => Some((root, OsStr::new(dir))),
        Some((up, name)) => {
            if held.as_ref().is_none_or(|(p, _)| p != up) {
                *held = None;
                *held = Some((up.to_string(), open_rel(root, Path::new(up)).ok()?));
            }
            Some((held.as_ref()?.1.as_fd(), OsStr::new(name)))
        }
    }
}

/// Open the dir at `rel` (relative, plain components) below `root`, one component at a time.
pub fn open_rel(root: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    let mut fd: Option<OwnedFd> = None;
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a plain relative path"));
        };
        let parent = fd.as_ref().map_or(root, |f| f.as_fd());
        fd = Some(open_dir(parent, name)?);
    }
    match fd {
        Some(fd) => Ok(fd),
        None => Ok(rustix::io::fcntl_dupfd_cloexec(root, 0)?),
    }
}

fn kind_of(t: FileType) -> Kind {
    match t {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// The kind of one entry of `d`, from its dirent type; a file system that gives none
/// (`DT_UNKNOWN`) costs one `fstatat`, never following a symlink.
pub fn entry_kind(d: &Dir, de: &rustix::fs::DirEntry) -> io::Result<Kind> {
    Ok(match de.file_type() {
        FileType::Unknown => {
            kind_of(FileType::from_raw_mode(statat(d.fd()?, de.file_name(), AtFlags::SYMLINK_NOFOLLOW)?.st_mode))
        }
        t => kind_of(t),
    })
}

/// The children of a dir (without `.` and `..`), sorted by name.
pub fn list(dir: OwnedFd) -> io::Result<(Dir, Vec<Child>)> {
    let mut d = Dir::new(dir)?;
    let mut out = vec![];
    while let Some(de) = d.read() {
        let de = de?;
        let name = de.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = entry_kind(&d, &de)?;
        out.push(Child { name: OsString::from_vec(name.to_vec()), kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((d, out))
}

/// `(size, mtime in ms, kind)` of `name` in `dir`, not following a symlink.
pub fn stat(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<(u64, i64, Kind)> {
    let (size, ms, kind, _) = stat_links(dir, name)?;
    Ok((size, ms, kind))
}

/// [`stat`], with `(link count, owner uid)`.
pub fn stat_links(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<(u64, i64, Kind, (u64, u32))> {
    let st = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let ms = st.st_mtime as i64 * 1000 + st.st_mtime_nsec as i64 / 1_000_000;
    let links = (st.st_nlink as u64, st.st_uid);
    Ok((st.st_size as u64, ms, kind_of(FileType::from_raw_mode(st.st_mode)), links))
}

/// The owner (uid) of an open dir: a scan's root, whose owner decides which hard links are read
/// ([`foreign_link`]).
pub fn owner(dir: BorrowedFd<'_>) -> io::Result<u32> {
    Ok(rustix::fs::fstat(dir)?.st_uid)
}

/// Why a regular file with `nlink` links owned by `uid` is not read in a cache dir owned by
/// `owner`: a hard link (more than one link) to a file of another owner. Hard links are not
/// symlinks: `O_NOFOLLOW` does not stop them, and a root-run scan would read (and store) a
/// root-only file that a cache writer linked in (`ln /etc/shadow <cache>/<KEY>/x.ttir`, where
/// `fs.protected_hardlinks` is off, or on a file system that ignores it). A file of the cache
/// owner linked twice (a copy made with `cp -al`, a benchmark's windows of one corpus) is read.
pub fn foreign_link(nlink: u64, uid: u32, owner: u32) -> Option<String> {
    (nlink > 1 && uid != owner).then(|| format!("{HARD_LINK} owned by uid {uid}"))
}

/// Start of the skip reason of a hard link to another owner's file ([`foreign_link`]).
pub const HARD_LINK: &str = "hard link to a file";

/// What identifies one state of a dir's list of names: its inode, mtime and ctime (ns). Any
/// create, unlink or rename in the dir moves both times; `utimensat` (a copy tool putting the
/// mtime back) moves the ctime, which nothing but the kernel's clock sets. See
/// docs/ARCHITECTURE.md, "The re-scan dir stamp", for where this is not enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub ino: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// As stored (`entry_stamps.stamp`): inode, mtime and ctime in hex.
impl std::fmt::Display for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:x}.{:x}.{:x}", self.ino, self.mtime_ns, self.ctime_ns)
    }
}

impl Stamp {
    /// As stored (`entry_stamps.stamp`).
    pub fn text(&self) -> String {
        self.to_string()
    }

    /// Whether `stored` is this stamp's [`Stamp::text`] (without making a `String`: a re-scan
    /// compares one per entry dir).
    pub fn is(&self, stored: &str) -> bool {
        use std::io::Write;
        let mut buf = [0u8; 64]; // three u64 in hex and two dots: at most 50 bytes
        let mut w = &mut buf[..];
        let _ = write!(w, "{self}");
        let n = 64 - w.len();
        buf[..n] == *stored.as_bytes()
    }
}

fn stamp_of(st: &rustix::fs::Stat) -> Stamp {
    let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
    Stamp {
        ino: st.st_ino,
        mtime_ns: ns(st.st_mtime, st.st_mtime_nsec as i64),
        ctime_ns: ns(st.st_ctime, st.st_ctime_nsec as i64),
    }
}

/// The [`Stamp`] of the dir `name` of `parent`, not following a symlink (`None`: not a dir).
pub fn dir_stamp(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<Stamp>> {
    Ok(dir_stamp_links(parent, name)?.map(|(st, _)| st))
}

/// [`dir_stamp`] with the dir's link count (2: no subdir, where the file system counts them).
pub fn dir_stamp_links(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<(Stamp, u64)>> {
    let st = statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok((FileType::from_raw_mode(st.st_mode) == FileType::Directory).then(|| (stamp_of(&st), st.st_nlink as u64)))
}

/// The [`Stamp`] of an open dir.
pub fn fd_stamp(dir: BorrowedFd<'_>) -> io::Result<Stamp> {
    Ok(stamp_of(&rustix::fs::fstat(dir)?))
}

/// Open the regular file `name` of `dir` for reading; a symlink fails (ELOOP), anything but a
/// regular file is refused, and so is a hard link to a file not owned by `owner` (the cache
/// dir's owner: [`foreign_link`]; checked on the open file, so a link swapped in after a
/// listing is refused too). Returns the file and its size.
pub fn open_file(dir: BorrowedFd<'_>, name: &OsStr, owner: u32) -> io::Result<(File, u64)> {
    use std::os::unix::fs::MetadataExt;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let f = File::from(openat(dir, name, flags, Mode::empty())?);
    let md = f.metadata()?;
    if !md.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    if let Some(why) = foreign_link(md.nlink(), md.uid(), owner) {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    }
    Ok((f, md.len()))
}

/// Why the symlink at `path` (absolute, below `root`) is not followed: a loop, dangling, out
/// of the cache, or inside it (links are never followed: following one by name could be
/// redirected after the check). Only the link is resolved here; nothing it points to is opened.
/// The flag is true when it points to a dir.
pub fn symlink_reason(root: &Path, path: &Path) -> (String, bool) {
    match std::fs::metadata(path) {
        Err(e) if e.raw_os_error() == Some(40) => ("symlink loop".into(), false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => ("dangling symlink".into(), false),
        Err(e) => (format!("symlink: {}", super::walk::reason(&e)), false),
        Ok(md) => {
            let inside = path.canonicalize().is_ok_and(|c| c.starts_with(root));
            let why = if inside { SYMLINK_INSIDE } else { SYMLINK_OUT };
            (why.into(), md.is_dir())
        }
    }
}

/// Skip reason of a symlink that points out of the scanned root.
pub const SYMLINK_OUT: &str = "symlink out of the cache";
/// Skip reason of a symlink that points to something inside the root (read there, if at all).
pub const SYMLINK_INSIDE: &str = "symlink inside the cache (not followed)";

/// A name as text: UTF-8 as it is, any other byte as `\xNN` (a backslash as `\\`), so two
/// different names never show the same.
pub fn display(name: &OsStr) -> String {
    let bytes = name.as_bytes();
    match std::str::from_utf8(bytes) {
        Ok(s) if !s.contains('\\') => s.to_string(),
        _ => {
            let mut out = String::with_capacity(bytes.len() + 8);
            for chunk in bytes.utf8_chunks() {
                out.push_str(&chunk.valid().replace('\\', "\\\\"));
                for b in chunk.invalid() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            out
        }
    }
}

/// What [`read_capped`] got from a file.
pub struct Hashed {
    /// Hex sha256 of all its bytes, or (`prefix`) of its first [`limits::MAX_HASH_BYTES`]
    /// followed by its size ([`limits::PARTIAL_HASH`]).
    pub sha256: String,
    /// Its size ...
    pub size: u64,
    /// ... whether its bytes are in the buffer (false: over the cap, hashed as a stream) ...
    pub kept: bool,
    /// ... and whether only its first [`limits::MAX_HASH_BYTES`] were hashed.
    pub prefix: bool,
}

/// Hash `f` (of `size` bytes, as its `fstat` said), keeping its bytes in `buf` only when
/// `size <= cap`; over the cap it is read as a stream through a fixed buffer, and over
/// [`limits::MAX_HASH_BYTES`] only that far ([`Hashed::prefix`]). An error "file changed during
/// scan" when the bytes read are not `size` (or, for a prefix, fewer than its length).
pub fn read_capped(f: File, size: u64, cap: u64, buf: &mut Vec<u8>) -> io::Result<Hashed> {
    read_capped_upto(f, size, cap, limits::MAX_HASH_BYTES, buf)
}

/// [`read_capped`] hashing at most `most` bytes.
fn read_capped_upto(mut f: File, size: u64, cap: u64, most: u64, buf: &mut Vec<u8>) -> io::Result<Hashed> {
    buf.clear();
    let changed = || io::Error::other("file changed during scan");
    if size <= cap {
        buf.reserve_exact(size as usize + 1);
        f.by_ref().take(size + 1).read_to_end(buf)?;
        if buf.len() as u64 != size {
            return Err(changed());
        }
        return Ok(Hashed { sha256: hex::encode(Sha256::digest(&buf[..])), size, kept: true, prefix: false });
    }
    let mut h = Sha256::new();
    let mut chunk = vec![0u8; 256 << 10];
    let prefix = size > most;
    let want = size.min(most);
    let mut n = 0u64;
    while n < want || !prefix {
        // a prefix reads exactly `want` bytes; a whole file on to its end (to see it grow)
        let room = if prefix { (want - n).min(chunk.len() as u64) as usize } else { chunk.len() };
        let k = match f.read(&mut chunk[..room]) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&chunk[..k]);
        n += k as u64;
        if n > size {
            return Err(changed());
        }
    }
    if n != want {
        return Err(changed());
    }
    if prefix {
        h.update(size.to_le_bytes());
    }
    Ok(Hashed { sha256: hex::encode(h.finalize()), size, kept: false, prefix })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_not_utf8_are_escaped_without_collisions() {
        assert_eq!(display(OsStr::new("add_kernel.ttir")), "add_kernel.ttir");
        let raw = display(OsStr::from_bytes(b"a\xffb.ttgir"));
        let lookalike = display(OsStr::new("a\\xffb.ttgir"));
        assert_eq!(raw, "a\\xffb.ttgir");
        assert_eq!(lookalike, "a\\\\xffb.ttgir");
        assert_ne!(raw, lookalike);
    }

    /// Over the hash budget: the sha256 of the first bytes followed by the size (8 bytes, little
    /// endian), never the whole file's; under it, the whole file's.
    #[test]
    fn files_over_the_hash_budget_hash_a_prefix_and_their_size() {
        let t = tempfile::TempDir::new().unwrap();
        let p = t.path().join("f");
        let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &body).unwrap();
        let mut buf = vec![];
        let open = || File::open(&p).unwrap();
        let got = read_capped_upto(open(), 10_000, 0, 4096, &mut buf).unwrap();
        let mut want = Sha256::new();
        want.update(&body[..4096]);
        want.update(10_000u64.to_le_bytes());
        assert!(got.prefix && !got.kept);
        assert_eq!(got.sha256, hex::encode(want.finalize()));
        assert_ne!(got.sha256, hex::encode(Sha256::digest(&body)));
        let whole = read_capped_upto(open(), 10_000, 0, 10_000, &mut buf).unwrap();
        assert!(!whole.prefix);
        assert_eq!(whole.sha256, hex::encode(Sha256::digest(&body)));
        // a file shorter than its stat said is a change, prefix or not
        assert!(read_capped_upto(open(), 20_000, 0, 15_000, &mut buf).is_err());
        assert!(read_capped_upto(open(), 20_000, 0, 4096, &mut buf).is_ok(), "the prefix was all there");
    }

    #[test]
    fn a_stamp_is_its_text_and_nothing_else() {
        let extremes = [0, 1, -1, i64::MIN, i64::MAX, 1_764_000_000_123_456_789];
        for ino in [0, 1, 0x6121ae, u64::MAX] {
            for m in extremes {
                for c in extremes {
                    let st = Stamp { ino, mtime_ns: m, ctime_ns: c };
                    let text = st.text();
                    assert!(st.is(&text), "{text}");
                    // any other stamp's text, or the text cut or lengthened, is not it
                    let other = Stamp { ino: ino ^ 1, ..st };
                    assert!(!st.is(&other.text()) && !other.is(&text), "{text}");
                    assert!(!st.is(&text[..text.len() - 1]) && !st.is(&format!("{text}0")) && !st.is(""), "{text}");
                }
            }
        }
    }
}
