//! Explainer answers for the API, pages and CLI: entries loaded through [`crate::db::explain`],
//! then the pure functions of this module ([`compare`], [`invalidations`], [`nearest`]) and the
//! view shapes of [`report`]. The one place the explainer touches the database.

use super::report::{self, CompareReport, InvalidationsReport};
use super::{Side, compare, invalidations, nearest_classes};
use crate::db::explain::{Loaded, ir_of, load, machine_exists, sides_at, sides_now};
use crate::db::scans::{ScanRef, scans_of};
use sqlx::SqlitePool;

/// Why an explain request cannot be answered.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// Malformed input (an id that is not `MACHINE:KEY`, an unknown IR kind, ...): 400.
    #[error("{0}")]
    Bad(String),
    /// An unknown entry, machine or scan: 404.
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Splits `MACHINE:KEY`.
pub fn parse_id(id: &str) -> Result<(&str, &str), ExplainError> {
    let bad = || ExplainError::Bad(format!("malformed entry id {id:?}: expected MACHINE:KEY"));
    let (m, k) = id.rsplit_once(':').ok_or_else(bad)?;
    let key_ok =
        !k.is_empty() && k.len() <= 128 && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !crate::model::valid_machine_name(m) || !key_ok {
        return Err(bad());
    }
    Ok((m, k))
}

/// Loads an entry by `MACHINE:KEY`, 404 when unknown.
pub async fn load_id(pool: &SqlitePool, id: &str) -> Result<Loaded, ExplainError> {
    let (m, k) = parse_id(id)?;
    load(pool, m, k).await?.ok_or_else(|| ExplainError::NotFound(format!("no entry {m}:{k}")))
}

/// The comparison of two entries, with the IR diff of `ir` (default: `.source` when both have
/// one, else `.ttir`).
pub async fn compare_ids(
    pool: &SqlitePool,
    a: &str,
    b: &str,
    ir: Option<&str>,
    strip: bool,
) -> Result<CompareReport, ExplainError> {
    if let Some(k) = ir.filter(|k| !report::IR_KINDS.contains(k)) {
        return Err(ExplainError::Bad(format!("unknown IR {k:?}: one of {}", report::IR_KINDS.join(", "))));
    }
    let (la, lb) = (load_id(pool, a).await?, load_id(pool, b).await?);
    let kind = ir.unwrap_or(if la.side.source.is_some() && lb.side.source.is_some() { "source" } else { "ttir" });
    let text = |l: &Loaded| -> Option<String> {
        match kind {
            "source" => l.side.source.clone(),
            "ttir" => l.side.ttir.clone(),
            _ => None,
        }
    };
    let (ta, tb) = match kind {
        "source" | "ttir" => (text(&la), text(&lb)),
        _ => (ir_of(pool, la.row.id, kind).await?, ir_of(pool, lb.row.id, kind).await?),
    };
    let (ir_stats, ir_rows) = report::ir_report(kind, ta.as_deref(), tb.as_deref(), strip, 3);
    let relocated = [("a", &la), ("b", &lb)]
        .into_iter()
        .filter(|(_, l)| l.side.relocated)
        .map(|(s, l)| report::Relocated::new(s, format!("{}:{}", l.row.machine, l.row.key), l.group_at.clone()))
        .collect();
    Ok(CompareReport {
        cmp: compare(&la.side, &lb.side),
        kernel_a: la.side.kernel_name().map(str::to_string),
        kernel_b: lb.side.kernel_name().map(str::to_string),
        relocated,
        ir: ir_stats,
        ir_rows,
    })
}

/// A neighbour of an entry.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Neighbour {
    pub machine: String,
    pub key: String,
    /// `machine:key`.
    pub id: String,
    /// Components of the key with a differing input (the first ranking criterion).
    pub components: usize,
    /// Differing key inputs (fields; the tie-break).
    pub differing: usize,
    pub cause: crate::explain::Cause,
    pub summary: String,
    pub identical_binary: bool,
    pub identical_code: bool,
}

