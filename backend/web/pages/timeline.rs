//! The overview's fleet timeline: each event of [`crate::db::timeline`] as a line a person reads
//! and the page that says more (the machine, or the invalidation report of the scan).

use crate::db::timeline::{Event, Kind};
use crate::fmt;
use serde::Serialize;

/// Events the overview shows (the latest; `/api/v1/timeline` pages through the rest).
pub const SHOWN: i64 = 50;

/// An event as the overview and `/api/v1/timeline` show it.
#[derive(Debug, Clone, Serialize)]
pub struct EventView {
    #[serde(flatten)]
    pub event: Event,
    /// What happened, in words.
    pub text: String,
    /// Where it is told in full.
    pub href: String,
    #[serde(skip)]
    pub when: String,
    #[serde(skip)]
    pub age: String,
}

impl EventView {
    /// The kind's name (the row's `data-kind`).
    pub fn kind(&self) -> &'static str {
        match self.event.kind {
            Kind::NewMachine => "new_machine",
            Kind::Triton => "triton",
            Kind::Python => "python",
            Kind::Invalidation => "invalidation",
        }
    }
}

pub fn view(e: Event) -> EventView {
    let m = fmt::enc(&e.machine);
    let report = format!(
        "/invalidations?machine={m}{}&to={}",
        e.from_scan.map_or(String::new(), |f| format!("&from={f}")),
        e.scan
    );
    let or_q = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    let (text, href) = match e.kind {
        Kind::NewMachine => ("first scan: a new machine".to_string(), format!("/machines/{m}")),
        Kind::Triton => (format!("Triton {} → {}", or_q(&e.before), or_q(&e.after)), report),
        Kind::Python => (format!("Python {} → {}", or_q(&e.before), or_q(&e.after)), report),
        Kind::Invalidation => (
            format!(
                "{} of {} entries invalidated{}",
                e.count.unwrap_or(0),
                e.base.unwrap_or(0),
                e.after.as_ref().map_or(String::new(), |c| format!(" (main cause: {c})"))
            ),
            report,
        ),
    };
    EventView { when: fmt::time(Some(e.at)), age: fmt::age(Some(e.at)), text, href, event: e }
}
