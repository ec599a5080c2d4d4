//! `cachelens gate`: the CI gate for upgrades. After a job compiled its kernels under the base
//! and under the change, it compares the two (two cache dirs, scanned read-only into a temporary
//! database as machines `base` and `change`; or two machines / two scans of an existing
//! database), prints the invalidation report grouped by cause, and fails when more of the
//! base's kernel entries would recompile than `--max-invalidated` allows.
//!
//! Exit status: 0 passed, 1 the gate failed (too many recompiles), 2 the gate could not decide
//! (bad arguments, a missing or unreadable dir or database, an unknown machine or scan, a change
//! side with next to no kernel entries: [`too_empty`], unless `--allow-empty-change`).
//!
//! Cache text in the text report and the notes goes through [`crate::fmt::term`].

use crate::answers::load::{self as dbx, ExplainError};
use crate::cli::GateArgs;
use crate::explain::report::{CauseCount, Cost, InvalidatedRow, InvalidationsReport};
use anyhow::Context;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The most recompiles allowed: a share of the base's kernel entries, or a count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// A fraction in [0, 1] (`10%`, `0.1`).
    Share(f64),
    /// A number of entries (`5`).
    Count(u64),
}

impl Limit {
    /// Whether `invalidated` of `total` entries is more than allowed.
    pub fn exceeded(self, invalidated: usize, total: usize) -> bool {
        match self {
            // exact for whole percentages: 1 of 10 is not more than 10%
            Limit::Share(f) => invalidated as f64 > f * total as f64 + 1e-9,
            Limit::Count(n) => invalidated as u64 > n,
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Share(s) => write!(f, "{}%", (s * 1e6).round() / 1e4),
            Limit::Count(n) => write!(f, "{n} entries"),
        }
    }
}

/// `--max-invalidated`: `10%` (a percentage), `0.1` (a fraction: has a dot) or `5` (a count of entries).
pub fn parse_limit(s: &str) -> Result<Limit, String> {
    let bad = || format!("{s:?}: give a percentage (10%), a fraction (0.1) or a count of entries (5)");
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| bad())?;
        return if (0.0..=100.0).contains(&p) { Ok(Limit::Share(p / 100.0)) } else { Err(bad()) };
    }
    if t.contains('.') {
        let f: f64 = t.parse().map_err(|_| bad())?;
        return if (0.0..=1.0).contains(&f) { Ok(Limit::Share(f)) } else { Err(bad()) };
    }
    t.parse::<u64>().map(Limit::Count).map_err(|_| bad())
}

/// The change side is "(almost) empty" when it holds fewer kernel entries than this share of
/// the base's ...
pub const MIN_CHANGE_SHARE: f64 = 0.1;
/// ... and the base holds at least this many (below it, any non-empty change is compared).
pub const MIN_BASE_FOR_SHARE: usize = 10;

/// Why the gate cannot decide on `change` kernel entries against `base`: none at all, or fewer
/// than [`MIN_CHANGE_SHARE`] of a base of [`MIN_BASE_FOR_SHARE`] or more. A change job that
/// failed or wrote elsewhere leaves such a side, and every base kernel would then count as
/// "removed", not invalidated: the gate used to pass it.
pub fn too_empty(base: usize, change: usize) -> Option<String> {
    let few = base >= MIN_BASE_FOR_SHARE && (change as f64) < MIN_CHANGE_SHARE * base as f64;
    (change == 0 || few).then(|| {
        format!(
            "the change cache holds {change} kernel entries against {base} in the base: nothing to compare \
             (did its jobs run?); --allow-empty-change gates it anyway"
        )
    })
}

/// Which report of a database: two machines as they are now, or two scans of one machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Pair {
    Machines(String, String),
    /// `from`/`to` default as on the invalidations page: the latest scan, the one before it.
    Scans {
        machine: String,
        from: Option<i64>,
        to: Option<i64>,
    },
}

