//! The "What can go" section of the machine page (computed per request) and of the overview
//! (the machines' stored advice summed): [`crate::prune::advice`].

use crate::fmt;
use crate::prune::Tally;
use crate::prune::advice::{Advice, Fleet, UNUSED_FOR_DAYS};

/// One class's line.
pub struct ClassRow {
    /// The class as the JSON and `--json` name it (`relocated`, ...): the row's `data-class`.
    pub class: String,
    pub label: String,
    pub items: i64,
    pub size: String,
    pub bytes: i64,
    pub inodes: i64,
}

/// One machine's line on the overview.
pub struct MachineRow {
    pub name: String,
    pub href: String,
    pub size: String,
    pub inodes: i64,
    pub as_of: String,
    pub command: String,
}

/// The section.
pub struct AdviceView {
    pub classes: Vec<ClassRow>,
    pub total: ClassRow,
    /// The command to run (machine page).
    pub command: Option<String>,
    /// What stands in for the last use, per cache dir (machine page).
    pub last_use: Vec<(String, String)>,
    /// Per machine (overview).
    pub machines: Vec<MachineRow>,
    pub unused_for_days: i64,
}

fn row(t: &Tally) -> ClassRow {
    let class = t.class.map(|c| serde_json::to_value(c).ok().and_then(|v| v.as_str().map(String::from)));
    ClassRow {
        class: class.flatten().unwrap_or_else(|| "total".into()),
        label: t.class.map_or("in all", |c| c.label()).replace("--unused-for", &format!("{UNUSED_FOR_DAYS} days")),
        items: t.items,
        size: fmt::bytes(t.bytes),
        bytes: t.bytes,
        inodes: t.inodes,
    }
}

/// A machine's section.
pub fn machine(a: &Advice) -> AdviceView {
    AdviceView {
        classes: a.classes.iter().map(row).collect(),
        total: row(&a.total),
        command: a.command.clone(),
        last_use: a.roots.iter().map(|r| (r.root.clone(), r.last_use.clone())).collect(),
        machines: vec![],
        unused_for_days: a.unused_for_days,
    }
}

/// The fleet's section.
pub fn fleet(f: &Fleet) -> AdviceView {
    AdviceView {
        classes: f.classes.iter().map(row).collect(),
        total: row(&f.total),
        command: None,
        last_use: vec![],
        machines: f
            .machines
            .iter()
            .filter(|m| m.total.items > 0)
            .map(|m| MachineRow {
                href: format!("/machines/{}", fmt::enc(&m.machine)),
                name: m.machine.clone(),
                size: fmt::bytes(m.total.bytes),
                inodes: m.total.inodes,
                as_of: fmt::age(Some(m.computed_at)),
                command: m.command.clone().unwrap_or_default(),
            })
            .collect(),
        unused_for_days: UNUSED_FOR_DAYS,
    }
}
