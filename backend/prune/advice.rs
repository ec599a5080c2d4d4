//! The server's "What can go": what `cachelens prune` (its default rules: relocated, superseded
//! not hit since, unused for 30 days; no IR, no budget) would free on a machine, decided by the
//! same [`super::decide`] from what the database holds instead of a disk listing: an entry's
//! bytes are its scanned files' and its inodes its files (its dir stays until empty for an hour).
//! Temp dirs are not stored, so the orphaned-temp class is the CLI's alone. The hook's first event for a root is taken over
//! its live entries' keys (the CLI also counts keys of removed entries).
//!
//! The machine page and the API compute a machine's advice per request (one pass over its live
//! entries, [`crate::db::advice::live_rows`], grouped by root and sorted by dir here one root at a
//! time); each landed scan stores it ([`refresh`]) and the overview sums the stored ones (one row
//! per machine).

use super::{Class, Rules, Tally, decide, disk};
use crate::db::Store;
use crate::db::advice::{self, AdviceRow};
use serde::{Deserialize, Serialize};

/// The `--unused-for` the advice uses: the CLI's default.
pub const UNUSED_FOR_DAYS: i64 = 30;

/// One cache dir's advice.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RootAdvice {
    pub root: String,
    /// Live entries, bytes and inodes the database holds for it.
    pub entries: i64,
    pub bytes: i64,
    pub inodes: i64,
    /// What stands in for an entry's last use (as the CLI says it).
    pub last_use: String,
    /// Per class (empty classes left out) and in all.
    pub classes: Vec<Tally>,
    pub total: Tally,
}

/// A machine's advice: per cache dir, per class over its dirs, and the command to run there.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Advice {
    pub machine: String,
    /// When it was computed (unix ms).
    pub computed_at: i64,
    pub unused_for_days: i64,
    pub roots: Vec<RootAdvice>,
    pub classes: Vec<Tally>,
    pub total: Tally,
    /// The dry run to run on the machine (`None`: no cache dir known).
    pub command: Option<String>,
}

/// A machine's advice built from its live rows one at a time, in root order: the rows of one
/// root at a time are held (as prune's rows and listing, each row moved, not copied), never the
/// machine's whole answer set beside them.
struct Roots {
    rules: Rules,
    done: Vec<RootAdvice>,
    at: Option<RootRows>,
}

/// The rows of the root being read.
struct RootRows {
    root: String,
    rows: Vec<crate::db::prune::PruneRow>,
    listed: Vec<disk::Listed>,
    since: Option<i64>,
}

impl Roots {
    fn new(now: i64) -> Roots {
        Roots {
            rules: Rules { now, unused_for: Some(UNUSED_FOR_DAYS * 86_400_000), ..Rules::default() },
            done: vec![],
            at: None,
        }
    }

    fn push(&mut self, r: AdviceRow) {
        if self.at.as_ref().is_some_and(|at| at.root != r.root) {
            self.close();
        }
        let at = self.at.get_or_insert_with(|| RootRows { root: r.root, rows: vec![], listed: vec![], since: None });
        at.listed.push(disk::Listed {
            dir: r.row.dir.clone(),
            sig: String::new(),
            bytes: r.entry_bytes,
            inodes: r.files + 1,
            files: vec![],
            has_group: false,
            groups: r.groups,
            pruned: false,
        });
        at.since = at.since.into_iter().chain(r.first_event).min();
        at.rows.push(r.row);
    }

    /// Decide the root being read, and let its rows go. Its rows are read in no order: sorted
    /// by dir here, as prune lists a root.
    fn close(&mut self) {
        let Some(mut at) = self.at.take() else { return };
        let mut order: Vec<usize> = (0..at.rows.len()).collect();
        order.sort_by(|a, b| at.rows[*a].dir.cmp(&at.rows[*b].dir));
        at.rows = permute(std::mem::take(&mut at.rows), &order);
        at.listed = permute(std::mem::take(&mut at.listed), &order);
        let listing = disk::Listing { entries: at.listed, temps: vec![], empty: vec![] };
        let plan = decide(&at.root, &at.rows, &listing, at.since, &self.rules);
        let (classes, total) = plan.tallies();
        self.done.push(RootAdvice {
            root: plan.root,
            entries: plan.entries,
            bytes: plan.bytes,
            inodes: plan.inodes,
            last_use: plan.last_use,
            classes,
            total,
        });
    }

    fn advice(mut self, machine: &str) -> Advice {
        self.close();
        let mut roots = self.done;
        roots.sort_by(|a, b| a.root.cmp(&b.root));
        let classes = merge(roots.iter().flat_map(|r| r.classes.iter()));
        let total = merge(roots.iter().map(|r| &r.total)).pop().unwrap_or_default();
        let command = (!roots.is_empty()).then(|| {
            let mut c =
                format!("cachelens prune --machine {} --unused-for {UNUSED_FOR_DAYS}d", super::cmd::quote(machine));
            for r in &roots {
                c.push(' ');
                c.push_str(&super::cmd::quote(&r.root));
            }
            c
        });
        Advice {
            machine: machine.to_string(),
            computed_at: self.rules.now,
            unused_for_days: UNUSED_FOR_DAYS,
            roots,
            classes,
            total,
            command,
        }
    }
}

