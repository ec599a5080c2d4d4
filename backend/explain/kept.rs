//! [`Kept`]: what the explainer keeps across calls, owned by its caller (one per database,
//! `db::Db`) and passed in: `explain` reaches no global.

use super::ir::Prepared;
use crate::bounded::Bounded;
use std::sync::Arc;

/// A line diff's outcome: changed lines, and the literal changes (`source::line_changes`).
pub(crate) type LineChanges = Arc<(usize, Vec<(String, String)>)>;

/// IR texts prepared and line diffs made lately (see [`PREPARED_KEPT`] and [`DIFFS_KEPT`]).
#[derive(Debug)]
pub struct Kept {
    /// Prepared texts by (address, length) of a shared text, with the text held alive.
    pub(crate) prepared_at: Bounded<(usize, usize), (Arc<str>, Arc<Prepared>)>,
    /// Prepared texts by the text's id ([`Prepared::id`]).
    pub(crate) prepared: Bounded<[u8; 16], Arc<Prepared>>,
    /// Line diffs by (A's text id, B's text id).
    pub(crate) diffs: Bounded<([u8; 16], [u8; 16]), LineChanges>,
}

/// IR texts prepared lately: pages ask about the same kernels again (nearest neighbours,
/// comparisons, reports of machines that share compiles), and preparing a text (strip,
/// canonical names, signature) costs ~0.2 ms per 10 KB. Found first by the text's allocation:
/// the texts of a fleet are read once per blob and shared (`db::explain::texts_by_sha`), so a
/// request names the same allocations again, and hashing them (18 KB a `.source`, two texts for
/// each of up to 128 classes of a nearest request) was ~10 % of its time; the cache holds each
/// such allocation alive, so its address names nothing else meanwhile. Then by the text's id,
/// the first 16 bytes of its sha256 (texts read apart). At most this many texts (a prepared
/// text keeps its hashes, signature, shapes and locations, a few KB, and the text itself, not
/// its stripped lines), four times as many allocations: a fleet's nearest requests rank up to
/// 128 classes, two texts each, and the load benchmark's fleet has 2,986 distinct texts (512
/// thrashed: most of a request's time was preparing texts again).
pub const PREPARED_KEPT: usize = 4096;

/// Line diffs kept (a few hundred bytes each), by the two texts' ids: a fleet's entries share
/// few distinct IR texts (the load benchmark's 300,000 entries: 2,986), so the neighbours a
/// nearest request lists, and the pairs a page compares, are mostly pairs of texts diffed
/// before (the diffs of ~20 listed neighbours were ~15 % of a nearest request).
pub const DIFFS_KEPT: usize = 16_384;

impl Default for Kept {
    fn default() -> Kept {
        Kept {
            prepared_at: Bounded::entries(4 * PREPARED_KEPT),
            prepared: Bounded::entries(PREPARED_KEPT),
            diffs: Bounded::entries(DIFFS_KEPT),
        }
    }
}

impl Kept {
    /// Prepared texts and line diffs kept now.
    pub fn len(&self) -> (usize, usize) {
        (self.prepared.len(), self.diffs.len())
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }
}
