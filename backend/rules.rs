//! The contract between the scanner and the server: what a valid scan record is.
//!
//! One rule set, used by both sides. The scanner screens what it read through [`screen_tail`]
//! and [`entry`] before a record reaches the local database or an upload, so what it emits is
//! by construction what a server of this version accepts. The server screens every uploaded
//! record again ([`Item`] and the same functions), because an older or newer client, or a
//! hostile one, may send anything. A record that breaks a rule is never a reason to refuse a
//! whole scan: it becomes a [`Skip`] of kind [`SkipKind::OutOfBounds`] with its reason, counted
//! on the scan's summary, and the rest is stored.
//!
//! The bounds are far above anything a real Triton cache holds, and low enough that no sum the
//! pages compute (bytes of a million entries, compile seconds of a year of events) can overflow
//! 64 bits (docs/THREAT-MODEL.md lists them).

use crate::model::{BestConfig, Entry, EventFileMark, HookEvent, InductorAutotune, Skip, SkipKind, ToolSize};
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
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
/// Files, bytes of what another tool keeps beside a cache (`beside`).
pub const TOOL_COUNT: RangeInclusive<i64> = 0..=(1 << 50);
/// Records in one report or upload: entries, events, skips...
pub const MAX_ITEMS: usize = 10_000_000;
/// Files per entry, autotune configs per entry, event files per scan.
pub const MAX_PER_ENTRY: usize = 100_000;
/// One file name as the scanner writes it: 255 bytes, each maybe shown as a 4-byte `\xNN`.
pub const MAX_NAME: usize = 1024;
/// One relative path as the scanner writes it.
pub const MAX_PATH: usize = 16_384;
/// JSON text of one uploaded record (an entry with its metadata: the scanner parses metadata
/// files up to 4 MiB, and `.autotune.json` up to 16 MiB).
pub const MAX_RECORD_BYTES: usize = 20 << 20;
/// JSON values in one uploaded record. A value costs the server ~50 bytes parsed: this keeps
/// any record under ~10 MB in memory whatever its text (a 32 KiB gzip of `[0,0,0,…]` used to
/// cost 1.6 GB). Real metadata has ~100 values, an `.autotune.json` a few thousand.
pub const MAX_RECORD_VALUES: usize = 200_000;
/// Autotune timings per config (Triton's quantiles: 3).
pub const MAX_TIMINGS: usize = 16;
/// Inductor's precision name (`float32`, `tf32`...).
pub const MAX_PRECISION: usize = 64;

/// `field = value is out of range (lo..=hi)` unless the value is within its bound.
pub fn within(field: &str, v: i64, range: &RangeInclusive<i64>) -> Result<(), String> {
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

/// One file name as the scanner writes it (non-UTF-8 bytes as `\xNN`, a backslash as `\\`):
/// no separator, not `.` or `..`, no NUL. The server never opens it: it is a label.
pub fn is_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME && s != "." && s != ".." && !s.contains(['/', '\0'])
}

/// A relative path below the root, as the scanner writes it: not absolute, no `.`/`..` or
/// empty component, no NUL. Backslashes and colons are ordinary characters of a Linux name.
pub fn is_rel_path(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_PATH && !s.starts_with('/') && s.split('/').all(is_name)
}

pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// At most 80 characters of client input, for an error or a skip reason.
pub fn trunc(s: &str) -> &str {
    match s.char_indices().nth(80) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// An IR blob: UTF-8 text of at most `max` bytes whose sha256 is `sha` (both the staged
/// upload's blob route and a whole report's `blobs` check it so).
pub fn blob(sha: &str, text: &[u8], max: usize) -> Result<(), String> {
    use sha2::Digest;
    if !is_sha256(sha) {
        return Err(format!("not a sha256: {:?}", trunc(sha)));
    }
    if text.len() > max {
        return Err(format!("blob {sha}: {} bytes of text, over the {max} allowed", text.len()));
    }
    if hex::encode(sha2::Sha256::digest(text)) != sha {
        return Err(format!("blob {sha} does not match its sha256"));
    }
    if std::str::from_utf8(text).is_err() {
        return Err(format!("blob {sha} is not UTF-8 text"));
    }
    Ok(())
}

/// One entry: plain key, dir inside the cache, every number within its bound, sane artifacts.
pub fn entry(e: &Entry) -> Result<(), String> {
    if !is_name(&e.key) {
        return Err(format!("entry key {:?} is not a plain name", trunc(&e.key)));
    }
    if !is_rel_path(&e.dir) {
        return Err(format!("entry dir {:?} is not a relative path inside the cache", trunc(&e.dir)));
    }
    if e.sig.len() > MAX_RECORD_BYTES {
        return Err("entry signature too long".into());
    }
    if let Some(st) = &e.dir_stamp {
        stamp(st)?;
    }
    let f = |name: &str| format!("entry {}: {name}", trunc(&e.key));
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
            return Err(format!("artifact name {:?} is not a plain file name", trunc(&a.name)));
        }
        if !is_sha256(&a.sha256) {
            return Err(format!("artifact {} has a bad sha256", trunc(&a.name)));
        }
        within(&f(&format!("artifact {} bytes", trunc(&a.name))), a.bytes, &FILE_BYTES)?;
    }
    if let Some(at) = &e.autotune {
        count(&f("autotune configs"), at.configs.len(), MAX_PER_ENTRY)?;
        for c in &at.configs {
            within_opt(&f("autotune num_warps"), c.num_warps, &LAUNCH)?;
            within_opt(&f("autotune num_stages"), c.num_stages, &LAUNCH)?;
            // A failed config is timed inf (see model.rs); NaN and negative times are nonsense.
            if c.timings_ms.len() > MAX_TIMINGS || c.timings_ms.iter().any(|t| t.is_nan() || *t < 0.0) {
                return Err(f(&format!("autotune timings_ms must be at most {MAX_TIMINGS} times, each ≥ 0 or inf")));
            }
        }
    }
    Ok(())
}

/// A dir stamp as the scanner writes it (`fsat::Stamp`: three hex numbers and two dots).
pub fn stamp(st: &str) -> Result<(), String> {
    if st.is_empty() || st.len() > 64 || !st.bytes().all(|b| b.is_ascii_hexdigit() || b == b'.') {
        return Err(format!("dir stamp {:?} is not a stamp", trunc(st)));
    }
    Ok(())
}

/// An entry the server holds the facts of ([`crate::model::Present`]).
pub fn present(p: &crate::model::Present) -> Result<(), String> {
    if !is_name(&p.key) {
        return Err(format!("entry key {:?} is not a plain name", trunc(&p.key)));
    }
    if !is_rel_path(p.dir()) {
        return Err(format!("entry dir {:?} is not a relative path inside the cache", trunc(p.dir())));
    }
    if !is_fact(&p.fact) {
        return Err(format!("entry {}: fact {:?} is not a fact digest", trunc(&p.key), trunc(&p.fact)));
    }
    if p.sig.is_empty() || p.sig.len() > 64 || !p.sig.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("entry {}: signature {:?} is not a signature", trunc(&p.key), trunc(&p.sig)));
    }
    within_opt(&format!("entry {}: created_at", trunc(&p.key)), p.created_at, &TIME_MS)?;
    if let Some(g) = &p.group {
        if !is_sha256(&g.sha256) {
            return Err(format!("entry {}: its group file has a bad sha256", trunc(&p.key)));
        }
        within(&format!("entry {}: group file bytes", trunc(&p.key)), g.bytes, &FILE_BYTES)?;
        within(&format!("entry {}: bytes", trunc(&p.key)), g.entry_bytes, &FILE_BYTES)?;
        if !g.at.starts_with('/') || g.at.len() > MAX_PATH || g.at.contains('\0') {
            return Err(format!("entry {}: group dir {:?} is not an absolute path", trunc(&p.key), trunc(&g.at)));
        }
    }
    p.stamp.as_deref().map_or(Ok(()), stamp)
}

