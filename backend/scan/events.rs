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
}

/// Identity of a file: when it changes (rotation), the file is read from the start again.
fn inode_sig(md: &fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}:{}", md.dev(), md.ino())
}

/// Read the events appended to `path` since `prev` (inode, offset).
pub fn read_events(
    path: &Path,
    prev: Option<&(String, i64)>,
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
    if let Err(e) = f.read_to_end(&mut buf) {
        fail(skipped, format!("hook events {}", super::walk::reason(&e)));
        return None;
    }
    let whole = buf.iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
    for line in buf[..whole].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<Line>(line) {
            Ok(l) if matches!(l.event.as_str(), "hit" | "miss" | "compile") => out.push(HookEvent {
                ts: (l.ts * 1000.0).round() as i64,
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