/// `MACHINE` or `MACHINE@SCAN`.
fn parse_side(s: &str) -> Result<(String, Option<i64>), String> {
    let (m, scan) = match s.split_once('@') {
        Some((m, id)) => (m, Some(id.parse::<i64>().map_err(|_| format!("{s:?}: scan id {id:?} is not a number"))?)),
        None => (s, None),
    };
    if !crate::model::valid_machine_name(m) {
        return Err(format!("{s:?} is no MACHINE or MACHINE@SCAN (with --db, BASE and CHANGE name machines)"));
    }
    Ok((m.to_string(), scan))
}

/// The pair that `BASE [CHANGE]` name in database mode.
pub fn parse_pair(base: &str, change: Option<&str>) -> Result<Pair, String> {
    let (bm, bs) = parse_side(base)?;
    let Some(change) = change else {
        return Ok(Pair::Scans { machine: bm, from: None, to: bs });
    };
    match ((bm, bs), parse_side(change)?) {
        ((a, None), (b, None)) => Ok(Pair::Machines(a, b)),
        ((a, Some(f)), (b, Some(t))) if a == b => Ok(Pair::Scans { machine: a, from: Some(f), to: Some(t) }),
        _ => Err(format!(
            "{base:?} and {change:?}: compare two machines as they are now (M1 M2) or two scans of one machine (M@S1 M@S2)"
        )),
    }
}

/// The invalidation report of a pair, freshly computed by the explainer (the gate's one call
/// into it: where reports are stored, this is the line to re-point), with the kernels (distinct
/// names) of its old and new side.
async fn invalidation_report(db: &crate::db::Db, pair: &Pair) -> Result<(InvalidationsReport, Kernels), ExplainError> {
    let pool = db.pool();
    use crate::db::explain::{light_at, light_now};
    match pair {
        Pair::Machines(a, b) => {
            let r = dbx::invalidations_machines(db, a, b).await?;
            Ok((r, (names(&light_now(pool, a).await?), names(&light_now(pool, b).await?))))
        }
        Pair::Scans { machine, from, to } => {
            let (from, to, _) = dbx::pick_scans(pool, machine, *from, *to).await?;
            let Some(from) = from else {
                return Err(ExplainError::NotFound(format!(
                    "scan {} is the first of {} in {}: no earlier scan to compare it with",
                    to.id, machine, to.root
                )));
            };
            let r = dbx::invalidations_scans(db, Some(&from), &to).await?;
            Ok((r, (names(&light_at(pool, &from).await?), names(&light_at(pool, &to).await?))))
        }
    }
}

/// Distinct kernels of the old and the new side.
type Kernels = (usize, usize);

/// Distinct kernel names of `rows`.
fn names(rows: &[crate::db::explain::LightRow]) -> usize {
    rows.iter().filter_map(|r| r.kernel.as_deref()).collect::<std::collections::HashSet<_>>().len()
}

/// The gate's answer (`--json`).
#[derive(Debug, Serialize)]
pub struct Verdict {
    pub passed: bool,
    /// What was compared: the dirs, or `MACHINE` / `MACHINE@SCAN`.
    pub base: String,
    pub change: String,
    /// Kernel entries (compiled variants) of the base: the share's denominator.
    pub base_entries: usize,
    pub change_entries: usize,
    /// Kernels (distinct names) of the base and of the change.
    pub base_kernels: usize,
    pub change_kernels: usize,
    /// Base entries that the change recompiles (a new key for the same variant).
    pub invalidated: usize,
    /// Kernels (distinct names) of those entries.
    pub invalidated_kernels: usize,
    /// What recompiling them costs: the compile times the hook measured (the invalidations
    /// page's figure).
    pub recompile: Cost,
    /// `invalidated / base_entries` (0 when the base has none).
    pub share: f64,
    /// The limit as given, and as read (`10%`, `5 entries`).
    pub max_invalidated: String,
    pub limit: String,
    pub by_cause: Vec<CauseCount>,
    /// Kernels in both (same key), new variants with no base counterpart, base kernels gone:
    /// shown, not counted.
    pub kept: usize,
    pub new: usize,
    pub removed: usize,
    pub summary: String,
    /// The full invalidation report (every invalidated kernel with its keys and cause).
    pub report: InvalidationsReport,
}