/// A [`crate::model::fact_digest`]: 32 lowercase hex digits.
pub fn is_fact(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// An unchanged entry's new dir stamp: (entry dir, stamp).
pub fn restamp((dir, st): &(String, String)) -> Result<(), String> {
    if !is_rel_path(dir) {
        return Err(format!("entry dir {:?} is not a relative path inside the cache", trunc(dir)));
    }
    stamp(st)
}

/// An Inductor `.best_config`.
pub fn best_config(b: &BestConfig) -> Result<(), String> {
    if !is_rel_path(&b.path) {
        return Err(format!("best_config path {:?} is not a relative path inside the cache", trunc(&b.path)));
    }
    within_opt("best_config num_warps", b.num_warps, &LAUNCH)?;
    within_opt("best_config num_stages", b.num_stages, &LAUNCH)
}

/// One hook event line (`scan::events::problem` says what the hook writes), and its counters.
pub fn event(e: &HookEvent) -> Result<(), String> {
    if let Some(why) = crate::scan::events::problem(e) {
        return Err(format!("hook event: {why}"));
    }
    within("hook event pid", e.pid, &PID)?;
    within_opt("hook event seq", e.seq, &SEQ)
}

/// How far an event file was read.
pub fn event_file(f: &EventFileMark) -> Result<(), String> {
    if f.path.is_empty() || f.path.len() > MAX_PATH || f.path.contains('\0') {
        return Err(format!("event file path {:?} is empty, too long or has a NUL", trunc(&f.path)));
    }
    if f.inode_sig.is_empty() || f.inode_sig.len() > 128 {
        return Err(format!("event file {:?} has a bad inode signature", trunc(&f.path)));
    }
    within("event file offset", f.offset, &OFFSET)
}

/// One of Inductor's max-autotune decisions.
pub fn decision(a: &InductorAutotune) -> Result<(), String> {
    if !is_rel_path(&a.path) {
        return Err(format!("autotune decision path {:?} is not a relative path inside the cache", trunc(&a.path)));
    }
    if a.op.len() > 1024 || a.key.len() > 65536 || a.precision.len() > MAX_PRECISION {
        return Err(format!(
            "autotune decision: op over 1024 bytes, shape key over 65536 or precision over {MAX_PRECISION} ({:?})",
            trunc(&a.precision)
        ));
    }
    if a.choices.is_empty() || a.choices.len() > 4096 {
        return Err(format!("autotune decision: {} choices (1-4096 allowed)", a.choices.len()));
    }
    let bad =
        |c: &&crate::model::AutotuneChoice| c.name.len() > 1024 || c.ms.is_some_and(|m| !m.is_finite() || m < 0.0);
    if let Some(c) = a.choices.iter().find(bad) {
        return Err(format!(
            "autotune choice {:?}: name over 1024 bytes, or a time that is not finite and ≥ 0",
            trunc(&c.name)
        ));
    }
    Ok(())
}

/// What another tool keeps beside the cache (a count, never trusted for sums: see `fmt`).
pub fn tool(t: &ToolSize) -> Result<(), String> {
    if t.tool.is_empty() || t.tool.len() > 64 || t.path.len() > MAX_PATH || t.path.contains('\0') {
        return Err(format!("beside {:?}: a tool name of 1-64 bytes and a path without NUL", trunc(&t.tool)));
    }
    within("beside files", t.files, &TOOL_COUNT)?;
    if let Some(n) = t.inodes {
        within("beside inodes", n, &TOOL_COUNT)?;
    }
    if t.holds.as_ref().is_some_and(|h| h.len() > MAX_HOLDS) {
        return Err(format!("beside {:?}: what it holds in at most {MAX_HOLDS} bytes", trunc(&t.tool)));
    }
    within("beside bytes", t.bytes, &TOOL_COUNT)
}

/// The longest "holds" text of a `beside` record (the scanner writes at most ~2 KB of key
/// factors, and an artifact's kernel names).
pub const MAX_HOLDS: usize = 16 << 10;

/// A skip record: its path and reason within their bounds (cut, never refused: it is a label).
pub fn skip(mut s: Skip) -> Skip {
    if s.path.len() > MAX_PATH {
        s.path = trunc(&s.path).to_string();
    }
    if s.reason.len() > 1000 {
        s.reason = format!("{}…", trunc(&s.reason));
    }
    s
}

/// An entry that breaks the contract, as the skip that stands in for it.
pub fn out_of_bounds(path: &str, why: String) -> Skip {
    skip(Skip::new(path, SkipKind::OutOfBounds, why))
}

/// Keep the records that pass `check`; each other one becomes a skip (`path` names it).
pub fn keep<T>(
    items: &mut Vec<T>,
    check: impl Fn(&T) -> Result<(), String>,
    path: impl Fn(&T) -> &str,
    skipped: &mut Vec<Skip>,
) {
    items.retain(|i| match check(i) {
        Ok(()) => true,
        Err(why) => {
            skipped.push(out_of_bounds(path(i), why));
            false
        }
    });
}

/// The records of a scan besides its entries, screened: what breaks a rule moves to `skipped`.
pub fn screen_tail(tail: &mut crate::scan::Tail) {
    let skipped = &mut tail.skipped;
    keep(&mut tail.best_configs, best_config, |b| &b.path, skipped);
    keep(&mut tail.events, event, |e| &e.key, skipped);
    keep(&mut tail.event_files, event_file, |f| &f.path, skipped);
    keep(&mut tail.inductor_autotune, decision, |a| &a.path, skipped);
    keep(
        &mut tail.unchanged,
        |d| if is_rel_path(d) { Ok(()) } else { Err("not a relative path".into()) },
        |d| d,
        skipped,
    );
    let cut: Vec<Skip> = std::mem::take(skipped).into_iter().map(skip).collect();
    *skipped = cut;
}

/// One uploaded record, parsed on its own: a record that is not valid JSON of its type, too
/// big, or holds too many values becomes `Bad` with the reason, and never costs the rest of
/// the upload. Parsing costs at most [`MAX_RECORD_BYTES`] of text and [`MAX_RECORD_VALUES`]
/// values, whatever the record holds.
#[derive(Debug)]
pub enum Item<T> {
    Ok(T),
    /// (what names the record, if it could be read; why it was refused)
    Bad(String, String),
}

impl<'de, T: DeserializeOwned> serde::Deserialize<'de> for Item<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <Box<serde_json::value::RawValue>>::deserialize(d)?;
        Ok(Item::parse(raw.get()))
    }
}

