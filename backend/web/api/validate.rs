//! What an uploaded scan report must satisfy before anything of it is stored: names that are
//! plain names, paths that stay inside the cache, blobs that match their sha256, and every
//! number within a documented bound (the `BOUNDS` table below, and docs/THREAT-MODEL.md).
//!
//! The bounds are far above anything a real Triton cache holds, and low enough that no sum the
//! pages compute (bytes of a million entries, compile seconds of a year of events) can overflow
//! 64 bits. A report that breaks one is refused whole with 422 and a message naming the field.

use crate::model::{Entry, REPORT_FORMAT, ScanReport, valid_machine_name};
use crate::web::error::AppError;
use sha2::{Digest, Sha256};
use std::ops::RangeInclusive;

/// Unix milliseconds up to 2100-01-01 (file mtimes, scan times).
pub const TIME_MS: RangeInclusive<i64> = 0..=4_102_444_800_000;
/// Bytes of one file or one entry: 64 GiB (a cubin is a few MiB).
pub const FILE_BYTES: RangeInclusive<i64> = 0..=(64 << 30);
/// A scan's duration: one week.
pub const DURATION_MS: RangeInclusive<i64> = 0..=604_800_000;
/// warp size, num_warps, num_stages, num_ctas.
pub const LAUNCH: RangeInclusive<i64> = 0..=4096;
/// Registers per thread.
pub const REGISTERS: RangeInclusive<i64> = 0..=65_536;
/// Spill and shared-memory bytes.
pub const RESOURCE_BYTES: RangeInclusive<i64> = 0..=(1 << 32);
/// How far an event file was read.
pub const OFFSET: RangeInclusive<i64> = 0..=(1 << 50);
/// Process ids and hook line counters.
pub const PID: RangeInclusive<i64> = 0..=(1 << 32);
pub const SEQ: RangeInclusive<i64> = 0..=(1 << 53);
/// Items in one report: entries, events, skips..., and files per entry, configs per autotune.
pub const MAX_ITEMS: usize = 10_000_000;
pub const MAX_PER_ENTRY: usize = 100_000;

/// Check a parsed report before anything is stored: 403 when it is for another machine than
/// the token's, 422 for anything that would store nonsense (unknown format, path-like names,
/// blobs whose content does not match their sha256, a number out of its bound).
pub fn validate(r: &ScanReport, token_machine: &str) -> Result<(), AppError> {
    let bad = |m: String| Err(AppError::Unprocessable(m));
    if r.format != REPORT_FORMAT {
        return bad(format!("report format {} is not supported (this server reads format {REPORT_FORMAT})", r.format));
    }
    if !valid_machine_name(&r.machine) {
        return bad(format!("invalid machine name {:?}", trunc(&r.machine)));
    }
    if r.machine != token_machine {
        return Err(AppError::Forbidden(format!(
            "this token uploads for machine {token_machine:?}, not {:?}",
            trunc(&r.machine)
        )));
    }
    if r.client_id.is_empty() || r.client_id.len() > 128 || !r.client_id.bytes().all(|b| b.is_ascii_graphic()) {
        return bad("client_id must be 1-128 printable ASCII characters".into());
    }
    if r.root.is_empty() || r.root.contains('\0') || r.root.len() > 4096 {
        return bad("root must be a non-empty path without NUL".into());
    }
    let odd = |t: &crate::model::ToolSize| {
        t.tool.len() > 64 || t.path.len() > 4096 || t.path.contains('\0') || t.files < 0 || t.bytes < 0
    };
    if r.beside.len() > 16 || r.beside.iter().any(odd) {
        return bad("beside: at most 16 tools, each a name up to 64 bytes, a path without NUL, counts >= 0".into());
    }
    let odd_choice = |c: &crate::model::AutotuneChoice| c.name.len() > 1024 || c.ms.is_some_and(|m| !m.is_finite());
    let odd_decision = |a: &crate::model::InductorAutotune| {
        !is_rel_path(&a.path)
            || a.op.len() > 1024
            || a.key.len() > 65536
            || a.precision.len() > 64
            || a.choices.is_empty()
            || a.choices.len() > 4096
            || a.choices.iter().any(odd_choice)
    };
    if r.inductor_autotune.len() > 100_000 || r.inductor_autotune.iter().any(odd_decision) {
        return bad(
            "inductor_autotune: at most 100,000 decisions, each with 1-4096 choices, times finite or null".into()
        );
    }
    let bad_event = crate::scan::events::problem;
    if let Some((i, why)) = r.events.iter().enumerate().find_map(|(i, e)| bad_event(e).map(|w| (i, w))) {
        return bad(format!("hook event {i}: {why}"));
    }
    numbers(r).map_err(AppError::Unprocessable)?;
    for e in &r.entries {
        entry(e).map_err(AppError::Unprocessable)?;
    }
    for p in r.unchanged.iter().chain(r.best_configs.iter().map(|b| &b.path)) {
        if !is_rel_path(p) {
            return bad(format!("path {:?} is not a relative path inside the cache", trunc(p)));
        }
    }
    for f in &r.event_files {
        if f.path.is_empty() || f.path.len() > 4096 || f.path.contains('\0') {
            return bad(format!("event file path {:?} is empty, too long or has a NUL", trunc(&f.path)));
        }
        if f.inode_sig.is_empty() || f.inode_sig.len() > 128 {
            return bad(format!("event file {:?} has a bad inode signature", trunc(&f.path)));
        }
    }
    for (sha, text) in &r.blobs {
        if !is_sha256(sha) || hex::encode(Sha256::digest(text.as_bytes())) != *sha {
            return bad(format!("blob {:?} does not match its sha256", trunc(sha)));
        }
    }
    Ok(())
}

