//! Reading the hook's event files (`<cache>/.cachelens/events-<host>.jsonl`) from where the last
//! scan stopped. Only whole lines are read; a line being written now is left for the next scan.
//!
//! Events are credited by their host ([`super::Hosts`]): a scan reads only its own machine's
//! files and lines; another host's are left for that host's scan (its file not opened, its
//! lines passed over) and counted as skipped.

use super::{fsat, limits};
use crate::model::{EventFileMark, HookEvent, Skip, SkipKind};
use serde::Deserialize;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// One line as the hook writes it (`ts` in unix seconds).
#[derive(Deserialize)]
struct Line {
    ts: f64,
    host: String,
    pid: i64,
    key: String,
    kernel: Option<String>,
    event: String,
    compile_ms: Option<f64>,
    stages_ms: Option<serde_json::Value>,
    /// What Triton hashed into the key (compile events of hooks that record it).
    parts: Option<serde_json::Value>,
    /// The hook's line counter in its process (hooks before it wrote none).
    seq: Option<i64>,
}

/// Identity of a file: when it changes (rotation), the file is read from the start again.
fn inode_sig(md: &fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}:{}", md.dev(), md.ino())
}

/// The hook's file name part for a host (`_writer.py`'s `_host_file`): every byte but
/// `[A-Za-z0-9._-]` made `_`, at most 128 characters, `unknown` when empty.
pub fn host_file(host: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let s: String = host.chars().map(|c| if safe(c) { c } else { '_' }).take(128).collect();
    if s.is_empty() { "unknown".into() } else { s }
}

/// Where and for whom event files are read: the root (open), its owner (a hard link to another
/// owner's file is not read: [`fsat::foreign_link`]) and the hosts whose lines are credited.
pub struct EventReader<'a> {
    pub root: BorrowedFd<'a>,
    pub owner: u32,
    pub hosts: &'a super::Hosts,
}

impl EventReader<'_> {
    /// Read the events appended to the event file `rel` (below the root; `shown` is its
    /// absolute path, the mark's key) since `prev` (inode, offset), at most about `budget` bytes
    /// of them (whole lines; the mark says where the next read resumes). What was read is taken
    /// off `budget`, so one budget can span several files. Lines of hosts not credited
    /// ([`super::Hosts::credits`]) are passed over and counted as skipped.
    ///
    /// The file is read in 1 MiB chunks: memory stays bounded whatever its size. A "line"
    /// longer than [`limits::MAX_EVENT_LINE`] (a file of zeros, no newline at all) is passed
    /// over once, counted as malformed, and the mark moves past it: it is not read again by
    /// every scan.
    pub fn events(
        &self,
        rel: &Path,
        shown: &str,
        prev: Option<&(String, i64)>,
        budget: &mut u64,
        out: &mut Vec<HookEvent>,
        skipped: &mut Vec<Skip>,
    ) -> Option<EventFileMark> {
        read_events(self, rel, shown, prev, budget, out, skipped)
    }
}

