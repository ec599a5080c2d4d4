//! Queries behind the explainer: entries loaded as [`Side`] values (metadata, IR text, binary
//! hash, relocation), entry sets at a scan (for invalidations), and a kernel's entries on every
//! machine (for nearest neighbours).

use super::read::{self, EntryRow};
use crate::explain::Side;
use sqlx::{FromRow, QueryBuilder, Row, Sqlite, SqlitePool};
use std::collections::HashMap;

/// An entry with everything the explainer needs.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub side: Side,
    pub row: EntryRow,
    /// Where its group file points (the writer's directory), when it names one.
    pub group_at: Option<String>,
}

/// Kinds of entries that hold a compiled kernel.
const KERNEL_KINDS: &str = "('kernel', 'binary_only', 'partial')";

/// One entry as a [`Side`], by machine and key (removed entries included).
pub async fn load(pool: &SqlitePool, machine: &str, key: &str) -> sqlx::Result<Option<Loaded>> {
    let Some(row) = read::entry(pool, machine, key).await? else {
        return Ok(None);
    };
    let (meta, group, _) = read::entry_json(pool, row.id).await?;
    let mut ir = ir_texts(pool, &[row.id]).await?;
    let (source, ttir) = ir.remove(&row.id).unwrap_or_default();
    let group: Option<serde_json::Value> = group.and_then(|g| serde_json::from_str(&g).ok());
    let group_at = group
        .as_ref()
        .and_then(|g| g.get("written_at")?.as_str().map(str::to_string));
    let side = Side {
        machine: row.machine.clone(),
        key: row.key.clone(),
        kernel: row.kernel.clone(),
        metadata: meta.and_then(|m| serde_json::from_str(&m).ok()),
        source,
        ttir,
        binary_sha256: row.binary_sha256.clone(),
        relocated: row.relocated,
    };
    Ok(Some(Loaded {
        side,
        row,
        group_at,
    }))
}

/// Text of one entry's IR artifact of the given extension (`source`, `ttir`, `ttgir`, `llir`,
/// `ptx`, `amdgcn`), when stored.
pub async fn ir_of(pool: &SqlitePool, entry_id: i64, ext: &str) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar(
        "SELECT b.content FROM artifacts a JOIN blobs b ON b.sha256 = a.sha256
         WHERE a.entry_id = ? AND a.ext = ? ORDER BY a.name LIMIT 1",
    )
    .bind(entry_id)
    .bind(ext)
    .fetch_optional(pool)
    .await
}

/// `.source` and `.ttir` texts of many entries: id → (source, ttir).
async fn ir_texts(
    pool: &SqlitePool,
    ids: &[i64],
) -> sqlx::Result<HashMap<i64, (Option<String>, Option<String>)>> {
    let mut out: HashMap<i64, (Option<String>, Option<String>)> = HashMap::new();
    for part in ids.chunks(500) {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "SELECT a.entry_id, a.ext, b.content FROM artifacts a JOIN blobs b ON b.sha256 = a.sha256
             WHERE a.ext IN ('source', 'ttir') AND a.entry_id IN (",
        );
        let mut sep = qb.separated(", ");
        for id in part {
            sep.push_bind(*id);
        }
        qb.push(")");
        for r in qb.build().fetch_all(pool).await? {
            let slot = out.entry(r.get(0)).or_default();
            let text: String = r.get(2);
            match r.get::<String, _>(1).as_str() {
                "source" => slot.0 = Some(text),
                _ => slot.1 = Some(text),
            }
        }
    }
    Ok(out)
}

#[derive(FromRow)]
struct SideRow {
    id: i64,
    machine: String,
    key: String,
    kernel: Option<String>,
    metadata_json: Option<String>,
    binary_sha256: Option<String>,
    relocated: bool,
}