/// `field = value is out of range (lo..=hi)` unless the value is within its bound.
fn within(field: &str, v: i64, range: &RangeInclusive<i64>) -> Result<(), String> {
    if range.contains(&v) {
        Ok(())
    } else {
        Err(format!("{field} = {v} is out of range ({}..={})", range.start(), range.end()))
    }
}

fn within_opt(field: &str, v: Option<i64>, range: &RangeInclusive<i64>) -> Result<(), String> {
    v.map_or(Ok(()), |v| within(field, v, range))
}

fn count(field: &str, n: usize, max: usize) -> Result<(), String> {
    if n <= max { Ok(()) } else { Err(format!("{field}: {n} items, more than the {max} allowed")) }
}

/// The report's own numbers, its list lengths, and those of its events, best configs and marks.
fn numbers(r: &ScanReport) -> Result<(), String> {
    within("scanned_at", r.scanned_at, &TIME_MS)?;
    within("duration_ms", r.duration_ms, &DURATION_MS)?;
    count("entries", r.entries.len(), MAX_ITEMS)?;
    count("unchanged", r.unchanged.len(), MAX_ITEMS)?;
    count("skipped", r.skipped.len(), MAX_ITEMS)?;
    count("events", r.events.len(), MAX_ITEMS)?;
    count("best_configs", r.best_configs.len(), MAX_ITEMS)?;
    count("event_files", r.event_files.len(), MAX_PER_ENTRY)?;
    for s in &r.skipped {
        if s.path.len() > 4096 || s.reason.len() > 1000 {
            return Err(format!("skipped {:?}: path or reason too long", trunc(&s.path)));
        }
    }
    // (time, duration, sign: `scan::events::problem`, checked first)
    for (i, e) in r.events.iter().enumerate() {
        within(&format!("hook event {i}: pid"), e.pid, &PID)?;
        within_opt(&format!("hook event {i}: seq"), e.seq, &SEQ)?;
    }
    for b in &r.best_configs {
        within_opt(&format!("best_config {}: num_warps", trunc(&b.path)), b.num_warps, &LAUNCH)?;
        within_opt(&format!("best_config {}: num_stages", trunc(&b.path)), b.num_stages, &LAUNCH)?;
    }
    for f in &r.event_files {
        within(&format!("event file {}: offset", trunc(&f.path)), f.offset, &OFFSET)?;
    }
    Ok(())
}

