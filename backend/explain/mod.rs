//! Why two cache entries differ, and which entries an upgrade or a change invalidated.
//!
//! Pure logic over what the database knows about entries ([`Side`]): no I/O. A difference is
//! reported field by field, grouped into components; the headline cause is the most upstream
//! differing component, in the order compiler > backend > env > source > options (see
//! docs/ARCHITECTURE.md and docs/API.md). Differences that follow from an upstream one (a
//! metadata field that only one Triton version writes, an option an env var set, a per-target
//! default, compile outputs) are shown with a note but are not causes.
//!
//! - [`compare`]: one entry against another.
//! - [`ir_diff`] / [`strip_locations`]: IR text diffs without location noise.
//! - [`invalidations`]: an old set of entries against a new one (two scans, two machines);
//!   [`match_part`] / [`finish`]: the same, a kernel at a time ([`load::invalidations_grouped`]),
//!   stored and read by page in [`stored`].
//! - [`nearest`]: the most similar entries to one entry.
//! - `identical_code`: the binaries' machine code is the same (`scan::resources::code_digest`).

mod compare;
mod fields;
mod ir;
mod kept;
mod locs;
mod matching;
mod recorded;
pub mod report;
mod source;
#[cfg(test)]
mod tests;
mod text;

pub use compare::{churn_note, compare, compare_kept, reason};
pub use ir::{DiffLine, ir_diff, strip_locations};
pub use kept::Kept;
pub use matching::{
    Budget, Invalidated, Invalidations, Near, OverBudget, Part, Shared, finish, invalidations, match_part, nearest,
    nearest_classes, pieces,
};
pub use text::{render_diff, render_text};

use serde::Serialize;

/// One side of a comparison: what the DB knows about an entry.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Machine the entry was scanned on.
    pub machine: String,
    /// The cache key (the entry's directory name).
    pub key: String,
    /// Kernel name, when known (else taken from the metadata's `name`).
    pub kernel: Option<String>,
    /// The entry's `<name>.json` as Triton wrote it.
    pub metadata: Option<serde_json::Value>,
    /// `.source` text (3.4+): the unoptimised TTIR (shared: the entries of a fleet point at few
    /// distinct texts).
    pub source: Option<std::sync::Arc<str>>,
    /// `.ttir` text.
    pub ttir: Option<std::sync::Arc<str>>,
    /// sha256 of the `.cubin` / `.hsaco`.
    pub binary_sha256: Option<String>,
    /// [`crate::scan::resources::code_digest`] of the binary: its machine code and kernel info, debug info left out.
    pub code_sha256: Option<String>,
    /// Its group file points elsewhere (Triton will miss on it).
    pub relocated: bool,
    /// The key's parts as the hook recorded them at this key's compile (`triton_key` digest,
    /// `source_hash`, `backend_hash`, `options_hash`, `env_vars`, `python`, `triton_dir`).
    pub parts: Option<serde_json::Value>,
}

impl Side {
    /// The kernel's name: [`Side::kernel`], else the metadata's `name`.
    pub fn kernel_name(&self) -> Option<&str> {
        self.kernel.as_deref().or_else(|| self.metadata.as_ref()?.get("name")?.as_str())
    }
    fn label(&self) -> String {
        format!("{}:{}", self.machine, self.key)
    }
}

/// A component of the cache key (and the headline cause of a difference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cause {
    /// Triton version or build (`triton_key`).
    Compiler,
    /// Backend, arch, warp size, toolchain.
    Backend,
    /// Cache-invalidating environment variables and the options they set.
    Env,
    /// Kernel code, callees, signature, specialisation, constexpr values.
    Source,
    /// Compile options (num_warps, num_stages, debug, ...).
    Options,
    /// Nothing differs (or, for a row, a field that is no key input).
    None,
    /// Not enough on disk to tell.
    Unknown,
}

impl Cause {
    /// Upstream first: compiler, backend, env, source, options, none, unknown.
    pub const ORDER: [Cause; 7] =
        [Cause::Compiler, Cause::Backend, Cause::Env, Cause::Source, Cause::Options, Cause::None, Cause::Unknown];

    /// Position in [`Cause::ORDER`].
    pub fn rank(self) -> usize {
        Cause::ORDER.iter().position(|c| *c == self).unwrap_or(usize::MAX)
    }

    /// The cause of a lowercase name (as serialized).
    pub fn parse(s: &str) -> Option<Cause> {
        Cause::ORDER.into_iter().find(|c| c.as_str() == s)
    }

    /// Lowercase name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Compiler => "compiler",
            Cause::Backend => "backend",
            Cause::Env => "env",
            Cause::Source => "source",
            Cause::Options => "options",
            Cause::None => "none",
            Cause::Unknown => "unknown",
        }
    }
}

/// One field of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The component the field belongs to (`none` for compile outputs and bookkeeping).
    pub component: Cause,
    /// Field name (`triton_version`, `target.arch`, `num_stages`, `signature.x_ptr`, ...).
    pub field: String,
    /// A's value (`null` when absent).
    pub a: serde_json::Value,
    /// B's value (`null` when absent).
    pub b: serde_json::Value,
    /// Whether the values differ.
    pub differs: bool,
    /// Why a difference is or is not a cause, e.g. "only in Triton 3.5.1: consequence of the
    /// version change".
    pub note: Option<String>,
}

/// Why two entries differ.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// `machine:key` of A.
    pub a: String,
    /// `machine:key` of B.
    pub b: String,
    /// Headline: the most upstream differing component.
    pub cause: Cause,
    /// One plain sentence, e.g. "Triton 3.5.1 → 3.6.0; everything else equal".
    pub summary: String,
    /// Every component and field, differing rows first.
    pub components: Vec<Row>,
    /// Same binary sha256 under different keys: pure key churn.
    pub identical_binary: bool,
    /// `recorded` when both sides carry the key's parts as the hook recorded them at compile
    /// time (the causes are measured), else `inferred` (from the files on disk).
    pub evidence: &'static str,
    /// Same machine code under different keys (the bytes may differ, only in debug info):
    /// pure key churn too. True whenever `identical_binary` is.
    pub identical_code: bool,
    /// Changed lines of the kernel IR (locations and value names ignored), when compared.
    pub source_changed_lines: Option<usize>,
}
