//! The machine page's "Hazards" section: where each cache root sits (`db::hazards`), in words.

use crate::db::hazards::RootHazards;
use crate::fmt;

/// One cache root's hazards as the page shows them.
pub struct HazardRow {
    pub root: String,
    /// `ext4`, `nfs (network)`, ...
    pub fs: String,
    pub network: bool,
    /// This cache's inodes, and the file system's used and free ones.
    pub cache_inodes: i64,
    pub inodes: String,
    pub bytes_free: String,
    pub orphan_temps: i64,
    /// "no", or the hosts and machines seen sharing it.
    pub shared: String,
    pub is_shared: bool,
    pub warnings: Vec<String>,
    pub reported: String,
}

/// The rows of a machine's roots, in root order.
pub fn rows(hs: Vec<RootHazards>) -> Vec<HazardRow> {
    hs.into_iter().map(row).collect()
}

fn row(r: RootHazards) -> HazardRow {
    let h = r.hazards;
    let used = h.fs_inodes.saturating_sub(h.fs_inodes_free);
    let mut sharers: Vec<String> = h.other_hosts.iter().map(|n| format!("host {n}")).collect();
    sharers.extend(h.shared_with.iter().map(|n| format!("machine {n}")));
    HazardRow {
        fs: if h.network { format!("{} (network)", h.fs_type) } else { h.fs_type.clone() },
        network: h.network,
        cache_inodes: h.cache_inodes,
        inodes: format!("{used} used, {} free of {}", h.fs_inodes_free, h.fs_inodes),
        bytes_free: format!("{} of {}", fmt::bytes(h.fs_bytes_free as i64), fmt::bytes(h.fs_bytes as i64)),
        orphan_temps: h.orphan_temps,
        is_shared: crate::scan::hazards::shared(&h),
        shared: if sharers.is_empty() { "no".into() } else { format!("yes: {}", sharers.join(", ")) },
        warnings: h.warnings,
        reported: fmt::age(Some(r.reported_at)),
        root: r.root,
    }
}
