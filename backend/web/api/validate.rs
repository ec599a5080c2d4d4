//! What the server checks of an upload, with the scanner's own rules (`crate::rules`).
//!
//! Only what names the scan itself is checked whole: its format, its machine (the token's), its
//! client id and root; a bad one is a 4xx naming the field. Every record (an entry, a hook event,
//! a best config, an autotune decision...) is parsed and checked on its own: one that breaks a
//! rule is skipped with its reason ([`crate::rules::Item`], [`crate::rules::screen`]) and the
//! rest is stored, so no client, older, newer or hostile, can freeze a node out.

use crate::model::{
    BestConfig, Entry, EventFileMark, HookEvent, InductorAutotune, REPORT_FORMAT, ScanPart, ScanReport, Skip, ToolSize,
    valid_machine_name,
};
use crate::rules::{self, Item, screen, trunc};
use crate::web::error::AppError;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub use crate::rules::is_sha256;

/// An uploaded scan report (`POST /api/v1/scans`), each record parsed on its own.
#[derive(Deserialize)]
pub struct ReportWire {
    pub format: u32,
    pub client_id: String,
    pub machine: String,
    pub root: String,
    pub scanned_at: i64,
    pub duration_ms: i64,
    pub entries: Vec<Item<Entry>>,
    #[serde(default)]
    pub unchanged: Vec<Item<String>>,
    #[serde(default)]
    pub skipped: Vec<Item<Skip>>,
    #[serde(default)]
    pub best_configs: Vec<Item<BestConfig>>,
    #[serde(default)]
    pub events: Vec<Item<HookEvent>>,
    #[serde(default)]
    pub event_files: Vec<Item<EventFileMark>>,
    #[serde(default)]
    pub blobs: BTreeMap<String, String>,
    #[serde(default)]
    pub beside: Vec<Item<ToolSize>>,
    #[serde(default)]
    pub inductor_autotune: Vec<Item<InductorAutotune>>,
}

/// One part of a staged upload (`PUT /api/v1/uploads/{id}/parts/{n}`), parsed record by record.
#[derive(Deserialize, Default)]
pub struct PartWire {
    #[serde(default)]
    pub entries: Vec<Item<Entry>>,
    #[serde(default)]
    pub unchanged: Vec<Item<String>>,
    #[serde(default)]
    pub skipped: Vec<Item<Skip>>,
    #[serde(default)]
    pub best_configs: Vec<Item<BestConfig>>,
    #[serde(default)]
    pub events: Vec<Item<HookEvent>>,
    #[serde(default)]
    pub inductor_autotune: Vec<Item<InductorAutotune>>,
}

/// The commit of a staged upload, its records parsed on their own.
#[derive(Deserialize)]
pub struct CommitWire {
    pub parts: i64,
    pub duration_ms: i64,
    #[serde(default)]
    pub event_files: Vec<Item<EventFileMark>>,
    #[serde(default)]
    pub beside: Vec<Item<ToolSize>>,
}

/// What names a scan: 403 when it is for another machine than the token's, 422 otherwise.
pub fn header(
    format: u32,
    want: u32,
    client_id: &str,
    machine: &str,
    root: &str,
    token_machine: &str,
) -> Result<(), AppError> {
    let bad = |m: String| Err(AppError::Unprocessable(m));
    if format != want {
        return bad(format!("report format {format} is not supported here (this endpoint reads format {want})"));
    }
    if !valid_machine_name(machine) {
        return bad(format!("invalid machine name {:?}", trunc(machine)));
    }
    if machine != token_machine {
        return Err(AppError::Forbidden(format!(
            "this token uploads for machine {token_machine:?}, not {:?}",
            trunc(machine)
        )));
    }
    if client_id.is_empty() || client_id.len() > 128 || !client_id.bytes().all(|b| b.is_ascii_graphic()) {
        return bad("client_id must be 1-128 printable ASCII characters".into());
    }
    if root.is_empty() || root.contains('\0') || root.len() > rules::MAX_PATH {
        return bad("root must be a non-empty path without NUL".into());
    }
    Ok(())
}

/// A scan's numbers of its own.
fn times(scanned_at: i64, duration_ms: i64) -> Result<(), AppError> {
    rules::within("scanned_at", scanned_at, &rules::TIME_MS)
        .and_then(|()| rules::within("duration_ms", duration_ms, &rules::DURATION_MS))
        .map_err(AppError::Unprocessable)
}

