//! What the server checks of an upload, with the scanner's own rules (`crate::rules`).
//!
//! Only what names the scan itself is checked whole: its format, its machine (the token's), its
//! client id and root; a bad one is a 4xx naming the field. Every record (an entry, a hook event,
//! a best config, an autotune decision...) is parsed and checked on its own: one that breaks a
//! rule is skipped with its reason ([`crate::rules::Item`], [`crate::rules::screen`]) and the
//! rest is stored, so no client, older, newer or hostile, can freeze a node out.

use crate::model::{
    BestConfig, Entry, EventFileMark, Hazards, HookEvent, InductorAutotune, Present, ScanPart, Skip, ToolSize,
    valid_machine_name,
};
use crate::rules::{self, Item, screen, trunc};
use crate::web::error::AppError;
use serde::Deserialize;

pub use crate::rules::is_sha256;

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
    #[serde(default)]
    pub present: Vec<Item<Present>>,
    #[serde(default)]
    pub stamps: Vec<Item<(String, String)>>,
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
    /// Absent from older clients.
    #[serde(default)]
    pub hazards: Option<Item<Hazards>>,
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

/// Counts of a report's lists: each at most [`rules::MAX_ITEMS`].
fn counts(lists: &[(&str, usize)]) -> Result<(), AppError> {
    match lists.iter().find(|(_, n)| *n > rules::MAX_ITEMS) {
        Some((what, n)) => {
            Err(AppError::Unprocessable(format!("{what}: {n} items, more than the {} allowed", rules::MAX_ITEMS)))
        }
        None => Ok(()),
    }
}

fn unchanged_dir(d: &str) -> Result<(), String> {
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
        ("present", w.present.len()),
        ("stamps", w.stamps.len()),
    ])?;
    let mut skipped = vec![];
    let mut p = ScanPart {
        entries: screen(w.entries, rules::entry, |e| &e.dir, &mut skipped),
        unchanged: screen(w.unchanged, |d: &String| unchanged_dir(d), |d| d, &mut skipped),
        skipped: vec![],
        best_configs: screen(w.best_configs, rules::best_config, |b| &b.path, &mut skipped),
        events: screen(w.events, rules::event, |e| &e.key, &mut skipped),
        inductor_autotune: screen(w.inductor_autotune, rules::decision, |a| &a.path, &mut skipped),
        present: screen(w.present, rules::present, |p| p.dir(), &mut skipped),
        stamps: screen(w.stamps, rules::restamp, |s| &s.0, &mut skipped),
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
        hazards: w.hazards.and_then(|h| hazards(h, skipped)),
    })
}

/// The commit's hazards within their bounds (`scan::hazards::check`), else left out with a skip:
/// the scan stands without them.
fn hazards(h: Item<Hazards>, skipped: &mut Vec<Skip>) -> Option<Hazards> {
    let why = match h {
        Item::Ok(h) => match crate::scan::hazards::check(h) {
            Ok(h) => return Some(h),
            Err(why) => why,
        },
        Item::Bad(_, why) => format!("hazards: {why}"),
    };
    skipped.push(rules::out_of_bounds("(hazards)", why));
    None
}
