//! Running a scan: into the local database (streamed, re-reading only changed entries), or into
//! one in-memory [`ScanReport`] for an upload.

use crate::db::ingest::{Begin, Finish, Ingest, Records};
use crate::model::{REPORT_FORMAT, ScanReport, ScanSummary};
use crate::scan::{self, Previous, Tail};
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Resolve a root given on the command line to its canonical absolute path.
pub fn resolve_root(path: &Path) -> anyhow::Result<PathBuf> {
    let md = std::fs::metadata(path).with_context(|| format!("cannot read cache dir {}", path.display()))?;
    anyhow::ensure!(md.is_dir(), "{} is not a directory", path.display());
    Ok(path.canonicalize()?)
}

/// Worker threads for reading entries: the machine's cores, at most 8.
pub fn threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).min(8)
}

/// A random id for a scan (makes an upload idempotent across retries).
pub fn new_client_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// This machine's hostname: `$CACHELENS_HOSTNAME` when set (a container, a test), else the
/// kernel's (what the hook writes as its lines' `host`). The default machine name, and a host
/// whose hook events a scan credits ([`hosts_of`]).
pub fn hostname() -> String {
    if let Some(h) = std::env::var("CACHELENS_HOSTNAME").ok().filter(|h| !h.trim().is_empty()) {
        return h.trim().to_string();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Whose hook events a scan for `machine` credits: lines whose host is this machine's
/// [`hostname`], the machine name, or one of `extra` (`scan --hook-host`); every line when
/// `extra` holds `*`.
pub fn hosts_of(machine: &str, extra: &[String]) -> scan::Hosts {
    if extra.iter().any(|h| h.trim() == "*") {
        return scan::Hosts::Any;
    }
    let mut names = vec![hostname(), machine.to_string()];
    names.extend(extra.iter().map(|h| h.trim().to_string()).filter(|h| !h.is_empty()));
    names.dedup();
    scan::Hosts::Only(names)
}

/// How a scan runs, besides its root and machine (the CLI's flags).
#[derive(Debug, Clone, Default)]
pub struct Opts {
    /// Check every entry file by file (`scan --full`), not trusting unchanged dir stamps.
    pub full: bool,
    /// Counted into as entry dirs are handled (a progress bar).
    pub progress: Option<std::sync::Arc<scan::Progress>>,
    /// Whose hook events are credited ([`hosts_of`]; default: every host's).
    pub hosts: scan::Hosts,
    /// Stop reading entries after this long from the root's start (`None`: no budget).
    pub time_budget: Option<std::time::Duration>,
    /// What other tools keep beside the root, stored with the scan.
    pub beside: Vec<crate::model::ToolSize>,
    /// Read the root's hazards ([`read_hazards`]) once the scan landed and store them with the
    /// root's inode count the advice just counted ([`store_hazards`]).
    pub hazards: bool,
}

impl Opts {
    /// The CLI's: every bound on, hook events of this machine only.
    pub fn cli(machine: &str, hook_hosts: &[String], time_budget: std::time::Duration) -> Opts {
        Opts { hosts: hosts_of(machine, hook_hosts), time_budget: Some(time_budget), ..Opts::default() }
    }

    /// The instant no entry is read after, for a scan started at `started`.
    pub fn deadline(&self, started: Instant) -> Option<Instant> {
        self.time_budget.and_then(|b| started.checked_add(b))
    }
}

/// Scan `root` into the local database. Every hook event found is credited to `machine`
/// whatever its host ([`scan::Hosts::Any`]) and there is no time budget: for a cache known to be
/// this machine's (the demo, tests); the CLI scans with [`scan_local_opts`] and [`Opts::cli`].
pub async fn scan_local(db: &crate::db::Db, root: &Path, machine: &str) -> anyhow::Result<ScanSummary> {
    scan_local_with(db, root, machine, false).await
}

/// [`scan_local`]; `full`: check every entry file by file (`scan --full`), not trusting
/// unchanged dir stamps.
pub async fn scan_local_with(
    db: &crate::db::Db,
    root: &Path,
    machine: &str,
    full: bool,
) -> anyhow::Result<ScanSummary> {
    scan_local_opts(db, root, machine, Opts { full, ..Opts::default() }).await
}

/// Scan `root` into the local database as `opts` say.
pub async fn scan_local_opts(
    db: &crate::db::Db,
    root: &Path,
    machine: &str,
    opts: Opts,
) -> anyhow::Result<ScanSummary> {
    let pool = db.pool();
    let started = Instant::now();
    let full = opts.full;
    let root = resolve_root(root)?;
    let root_s = root.display().to_string();
    // The root is listed and its entry dirs stamped while the database reads what the previous
    // scan left (both take about as long on a 100,000-entry re-scan; one after the other they
    // were most of it). `--full` compares no stamps.
    let survey = tokio::task::spawn_blocking({
        let root = root.clone();
        move || scan::survey(&root, threads(), !full)
    });
    let mut ingest = match Ingest::begin(db, machine, &new_client_id(), &root_s, crate::db::now_ms(), "local").await? {
        Begin::Started(i) => i,
        Begin::AlreadyStored(_) => anyhow::bail!("scan id collision"),
    };
    let mut prev = ingest.previous().await?;
    let survey = survey.await?;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "scan: previous loaded");
    // The cache's hazards (its file system's, no query) read while the entries are, not after
    // them, from the survey's listing and link counts (before, a listing and a stat of each
    // entry dir of their own: a third of a 100,000-entry re-scan's second).
    let seen = survey.as_ref().ok().and_then(|s| s.seen());
    let read = opts.hazards.then(|| tokio::spawn(read_hazards_seen(root.clone(), opts.hosts.clone(), seen)));
    prev.full = full;
    prev.deadline = opts.deadline(started);
    prev.progress = opts.progress;
    prev.hosts = opts.hosts.clone();
    let beside = opts.beside;
    // Entries carry their IR text (~300 KB each in the corpus): keep few in flight and flush
    // batches by size as well as by count, so peak memory stays flat on 100,000-entry caches.
    let (tx, mut rx) = tokio::sync::mpsc::channel(32);
    let scanner = tokio::task::spawn_blocking(move || {
        let sink = |e| {
            let _ = tx.blocking_send(e);
        };
        match survey {
            Ok(survey) => scan::scan_surveyed(&root, survey, &prev, threads(), sink),
            Err(tail) => *tail,
        }
    });
    // Two stages, so that the scanner threads keep reading while SQLite writes a batch: one
    // fills the next batch while the other stores the last (a single loop stalled the readers
    // for every insert and left both cores half idle).
    let (btx, mut brx) = tokio::sync::mpsc::channel::<Vec<crate::model::Entry>>(1);
    let batcher = async move {
        let mut batch: Vec<crate::model::Entry> = Vec::with_capacity(256);
        let mut batch_bytes = 0usize;
        while let Some(e) = rx.recv().await {
            batch_bytes += e.artifacts.iter().filter_map(|a| a.text.as_ref().map(String::len)).sum::<usize>();
            batch.push(e);
            if batch.len() == 256 || batch_bytes > 24 << 20 {
                if btx.send(std::mem::replace(&mut batch, Vec::with_capacity(256))).await.is_err() {
                    return; // the writer failed; its error is reported below
                }
                batch_bytes = 0;
            }
        }
        let _ = btx.send(batch).await;
    };
    let writer = async {
        let empty = BTreeMap::new();
        while let Some(batch) = brx.recv().await {
            ingest.entries(&batch, &empty).await?;
        }
        anyhow::Ok(())
    };
    let ((), written) = tokio::join!(batcher, writer);
    written?;
    let tail = scanner.await?;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "scan: walked");
    ingest.records(Records::of(&tail)).await?;
    let duration_ms = started.elapsed().as_millis() as i64;
    let mut summary = ingest.finish(Finish { tail, duration_ms, beside: beside.clone(), staged_upload: None }).await?;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "scan: committed");
    // the landing's log copied into the database while the advice and hazards are read
    let copy = tokio::spawn({
        let pool = pool.clone();
        async move { crate::db::checkpoint_beside(&pool).await }
    });
    summary.beside = beside;
    let advice = refresh_advice(db, &summary).await;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "scan: advised");
    if let Some(read) = read {
        let h = read.await.ok().flatten();
        summary.hazards = store_hazards(db, &summary, h, advice.as_ref()).await;
    }
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "scan: finished");
    // The scan's invalidation report, computed now so that its first visit reads it.
    crate::answers::stored::after_scan(db.clone(), summary.scan_id, None).await;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "scan: report stored");
    // Fold the WAL back into the database file now and truncate it: a cold scan of a big cache
    // leaves a WAL as large as the database, which every later process would otherwise recover
    // and copy into the database again on its first commit (a no-change re-scan of 100,000
    // entries spent 10 s writing 680 MB that way). Best effort: a busy reader just defers it.
    let _ = copy.await;
    let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(pool).await;
    tracing::debug!(ms = started.elapsed().as_millis() as u64, "scan: checkpointed");
    Ok(summary)
}

