//! What `cachelens prune` reads from the database to decide: a root's live entries with their
//! variant identity, compile time and the hook's last event for their key, and when the hook
//! started recording in that root. Deciding is `prune`'s; this module only reads.

use super::Store;
use sqlx::FromRow;

/// One live entry of a root, as prune judges it.
#[derive(Debug, Clone, FromRow, Default)]
pub struct PruneRow {
    pub dir: String,
    pub key: String,
    pub kind: String,
    pub kernel: Option<String>,
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub warp_size: Option<i64>,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub num_ctas: Option<i64>,
    pub triton_version: Option<String>,
    pub signature: Option<String>,
    pub shapes: Option<String>,
    /// The metadata file's mtime: when Triton wrote the entry.
    pub created_at: Option<i64>,
    #[sqlx(try_from = "crate::db::Flag")]
    pub relocated: bool,
    /// The hook's last event (hit, miss or compile) for this key on this machine (unix ms).
    /// (`default`: the advice's rows fold it from one time per event kind.)
    #[sqlx(default)]
    pub last_event: Option<i64>,
    /// The hook's last hit for this key on this machine (unix ms).
    #[sqlx(default)]
    pub last_hit: Option<i64>,
}

/// The live entries of `root` on `machine`, in dir order.
pub async fn rows(pool: &Store, machine: &str, root: &str) -> sqlx::Result<Vec<PruneRow>> {
    sqlx::query_as(
        "SELECT e.dir, e.key, e.kind, e.kernel, e.backend, e.arch, e.warp_size, e.num_warps, e.num_stages,
                e.num_ctas, e.triton_version, e.signature, e.shapes, e.created_at, e.relocated != 0 AS relocated,
                (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key) AS last_event,
                (SELECT MAX(v.ts) FROM events v WHERE v.machine_id = e.machine_id AND v.key = e.key
                   AND v.event = 'hit') AS last_hit
         FROM entry_rows e JOIN machines m ON m.id = e.machine_id
         WHERE m.name = ? AND e.root = ? AND e.removed_at IS NULL
         ORDER BY e.dir",
    )
    .bind(machine)
    .bind(root)
    .fetch_all(pool)
    .await
}

/// When the hook's first event for a key of `root` (live or removed) on `machine` was recorded:
/// from then on a key without events was not looked up. `None`: no hook events for this root.
pub async fn hook_since(pool: &Store, machine: &str, root: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar(
        "SELECT MIN(v.ts) FROM events v JOIN machines m ON m.id = v.machine_id
         WHERE m.name = ?1 AND v.key IN (SELECT e.key FROM entry_rows e WHERE e.machine_id = m.id AND e.root = ?2)",
    )
    .bind(machine)
    .bind(root)
    .fetch_one(pool)
    .await
}

/// Inodes the live entries of `root` on `machine` use: one per entry dir and one per file.
pub async fn cache_inodes(pool: &Store, machine: &str, root: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        // (files counted on the fact and in `artifacts` for rows from before facts had files:
        // `entry_files`, a UNION ALL, in a correlated subquery is built whole for the fleet)
        "SELECT COUNT(*) + COALESCE(SUM((SELECT COUNT(*) FROM artifacts a WHERE a.entry_id = e.id) + f.files), 0)
         FROM entries e JOIN facts f ON f.id = e.fact_id JOIN roots r ON r.id = e.root_id
         WHERE e.machine_id = (SELECT id FROM machines WHERE name = ?) AND r.path = ? AND e.removed_at IS NULL",
    )
    .bind(machine)
    .bind(root)
    .fetch_one(pool)
    .await
}