/// `items` in the order of `order` (a permutation of their indexes).
fn permute<T>(items: Vec<T>, order: &[usize]) -> Vec<T> {
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order.iter().filter_map(|i| slots[*i].take()).collect()
}

/// Tallies summed per class (in [`Class::ALL`] order; a tally without a class sums as one).
pub fn merge<'a>(tallies: impl Iterator<Item = &'a Tally>) -> Vec<Tally> {
    let mut out: Vec<Tally> = vec![];
    for t in tallies {
        match out.iter_mut().find(|o| o.class == t.class) {
            Some(o) => {
                o.items += t.items;
                o.bytes = o.bytes.saturating_add(t.bytes);
                o.inodes = o.inodes.saturating_add(t.inodes);
            }
            None => out.push(t.clone()),
        }
    }
    let rank = |c: Option<Class>| c.map_or(usize::MAX, |c| Class::ALL.iter().position(|x| *x == c).unwrap_or(0));
    out.sort_by_key(|t| rank(t.class));
    out
}

/// A machine's advice computed now (`None`: no such machine).
pub async fn compute(pool: &Store, machine: &str) -> sqlx::Result<Option<Advice>> {
    let Some(id) = advice::machine_id(pool, machine).await? else { return Ok(None) };
    let mut conn = pool.acquire().await?;
    let mut roots = Roots::new(crate::db::now_ms());
    advice::live_rows(&mut conn, id, |r| roots.push(r)).await?;
    Ok(Some(roots.advice(machine)))
}

/// How long a machine's stored advice stands when its scans change nothing: what it says moves
/// only with time then (an entry's days unused), by whole days.
pub const UNCHANGED_KEEPS_MS: i64 = 3_600_000;

/// A machine's advice as its page shows it: the stored one while younger than
/// [`UNCHANGED_KEEPS_MS`] (every landing that changed the machine's entries or events stored it
/// again, so only time has moved since), else computed now and stored for the next reader, in
/// the background (`None`: no such machine). A page reads one row, not every live entry of the
/// machine, but once an hour for a machine whose scans change nothing.
pub async fn current(db: &crate::db::Db, machine: &str) -> sqlx::Result<Option<Advice>> {
    let pool = db.pool();
    let Some(id) = advice::machine_id(pool, machine).await? else { return Ok(None) };
    if let Some((at, json)) = advice::stored_of(pool, id).await?
        && crate::db::now_ms() - at < UNCHANGED_KEEPS_MS
        && let Ok(a) = serde_json::from_str::<Advice>(&json)
    {
        return Ok(Some(a));
    }
    let a = compute(pool, machine).await?;
    if let Some(a) = &a
        && let Ok(json) = serde_json::to_string(a)
    {
        let (db, at) = (db.clone(), a.computed_at);
        tokio::spawn(async move {
            if let Err(e) = advice::store(&db, id, at, &json).await {
                tracing::warn!(error = %e, "storing a machine's advice computed for a reader");
            }
        });
    }
    Ok(a)
}

/// After a scan landed: store its machine's advice for the overview. A scan that changed nothing
/// (no entry new, changed or removed, no hook event) leaves a stored advice younger than
/// [`UNCHANGED_KEEPS_MS`] as it is: recomputing it reads every live entry of the machine, the
/// whole cost of an unchanged re-upload otherwise. Returns the advice when it computed one.
pub async fn refresh_after(db: &crate::db::Db, scan: &crate::model::ScanSummary) -> anyhow::Result<Option<Advice>> {
    let pool = db.pool();
    let Some(id) = advice::machine_id(pool, &scan.machine).await? else { return Ok(None) };
    if scan.entries_unchanged()
        && scan.events == 0
        && advice::stored_of(pool, id).await?.is_some_and(|(at, _)| crate::db::now_ms() - at < UNCHANGED_KEEPS_MS)
    {
        return Ok(None);
    }
    refresh(db, &scan.machine).await.map(Some)
}

/// Compute and store `machine`'s advice now.
pub async fn refresh(db: &crate::db::Db, machine: &str) -> anyhow::Result<Advice> {
    let pool = db.pool();
    let id = advice::machine_id(pool, machine).await?;
    let a = compute(pool, machine).await?;
    let (Some(id), Some(a)) = (id, a) else { anyhow::bail!("machine {machine} vanished") };
    advice::store(db, id, a.computed_at, &serde_json::to_string(&a)?).await?;
    Ok(a)
}

/// The fleet's advice: every machine's stored one, and their sums per class.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Fleet {
    pub machines: Vec<Advice>,
    pub classes: Vec<Tally>,
    pub total: Tally,
}

/// Sum the stored advice of every machine (one row each; a row that does not parse is skipped).
pub async fn fleet(pool: &Store) -> sqlx::Result<Fleet> {
    let machines: Vec<Advice> = advice::stored(pool)
        .await?
        .into_iter()
        .filter_map(|(name, _, json)| {
            serde_json::from_str(&json).map_err(|e| tracing::warn!("stored advice of {name}: {e}")).ok()
        })
        .collect();
    let classes = merge(machines.iter().flat_map(|m| m.classes.iter()));
    let total = merge(machines.iter().map(|m| &m.total)).pop().unwrap_or_default();
    Ok(Fleet { machines, classes, total })
}
