//! A whole report (`POST /api/v1/scans`, clients before staged uploads), decoded as it is read.
//!
//! The body is never held whole, neither as bytes nor as values: a streaming JSON reader walks
//! it (through the capped gunzip), each record is parsed on its own ([`Item`]: its text size
//! and value count checked before any value is built), records are gathered into parts of
//! about [`PART_BYTES`] and handed to a [`Stage`] as they fill, and each IR blob is handed over
//! alone. The server's stage is a staged upload (`db::staging`), committed like any other: one
//! ingest path for both endpoints. Memory: one part, and the body's largest single JSON string
//! (at most the decompressed cap).

use super::validate::{self, PartWire};
use crate::model::{EventFileMark, ScanPart, Skip, ToolSize};
use crate::rules::{self, Item};
use crate::web::error::AppError;
use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::io::Read;

/// Records a part gathers before it is handed to the stage (their JSON text).
pub const PART_BYTES: usize = 4 << 20;

/// Where a decoded report goes: screened parts in order, and IR blobs one by one.
pub trait Stage {
    fn part(&mut self, p: ScanPart) -> Result<(), AppError>;
    /// A blob whose text matched its sha256 (the caller checked), at most the IR cap.
    fn blob(&mut self, sha256: &str, text: &str) -> Result<(), AppError>;
}

/// What names the report and what its commit needs, once the body was read whole.
#[derive(Debug, Default)]
pub struct Header {
    pub format: Option<u32>,
    pub client_id: Option<String>,
    pub machine: Option<String>,
    pub root: Option<String>,
    pub scanned_at: Option<i64>,
    pub duration_ms: Option<i64>,
    pub event_files: Vec<Item<EventFileMark>>,
    pub beside: Vec<Item<ToolSize>>,
    pub hazards: Option<Item<crate::model::Hazards>>,
    /// Parts handed to the stage.
    pub parts: i64,
    /// Blobs refused (over the cap, not matching their sha256).
    pub skipped: Vec<Skip>,
}

/// Read a report from `body` (JSON, gunzipped when `gzip`, at most `max` bytes once
/// decompressed: 413 past it) into `stage`. Never panics on any input.
pub fn decode(body: impl Read, gzip: bool, max: usize, stage: &mut dyn Stage) -> Result<Header, AppError> {
    let over = std::rc::Rc::new(std::cell::Cell::new(false));
    let reader: Box<dyn Read> = if gzip { Box::new(flate2::read::MultiGzDecoder::new(body)) } else { Box::new(body) };
    let capped = Capped { inner: reader, left: max, over: over.clone() };
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(capped));
    let mut sink = Sink { stage, part: PartWire::default(), bytes: 0, header: Header::default(), failed: None };
    let read = (ReportSeed { sink: &mut sink }).deserialize(&mut de).and_then(|()| de.end());
    if over.get() {
        return Err(AppError::TooLarge(format!(
            "upload larger than the server's limit of {} MiB once decompressed (a scan of any size goes in parts: POST /api/v1/uploads, which `cachelens scan --server` of 0.2 and later uses)",
            max >> 20
        )));
    }
    if let Some(e) = sink.failed.take() {
        return Err(e);
    }
    if let Err(e) = read {
        return Err(match e.classify() {
            serde_json::error::Category::Io if gzip => AppError::BadRequest(format!("body is not valid gzip: {e}")),
            serde_json::error::Category::Data => AppError::Unprocessable(format!("not a scan report: {e}")),
            _ => AppError::BadRequest(format!("malformed JSON: {e}")),
        });
    }
    sink.flush()?;
    Ok(sink.header)
}

/// A reader that fails once more than `left` bytes came through, and says so in `over`.
struct Capped<R> {
    inner: R,
    left: usize,
    over: std::rc::Rc<std::cell::Cell<bool>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > self.left {
            self.over.set(true);
            return Err(std::io::Error::other("over the size cap"));
        }
        self.left -= n;
        Ok(n)
    }
}

struct Sink<'a> {
    stage: &'a mut dyn Stage,
    part: PartWire,
    bytes: usize,
    header: Header,
    /// The stage's own error (a database error): reported as it is, not as bad JSON.
    failed: Option<AppError>,
}

impl Sink<'_> {
    fn grew(&mut self, n: usize) -> Result<(), AppError> {
        self.bytes += n;
        if self.bytes >= PART_BYTES { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> Result<(), AppError> {
        if self.bytes == 0 {
            return Ok(());
        }
        let part = validate::part(std::mem::take(&mut self.part))?;
        self.bytes = 0;
        self.header.parts += 1;
        self.stage.part(part)
    }

    fn blob(&mut self, sha: String, text: String) -> Result<(), AppError> {
        match rules::blob(&sha, text.as_bytes(), crate::scan::limits::MAX_TEXT_BYTES as usize) {
            Ok(()) => self.stage.blob(&sha, &text),
            Err(why) => {
                let why = format!("{why}: its text not stored");
                self.header.skipped.push(rules::out_of_bounds(&sha, why));
                Ok(())
            }
        }
    }
}

/// A record with the length of its JSON text (what a part is sized by).
struct Sized<T>(usize, Item<T>);

impl<'de, T: DeserializeOwned> serde::Deserialize<'de> for Sized<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <Box<serde_json::value::RawValue>>::deserialize(d)?;
        Ok(Sized(raw.get().len(), Item::parse(raw.get())))
    }
}

struct ReportSeed<'s, 'a> {
    sink: &'s mut Sink<'a>,
}

impl<'de> DeserializeSeed<'de> for ReportSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

/// Which list of a part a record goes to.
type Push<T> = fn(&mut PartWire, Item<T>);