fn read_events(
    at: &EventReader<'_>,
    rel: &Path,
    shown: &str,
    prev: Option<&(String, i64)>,
    budget: &mut u64,
    out: &mut Vec<HookEvent>,
    skipped: &mut Vec<Skip>,
) -> Option<EventFileMark> {
    let fail = |skipped: &mut Vec<Skip>, kind: SkipKind, why: String| skipped.push(Skip::new(shown, kind, why));
    let parent = rel.parent().unwrap_or(Path::new(""));
    let opened = fsat::open_rel(at.root, parent)
        .and_then(|d| fsat::open_file(d.as_fd(), rel.file_name().unwrap_or_default(), at.owner).map(|(f, _)| f));
    let mut f = match opened {
        Ok(f) => f,
        Err(e) => {
            let (kind, why) = super::walk::why(&e);
            fail(skipped, kind, format!("hook events {why}"));
            return None;
        }
    };
    let md = f.metadata().ok()?;
    let sig = inode_sig(&md);
    let start = match prev {
        Some((s, off)) if *s == sig && (*off as u64) <= md.len() => *off as u64,
        _ => 0,
    };
    if f.seek(SeekFrom::Start(start)).is_err() {
        return None;
    }
    // `done`: bytes after `start` handled (whole lines read, or an overlong line passed over).
    let (mut done, mut line, mut overlong) = (0u64, Vec::new(), false);
    let mut chunk = vec![0u8; 1 << 20];
    'read: loop {
        let n = match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                fail(skipped, SkipKind::Unreadable, format!("hook events {}", super::walk::reason(&e)));
                break;
            }
        };
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let (piece, ended) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            rest = &rest[(piece.len() + usize::from(ended))..];
            if overlong {
                done += (piece.len() + usize::from(ended)) as u64;
                overlong = !ended;
                continue;
            }
            line.extend_from_slice(piece);
            if line.len() > limits::MAX_EVENT_LINE {
                // Not a hook line (they are under 4 KB): pass over it rather than stall here.
                fail(skipped, SkipKind::Malformed, "malformed hook event line (too long)".into());
                done += (line.len() + usize::from(ended)) as u64;
                line.clear();
                overlong = !ended;
                continue;
            }
            if !ended {
                continue;
            }
            if done + line.len() as u64 + 1 > *budget {
                break 'read; // over the budget: the next scan reads on from here
            }
            done += line.len() as u64 + 1;
            if !line.is_empty() {
                parse_line(&line, at.hosts, out, &mut |kind, why| fail(skipped, kind, why));
            }
            line.clear();
        }
    }
    *budget = budget.saturating_sub(done);
    Some(EventFileMark { path: shown.to_string(), inode_sig: sig, offset: (start + done) as i64 })
}

fn parse_line(line: &[u8], hosts: &super::Hosts, out: &mut Vec<HookEvent>, fail: &mut dyn FnMut(SkipKind, String)) {
    match serde_json::from_slice::<Line>(line) {
        Ok(l) if !hosts.credits(&l.host) => {
            // shown as the hook names its file: no control characters, 64 at most
            let host: String = host_file(&l.host).chars().take(64).collect();
            fail(SkipKind::Other, super::other_host(&host))
        }
        Ok(l) => {
            let event = match l.event.parse() {
                Ok(event) => event,
                Err(why) => return fail(SkipKind::Malformed, format!("hook event line: {why}")),
            };
            let e = HookEvent {
                // The hook writes microseconds: all of them identify the line (a millisecond
                // would merge two lookups of one key in one process). Milliseconds as before.
                ts: (l.ts * 1000.0).round() as i64,
                ts_us: Some((l.ts * 1_000_000.0).round() as i64),
                seq: l.seq,
                host: l.host,
                pid: l.pid,
                key: l.key,
                kernel: l.kernel,
                event,
                compile_ms: l.compile_ms,
                stages_ms: l.stages_ms,
                parts: l.parts,
            };
            // What a server would refuse is left out here, with a reason: one bad line must
            // not make every upload of this machine fail.
            match problem(&e) {
                None => out.push(e),
                Some(why) => fail(SkipKind::Malformed, format!("hook event line: {why}")),
            }
        }
        Err(_) => fail(SkipKind::Malformed, "malformed hook event line".into()),
    }
}

