//! Size caps: what the scanner keeps in memory (and stores) per file, whatever the cache holds.
//!
//! Every file is hashed (sha256): files over their cap are read as a stream through a 256 KiB
//! buffer, so a 2 GiB `.ttir` (even a sparse one) costs 256 KiB, not 2 GiB. A file over
//! [`MAX_HASH_BYTES`] (256 MiB) is hashed only that far: its sha256 is then that of its first
//! 256 MiB followed by its size as 8 little-endian bytes ([`PARTIAL_HASH`]), its entry partial
//! ("file of 16 TiB: hashed its first 256 MiB") and the file counted in the scan's skips. Such a
//! hash never equals the full hash of any file the scanner reads whole: its input is exactly
//! 256 MiB + 8 bytes long, a whole-file hash's input at most 256 MiB. Before, a sparse 16 TiB
//! file (12 KB on disk) took about 13 hours to hash; now it takes a fraction of a second.
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
//! | Inductor entry of a saved compile artifact (`scan/standalone.rs`) | `standalone::MAX_PICKLE_BYTES` 64 MiB | listed with its size, its Triton kernels not read |
//! | any file, hashed | [`MAX_HASH_BYTES`] 256 MiB | sha256 of its first 256 MiB and its size; the entry partial, the file counted |
//!
//! Time: a scan of one root stops reading entries once its time budget is spent
//! ([`DEFAULT_TIME_BUDGET`], 30 min; `scan --time-budget` or `CACHELENS_TIME_BUDGET`). The entries
//! it did not reach are counted as skipped ([`TIME_BUDGET_REASON`]) and keep their rows as
//! they were (live, not removed); the next scan, which passes over unchanged entries quickly,
//! reads on. Best configs, Inductor autotune files and hook events are read after the entries
//! whatever the budget (each is bounded above).
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

/// Files are hashed up to this many bytes; a larger file's sha256 is [`PARTIAL_HASH`].
pub const MAX_HASH_BYTES: u64 = 256 << 20;

/// What the sha256 of a file over [`MAX_HASH_BYTES`] is taken over.
pub const PARTIAL_HASH: &str = "its first 256 MiB followed by its size as 8 little-endian bytes";

/// How long one root's scan reads entries by default (`scan --time-budget`).
pub const DEFAULT_TIME_BUDGET: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// Skip reason of an entry dir not read because the scan's time budget was spent.
pub const TIME_BUDGET_REASON: &str = "time budget reached: entry dir not read (kept as it was)";

/// Partial/skip reason of a file hashed only up to [`MAX_HASH_BYTES`].
pub fn hashed_prefix(size: u64) -> String {
    format!("file of {}: hashed its first {}", size_text(size), size_text(MAX_HASH_BYTES))
}

/// `16 TiB`, `2.5 GiB`, `300 MiB`: a size in the largest binary unit it reaches, to a tenth.
pub fn size_text(n: u64) -> String {
    let units = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in units {
        if n >= 1 << shift {
            let tenths = format!("{:.1}", n as f64 / (1u64 << shift) as f64);
            return match tenths.strip_suffix(".0") {
                Some(whole) => format!("{whole} {unit}"),
                None => format!("{tenths} {unit}"),
            };
        }
    }
    format!("{n} B")
}

/// Skip/partial reason of a file over its cap.
pub fn over_cap(what: &str, cap: u64) -> String {
    format!("{what} over the {} MiB size cap: not read", cap >> 20)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_people_write_them() {
        let t = super::size_text;
        assert_eq!(
            [t(16 << 40), t((16 << 40) - 4096), t(5 << 29), t(256 << 20), t(1000)],
            ["16 TiB", "16 TiB", "2.5 GiB", "256 MiB", "1000 B"]
        );
        assert_eq!(super::hashed_prefix(2 << 40), "file of 2 TiB: hashed its first 256 MiB");
    }
}
