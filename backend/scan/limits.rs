//! Size caps: what the scanner keeps in memory (and stores) per file, whatever the cache holds.
//!
//! Every file is hashed (sha256) whatever its size: files over their cap are read as a stream
//! through a 256 KiB buffer, so a 2 GiB `.ttir` (even a sparse one) costs 256 KiB, not 2 GiB.
//! Under its cap a file is read whole, once. With 8 reader threads the scanner's peak is about
//! `8 × (largest cap in use)` plus the entries in flight to the database (at most 32, and IR text
//! of one file at most [`MAX_TEXT_BYTES`]).
//!
//! | file | cap | over the cap |
//! | --- | --- | --- |
//! | IR text (`.source`, `.ttir`, `.ttgir`, `.llir`, `.ptx`, `.amdgcn`) | [`MAX_TEXT_BYTES`] 16 MiB | hashed and listed; text not stored (the entry page says why); not parsed |
//! | metadata `<name>.json` | [`MAX_META_BYTES`] 4 MiB | hashed and listed, not parsed: the entry is partial, the skip counted ("over the size cap") |
//! | group file `__grp__*.json` | [`MAX_META_BYTES`] 4 MiB | same |
//! | `<fn>.autotune.json` | [`MAX_TEXT_BYTES`] 16 MiB | same |
//! | `.cubin` | [`MAX_CUBIN_BYTES`] 32 MiB | hashed and listed, resources not read: the entry is partial, the skip counted |
//! | `.hsaco`, `.so`, anything else | 0 | always hashed as a stream (never parsed) |
//! | Inductor `.best_config` | [`MAX_BEST_CONFIG_BYTES`] 1 MiB | skipped with the reason |
//! | Inductor autotune cache `cache/<hash>` | [`MAX_INDUCTOR_AUTOTUNE_BYTES`] 16 MiB | skipped with the reason |
//! | hook event line | [`MAX_EVENT_LINE`] 64 KiB | skipped ("malformed hook event line (too long)"), reading goes on after its end |
//! | hook event bytes per scan | [`MAX_EVENT_BYTES_PER_SCAN`] 64 MiB | the rest is read by the next scan, from the mark this one leaves |
//!
//! Real caches are far below these: the corpus's largest metadata file is a few KB, its largest
//! cubin a few hundred KB, its largest IR (`.llir`) about 1 MB.

/// IR text larger than this is hashed but not kept, stored or parsed.
pub const MAX_TEXT_BYTES: u64 = 16 << 20;
/// Metadata and group files larger than this are hashed but not parsed.
pub const MAX_META_BYTES: u64 = 4 << 20;
/// Cubins larger than this are hashed but their resources are not read.
pub const MAX_CUBIN_BYTES: u64 = 32 << 20;
/// Inductor `.best_config` files larger than this are skipped.
pub const MAX_BEST_CONFIG_BYTES: u64 = 1 << 20;
/// Inductor autotune cache files (`cache/<hash>`: 12 KB for 4 shapes in the fixture) larger than this are skipped.
pub const MAX_INDUCTOR_AUTOTUNE_BYTES: u64 = 16 << 20;
/// A hook event line longer than this is not a hook line (they are under 4 KB).
pub const MAX_EVENT_LINE: usize = 64 << 10;
/// At most this many bytes of hook event lines are read per scan (all files together).
pub const MAX_EVENT_BYTES_PER_SCAN: u64 = 64 << 20;

/// Skip/partial reason of a file over its cap.
pub fn over_cap(what: &str, cap: u64) -> String {
    format!("{what} over the {} MiB size cap: not read", cap >> 20)
}