/// What is wrong with a hook event, if anything: the checks a server makes on uploaded events
/// (the hook writes lines under 4 KB, with times after 2001 and before 2100).
pub fn problem(e: &HookEvent) -> Option<String> {
    const TS_MS: std::ops::Range<i64> = 1_000_000_000_000..4_102_444_800_000;
    let short = |s: &str, max: usize| !s.is_empty() && s.len() <= max && !s.contains('\0');
    let plain = |s: &str| short(s, 255) && s != "." && s != ".." && !s.contains(['/', '\\']);
    if !TS_MS.contains(&e.ts)
        || e.ts_us.is_some_and(|us| us.checked_sub(e.ts * 1000).is_none_or(|d| d.unsigned_abs() > 1000))
    {
        return Some(format!("time {} ms / {:?} µs is out of range or inconsistent", e.ts, e.ts_us));
    }
    if !short(&e.host, 255) || !plain(&e.key) || e.kernel.as_deref().is_some_and(|k| !short(k, 4000)) {
        return Some("host, key or kernel is empty, too long or not a plain name".into());
    }
    if e.pid < 0 || e.seq.is_some_and(|s| s < 0) {
        return Some("negative pid or seq".into());
    }
    if e.compile_ms.is_some_and(|ms| !ms.is_finite() || !(0.0..1e9).contains(&ms)) {
        return Some("compile_ms is not a duration".into());
    }
    let small = |v: &Option<serde_json::Value>| v.as_ref().is_none_or(|v| v.is_object() && v.to_string().len() <= 4000);
    if !small(&e.stages_ms) {
        return Some("stages_ms is not a small object".into());
    }
    (!small(&e.parts)).then(|| "parts is not a small object".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: usize) -> String {
        let ts = 1_763_900_000.0 + i as f64 / 1000.0;
        format!(r#"{{"ts": {ts}, "host": "h", "pid": 1, "key": "K{i}", "kernel": "k", "event": "hit", "seq": {i}}}"#)
    }

    fn read(dir: &Path, prev: Option<&(String, i64)>, budget: u64) -> (Vec<HookEvent>, Vec<Skip>, EventFileMark) {
        let root = fsat::open_root(dir).unwrap();
        let (mut out, mut skipped, mut budget) = (vec![], vec![], budget);
        let rel = Path::new(".cachelens/events-h.jsonl");
        let at = EventReader {
            root: root.as_fd(),
            owner: fsat::owner(root.as_fd()).unwrap(),
            hosts: &super::super::Hosts::Any,
        };
        let mark = at.events(rel, "x", prev, &mut budget, &mut out, &mut skipped).unwrap();
        (out, skipped, mark)
    }

    /// Lines across the 1 MiB read chunks, an overlong line, a budget and a line being written.
    #[test]
    fn reads_whole_lines_across_chunks_and_resumes_at_the_mark() {
        let t = tempfile::TempDir::new().unwrap();
        std::fs::create_dir(t.path().join(".cachelens")).unwrap();
        let path = t.path().join(".cachelens/events-h.jsonl");
        let mut text = String::new();
        for i in 0..30_000 {
            text += &line(i);
            text.push('\n');
            if i == 7000 {
                text += &"x".repeat(200_000);
                text.push('\n');
            }
        }
        let whole = text.len() as i64;
        text += &line(99_999)[..40]; // being written: not read yet
        std::fs::write(&path, &text).unwrap();
        assert!(whole > 2 << 20, "spans several chunks");

        let (ev, sk, mark) = read(t.path(), None, u64::MAX);
        assert_eq!(ev.len(), 30_000);
        assert!(ev.iter().enumerate().all(|(i, e)| e.key == format!("K{i}")));
        assert_eq!(sk.len(), 1);
        assert_eq!((sk[0].kind, sk[0].reason.as_str()), (SkipKind::Malformed, "malformed hook event line (too long)"));
        assert_eq!(mark.offset, whole);

        // with a budget: whole lines up to it, then the rest from the mark
        let (ev1, _, m1) = read(t.path(), None, 100_000);
        assert!(!ev1.is_empty() && m1.offset <= 100_000);
        assert_eq!(text.as_bytes()[m1.offset as usize - 1], b'\n');
        let (ev2, _, m2) = read(t.path(), Some(&(m1.inode_sig.clone(), m1.offset)), u64::MAX);
        assert_eq!(ev1.len() + ev2.len(), 30_000);
        assert_eq!(m2.offset, whole);
    }
}
