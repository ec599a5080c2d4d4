//! Where each cache root of a machine sits (`root_hazards`): the hazards its latest scan
//! reported ([`crate::scan::hazards`]), one row per (machine, root), with the server's own
//! figures and findings added when read: the inodes its live entries use and the other
//! machines that report the same root and see the same hook event files (a shared cache).

use crate::db::Store;
use crate::model::Hazards;
use crate::scan::hazards;

/// One root's hazards as the server holds them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RootHazards {
    pub machine: String,
    pub root: String,
    /// When the server stored them, as a scan landed (unix ms).
    pub reported_at: i64,
    pub hazards: Hazards,
}

/// Where a root's cache inodes come from when its hazards are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inodes {
    /// Counted already (the machine's advice, computed after the scan landed, counts them).
    Counted(i64),
    /// The scan changed none of the root's entries: the count stored before, if any (counting
    /// reads every live entry of the root).
    AsStored,
    /// Count them from the live entries the server holds of the root.
    Count,
}

/// Store `h` (checked) as the latest hazards of `root` on `machine`, with its cache inodes as
/// `inodes` says. Returns what was stored, with the machines sharing it and its warnings.
pub async fn store(
    db: &super::Db,
    machine: &str,
    root: &str,
    scan_id: i64,
    inodes: Inodes,
    h: Hazards,
) -> sqlx::Result<Hazards> {
    let pool = db.pool();
    let mut h = h;
    let before: Option<i64> = match inodes {
        Inodes::Counted(n) => Some(n),
        Inodes::AsStored => sqlx::query_scalar(
            "SELECT CAST(json_extract(h.hazards_json, '$.cache_inodes') AS BIGINT)
             FROM root_hazards h JOIN machines m ON m.id = h.machine_id
             WHERE m.name = ? AND h.root = ?",
        )
        .bind(machine)
        .bind(root)
        .fetch_optional(pool)
        .await?
        .flatten(),
        Inodes::Count => None,
    };
    h.cache_inodes = match before {
        Some(n) => n,
        None => super::prune::cache_inodes(pool, machine, root).await?,
    };
    h.warnings.clear();
    h.shared_with.clear();
    let json = serde_json::to_string(&h).unwrap_or_default();
    {
        let _turn = super::write::turn(db).await;
        sqlx::query(
            "INSERT INTO root_hazards(machine_id, root, scan_id, reported_at, hazards_json)
             SELECT m.id, ?2, ?3, ?4, ?5 FROM machines m WHERE m.name = ?1
             ON CONFLICT(machine_id, root) DO UPDATE SET scan_id = excluded.scan_id,
               reported_at = excluded.reported_at, hazards_json = excluded.hazards_json",
        )
        .bind(machine)
        .bind(root)
        .bind(scan_id)
        .bind(super::now_ms())
        .bind(json)
        .execute(pool)
        .await?;
    }
    Ok(finish(h, &same_root(pool, machine, root).await?, machine))
}

/// The hazards of every root of `machine` (all machines when `None`), by machine and root,
/// each with the machines sharing it and its warnings.
pub async fn read(pool: &Store, machine: Option<&str>) -> sqlx::Result<Vec<RootHazards>> {
    let rows: Vec<(String, String, i64, String)> = sqlx::query_as(
        "SELECT m.name, h.root, h.reported_at, h.hazards_json FROM root_hazards h JOIN machines m ON m.id = h.machine_id
         WHERE ?1 IS NULL OR m.name = ?1 ORDER BY m.name, h.root",
    )
    .bind(machine)
    .fetch_all(pool)
    .await?;
    let parsed: Vec<(String, String, i64, Hazards)> =
        rows.into_iter().filter_map(|(n, r, at, j)| Some((n, r, at, serde_json::from_str(&j).ok()?))).collect();
    let mut by_root: std::collections::BTreeMap<&str, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, (_, root, ..)) in parsed.iter().enumerate() {
        by_root.entry(root).or_default().push(i);
    }
    let mut out = Vec::with_capacity(parsed.len());
    for (name, root, reported_at, h) in &parsed {
        // every machine's rows are at hand when all were read: no query per row
        let others = match machine {
            Some(_) => same_root(pool, name, root).await?,
            None => by_root[root.as_str()]
                .iter()
                .map(|&i| &parsed[i])
                .filter(|(n, ..)| n != name)
                .map(|(n, _, _, o)| (n.clone(), o.clone()))
                .collect(),
        };
        let hazards = finish(h.clone(), &others, name);
        out.push(RootHazards { hazards, machine: name.clone(), root: root.clone(), reported_at: *reported_at });
    }
    Ok(out)
}

/// The other machines' hazards of the same root path (an index seek on `root_hazards_root`).
async fn same_root(pool: &Store, machine: &str, root: &str) -> sqlx::Result<Vec<(String, Hazards)>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, h.hazards_json FROM root_hazards h JOIN machines m ON m.id = h.machine_id
         WHERE h.root = ?2 AND m.name <> ?1 ORDER BY m.name LIMIT 1000",
    )
    .bind(machine)
    .bind(root)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().filter_map(|(n, j)| Some((n, serde_json::from_str(&j).ok()?))).collect())
}

/// `h` of `machine` with the machines that share its root (see [`sharing`]) and its warnings.
fn finish(mut h: Hazards, others: &[(String, Hazards)], machine: &str) -> Hazards {
    h.shared_with = others.iter().filter(|(n, o)| sharing(machine, &h, n, o)).map(|(n, _)| n.clone()).collect();
    h.warnings = hazards::warnings(&h);
    h
}

/// Whether two machines reporting the same root path see the same cache: a hook host's event
/// files are in both, or either names the other as a host whose events it holds. Two
/// node-local caches at the same path each hold only their own node's files.
pub fn sharing(a_name: &str, a: &Hazards, b_name: &str, b: &Hazards) -> bool {
    a.event_hosts.iter().any(|h| b.event_hosts.contains(h))
        || a.other_hosts.iter().any(|h| h == b_name)
        || b.other_hosts.iter().any(|h| h == a_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Same path on two nodes: shared only when they see a host's files in common.
    #[test]
    fn two_machines_share_a_root_only_when_they_see_the_same_event_files() {
        let h = |ev: &[&str], other: &[&str]| Hazards {
            event_hosts: ev.iter().map(|s| s.to_string()).collect(),
            other_hosts: other.iter().map(|s| s.to_string()).collect(),
            ..Hazards::default()
        };
        assert!(!sharing("a", &h(&["a"], &[]), "b", &h(&["b"], &[])));
        assert!(sharing("a", &h(&["a", "b"], &["b"]), "b", &h(&["a", "b"], &["a"])));
        assert!(sharing("a", &h(&[], &["b"]), "b", &h(&[], &[])));
        assert!(!sharing("a", &h(&[], &[]), "b", &h(&[], &[])));
    }
}