impl<T: DeserializeOwned> Item<T> {
    pub fn parse(raw: &str) -> Item<T> {
        let name = || name_of(raw);
        if raw.len() > MAX_RECORD_BYTES {
            return Item::Bad(name(), format!("a record of {} bytes, over the {MAX_RECORD_BYTES} allowed", raw.len()));
        }
        let mut n = 0usize;
        let mut de = serde_json::Deserializer::from_str(raw);
        if (Counter { n: &mut n }).deserialize(&mut de).is_err() {
            return Item::Bad(name(), format!("a record of more than {MAX_RECORD_VALUES} JSON values"));
        }
        match serde_json::from_str(raw) {
            Ok(v) => Item::Ok(v),
            Err(e) => Item::Bad(name(), format!("not a valid record: {e}")),
        }
    }
}

/// What names a record in a skip: its `dir`, `path` or `key` when it has one of them.
fn name_of(raw: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Named {
        dir: Option<String>,
        path: Option<String>,
        key: Option<String>,
    }
    let n: Option<Named> = serde_json::from_str(raw).ok();
    let n = n.and_then(|n| n.dir.or(n.path).or(n.key)).unwrap_or_else(|| "(unnamed record)".into());
    trunc(&n).to_string()
}

/// Counts the JSON values of a text without keeping them; fails past [`MAX_RECORD_VALUES`].
struct Counter<'a> {
    n: &'a mut usize,
}