/// Run an entry query (selecting [`SideRow`] columns) and attach IR text.
async fn sides(pool: &SqlitePool, sql: &str, binds: &[&str]) -> sqlx::Result<Vec<Side>> {
    let mut q = sqlx::query_as::<_, SideRow>(sqlx::AssertSqlSafe(sql.to_string()));
    for b in binds {
        q = q.bind(*b);
    }
    let rows = q.fetch_all(pool).await?;
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let mut ir = ir_texts(pool, &ids).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let (source, ttir) = ir.remove(&r.id).unwrap_or_default();
            Side {
                machine: r.machine,
                key: r.key,
                kernel: r.kernel,
                metadata: r.metadata_json.and_then(|m| serde_json::from_str(&m).ok()),
                source,
                ttir,
                binary_sha256: r.binary_sha256,
                relocated: r.relocated,
            }
        })
        .collect())
}

const SIDE_COLUMNS: &str =
    "e.id, m.name AS machine, e.key, e.kernel, e.metadata_json, e.binary_sha256, e.relocated";

/// A scan: its machine and root.
#[derive(Debug, Clone, FromRow)]
pub struct ScanRef {
    pub id: i64,
    pub machine: String,
    pub root: String,
    pub scanned_at: i64,
}

/// One scan by id.
pub async fn scan(pool: &SqlitePool, id: i64) -> sqlx::Result<Option<ScanRef>> {
    sqlx::query_as(
        "SELECT s.id, m.name AS machine, s.root, s.scanned_at FROM scans s JOIN machines m ON m.id = s.machine_id
         WHERE s.id = ?",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// Every scan of a machine, oldest first.
pub async fn scans_of(pool: &SqlitePool, machine: &str) -> sqlx::Result<Vec<ScanRef>> {
    sqlx::query_as(
        "SELECT s.id, m.name AS machine, s.root, s.scanned_at FROM scans s JOIN machines m ON m.id = s.machine_id
         WHERE m.name = ? ORDER BY s.scanned_at, s.id",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
}

/// Kernel entries of the scan's machine and root that were present right after that scan:
/// `first_scan_id <= S` and not removed by S.
pub async fn sides_at(pool: &SqlitePool, s: &ScanRef) -> sqlx::Result<Vec<Side>> {
    let id = s.id.to_string();
    let sql = format!(
        "SELECT {SIDE_COLUMNS} FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE m.name = ?1 AND e.root = ?2 AND e.kind IN {KERNEL_KINDS}
           AND e.first_scan_id <= CAST(?3 AS INTEGER)
           AND (e.removed_scan_id IS NULL OR e.removed_scan_id > CAST(?3 AS INTEGER))
         ORDER BY e.kernel, e.key"
    );
    sides(pool, &sql, &[&s.machine, &s.root, &id]).await
}

/// Kernel entries a machine holds now (every root).
pub async fn sides_now(pool: &SqlitePool, machine: &str) -> sqlx::Result<Vec<Side>> {
    let sql = format!(
        "SELECT {SIDE_COLUMNS} FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE m.name = ?1 AND e.kind IN {KERNEL_KINDS} AND e.removed_at IS NULL ORDER BY e.kernel, e.key"
    );
    sides(pool, &sql, &[machine]).await
}

/// Entries of one kernel on every machine, present now.
pub async fn kernel_sides(pool: &SqlitePool, kernel: &str) -> sqlx::Result<Vec<Side>> {
    let sql = format!(
        "SELECT {SIDE_COLUMNS} FROM entries e JOIN machines m ON m.id = e.machine_id
         WHERE e.kernel = ?1 AND e.kind IN {KERNEL_KINDS} AND e.removed_at IS NULL ORDER BY m.name, e.key"
    );
    sides(pool, &sql, &[kernel]).await
}

/// Whether a machine exists.
pub async fn machine_exists(pool: &SqlitePool, machine: &str) -> sqlx::Result<bool> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM machines WHERE name = ?")
        .bind(machine)
        .fetch_one(pool)
        .await?;
    Ok(n > 0)
}

// ---- What the views ask for: queries above combined with the pure explainer. ----

use crate::explain::report::{self, CompareReport, InvalidationsReport};
use crate::explain::{compare, invalidations, nearest};

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
    let key_ok = !k.is_empty()
        && k.len() <= 128
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !crate::model::valid_machine_name(m) || !key_ok {
        return Err(bad());
    }
    Ok((m, k))
}

/// Loads an entry by `MACHINE:KEY`, 404 when unknown.
pub async fn load_id(pool: &SqlitePool, id: &str) -> Result<Loaded, ExplainError> {
    let (m, k) = parse_id(id)?;
    load(pool, m, k)
        .await?
        .ok_or_else(|| ExplainError::NotFound(format!("no entry {m}:{k}")))
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
        return Err(ExplainError::Bad(format!(
            "unknown IR {k:?}: one of {}",
            report::IR_KINDS.join(", ")
        )));
    }
    let (la, lb) = (load_id(pool, a).await?, load_id(pool, b).await?);
    let kind = ir.unwrap_or(if la.side.source.is_some() && lb.side.source.is_some() {
        "source"
    } else {
        "ttir"
    });
    let text = |l: &Loaded| -> Option<String> {
        match kind {
            "source" => l.side.source.clone(),
            "ttir" => l.side.ttir.clone(),
            _ => None,
        }
    };
    let (ta, tb) = match kind {
        "source" | "ttir" => (text(&la), text(&lb)),
        _ => (
            ir_of(pool, la.row.id, kind).await?,
            ir_of(pool, lb.row.id, kind).await?,
        ),
    };
    let (ir_stats, ir_rows) = report::ir_report(kind, ta.as_deref(), tb.as_deref(), strip, 3);
    let relocated = [("a", &la), ("b", &lb)]
        .into_iter()
        .filter(|(_, l)| l.side.relocated)
        .map(|(s, l)| {
            report::Relocated::new(
                s,
                format!("{}:{}", l.row.machine, l.row.key),
                l.group_at.clone(),
            )
        })
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
    /// Differing key inputs.
    pub differing: usize,
    pub cause: crate::explain::Cause,
    pub summary: String,
    pub identical_binary: bool,
}