/// Scan `root` fully into one report (for an upload). IR text goes into `blobs`.
pub fn scan_report(root: &Path, machine: &str) -> anyhow::Result<ScanReport> {
    scan_report_from(root, machine, &Previous::default())
}

/// [`scan_report`], reading hook events from `prev.event_marks` on (where the server got to),
/// at most `prev.max_event_bytes` of them, of the hosts `prev.hosts` credits. Entries are all
/// read (the server compares their signatures itself, and a report says which entries are
/// gone by leaving them out) until `prev.deadline`: those not reached are sent as skipped, which
/// the server keeps as they were.
pub fn scan_report_from(root: &Path, machine: &str, prev: &Previous) -> anyhow::Result<ScanReport> {
    let started = Instant::now();
    let root = resolve_root(root)?;
    let mut entries = vec![];
    let prev = Previous {
        event_marks: prev.event_marks.clone(),
        max_event_bytes: prev.max_event_bytes,
        progress: prev.progress.clone(),
        hosts: prev.hosts.clone(),
        deadline: prev.deadline,
        ..Default::default()
    };
    let tail = scan::scan(&root, &prev, threads(), |e| entries.push(e));
    // Move the IR text into `blobs` (once per sha256): entries keep only the hash, so a big
    // cache's report does not hold every identical IR file many times over.
    let mut blobs = BTreeMap::new();
    for e in &mut entries {
        for a in &mut e.artifacts {
            if let Some(t) = a.text.take() {
                blobs.entry(a.sha256.clone()).or_insert(t);
            }
        }
    }
    entries.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(ScanReport {
        format: REPORT_FORMAT,
        client_id: new_client_id(),
        machine: machine.to_string(),
        root: root.display().to_string(),
        scanned_at: crate::db::now_ms(),
        duration_ms: started.elapsed().as_millis() as i64,
        entries,
        unchanged: tail.unchanged,
        skipped: tail.skipped,
        best_configs: tail.best_configs,
        events: tail.events,
        event_files: tail.event_files,
        blobs,
        beside: vec![],
        inductor_autotune: tail.inductor_autotune,
        hazards: None,
    })
}