impl<'de> Visitor<'de> for ReportSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a scan report object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let sink = self.sink;
        while let Some(key) = map.next_key::<String>()? {
            let h = &mut sink.header;
            match key.as_str() {
                "format" => h.format = Some(map.next_value()?),
                "client_id" => h.client_id = Some(map.next_value()?),
                "machine" => h.machine = Some(map.next_value()?),
                "root" => h.root = Some(map.next_value()?),
                "scanned_at" => h.scanned_at = Some(map.next_value()?),
                "duration_ms" => h.duration_ms = Some(map.next_value()?),
                "entries" => {
                    map.next_value_seed(List::<crate::model::Entry> { sink, push: |p, i| p.entries.push(i) })?
                }
                "unchanged" => map.next_value_seed(List::<String> { sink, push: |p, i| p.unchanged.push(i) })?,
                "skipped" => map.next_value_seed(List::<Skip> { sink, push: |p, i| p.skipped.push(i) })?,
                "best_configs" => map.next_value_seed(List { sink, push: |p, i| p.best_configs.push(i) })?,
                "events" => map.next_value_seed(List { sink, push: |p, i| p.events.push(i) })?,
                "inductor_autotune" => map.next_value_seed(List { sink, push: |p, i| p.inductor_autotune.push(i) })?,
                "event_files" => h.event_files = map.next_value::<Bounded<EventFileMark>>()?.0,
                "beside" => h.beside = map.next_value::<Bounded<ToolSize>>()?.0,
                "hazards" => h.hazards = map.next_value()?,
                "blobs" => map.next_value_seed(Blobs { sink })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A list of records, each handed to the part as it is read.
struct List<'s, 'a, T> {
    sink: &'s mut Sink<'a>,
    push: Push<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for List<'_, '_, T> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for List<'_, '_, T> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of records")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut n = 0usize;
        while let Some(Sized(len, item)) = seq.next_element::<Sized<T>>()? {
            n += 1;
            if n > rules::MAX_ITEMS {
                return Err(A::Error::custom(format!("more than {} records in one list", rules::MAX_ITEMS)));
            }
            (self.push)(&mut self.sink.part, item);
            if let Err(e) = self.sink.grew(len.max(1)) {
                self.sink.failed = Some(e);
                return Err(A::Error::custom("the upload could not be staged"));
            }
        }
        Ok(())
    }
}

/// A short list read whole (event file marks, `beside`): at most [`rules::MAX_PER_ENTRY`].
struct Bounded<T>(Vec<Item<T>>);

impl<'de, T: DeserializeOwned> serde::Deserialize<'de> for Bounded<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: DeserializeOwned> Visitor<'de> for V<T> {
            type Value = Vec<Item<T>>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(i) = seq.next_element::<Item<T>>()? {
                    if out.len() == rules::MAX_PER_ENTRY {
                        return Err(A::Error::custom(format!("more than {} items", rules::MAX_PER_ENTRY)));
                    }
                    out.push(i);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData)).map(Bounded)
    }
}

/// The report's `blobs` object, each (sha256, text) handed over alone.
struct Blobs<'s, 'a> {
    sink: &'s mut Sink<'a>,
}

impl<'de> DeserializeSeed<'de> for Blobs<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Blobs<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object of IR texts by sha256")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some((sha, text)) = map.next_entry::<String, String>()? {
            if let Err(e) = self.sink.blob(sha, text) {
                self.sink.failed = Some(e);
                return Err(A::Error::custom("the upload could not be staged"));
            }
        }
        Ok(())
    }
}

/// The header's fields, all present and valid for `token_machine`, or the 4xx that says which.
pub struct Named {
    pub client_id: String,
    pub root: String,
    pub scanned_at: i64,
    pub commit: crate::model::UploadCommit,
    pub skipped: Vec<Skip>,
}

impl Header {
    /// Check what names the scan (as a staged upload's begin does) and screen its commit records.
    pub fn check(self, token_machine: &str) -> Result<Named, AppError> {
        let missing = |f: &str| AppError::Unprocessable(format!("not a scan report: missing field `{f}`"));
        let format = self.format.ok_or_else(|| missing("format"))?;
        let client_id = self.client_id.ok_or_else(|| missing("client_id"))?;
        let machine = self.machine.ok_or_else(|| missing("machine"))?;
        let root = self.root.ok_or_else(|| missing("root"))?;
        let scanned_at = self.scanned_at.ok_or_else(|| missing("scanned_at"))?;
        let duration_ms = self.duration_ms.ok_or_else(|| missing("duration_ms"))?;
        validate::header(format, crate::model::REPORT_FORMAT, &client_id, &machine, &root, token_machine)?;
        rules::within("scanned_at", scanned_at, &rules::TIME_MS).map_err(AppError::Unprocessable)?;
        let mut skipped = self.skipped;
        let wire = validate::CommitWire {
            parts: self.parts,
            duration_ms,
            event_files: self.event_files,
            beside: self.beside,
            hazards: self.hazards,
        };
        let commit = validate::commit(wire, &mut skipped)?;
        Ok(Named { client_id, root, scanned_at, commit, skipped })
    }
}

/// A stage that keeps everything in memory (tests, fuzzing).
#[derive(Default)]
pub struct Memory {
    pub parts: Vec<ScanPart>,
    pub blobs: std::collections::BTreeMap<String, String>,
}

impl Stage for Memory {
    fn part(&mut self, p: ScanPart) -> Result<(), AppError> {
        self.parts.push(p);
        Ok(())
    }
    fn blob(&mut self, sha256: &str, text: &str) -> Result<(), AppError> {
        self.blobs.insert(sha256.into(), text.into());
        Ok(())
    }
}