impl Verdict {
    fn new(
        (r, (base_kernels, change_kernels)): (InvalidationsReport, Kernels),
        (base, change): (String, String),
        given: &str,
        limit: Limit,
    ) -> Verdict {
        let (n, total) = (r.invalidated.len(), r.old_entries);
        Verdict {
            passed: !limit.exceeded(n, total),
            base,
            change,
            base_entries: total,
            change_entries: r.new_entries,
            base_kernels,
            change_kernels,
            invalidated: n,
            invalidated_kernels: kernels_of(r.invalidated.iter()),
            recompile: Cost::of_rows(&r.invalidated),
            share: if total == 0 { 0.0 } else { n as f64 / total as f64 },
            max_invalidated: given.to_string(),
            limit: limit.to_string(),
            by_cause: r.by_cause.clone(),
            kept: r.kept,
            new: r.new.len(),
            removed: r.removed.len(),
            summary: r.summary.clone(),
            report: r,
        }
    }

    /// The text report: verdict, then the invalidated kernels grouped by cause (`show` per cause).
    /// Cache text (dirs, kernel names, keys, summaries) goes through [`term`]: the report lands
    /// in CI logs, where a line of a name must never start a workflow command.
    pub fn text(&self, show: usize) -> String {
        use crate::fmt::term;
        use std::fmt::Write;
        let mut o = String::new();
        let word = if self.passed { "passed" } else { "FAILED" };
        let rel = if self.passed { "within" } else { "more than" };
        let _ = writeln!(
            o,
            "gate {word}: {} of {} base entries ({}) would recompile ({:.1}%), {rel} the {} allowed",
            self.invalidated,
            self.base_entries,
            plural(self.invalidated_kernels, "kernel"),
            self.share * 100.0,
            self.limit
        );
        let of = |entries, kernels| format!("{} of {}", plural(entries, "entry"), plural(kernels, "kernel"));
        let _ = writeln!(o, "base:   {} ({})", term(&self.base), of(self.base_entries, self.base_kernels));
        let _ = writeln!(o, "change: {} ({})", term(&self.change), of(self.change_entries, self.change_kernels));
        if self.invalidated > 0 {
            let _ = writeln!(o, "recompile cost: {}", cost_line(&self.recompile));
        }
        for c in &self.by_cause {
            let rows: Vec<_> = self.report.invalidated.iter().filter(|i| i.cause == c.cause).collect();
            let cost = Cost::of_rows(rows.iter().copied());
            let n = of(c.count, kernels_of(rows.iter().copied()));
            let _ = writeln!(o, "{}: {n}, compile time {}", c.cause.as_str(), cost.text());
            // One line per change (its reason) with its count; the entries below it.
            let reasons = reasons(&rows);
            for (why, n) in reasons.iter().take(REASONS_SHOWN) {
                let _ = writeln!(o, "  {n} × {}", term(why));
            }
            if reasons.len() > REASONS_SHOWN {
                let _ = writeln!(o, "  ... and {} other reasons (--json for all)", reasons.len() - REASONS_SHOWN);
            }
            for i in rows.iter().take(show) {
                let (k, old, new) = (term(&i.kernel), term(&i.old_key), term(&i.new_key));
                let why = match reasons.len() {
                    1 if i.identical_binary => "  (identical binary)".to_string(),
                    1 if i.identical_code => "  (same machine code)".to_string(),
                    1 => String::new(),
                    _ => format!("  {}", term(&i.summary)),
                };
                let _ = writeln!(o, "    {k}  {old} -> {new}{why}");
            }
            if rows.len() > show {
                let _ = writeln!(o, "    ... and {} more (--show N, or --json for all)", rows.len() - show);
            }
        }
        let _ = writeln!(
            o,
            "not counted: {} kept (same key), {} new variants, {} removed",
            self.kept, self.new, self.removed
        );
        let _ = writeln!(o, "summary: {}", term(&self.summary));
        o
    }
}