/// Ingest a whole report (an upload) in one transaction. Returns (summary, created).
pub async fn ingest_report(db: &crate::db::Db, r: &ScanReport, source: &str) -> anyhow::Result<(ScanSummary, bool)> {
    let mut ingest = match Ingest::begin(db, &r.machine, &r.client_id, &r.root, r.scanned_at, source).await? {
        Begin::Started(i) => i,
        Begin::AlreadyStored(id) => {
            return Ok((ScanSummary { scan_id: id, machine: r.machine.clone(), ..Default::default() }, false));
        }
    };
    for chunk in r.entries.chunks(256) {
        ingest.entries(chunk, &r.blobs).await?;
    }
    let records = Records { best_configs: &r.best_configs, events: &r.events, inductor_autotune: &r.inductor_autotune };
    ingest.records(records).await?;
    let summary = ingest
        .finish(Finish {
            tail: Tail {
                unchanged: r.unchanged.clone(),
                skipped: r.skipped.clone(),
                event_files: r.event_files.clone(),
                ..Tail::default()
            },
            duration_ms: r.duration_ms,
            beside: r.beside.clone(),
            staged_upload: None,
        })
        .await?;
    let advice = refresh_advice(db, &summary).await;
    let hazards = store_hazards(db, &summary, r.hazards.clone(), advice.as_ref()).await;
    Ok((ScanSummary { beside: r.beside.clone(), hazards, ..summary }, true))
}

/// Text bytes of IR one batch of a staged commit holds in memory at most (a batch is also at
/// most 256 entries; one entry's blobs are read whole, each at most the blob cap).
const COMMIT_BATCH_TEXT: i64 = 32 << 20;

