//! The fleet the load benchmark serves, built through the binary's own ingest path: reports of
//! real corpus entries (demo/*.tar.xz, scanned once by this checkout's scanner) cloned under new
//! keys and uploaded to the server under test, so whatever a build computes at ingest is paid
//! and measured, and the same code fills an old build and a new one.
//!
//! - `bench-01`…: the H100 corpora (JIT, Inductor, fp-fusion-off, hook) cloned to `entries`
//!   each, the same keys on every machine; clone `n` of kernel `K` is named `K_v{n % variety}`.
//!   Hook history: the real h100-hook events, cloned onto the clones' keys with shifted times.
//! - `up`: upgraded in place: a scan of the A100 Triton 3.4.0 corpus cloned to `entries`, then
//!   the same dir after the 3.5.1 recompile (both generations, as Triton leaves them: 2×).
//! - `pair-old` / `pair-new`: the MI300 corpus on Triton 3.6.0, and its 3.9.0 recompile.
//! - `h100-autotune`: the real Inductor max-autotune dir (its decisions and their entries), not
//!   cloned: the autotune pages need real choices linked to real entries.

#[path = "../../backend/test_corpus.rs"]
pub mod test_corpus;

use cachelens::model::{Entry, HookEvent, ScanReport};
use std::collections::BTreeMap;

/// The real reports the fleet is cloned from.
pub struct Corpus {
    pub h100: ScanReport,
    pub a100_old: ScanReport,
    pub a100_new: ScanReport,
    pub mi300_old: ScanReport,
    pub mi300_new: ScanReport,
    /// The H100 Inductor max-autotune dir, as scanned (uploaded as is).
    pub autotune: ScanReport,
}

fn scan(archive: &str, sub: &str) -> anyhow::Result<ScanReport> {
    cachelens::collect::scan_report(&test_corpus::unpacked(archive).join(sub), "template")
}

fn merge(mut into: ScanReport, from: ScanReport) -> ScanReport {
    let have: std::collections::HashSet<String> = into.entries.iter().map(|e| e.key.clone()).collect();
    into.entries.extend(from.entries.into_iter().filter(|e| !have.contains(&e.key)));
    into.blobs.extend(from.blobs);
    into.events.extend(from.events);
    into
}

impl Corpus {
    pub fn load() -> anyhow::Result<Corpus> {
        let mut h100 = scan("h100-jit-3.6.0", "triton-cache")?;
        for (a, sub) in [
            ("h100-jit-3.6.0", "inductor"),
            ("h100-inductor-3.6.0", "inductor"),
            ("h100-fpfusion-off-triton-3.6.0", "triton-cache"),
            ("h100-hook-3.6.0", "triton-cache"),
        ] {
            h100 = merge(h100, scan(a, sub)?);
        }
        let mi300_old = scan("mi300-upgrade-1-triton-3.6.0", "triton-cache")?;
        let mut mi300_new = scan("mi300-upgrade-2-triton-3.9.0", "triton-cache")?;
        let old_keys: std::collections::HashSet<&str> = mi300_old.entries.iter().map(|e| e.key.as_str()).collect();
        mi300_new.entries.retain(|e| !old_keys.contains(e.key.as_str())); // the 3.9.0 generation only
        Ok(Corpus {
            h100,
            a100_old: scan("a100-upgrade-1-triton-3.4.0", "triton-cache")?,
            a100_new: scan("a100-upgrade-2-triton-3.5.1", "triton-cache")?,
            mi300_old,
            mi300_new,
            autotune: scan("h100-inductor-autotune-triton-3.6.0", "")?,
        })
    }
}

/// Key of clone `n` of a template key: a plain name, the same for the same (key, n) anywhere.
pub fn clone_key(key: &str, n: usize) -> String {
    format!("B{n:06}{}", &key[..key.len().min(44)])
}

fn clone_entry(e: &Entry, n: usize, variety: usize) -> Entry {
    let mut c = e.clone();
    c.key = clone_key(&e.key, n);
    c.dir = c.key.clone();
    let v = n % variety.max(1);
    if let Some(k) = &e.kernel {
        c.kernel = Some(format!("{k}_v{v}"));
    }
    if let Some(serde_json::Value::Object(m)) = &mut c.metadata
        && let Some(serde_json::Value::String(name)) = m.get("name").cloned()
    {
        m.insert("name".into(), serde_json::Value::String(format!("{name}_v{v}")));
    }
    c
}