impl Counter<'_> {
    fn one<E: serde::de::Error>(&mut self) -> Result<(), E> {
        *self.n += 1;
        if *self.n > MAX_RECORD_VALUES { Err(E::custom("too many values")) } else { Ok(()) }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: serde::de::Error>(mut self, _: bool) -> Result<(), E> {
        self.one()
    }
    fn visit_i64<E: serde::de::Error>(mut self, _: i64) -> Result<(), E> {
        self.one()
    }
    fn visit_u64<E: serde::de::Error>(mut self, _: u64) -> Result<(), E> {
        self.one()
    }
    fn visit_f64<E: serde::de::Error>(mut self, _: f64) -> Result<(), E> {
        self.one()
    }
    fn visit_str<E: serde::de::Error>(mut self, _: &str) -> Result<(), E> {
        self.one()
    }
    fn visit_unit<E: serde::de::Error>(mut self) -> Result<(), E> {
        self.one()
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.one()?;
        while seq.next_element_seed(Counter { n: self.n })?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.one()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Counter { n: self.n })?;
        }
        Ok(())
    }
}

/// Uploaded records of one kind, parsed one by one: the good ones pass `check` too; every
/// other one becomes a skip.
pub fn screen<T>(
    items: Vec<Item<T>>,
    check: impl Fn(&T) -> Result<(), String>,
    path: impl Fn(&T) -> &str,
    skipped: &mut Vec<Skip>,
) -> Vec<T> {
    let mut out = Vec::with_capacity(items.len());
    for i in items {
        match i {
            Item::Ok(v) => match check(&v) {
                Ok(()) => out.push(v),
                Err(why) => skipped.push(out_of_bounds(path(&v), why)),
            },
            Item::Bad(name, why) => skipped.push(out_of_bounds(&name, why)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_checks() {
        for p in ["triton/0/ABC", "ABC", "x\\xff.bin", "back\\slash", "a:b/c"] {
            assert!(is_rel_path(p), "{p:?}");
        }
        for p in ["", "/etc", "../x", "a/../b", "a\0b", "..", "a//b", "a/./b", "a/"] {
            assert!(!is_rel_path(p), "{p:?}");
        }
        for n in ["", ".", "..", "a/b", "a\0"] {
            assert!(!is_name(n), "{n:?}");
        }
        assert!(is_name("x\\xff.bin") && is_name("back\\slash.txt"));
    }

    #[test]
    fn bounds_name_the_field() {
        let e = within("entry K: bytes", i64::MAX, &FILE_BYTES).unwrap_err();
        assert!(e.contains("entry K: bytes = 9223372036854775807 is out of range"), "{e}");
        assert!(within("x", 64 << 30, &FILE_BYTES).is_ok() && within("x", -1, &FILE_BYTES).is_err());
    }

    /// A record of a million zeros is refused by counting, before any value is built.
    #[test]
    fn a_record_of_too_many_values_is_refused_without_parsing_it() {
        let zeros = format!("{{\"dir\": \"K\", \"metadata\": [{}0]}}", "0,".repeat(MAX_RECORD_VALUES));
        match Item::<serde_json::Value>::parse(&zeros) {
            Item::Bad(name, why) => assert!(name == "K" && why.contains("JSON values"), "{name} {why}"),
            Item::Ok(_) => panic!("parsed"),
        }
        let ok = format!("{{\"metadata\": [{}0]}}", "0,".repeat(1000));
        assert!(matches!(Item::<serde_json::Value>::parse(&ok), Item::Ok(_)));
        match Item::<Skip>::parse("{\"path\": 3}") {
            Item::Bad(name, why) => {
                assert!(name == "(unnamed record)" && why.starts_with("not a valid record"), "{why}")
            }
            Item::Ok(_) => panic!("parsed"),
        }
    }
}
