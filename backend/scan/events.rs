//! Reading the hook's event files (`<cache>/.cachelens/events-<host>.jsonl`) from where the last
//! scan stopped. Only whole lines are read; a line being written now is left for the next scan.

use crate::model::{EventFileMark, HookEvent, Skip};
use serde::Deserialize;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
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
    /// The hook's line counter in its process (hooks before it wrote none).
    seq: Option<i64>,
}

/// Identity of a file: when it changes (rotation), the file is read from the start again.
fn inode_sig(md: &fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}:{}", md.dev(), md.ino())
}

/// Read the events appended to `path` since `prev` (inode, offset), at most about `max_bytes` of
/// them (whole lines; the mark says where the next read resumes).
pub fn read_events(
    path: &Path,
    prev: Option<&(String, i64)>,
    max_bytes: u64,
    out: &mut Vec<HookEvent>,
    skipped: &mut Vec<Skip>,
) -> Option<EventFileMark> {
    let shown = path.display().to_string();
    let fail = |skipped: &mut Vec<Skip>, why: String| skipped.push(Skip { path: shown.clone(), reason: why });
    let mut f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            fail(skipped, format!("hook events {}", super::walk::reason(&e)));
            return None;
        }
    };
    let md = f.metadata().ok()?;
    let sig = inode_sig(&md);
    let mut offset = match prev {
        Some((s, off)) if *s == sig && (*off as u64) <= md.len() => *off as u64,
        _ => 0,
    };
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return None;
    }
    let mut buf = Vec::new();
    if let Err(e) = f.by_ref().take(max_bytes).read_to_end(&mut buf) {
        fail(skipped, format!("hook events {}", super::walk::reason(&e)));
        return None;
    }
    let whole = buf.iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
    if whole == 0 && buf.len() as u64 == max_bytes && max_bytes >= 1 << 16 {
        // No line end within 64 KiB: not a hook line (they are under 4 KB). Pass over it rather
        // than stall here on every scan. (A smaller budget just ends mid-line: read on next time.)
        fail(skipped, "malformed hook event line (too long)".into());
        offset += buf.len() as u64;
    }
    for line in buf[..whole].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Line>(line) {
            Ok(l) if matches!(l.event.as_str(), "hit" | "miss" | "compile") => out.push(HookEvent {
                // The hook writes microseconds: all of them identify the line (a millisecond
                // would merge two lookups of one key in one process). Milliseconds as before.
                ts: (l.ts * 1000.0).round() as i64,
                ts_us: Some((l.ts * 1_000_000.0).round() as i64),
                seq: l.seq,
                host: l.host,
                pid: l.pid,
                key: l.key,
                kernel: l.kernel,
                event: l.event,
                compile_ms: l.compile_ms,
                stages_ms: l.stages_ms,
            }),
            _ => fail(skipped, "malformed hook event line".into()),
        }
    }
    offset += whole as u64;
    Some(EventFileMark { path: shown, inode_sig: sig, offset: offset as i64 })
}