/// `1 kernel`, `4 kernels`, `1 entry`, `45 entries`.
fn plural(n: usize, word: &str) -> String {
    match (n, word.strip_suffix('y')) {
        (1, _) => format!("1 {word}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {word}s"),
    }
}

/// Distinct kernels of `rows`.
fn kernels_of<'a>(rows: impl Iterator<Item = &'a InvalidatedRow>) -> usize {
    rows.map(|i| i.kernel.as_str()).collect::<std::collections::HashSet<_>>().len()
}

/// What recompiling costs, as the invalidations page says it.
fn cost_line(c: &Cost) -> String {
    let hook = "the hook (TRITON_CACHE_MANAGER=cachelens_hook:TrackingCacheManager) did not see";
    match (c.timed, c.of) {
        (0, _) => format!("unknown: {hook} these entries compile"),
        (t, n) if t == n => format!("{} of compile time for the {n} recompiled entries", c.text()),
        (t, n) => format!(
            "{} of compile time for the {t} of {n} recompiled entries the hook timed ({hook} the others compile)",
            c.text()
        ),
    }
}

/// Reasons (distinct changes) the text report lists per cause at most.
const REASONS_SHOWN: usize = 10;

/// The reasons of `rows` (their summaries less the churn note, [`crate::explain::reason`]) with
/// how many rows share each, most first (then first seen).
fn reasons<'a>(rows: &[&'a InvalidatedRow]) -> Vec<(&'a str, usize)> {
    let mut out: Vec<(&str, usize)> = Vec::new();
    for i in rows {
        let why = crate::explain::reason(&i.summary);
        match out.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => out.push((why, 1)),
        }
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.1));
    out
}