/// The closest entries of the same kernel on any machine: fewest differing components first,
/// then fewest differing key inputs. Candidates come by kernel and variant identity
/// ([`crate::db::nearest`]): one analysis per class of entries that compare alike.
pub async fn nearest_of(pool: &SqlitePool, id: &str, limit: usize) -> Result<(Loaded, Vec<Neighbour>), ExplainError> {
    let of = load_id(pool, id).await?;
    let Some(kernel) = of.side.kernel_name().map(str::to_string) else {
        return Ok((of, vec![]));
    };
    let crate::db::nearest::Classes { candidates, mut classes } =
        crate::db::nearest::kernel_classes(pool, &kernel).await?;
    let me = candidates.iter().position(|c| c.machine == of.side.machine && c.key == of.side.key);
    for (_, members) in &mut classes {
        members.retain(|&i| Some(i) != me);
    }
    classes.retain(|(_, members)| !members.is_empty());
    let side_of: std::collections::HashMap<usize, usize> =
        classes.iter().enumerate().flat_map(|(c, (_, m))| m.iter().map(move |&i| (i, c))).collect();
    let out = nearest_classes(&of.side, &classes, limit)
        .into_iter()
        .map(|n| {
            let at = &candidates[n.index];
            let c = Side { machine: at.machine.clone(), key: at.key.clone(), ..classes[side_of[&n.index]].0.clone() };
            let cmp = compare(&of.side, &c);
            Neighbour {
                machine: c.machine.clone(),
                key: c.key.clone(),
                id: format!("{}:{}", c.machine, c.key),
                components: n.components,
                differing: n.differing,
                cause: n.cause,
                summary: cmp.summary,
                identical_binary: cmp.identical_binary,
                identical_code: cmp.identical_code,
            }
        })
        .collect();
    Ok((of, out))
}

/// Which scans to compare: `to` defaults to the machine's latest scan, `from` to the scan of
/// the same root before `to` (none when `to` is the first).
pub async fn pick_scans(
    pool: &SqlitePool,
    machine: &str,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<(Option<ScanRef>, ScanRef, Vec<ScanRef>), ExplainError> {
    let all = scans_of(pool, machine).await?;
    if all.is_empty() {
        return Err(ExplainError::NotFound(format!("no scans of machine {machine:?}")));
    }
    let find = |id: i64| {
        all.iter()
            .find(|s| s.id == id)
            .cloned()
            .ok_or_else(|| ExplainError::NotFound(format!("no scan {id} of machine {machine}")))
    };
    let to = match to {
        Some(id) => find(id)?,
        None => all.last().cloned().unwrap_or_else(|| unreachable!()),
    };
    let from = match from {
        Some(id) => Some(find(id)?),
        None => all.iter().rev().find(|s| s.root == to.root && (s.scanned_at, s.id) < (to.scanned_at, to.id)).cloned(),
    };
    if let Some(f) = &from
        && f.root != to.root
    {
        return Err(ExplainError::Bad(format!(
            "scans {} and {} are of different cache dirs ({} vs {})",
            f.id, to.id, f.root, to.root
        )));
    }
    Ok((from, to, all))
}

fn inv_report(
    old: &[crate::explain::Side],
    new: &[crate::explain::Side],
    machines: (&str, &str),
) -> InvalidationsReport {
    let moved: std::collections::HashSet<&str> = new.iter().filter(|s| s.relocated).map(|s| s.key.as_str()).collect();
    let inv = invalidations(old, new);
    report::invalidations_report(inv, machines, (old.len(), new.len()), |k| moved.contains(k), moved.len())
}

/// Invalidations on one machine between two scans.
pub async fn invalidations_scans(
    pool: &SqlitePool,
    from: Option<&ScanRef>,
    to: &ScanRef,
) -> Result<InvalidationsReport, ExplainError> {
    let old = match from {
        Some(f) => sides_at(pool, f).await?,
        None => vec![],
    };
    let new = sides_at(pool, to).await?;
    let mut r = inv_report(&old, &new, (&to.machine, &to.machine));
    r.from = from.map(|f| f.id);
    r.to = Some(to.id);
    Ok(r)
}

/// Invalidations from machine `a` to machine `b`, as they are now.
pub async fn invalidations_machines(pool: &SqlitePool, a: &str, b: &str) -> Result<InvalidationsReport, ExplainError> {
    for m in [a, b] {
        if !machine_exists(pool, m).await? {
            return Err(ExplainError::NotFound(format!("no machine {m:?}")));
        }
    }
    let (old, new) = (sides_now(pool, a).await?, sides_now(pool, b).await?);
    Ok(inv_report(&old, &new, (a, b)))
}