/// A report of `machine`: the template's entries cloned (clone 0 first) to `n` entries, every
/// IR blob they reference, and `events` hook events cloned from the template's onto the clones.
pub fn report(t: &ScanReport, machine: &str, root: &str, n: usize, variety: usize, events: usize) -> ScanReport {
    let per = t.entries.len().max(1);
    let entries: Vec<Entry> = (0..n).map(|i| clone_entry(&t.entries[i % per], i / per, variety)).collect();
    let mut ev: Vec<HookEvent> = vec![];
    if !t.events.is_empty() {
        let t0 = cachelens::db::now_ms() - 30 * 86_400_000;
        let clones = n.div_ceil(per);
        for i in 0..events {
            let (src, round) = (&t.events[i % t.events.len()], i / t.events.len());
            let mut e = src.clone();
            let copy = round % clones; // the clone whose key the event is about
            e.key = clone_key(&src.key, copy);
            e.kernel = src.kernel.as_ref().map(|k| format!("{k}_v{}", copy % variety.max(1)));
            // spread over 30 days, in order
            e.ts = t0 + (i as i64) * (30 * 86_400_000 / events.max(1) as i64);
            e.ts_us = None;
            e.seq = Some(i as i64);
            e.pid = 1000 + round as i64;
            e.host = machine.to_string();
            ev.push(e);
        }
    }
    ScanReport {
        format: t.format,
        client_id: cachelens::collect::new_client_id(),
        machine: machine.to_string(),
        root: root.to_string(),
        scanned_at: cachelens::db::now_ms(),
        duration_ms: 1000,
        entries,
        unchanged: vec![],
        skipped: vec![],
        best_configs: vec![],
        events: ev,
        event_files: vec![],
        blobs: t.blobs.clone(),
        beside: vec![],
        inductor_autotune: vec![],
        hazards: None,
    }
}

/// Facts of the built fleet the route templates need.
#[derive(Default, Clone)]
pub struct Facts {
    pub machines: Vec<String>,
    pub kernels: Vec<String>,
    /// (machine, key, artifact name) of some bench entries.
    pub entries: Vec<(String, String, String)>,
    pub up: String,
    pub from: i64,
    pub to: i64,
    /// (old key, new key) of one kernel on `up`, old and new release.
    pub upgrade_pairs: Vec<(String, String)>,
    pub pair_old: String,
    pub pair_new: String,
    /// The machine with real autotune decisions, and the id of one of them (read back from the
    /// server after the landing).
    pub autotune: String,
    pub decision: i64,
    /// 90% of the fleet's entries, read back from the server after the landing: the offset of
    /// the fleet's deep `/api/v1/entries` page (most of the fleet before it, mid-machine).
    pub deep: i64,
}

/// Entries to pick for the templates: kernels (not launchers), spread over the clones.
pub fn facts(c: &Corpus, machines: &[String], n: usize, variety: usize) -> Facts {
    let per = c.h100.entries.len().max(1);
    let clones = n.div_ceil(per).max(1);
    let mut f = Facts {
        machines: machines.to_vec(),
        up: "up".into(),
        pair_old: "pair-old".into(),
        pair_new: "pair-new".into(),
        autotune: "h100-autotune".into(),
        ..Default::default()
    };
    let mut kernels = BTreeMap::new();
    for (i, e) in c.h100.entries.iter().enumerate().filter(|(_, e)| e.kernel.is_some() && !e.artifacts.is_empty()) {
        for j in 0..8 {
            let copy = (i * 7 + j * 131) % clones;
            if copy * per + i >= n {
                continue;
            }
            let m = &machines[(i + j) % machines.len()];
            let art = e.artifacts[0].name.clone();
            f.entries.push((m.clone(), clone_key(&e.key, copy), art));
            kernels.insert(format!("{}_v{}", e.kernel.as_ref().unwrap(), copy % variety.max(1)), ());
        }
    }
    f.kernels = kernels.into_keys().collect();
    let per_up = c.a100_old.entries.len().max(1);
    let old_keys: std::collections::HashSet<&str> = c.a100_old.entries.iter().map(|e| e.key.as_str()).collect();
    for o in &c.a100_old.entries {
        if let Some(nw) = c
            .a100_new
            .entries
            .iter()
            .find(|e| !old_keys.contains(e.key.as_str()) && e.kernel == o.kernel && e.kernel.is_some())
        {
            let copy = (f.upgrade_pairs.len() * 37) % n.div_ceil(per_up).max(1);
            f.upgrade_pairs.push((clone_key(&o.key, copy), clone_key(&nw.key, copy)));
        }
    }
    f
}
