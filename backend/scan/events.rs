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

/// Read the events appended to `path` since `prev` (inode, offset), at most about `budget` bytes
/// of them (whole lines; the mark says where the next read resumes). What was read is taken off
/// `budget`, so one budget can span several files.
pub fn read_events(
    path: &Path,
    prev: Option<&(String, i64)>,
    budget: &mut u64,
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
    let max_bytes = *budget;
    let mut offset = match prev {
        Some((s, off)) if *s == sig && (*off as u64) <= md.len() => *off as u64,
        _ => 0,
    };
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return None;
    }
    let start = offset;
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
            Ok(l) => {
                let event = match l.event.parse() {
                    Ok(event) => event,
                    Err(why) => {
                        fail(skipped, format!("hook event line: {why}"));
                        continue;
                    }
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
                };
                // What a server would refuse is left out here, with a reason: one bad line must
                // not make every upload of this machine fail.
                match problem(&e) {
                    None => out.push(e),
                    Some(why) => fail(skipped, format!("hook event line: {why}")),
                }
            }
            Err(_) => fail(skipped, "malformed hook event line".into()),
        }
    }
    offset += whole as u64;
    *budget = budget.saturating_sub(offset - start);
    Some(EventFileMark { path: shown, inode_sig: sig, offset: offset as i64 })
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
    match &e.stages_ms {
        Some(v) if !v.is_object() || v.to_string().len() > 4000 => Some("stages_ms is not a small object".into()),
        _ => None,
    }
}
