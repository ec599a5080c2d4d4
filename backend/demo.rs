//! The bundled demo dataset: real Triton caches (the corpus archives in `demo/`), unpacked into
//! a temp dir and scanned into a database, so someone without a GPU sees a populated dashboard.
//!
//! The upgrade archives are two snapshots of one cache dir; they are unpacked into the same
//! path one after the other, so the second scan sees the in-place upgrade as it happened.

use crate::collect::scan_local;
use rust_embed::RustEmbed;
use std::path::Path;

#[derive(RustEmbed)]
#[folder = "demo/"]
#[include = "*.tar.xz"]
struct Archives;

/// (machine, archives scanned in order into one path, sub dir to scan)
const PLAN: &[(&str, &[&str], &str)] = &[
    ("h100-a", &["h100-jit-3.6.0"], "triton-cache"),
    ("h100-a", &["h100-jit-3.6.0"], "inductor"),
    ("h100-b", &["h100-inductor-3.6.0"], "inductor"),
    ("h100-c", &["h100-fpfusion-off-triton-3.6.0"], "triton-cache"),
    ("a100-1", &["a100-upgrade-1-triton-3.4.0", "a100-upgrade-2-triton-3.5.1"], "triton-cache"),
    ("mi300-1", &["mi300-upgrade-1-triton-3.6.0", "mi300-upgrade-2-triton-3.9.0"], "triton-cache"),
    // recorded by cachelens' own hook under real JIT launches on an H100 (two runs: 16 misses
    // with compile times, then 16 hits); see scripts/gpu-hook-check.sh
    ("h100-hook", &["h100-hook-3.6.0"], "triton-cache"),
    // torch.compile(mode="max-autotune-no-cudagraphs") on an H100: the archive is the Inductor dir
    // itself (autotune choices in cache/, Triton entries in triton/0/); see
    // scripts/gpu-inductor-autotune.sh
    ("h100-autotune", &["h100-inductor-autotune-triton-3.6.0"], ""),
];

/// Unpack one embedded archive into `dest` (which then holds `<archive name>/...`).
pub fn unpack(name: &str, dest: &Path) -> anyhow::Result<()> {
    let file = Archives::get(&format!("{name}.tar.xz")).ok_or_else(|| anyhow::anyhow!("no demo archive {name}"))?;
    let mut tar_bytes = Vec::new();
    lzma_rs::xz_decompress(&mut &file.data[..], &mut tar_bytes).map_err(|e| anyhow::anyhow!("{name}: {e:?}"))?;
    let mut ar = tar::Archive::new(&tar_bytes[..]);
    ar.set_preserve_mtime(true);
    ar.unpack(dest)?;
    Ok(())
}

/// Load every demo machine into `pool`. Returns the number of scans stored.
pub async fn load(db: &crate::db::Db, workdir: &Path) -> anyhow::Result<usize> {
    let mut scans = 0;
    for (i, (machine, archives, sub)) in PLAN.iter().enumerate() {
        let slot = workdir.join(format!("m{i}"));
        for archive in archives.iter() {
            let _ = std::fs::remove_dir_all(&slot);
            std::fs::create_dir_all(&slot)?;
            unpack(archive, &slot)?;
            // same path for every snapshot of one machine: an in-place upgrade
            let tmp = slot.join(archive);
            let fixed = slot.join("cache");
            std::fs::rename(&tmp, &fixed)?;
            let s = scan_local(db, &fixed.join(sub), machine).await?;
            let h = crate::collect::read_hazards(std::path::PathBuf::from(&s.root), crate::scan::Hosts::Any).await;
            crate::collect::store_hazards(db, &s, h, None).await;
            tracing::info!(machine, archive, entries = s.entries, "demo scan");
            scans += 1;
        }
    }
    Ok(scans)
}

/// Bytes of the regular files under `dir` (symlinks not followed; unreadable parts count 0).
pub fn disk_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => disk_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}
