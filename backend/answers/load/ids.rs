//! Entry ids as people type them: `MACHINE:KEY` with the whole key, or with its start as the
//! pages show it (`a100-1:VURMD4KEVF`). A start that names one entry of the machine stands for
//! it; one that names several is refused with the candidates ([`ExplainError::Ambiguous`]).

use super::{ExplainError, parse_id};
use crate::db::Store;
use crate::db::keys::{KeyHit, by_prefix};

/// Candidates an ambiguous id lists at most.
pub const CANDIDATES: usize = 10;

/// The whole `MACHINE:KEY` id `id` stands for: itself when an entry has that key, else the one
/// entry of the machine whose key starts with it. 404 when none does, [`ExplainError::Ambiguous`]
/// when several do (one indexed range read, at most [`CANDIDATES`] + 1 rows).
pub async fn resolve(pool: &Store, id: &str) -> Result<String, ExplainError> {
    let (m, k) = parse_id(id)?;
    let hits = by_prefix(pool, Some(m), k, CANDIDATES as i64 + 1).await?;
    match hits.as_slice() {
        _ if hits.iter().any(|h| h.key == k) => Ok(id.to_string()),
        [one] => Ok(format!("{}:{}", one.machine, one.key)),
        [] => Err(ExplainError::NotFound(format!("no entry {m}:{k} (no key on {m} starts with {k:?})"))),
        _ => Err(ExplainError::Ambiguous(Ambiguous::new(id, hits))),
    }
}

/// An id whose key start names several entries.
#[derive(Debug, Clone)]
pub struct Ambiguous {
    /// The id as given.
    pub id: String,
    /// The first [`CANDIDATES`] entries it names.
    pub candidates: Vec<KeyHit>,
    /// It names more than those.
    pub more: bool,
}

impl Ambiguous {
    fn new(id: &str, mut hits: Vec<KeyHit>) -> Ambiguous {
        let more = hits.len() > CANDIDATES;
        hits.truncate(CANDIDATES);
        Ambiguous { id: id.to_string(), candidates: hits, more }
    }
}

impl std::fmt::Display for Ambiguous {
    /// One candidate a line: `a100-1:VU names 3 entries; give more of the key:` then
    /// `  a100-1:VURMD4KEVF... (matmul_kernel)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let more = if self.more { " or more" } else { "" };
        write!(f, "{} names {}{more} entries; give more of the key:", self.id, self.candidates.len())?;
        for h in &self.candidates {
            let removed = if h.live { "" } else { ", removed" };
            write!(f, "\n  {}:{} ({}{removed})", h.machine, h.key, h.kernel.as_deref().unwrap_or("no kernel name"))?;
        }
        if self.more { f.write_str("\n  ...") } else { Ok(()) }
    }
}