/// `cachelens gate`: prints the verdict; the exit status says it (0 passed, 1 failed, 2 error).
pub async fn run(a: GateArgs) -> ExitCode {
    match verdict(&a).await {
        Ok(v) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                print!("{}", v.text(a.show));
            }
            if v.passed { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(e) => {
            eprintln!("error: {}", crate::fmt::term(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

async fn verdict(a: &GateArgs) -> anyhow::Result<Verdict> {
    let v = compared(a).await?;
    if !a.allow_empty_change
        && let Some(why) = too_empty(v.base_entries, v.change_entries)
    {
        anyhow::bail!(why);
    }
    Ok(v)
}

async fn compared(a: &GateArgs) -> anyhow::Result<Verdict> {
    let given = a.max_invalidated.as_str();
    let limit = parse_limit(given).map_err(|e| anyhow::anyhow!("--max-invalidated {e}"))?;
    let Some(db) = &a.db else {
        let change = a.change.as_deref().context("give two cache dirs, BASE and CHANGE (or --db with machines)")?;
        let (base, change) = (PathBuf::from(&a.base), PathBuf::from(change));
        let tmp = tempfile::Builder::new().prefix("cachelens-gate-").tempdir()?;
        let store = crate::db::Db::open(&tmp.path().join("gate.db")).await?;
        for (machine, dir) in [("base", &base), ("change", &change)] {
            scan_dir(&store, machine, dir, a.quiet).await?;
        }
        let r = invalidation_report(&store, &Pair::Machines("base".into(), "change".into())).await?;
        store.pool().close().await;
        let labels = (base.display().to_string(), change.display().to_string());
        return Ok(Verdict::new(r, labels, given, limit));
    };
    anyhow::ensure!(crate::db::exists(db), "no database at {} (scan into it first)", db.display());
    let pair = parse_pair(&a.base, a.change.as_deref()).map_err(anyhow::Error::msg)?;
    let store = crate::db::Db::open(db).await?;
    let r = invalidation_report(&store, &pair).await?;
    let labels = match (&pair, r.0.from) {
        (Pair::Machines(x, y), _) => (x.clone(), y.clone()),
        (Pair::Scans { machine, .. }, from) => {
            let at = |s: Option<i64>| s.map(|s| format!("{machine}@{s}")).unwrap_or_else(|| machine.clone());
            (at(from), at(r.0.to))
        }
    };
    Ok(Verdict::new(r, labels, given, limit))
}

/// Scan every Triton cache found below `dir` into `db` as `machine` (read-only, as `scan`).
async fn scan_dir(db: &crate::db::Db, machine: &str, dir: &Path, quiet: bool) -> anyhow::Result<()> {
    let mut say = |line: String| {
        if !quiet {
            eprintln!("{machine}: {}", crate::fmt::term(&line))
        }
    };
    let roots = crate::locate::roots(std::slice::from_ref(&dir.to_path_buf()), &[], false, &mut say)
        .with_context(|| format!("{machine} {}", dir.display()))?;
    for r in roots {
        let (bar, counts) = crate::progress::Bar::scan(quiet, &r.path.display().to_string());
        let s = crate::collect::scan_local_opts(
            db,
            &r.path,
            machine,
            crate::collect::Opts { progress: counts, ..Default::default() },
        )
        .await;
        bar.finish();
        let s = s?;
        let skipped: i64 = s.skipped.values().sum();
        say(format!("{} entries in {} ({skipped} skipped)", s.entries, s.root));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_as_percentage_fraction_or_count() {
        assert_eq!(parse_limit("10%"), Ok(Limit::Share(0.1)));
        assert_eq!(parse_limit("0.25"), Ok(Limit::Share(0.25)));
        assert_eq!(parse_limit("1.0"), Ok(Limit::Share(1.0)));
        assert_eq!(parse_limit("5"), Ok(Limit::Count(5)));
        for bad in ["", "%", "ten%", "101%", "-1%", "1.5", "-3", "10 kernels", "nan%"] {
            assert!(parse_limit(bad).is_err(), "{bad:?} accepted");
        }
        // "more than": the limit itself passes
        assert!(!Limit::Share(0.1).exceeded(1, 10) && Limit::Share(0.1).exceeded(2, 10));
        assert!(!Limit::Count(6).exceeded(6, 12) && Limit::Count(5).exceeded(6, 12));
        assert!(!parse_limit("50%").unwrap().exceeded(6, 12) && parse_limit("49%").unwrap().exceeded(6, 12));
    }

    #[test]
    fn an_almost_empty_change_cannot_be_decided() {
        for (base, change) in [(0, 0), (45, 0), (5, 0), (10, 0), (10, 0), (100, 9), (45, 4)] {
            assert!(too_empty(base, change).is_some(), "{base} {change}");
        }
        for (base, change) in [(0, 3), (1, 1), (9, 1), (10, 1), (100, 10), (45, 5), (45, 90)] {
            assert!(too_empty(base, change).is_none(), "{base} {change}");
        }
        let m = too_empty(45, 0).unwrap();
        assert!(m.starts_with("the change cache holds 0 kernel entries against 45 in the base"), "{m}");
    }

    #[test]
    fn pairs_name_two_machines_or_two_scans_of_one() {
        let p = |a, b| parse_pair(a, b);
        assert_eq!(p("m1", Some("m2")), Ok(Pair::Machines("m1".into(), "m2".into())));
        assert_eq!(p("m@3", Some("m@5")), Ok(Pair::Scans { machine: "m".into(), from: Some(3), to: Some(5) }));
        assert_eq!(p("m", None), Ok(Pair::Scans { machine: "m".into(), from: None, to: None }));
        assert_eq!(p("m@5", None), Ok(Pair::Scans { machine: "m".into(), from: None, to: Some(5) }));
        for (a, b) in [("m@3", Some("n@5")), ("m@3", Some("m")), ("m", Some("m@2")), ("m@x", None), ("/tmp/a", None)] {
            assert!(p(a, b).is_err(), "{a:?} {b:?} accepted");
        }
    }
}