/// Commit a staged upload (`db::staging`): every part, in order, into one scan, in one
/// transaction that also drops the staged parts. Memory: one part and one batch of its
/// entries' IR text at a time. Returns (summary, created).
pub async fn ingest_staged(
    db: &crate::db::Db,
    up: &crate::db::staging::Upload,
    commit: &crate::model::UploadCommit,
    mut skipped: Vec<crate::model::Skip>,
) -> anyhow::Result<(ScanSummary, bool)> {
    use crate::db::staging;
    let mut ingest = match Ingest::begin(db, &up.machine, &up.client_id, &up.root, up.scanned_at, "upload").await? {
        Begin::Started(i) => i,
        Begin::AlreadyStored(id) => {
            return Ok((ScanSummary { scan_id: id, machine: up.machine.clone(), ..Default::default() }, false));
        }
    };
    crate::failpoint::hit("commit-begun");
    let (mut unchanged, mut stamps) = (vec![], vec![]);
    for n in 0..commit.parts {
        let part = staging::read_part(ingest.tx(), up.id, n).await?;
        let shas: Vec<&str> = part.entries.iter().flat_map(|e| e.artifacts.iter().map(|a| a.sha256.as_str())).collect();
        let sizes = staging::blob_sizes(ingest.tx(), up.id, &shas).await?;
        let mut batch: Vec<crate::model::Entry> = Vec::with_capacity(256);
        let mut text = 0i64;
        for e in part.entries {
            text += e.artifacts.iter().filter_map(|a| sizes.get(&a.sha256)).sum::<i64>();
            batch.push(e);
            if batch.len() == 256 || text > COMMIT_BATCH_TEXT {
                store_staged_batch(&mut ingest, up.id, &batch).await?;
                batch.clear();
                text = 0;
            }
        }
        store_staged_batch(&mut ingest, up.id, &batch).await?;
        ingest.present(&part.present).await?;
        crate::failpoint::hit("commit-entries");
        let records = Records {
            best_configs: &part.best_configs,
            events: &part.events,
            inductor_autotune: &part.inductor_autotune,
        };
        ingest.records(records).await?;
        unchanged.extend(part.unchanged);
        stamps.extend(part.stamps);
        skipped.extend(part.skipped);
        crate::failpoint::hit("commit-records");
    }
    let summary = ingest
        .finish(Finish {
            tail: Tail { unchanged, stamps, skipped, event_files: commit.event_files.clone(), ..Tail::default() },
            duration_ms: commit.duration_ms,
            beside: commit.beside.clone(),
            staged_upload: Some(up.id),
        })
        .await?;
    let advice = refresh_advice(db, &summary).await;
    let hazards = store_hazards(db, &summary, commit.hazards.clone(), advice.as_ref()).await;
    Ok((ScanSummary { beside: commit.beside.clone(), hazards, ..summary }, true))
}

/// The hazards of the cache at `root` (`scan::hazards`), read off the async threads; `None` when
/// its file system cannot be read (the scan stands without them). Its cache inodes are the
/// storing database's to count.
pub async fn read_hazards(root: std::path::PathBuf, hosts: crate::scan::Hosts) -> Option<crate::model::Hazards> {
    read_hazards_seen(root, hosts, None).await
}

/// [`read_hazards`] from what a survey saw of the root's layout (`None`: read it now).
async fn read_hazards_seen(
    root: std::path::PathBuf,
    hosts: crate::scan::Hosts,
    seen: Option<crate::scan::hazards::Seen>,
) -> Option<crate::model::Hazards> {
    use crate::scan::hazards;
    let shown = root.display().to_string();
    let h = tokio::task::spawn_blocking(move || match seen {
        Some(seen) => hazards::of_seen(&root, &seen, crate::db::now_ms(), &hosts),
        None => hazards::of(&root, crate::db::now_ms(), &hosts),
    });
    h.await.ok()?.map_err(|e| tracing::warn!("file system of {shown}: {e}")).ok()
}

/// Store the machine's "what can go" after a scan landed (`prune::advice::refresh_after`): the
/// advice when it was computed, `None` when the stored one stands or storing failed (logged).
async fn refresh_advice(db: &crate::db::Db, s: &ScanSummary) -> Option<crate::prune::advice::Advice> {
    crate::prune::advice::refresh_after(db, s)
        .await
        .map_err(|e| tracing::warn!("storing what can go on {}: {e:#}", s.machine))
        .ok()
        .flatten()
}

/// Store the hazards a scan reported for its root, if it reported any (`None` when it did not or
/// storing failed, logged). `advice`: the machine's advice computed after this scan landed, whose
/// count of the root's inodes the hazards take instead of counting them again.
pub async fn store_hazards(
    db: &crate::db::Db,
    s: &ScanSummary,
    h: Option<crate::model::Hazards>,
    advice: Option<&crate::prune::advice::Advice>,
) -> Option<crate::model::Hazards> {
    let inodes = match advice {
        Some(a) => {
            crate::db::hazards::Inodes::Counted(a.roots.iter().find(|r| r.root == s.root).map_or(0, |r| r.inodes))
        }
        None if s.entries_unchanged() => crate::db::hazards::Inodes::AsStored,
        None => crate::db::hazards::Inodes::Count,
    };
    let stored = crate::db::hazards::store(db, &s.machine, &s.root, s.scan_id, inodes, h?).await;
    stored.map_err(|e| tracing::warn!("storing the hazards of {} on {}: {e:#}", s.root, s.machine)).ok()
}

async fn store_staged_batch(ingest: &mut Ingest, upload: i64, batch: &[crate::model::Entry]) -> anyhow::Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let shas: Vec<&str> = batch.iter().flat_map(|e| e.artifacts.iter().map(|a| a.sha256.as_str())).collect();
    let blobs = crate::db::staging::read_blobs(ingest.tx(), upload, &shas).await?;
    ingest.entries(batch, &blobs).await?;
    Ok(())
}