/// Counts of a report's lists: each at most [`rules::MAX_ITEMS`].
fn counts(lists: &[(&str, usize)]) -> Result<(), AppError> {
    match lists.iter().find(|(_, n)| *n > rules::MAX_ITEMS) {
        Some((what, n)) => {
            Err(AppError::Unprocessable(format!("{what}: {n} items, more than the {} allowed", rules::MAX_ITEMS)))
        }
        None => Ok(()),
    }
}

fn unchanged_dir(d: &String) -> Result<(), String> {
    if rules::is_rel_path(d) {
        Ok(())
    } else {
        Err(format!("unchanged dir {:?} is not a relative path inside the cache", trunc(d)))
    }
}

fn no_check<T>(_: &T) -> Result<(), String> {
    Ok(())
}

/// A part's records screened: those that pass, and a skip for each other one.
pub fn part(w: PartWire) -> Result<ScanPart, AppError> {
    counts(&[
        ("entries", w.entries.len()),
        ("unchanged", w.unchanged.len()),
        ("skipped", w.skipped.len()),
        ("best_configs", w.best_configs.len()),
        ("events", w.events.len()),
        ("inductor_autotune", w.inductor_autotune.len()),
    ])?;
    let mut skipped = vec![];
    let mut p = ScanPart {
        entries: screen(w.entries, rules::entry, |e| &e.dir, &mut skipped),
        unchanged: screen(w.unchanged, unchanged_dir, |d| d, &mut skipped),
        skipped: vec![],
        best_configs: screen(w.best_configs, rules::best_config, |b| &b.path, &mut skipped),
        events: screen(w.events, rules::event, |e| &e.key, &mut skipped),
        inductor_autotune: screen(w.inductor_autotune, rules::decision, |a| &a.path, &mut skipped),
    };
    let sent = screen(w.skipped, no_check, |s| &s.path, &mut skipped);
    p.skipped = sent.into_iter().chain(skipped).map(rules::skip).collect();
    Ok(p)
}

/// A commit's records screened (what breaks a rule is left out, counted in `skipped`).
pub fn commit(w: CommitWire, skipped: &mut Vec<Skip>) -> Result<crate::model::UploadCommit, AppError> {
    rules::within("duration_ms", w.duration_ms, &rules::DURATION_MS).map_err(AppError::Unprocessable)?;
    if !(0..=rules::MAX_ITEMS as i64).contains(&w.parts) {
        return Err(AppError::Unprocessable(format!("parts = {} is out of range", w.parts)));
    }
    counts(&[("event_files", w.event_files.len()), ("beside", w.beside.len())])?;
    Ok(crate::model::UploadCommit {
        parts: w.parts,
        duration_ms: w.duration_ms,
        event_files: screen(w.event_files, rules::event_file, |f| &f.path, skipped),
        beside: screen(w.beside, rules::tool, |t| &t.path, skipped),
    })
}

/// A whole report (`POST /api/v1/scans`) checked: its header whole (4xx), each record on its
/// own (skipped with its reason when it breaks a rule), each blob against its sha256.
pub fn validate(w: ReportWire, token_machine: &str) -> Result<ScanReport, AppError> {
    header(w.format, REPORT_FORMAT, &w.client_id, &w.machine, &w.root, token_machine)?;
    times(w.scanned_at, w.duration_ms)?;
    counts(&[("event_files", w.event_files.len()), ("beside", w.beside.len())])?;
    let p = part(PartWire {
        entries: w.entries,
        unchanged: w.unchanged,
        skipped: w.skipped,
        best_configs: w.best_configs,
        events: w.events,
        inductor_autotune: w.inductor_autotune,
    })?;
    let mut skipped = p.skipped;
    let c = commit(
        CommitWire { parts: 0, duration_ms: w.duration_ms, event_files: w.event_files, beside: w.beside },
        &mut skipped,
    )?;
    let mut blobs = w.blobs;
    blobs.retain(|sha, text| {
        let ok = is_sha256(sha)
            && text.len() <= crate::scan::limits::MAX_TEXT_BYTES as usize
            && hex::encode(Sha256::digest(text.as_bytes())) == *sha;
        if !ok {
            skipped.push(rules::out_of_bounds(
                sha,
                "IR blob over the size cap or not matching its sha256: its text not stored".into(),
            ));
        }
        ok
    });
    Ok(ScanReport {
        format: w.format,
        client_id: w.client_id,
        machine: w.machine,
        root: w.root,
        scanned_at: w.scanned_at,
        duration_ms: w.duration_ms,
        entries: p.entries,
        unchanged: p.unchanged,
        skipped,
        best_configs: p.best_configs,
        events: p.events,
        event_files: c.event_files,
        blobs,
        beside: c.beside,
        inductor_autotune: p.inductor_autotune,
    })
}