/// The closest entries of the same kernel on any machine, fewest differing key inputs first.
pub async fn nearest_of(
    pool: &SqlitePool,
    id: &str,
    limit: usize,
) -> Result<(Loaded, Vec<Neighbour>), ExplainError> {
    let of = load_id(pool, id).await?;
    let kernel = of.side.kernel_name().map(str::to_string);
    let mut cands = match &kernel {
        Some(k) => kernel_sides(pool, k).await?,
        None => vec![],
    };
    cands.retain(|c| !(c.machine == of.side.machine && c.key == of.side.key));
    let out = nearest(&of.side, &cands, limit)
        .into_iter()
        .map(|(i, differing, cause)| {
            let c = &cands[i];
            let cmp = compare(&of.side, c);
            Neighbour {
                machine: c.machine.clone(),
                key: c.key.clone(),
                id: format!("{}:{}", c.machine, c.key),
                differing,
                cause,
                summary: cmp.summary,
                identical_binary: cmp.identical_binary,
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
        return Err(ExplainError::NotFound(format!(
            "no scans of machine {machine:?}"
        )));
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
        None => all
            .iter()
            .rev()
            .find(|s| s.root == to.root && (s.scanned_at, s.id) < (to.scanned_at, to.id))
            .cloned(),
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
    let moved: std::collections::HashSet<&str> = new
        .iter()
        .filter(|s| s.relocated)
        .map(|s| s.key.as_str())
        .collect();
    let inv = invalidations(old, new);
    report::invalidations_report(
        inv,
        machines,
        (old.len(), new.len()),
        |k| moved.contains(k),
        moved.len(),
    )
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
pub async fn invalidations_machines(
    pool: &SqlitePool,
    a: &str,
    b: &str,
) -> Result<InvalidationsReport, ExplainError> {
    for m in [a, b] {
        if !machine_exists(pool, m).await? {
            return Err(ExplainError::NotFound(format!("no machine {m:?}")));
        }
    }
    let (old, new) = (sides_now(pool, a).await?, sides_now(pool, b).await?);
    Ok(inv_report(&old, &new, (a, b)))
}