/// One entry: plain key, dir inside the cache, every number within its bound, sane artifacts.
fn entry(e: &Entry) -> Result<(), String> {
    if !is_name(&e.key) {
        return Err(format!("entry key {:?} is not a plain name", trunc(&e.key)));
    }
    if !is_rel_path(&e.dir) {
        return Err(format!("entry dir {:?} is not a relative path inside the cache", trunc(&e.dir)));
    }
    let f = |name: &str| format!("entry {}: {name}", e.key);
    within(&f("bytes"), e.bytes, &FILE_BYTES)?;
    within_opt(&f("created_at"), e.created_at, &TIME_MS)?;
    within_opt(&f("warp_size"), e.warp_size, &LAUNCH)?;
    within_opt(&f("num_warps"), e.num_warps, &LAUNCH)?;
    within_opt(&f("num_stages"), e.num_stages, &LAUNCH)?;
    within_opt(&f("num_ctas"), e.num_ctas, &LAUNCH)?;
    within_opt(&f("registers"), e.registers, &REGISTERS)?;
    within_opt(&f("spills"), e.spills, &RESOURCE_BYTES)?;
    within_opt(&f("shared_bytes"), e.shared_bytes, &RESOURCE_BYTES)?;
    count(&f("artifacts"), e.artifacts.len(), MAX_PER_ENTRY)?;
    for a in &e.artifacts {
        if !is_name(&a.name) {
            return Err(format!("artifact name {:?} in entry {} is not a plain file name", trunc(&a.name), e.key));
        }
        if !is_sha256(&a.sha256) {
            return Err(format!("artifact {} in entry {} has a bad sha256", a.name, e.key));
        }
        within(&f(&format!("artifact {} bytes", a.name)), a.bytes, &FILE_BYTES)?;
    }
    if let Some(at) = &e.autotune {
        count(&f("autotune configs"), at.configs.len(), MAX_PER_ENTRY)?;
        for c in &at.configs {
            within_opt(&f("autotune num_warps"), c.num_warps, &LAUNCH)?;
            within_opt(&f("autotune num_stages"), c.num_stages, &LAUNCH)?;
            // A failed config is timed inf (see model.rs); NaN and negative times are nonsense.
            if c.timings_ms.len() > 16 || c.timings_ms.iter().any(|t| t.is_nan() || *t < 0.0) {
                return Err(f("autotune timings_ms must be at most 16 times, each ≥ 0 or inf"));
            }
        }
    }
    Ok(())
}

/// One path component: no separators, no `..`, no NUL.
pub fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s != "." && s != ".." && !s.contains(['/', '\\', '\0'])
}

/// A relative path below the root: not absolute, no `..` component, no NUL.
pub fn is_rel_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 4096
        && !s.starts_with(['/', '\\'])
        && !s.contains(['\0', ':']) // ':' rejects drive-letter paths like C:x
        && s.split(['/', '\\']).all(|c| c != "..")
}

pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Echo at most 80 characters of client input in an error.
pub fn trunc(s: &str) -> &str {
    match s.char_indices().nth(80) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_checks() {
        assert!(is_rel_path("triton/0/ABC"));
        assert!(is_rel_path("ABC"));
        for p in ["", "/etc", "../x", "a/../b", "a\0b", "..", "\\x", "C:x"] {
            assert!(!is_rel_path(p), "{p:?}");
        }
        for n in ["", ".", "..", "a/b", "a\\b", "a\0"] {
            assert!(!is_name(n), "{n:?}");
        }
    }

    #[test]
    fn bounds_name_the_field() {
        let e = within("entry K: bytes", i64::MAX, &FILE_BYTES).unwrap_err();
        assert!(e.contains("entry K: bytes = 9223372036854775807 is out of range"), "{e}");
        assert!(within("x", 64 << 30, &FILE_BYTES).is_ok() && within("x", -1, &FILE_BYTES).is_err());
    }
}
