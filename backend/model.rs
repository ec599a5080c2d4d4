//! Serde types shared by the scanner, the uploader and the server.
//!
//! A [`ScanReport`] is what one scan of one cache root produces. A local scan writes it into
//! SQLite through `db::ingest`; a remote scan sends the very same value as the body of
//! `POST /api/v1/scans`, and the server ingests it with the same function.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the [`ScanReport`] wire format.
pub const REPORT_FORMAT: u32 = 1;

/// Everything one scan of one cache root found.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ScanReport {
    pub format: u32,
    /// Chosen by the scanner (random); the server stores a scan once per (machine, client_id).
    pub client_id: String,
    pub machine: String,
    /// Absolute, canonical path of the scanned root.
    pub root: String,
    /// Unix milliseconds.
    pub scanned_at: i64,
    pub duration_ms: i64,
    /// Entries read (new or changed since the previous scan, or all of them for an upload).
    pub entries: Vec<Entry>,
    /// Entry dirs (relative to root) seen unchanged since the previous scan: not re-read.
    #[serde(default)]
    pub unchanged: Vec<String>,
    /// Everything that was skipped, with a reason.
    #[serde(default)]
    pub skipped: Vec<Skip>,
    /// Inductor `.best_config` files.
    #[serde(default)]
    pub best_configs: Vec<BestConfig>,
    /// Hook events read from the cache's `.cachelens/` event files.
    #[serde(default)]
    pub events: Vec<HookEvent>,
    /// Where each event file was read up to (so the next scan resumes there).
    #[serde(default)]
    pub event_files: Vec<EventFileMark>,
    /// IR text by sha256 (uploads carry only the blobs the server lacks).
    #[serde(default)]
    pub blobs: BTreeMap<String, String>,
    /// What other tools keep beside this cache dir (Inductor's FX graphs, vLLM's compiled graphs).
    #[serde(default)]
    pub beside: Vec<ToolSize>,
    /// Inductor's max-autotune choices (`<inductor dir>/cache/<hash>`).
    #[serde(default)]
    pub inductor_autotune: Vec<InductorAutotune>,
    /// Where the cache sits (absent from older scanners, or when its file system could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hazards: Option<Hazards>,
}

/// What kind of directory an entry is. Stored as its snake_case name (`entries.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A compiled kernel with metadata, IR and binary.
    Kernel,
    /// A kernel stored with `TRITON_STORE_BINARY_ONLY=1`: metadata and binary only.
    BinaryOnly,
    /// A launcher or utility shared object (`*.so`, no group file).
    Launcher,
    /// `<fn>.autotune.json` results.
    Autotune,
    /// A kernel entry missing files its group names (crash mid-write), or with no metadata.
    Partial,
    /// Anything else Triton put in a key dir. Also what a kind this version does not know
    /// (from a newer client's upload) is read as.
    #[serde(other)]
    Other,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Kernel => "kernel",
            EntryKind::BinaryOnly => "binary_only",
            EntryKind::Launcher => "launcher",
            EntryKind::Autotune => "autotune",
            EntryKind::Partial => "partial",
            EntryKind::Other => "other",
        }
    }

    /// An SQL list of kinds, `('kernel', 'binary_only')`, for `kind IN ...`.
    pub fn sql_list(kinds: &[EntryKind]) -> String {
        let names: Vec<String> = kinds.iter().map(|k| format!("'{}'", k.as_str())).collect();
        format!("({})", names.join(", "))
    }
}

crate::stored_as_name!(EntryKind {
    EntryKind::Kernel,
    EntryKind::BinaryOnly,
    EntryKind::Launcher,
    EntryKind::Autotune,
    EntryKind::Partial,
    EntryKind::Other,
} else EntryKind::Other);
crate::stored_as_name!(EventKind { EventKind::Hit, EventKind::Miss, EventKind::Compile });

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a hook event records. Stored as its name (`events.event`). A report carrying any other
/// value is not a report this version reads (an upload gets 422; the scanner skips the line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A cache lookup that found a usable entry.
    Hit,
    /// A lookup that did not (a compile follows unless it failed).
    Miss,
    /// A compile finished and was stored (with its `compile_ms`).
    Compile,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Hit => "hit",
            EventKind::Miss => "miss",
            EventKind::Compile => "compile",
        }
    }
}

impl std::str::FromStr for EventKind {
    type Err = String;

    fn from_str(s: &str) -> Result<EventKind, String> {
        match s {
            "hit" => Ok(EventKind::Hit),
            "miss" => Ok(EventKind::Miss),
            "compile" => Ok(EventKind::Compile),
            _ => Err(format!("event {:?} is not hit, miss or compile", s.chars().take(40).collect::<String>())),
        }
    }
}

/// One cache entry (one `<cache>/<KEY>/` directory).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub key: String,
    /// Path of the entry dir relative to the scanned root (e.g. `KEY` or `triton/0/KEY`).
    pub dir: String,
    pub kind: EntryKind,
    pub kernel: Option<String>,
    pub backend: Option<String>,
    /// `sm_90`, `gfx942`, ...
    pub arch: Option<String>,
    pub warp_size: Option<i64>,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub num_ctas: Option<i64>,
    pub triton_version: Option<String>,
    /// The metadata's `hash` field (hex of the cache key).
    pub meta_hash: Option<String>,
    /// Argument types from the TTIR signature, e.g. `ptr<f16>:16,ptr<f16>:16,i32:16`.
    pub signature: Option<String>,
    /// Tensor shapes in the TTIR, e.g. `1024` or `128x64,64x128`.
    pub shapes: Option<String>,
    /// Metadata mtime (unix ms): when Triton wrote the entry.
    pub created_at: Option<i64>,
    pub bytes: i64,
    pub registers: Option<i64>,
    pub spills: Option<i64>,
    pub shared_bytes: Option<i64>,
    /// Backend-specific resource figures (AMD: vgprs, sgprs, occupancy, scratch...).
    pub resources: Option<serde_json::Value>,
    /// The metadata JSON as Triton wrote it.
    pub metadata: Option<serde_json::Value>,
    pub group: Option<GroupInfo>,
    /// Why the entry is partial, if it is.
    pub partial: Option<String>,
    pub artifacts: Vec<Artifact>,
    pub autotune: Option<Autotune>,
    /// Names, sizes and mtimes of the files: a re-scan re-reads the entry only when this changes.
    pub sig: String,
    /// The entry dir's stamp ([`crate::scan::fsat::Stamp`]) when the scanner may trust it: a
    /// re-scan skips the files of a dir whose stamp is unchanged (an upload's re-scan too: the
    /// server hands the stamps back, `POST /api/v1/uploads/{id}/previous`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir_stamp: Option<String>,
}

impl Entry {
    /// Whether the entry's facts are all in its files' contents, the same on every machine that
    /// holds the same files (and sits them where they were written, or not: `relocated`, sent
    /// along): not partial (a write in progress). (Autotune timings were measured on one GPU, but
    /// they are read from the `.autotune.json` file: the same file holds the same timings, kept
    /// once per fact.) Only such an entry may be sent as a [`Present`] record.
    pub fn facts_are_content(&self) -> bool {
        self.kind != EntryKind::Partial && self.partial.is_none()
    }

    /// Whether its group file points to another path than where it sits (Triton misses on it).
    pub fn relocated(&self) -> bool {
        self.group.as_ref().is_some_and(|g| g.relocated)
    }

    /// The digest of the entry's content ([`fact_digest`] of its key, kind and files, and of what
    /// the scanner read from them). A group file whose children all sit in the entry's own dir
    /// ([`Entry::group_in_dir`]) enters as its children's names, not its bytes (which hold the
    /// dir's absolute path): the same files at another path are the same fact.
    ///
    /// What was read (kernel, variant, resources, metadata: [`Entry::read_digest`]) enters too:
    /// a server copies those from the first entry stored with the fact, so a node that sent real
    /// files' sha256s with made-up figures would otherwise be believed for every machine holding
    /// the same files; with them in the digest its entry is a fact of its own.
    pub fn fact(&self) -> String {
        let normal = self.group_in_dir().map(|(g, _)| (g.name.as_str(), group_in_dir_digest(self.group.as_ref())));
        let files = self.artifacts.iter().map(|a| match &normal {
            Some((name, d)) if *name == a.name => (a.name.as_str(), d.as_str()),
            _ => (a.name.as_str(), a.sha256.as_str()),
        });
        let read = self.read_digest();
        // "" is no file's name: the pseudo-file cannot collide with a real one
        fact_digest(&self.key, self.kind.as_str(), files.chain(std::iter::once(("", read.as_str()))))
    }

    /// sha256 of what the scanner read from the files and a server copies from a fact's first
    /// entry: the kernel and its variant, the resources and the metadata, as canonical JSON
    /// (serde_json's maps are sorted), the same on the client and after a server's parse. Not
    /// the bytes (a group file's size holds its dir's path) nor the times.
    fn read_digest(&self) -> String {
        use sha2::Digest;
        let read = serde_json::json!([
            self.kernel,
            self.backend,
            self.arch,
            self.warp_size,
            self.num_warps,
            self.num_stages,
            self.num_ctas,
            self.triton_version,
            self.meta_hash,
            self.signature,
            self.shapes,
            self.registers,
            self.spills,
            self.shared_bytes,
            self.resources,
            self.metadata,
        ]);
        format!("read:{}", hex::encode(sha2::Sha256::digest(read.to_string().as_bytes())))
    }

    /// The entry's one group file and the dir its children were written at, when every child
    /// names its file in that dir (`<dir>/<name>`) and the entry sits there (not relocated):
    /// then the group says nothing but its children's names and where the entry sits.
    pub fn group_in_dir(&self) -> Option<(&Artifact, &str)> {
        let g = self.group.as_ref()?;
        let at = g.in_dir()?;
        let mut files = self.artifacts.iter().filter(|a| a.ext() == "grp");
        let file = files.next()?;
        files.next().is_none().then_some((file, at))
    }
}

/// What stands for a group file in [`fact_digest`] when its children sit in the entry's dir
/// ([`GroupInfo::in_dir`]): its children's names, hashed (not a file's sha256: prefixed `dir:`).
fn group_in_dir_digest(g: Option<&GroupInfo>) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for name in g.into_iter().flat_map(|g| g.children.keys()) {
        h.update(name.as_bytes());
        h.update([0]);
    }
    format!("dir:{}", hex::encode(h.finalize()))
}

/// What identifies an entry's facts: its key, its kind and every file's name and sha256 (the
/// group file too: it names the paths it was written at). Two machines whose entry dirs hold
/// the same files have the same facts; the scanner read them from those bytes alone. 128 bits
/// of sha256 over `key NUL kind NUL (name NUL sha256 NUL)*` with the files sorted by name, in
/// hex. The client computes it from what it read, the server from what it stored.
pub fn fact_digest<'a>(key: &str, kind: &str, files: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    use sha2::Digest;
    let mut files: Vec<(&str, &str)> = files.collect();
    files.sort_unstable();
    let mut h = sha2::Sha256::new();
    for part in [key, kind] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for (name, sha) in files {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(sha.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..16])
}

/// An entry the server already holds the facts of (from this machine or another): only what is
/// this machine's own goes on the wire. The server copies the rest from an entry with the same
/// [`fact_digest`] (`POST /api/v1/uploads/{id}/facts` said it holds one).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Present {
    pub key: String,
    /// The entry dir, when it is not the key itself (an Inductor `triton/0/KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    pub fact: String,
    pub sig: String,
    /// Metadata mtime (unix ms): when Triton wrote the entry on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp: Option<String>,
    /// Its group file points elsewhere than where it sits here: its facts are copied from an
    /// entry that is relocated too (the two differ in that flag and in the class it enters).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relocated: bool,
    /// This machine's own group file, when its children sit in the entry's dir (the fact holds
    /// their names, not the paths: [`Entry::group_in_dir`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<OwnGroup>,
}

/// A machine's own group file of an entry whose fact names it by its children
/// ([`Entry::group_in_dir`]): its bytes hold this machine's path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OwnGroup {
    pub sha256: String,
    pub bytes: i64,
    /// The dir its children name (the entry's dir as the writer spelled it).
    pub at: String,
    /// The entry's size, its group file included.
    pub entry_bytes: i64,
}

impl Present {
    /// The record of an entry whose facts the server holds.
    pub fn of(e: &Entry, fact: String) -> Present {
        Present {
            key: e.key.clone(),
            dir: (e.dir != e.key).then(|| e.dir.clone()),
            fact,
            sig: e.sig.clone(),
            created_at: e.created_at,
            stamp: e.dir_stamp.clone(),
            relocated: e.relocated(),
            group: e.group_in_dir().map(|(a, at)| OwnGroup {
                sha256: a.sha256.clone(),
                bytes: a.bytes,
                at: at.to_string(),
                entry_bytes: e.bytes,
            }),
        }
    }

    pub fn dir(&self) -> &str {
        self.dir.as_deref().unwrap_or(&self.key)
    }
}

/// A `__grp__<name>.json` file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupInfo {
    /// file name -> absolute path as written by the machine that wrote the entry (or none when
    /// the group is a plain list, as Triton's RemoteCacheManager writes it).
    pub children: BTreeMap<String, Option<String>>,
    /// True when some child path does not point into the directory where the entry sits now:
    /// Triton will miss on this entry (≤3.7 drops such children, 3.8+ rejects the group).
    pub relocated: bool,
    /// The directory the children point to (the writer's path), when they agree.
    pub written_at: Option<String>,
    /// Children named by the group that are not on disk.
    pub missing: Vec<String>,
}

impl GroupInfo {
    /// The dir every child sits in, when each child is `<dir>/<its name>` and the entry sits
    /// there (not relocated): the group is then its children's names and that dir.
    pub fn in_dir(&self) -> Option<&str> {
        let at = (self.written_at.as_deref())
            .filter(|a| a.starts_with('/') && !self.relocated && !self.children.is_empty())?;
        let each = self.children.iter().all(|(name, p)| {
            p.as_deref().and_then(|p| p.strip_prefix(at)?.strip_prefix('/')).is_some_and(|n| n == name)
        });
        each.then_some(at)
    }

    /// The group as stored once per fact: for one whose children sit in the entry's dir
    /// ([`GroupInfo::in_dir`]) its names and missing children only (`{"in_dir": [...],
    /// "missing": [...]}`, read back with the entry's own dir by [`group_json_at`]); any
    /// other as it is.
    pub fn stored_json(&self) -> String {
        if self.in_dir().is_some() {
            let names: Vec<&String> = self.children.keys().collect();
            return serde_json::json!({ "in_dir": names, "missing": self.missing }).to_string();
        }
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The absolute path of an entry dir `dir` in the cache `root`.
pub fn entry_path(root: &str, dir: &str) -> String {
    format!("{}/{dir}", root.trim_end_matches('/'))
}

/// A stored group's JSON ([`GroupInfo::stored_json`]) as the entry's machine has it: one stored
/// by its children's names gets `at`, the dir they sit in on that machine, back into each path.
/// Any other text is returned as it is.
pub fn group_json_at(stored: String, at: &str) -> String {
    #[derive(Deserialize)]
    struct InDir {
        in_dir: Vec<String>,
        missing: Vec<String>,
    }
    let Ok(g) = serde_json::from_str::<InDir>(&stored) else { return stored };
    let children = g.in_dir.into_iter().map(|n| (n.clone(), Some(format!("{at}/{n}")))).collect();
    let g = GroupInfo { children, relocated: false, written_at: Some(at.to_string()), missing: g.missing };
    serde_json::to_string(&g).unwrap_or_default()
}

/// One file of an entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Artifact {
    pub name: String,
    pub bytes: i64,
    pub sha256: String,
    /// The text of IR files (not serialised: uploads carry it in `ScanReport::blobs`).
    #[serde(skip)]
    pub text: Option<String>,
}

impl Artifact {
    /// The artifact type: the file extension (`ttir`, `cubin`, ...), `autotune.json`, `json`,
    /// `grp` for group files, `so` for launchers.
    pub fn ext(&self) -> &str {
        artifact_ext(&self.name)
    }
}

/// Artifact type of a file name (see [`Artifact::ext`]).
pub fn artifact_ext(name: &str) -> &str {
    if name.starts_with("__grp__") {
        "grp"
    } else if name.ends_with(".autotune.json") {
        "autotune.json"
    } else if name.ends_with(".so") {
        "so"
    } else {
        name.rsplit_once('.').map(|(_, e)| e).unwrap_or("")
    }
}

/// Autotuner results (`<fn>.autotune.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Autotune {
    /// The autotune key (problem sizes and dtypes).
    pub key: serde_json::Value,
    pub configs: Vec<AutotuneConfig>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AutotuneConfig {
    pub config: serde_json::Value,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    /// The benchmark figures in ms (Triton's do_bench quantiles: median, p20, p80).
    /// A failed config is timed `inf`: JSON writes it as `null`, read back as infinity (so a
    /// report survives the trip through `POST /api/v1/scans`).
    #[serde(deserialize_with = "timings")]
    pub timings_ms: Vec<f64>,
    /// True for the config Triton picked (smallest timings, compared as Triton does).
    pub winner: bool,
}

fn timings<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v: Vec<Option<f64>> = Deserialize::deserialize(d)?;
    Ok(v.into_iter().map(|t| t.unwrap_or(f64::INFINITY)).collect())
}

/// An entry directory (or file) that was not read, and why.
///
/// `kind` decides what the ingest does (an entry that vanished is marked removed, one that is
/// unreadable is kept); `reason` is the human text, for display and the scan summary only.
/// On the wire: `{"path", "reason", "kind"}`. Reports of clients from before `kind` carry only
/// `reason`: their kind is read off the wording those clients used ([`SkipKind::from_legacy`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "SkipWire")]
pub struct Skip {
    pub path: String,
    pub kind: SkipKind,
    pub reason: String,
}

impl Skip {
    pub fn new(path: impl Into<String>, kind: SkipKind, reason: impl Into<String>) -> Self {
        Skip { path: path.into(), kind, reason: reason.into() }
    }
}

/// Why something was skipped, as far as behaviour goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipKind {
    /// The entry dir (or a file of it) disappeared while it was read: the entry is gone.
    Vanished,
    /// A file changed size while it was read: still there, read again by the next scan.
    Changed,
    /// An empty key dir (Triton makes one on every lookup): no entry there.
    EmptyDir,
    /// Still there but not readable now (permission denied, I/O error): its row is kept.
    Unreadable,
    /// A dir whose listing failed: every entry below it is kept as it was.
    DirUnreadable,
    /// A symlink: never followed (out of the cache, dangling, a loop, or inside the cache).
    Symlink,
    /// Triton's temp dir, or an entry being written.
    WriteInProgress,
    /// The same key in another dir or root of this machine.
    Duplicate,
    /// A file over the scanner's size cap (see `scan::limits`).
    TooLarge,
    /// A best_config or hook event line that could not be parsed or is out of bounds.
    Malformed,
    /// A record that breaks a bound of the scanner-server contract (`rules`): skipped, the rest
    /// stored. An entry skipped so keeps its row as it was.
    OutOfBounds,
    /// Anything else, and kinds of newer clients this version does not know.
    #[serde(other)]
    Other,
}

impl SkipKind {
    /// The kind of a reason sent by a client from before `kind` existed, from the wording it
    /// used. Only this fallback reads the text.
    pub fn from_legacy(reason: &str) -> SkipKind {
        if reason.contains("vanished") {
            SkipKind::Vanished
        } else if reason.starts_with("empty entry dir") {
            SkipKind::EmptyDir
        } else if reason.contains("unreadable (its entries kept as they were)") {
            SkipKind::DirUnreadable
        } else if reason.starts_with("duplicate key") {
            SkipKind::Duplicate
        } else {
            SkipKind::Other
        }
    }
}

#[derive(Deserialize)]
struct SkipWire {
    path: String,
    reason: String,
    #[serde(default)]
    kind: Option<SkipKind>,
}

impl From<SkipWire> for Skip {
    fn from(w: SkipWire) -> Self {
        let kind = match w.kind {
            Some(SkipKind::Other) | None => SkipKind::from_legacy(&w.reason),
            Some(k) => k,
        };
        Skip { path: w.path, kind, reason: w.reason }
    }
}

/// Inductor's `<hash>.best_config`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BestConfig {
    /// Path relative to the scanned root.
    pub path: String,
    /// The key of the Triton cache entry it selected.
    pub triton_cache_hash: Option<String>,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub config: serde_json::Value,
}

/// One line of the hook's event file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HookEvent {
    /// Unix milliseconds (what history buckets by).
    pub ts: i64,
    /// Unix microseconds as the hook wrote them. With `seq` this identifies the line: the same
    /// line read again (re-scan, re-upload, rotated file) is stored once, two lines twice.
    /// Reports from before this field carry only `ts` (then `ts * 1000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts_us: Option<i64>,
    /// The hook's line counter within its process (absent in lines of older hooks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    pub host: String,
    pub pid: i64,
    pub key: String,
    pub kernel: Option<String>,
    pub event: EventKind,
    pub compile_ms: Option<f64>,
    pub stages_ms: Option<serde_json::Value>,
    /// The parts Triton hashed into the key, as the hook recorded them at compile time
    /// (`triton_key` digest, `source_hash`, `backend_hash`, `options_hash`, `env_vars`,
    /// `python`, `triton_dir`). Absent from hooks that do not record them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<serde_json::Value>,
}

/// How far one event file was read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventFileMark {
    pub path: String,
    /// Device/inode/creation identity: when it changes the file was rotated and is read anew.
    pub inode_sig: String,
    pub offset: i64,
}

/// The summary printed by `cachelens scan` (and returned by the upload).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ScanSummary {
    pub scan_id: i64,
    pub machine: String,
    pub root: String,
    pub entries: i64,
    pub new_entries: i64,
    pub changed_entries: i64,
    pub unchanged_entries: i64,
    pub removed_entries: i64,
    pub bytes: i64,
    pub relocated: i64,
    pub partial: i64,
    pub skipped: BTreeMap<String, i64>,
    pub events: i64,
    pub best_configs: i64,
    pub duration_ms: i64,
    /// What other tools keep beside this cache dir.
    #[serde(default)]
    pub beside: Vec<ToolSize>,
    /// Where the cache sits (a local scan's; `None` from a server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hazards: Option<Hazards>,
}

impl ScanSummary {
    /// Whether the scan found its root's entries as the server held them: none new, changed or
    /// removed (what is derived from them alone need not be read again).
    pub fn entries_unchanged(&self) -> bool {
        self.new_entries == 0 && self.changed_entries == 0 && self.removed_entries == 0
    }
}

/// What a scan says about where its cache sits (`scan::hazards`): its file system, how full it
/// is, orphaned temp dirs, other hosts writing it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Hazards {
    /// Inodes the cache's entries use (entry dirs and their files).
    pub cache_inodes: i64,
    /// The file system's name (`ext4`, `nfs`, `lustre`, ...; `0x…` when unknown).
    pub fs_type: String,
    /// Whether it is a network or cluster file system.
    pub network: bool,
    pub fs_bytes: u64,
    pub fs_bytes_free: u64,
    pub fs_inodes: u64,
    pub fs_inodes_free: u64,
    /// Writers' temp dirs (`tmp.pid_*`) older than an hour: left by a crashed or killed job.
    pub orphan_temps: i64,
    /// Hosts other than the scanning one whose hook event files are in the cache: several
    /// nodes write it (a shared cache).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_hosts: Vec<String>,
    /// Every host whose hook event files are in the cache, the scanning one's included (at most
    /// [`crate::scan::hazards::MAX_HOSTS`]): two machines reporting the same root with a host in
    /// common see the same files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_hosts: Vec<String>,
    /// Other machines reporting the same root that see the same hook event files (the server's
    /// view, `db::hazards`; empty from a scanner).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<String>,
    /// What to tell people, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The size of what one tool keeps beside a Triton cache dir: Inductor's FX graph
/// (`fxgraph/`) or AOTAutograd (`aotautograd/`) cache, vLLM's compiled graphs (the rank dir
/// less its `triton_cache/`). Counted without following symlinks, to a bounded depth.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ToolSize {
    /// `inductor-fxgraph`, `inductor-aotautograd`, `vllm-compiled` (a rank dir of vLLM's older
    /// layout), `vllm-key-factors` or `vllm-artifact` (see [`crate::scan::vllm`]).
    pub tool: String,
    /// The dir counted.
    pub path: String,
    /// Regular files and their bytes.
    pub files: i64,
    pub bytes: i64,
    /// False when a bound stopped the count or a dir could not be listed (figures are floors).
    pub complete: bool,
    /// Inodes (files, dirs, links) it takes, where counted (vLLM's compile artifacts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inodes: Option<i64>,
    /// What it holds, in words (a compile artifact's graphs and kernels, vLLM's key factors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds: Option<String>,
}

/// The answer to an upload (`POST /api/v1/scans`).
#[derive(Debug, Serialize, Deserialize)]
pub struct UploadResponse {
    pub scan_id: i64,
    /// False when the same scan (machine, client_id) was stored before: nothing was written.
    pub created: bool,
    pub summary: ScanSummary,
    /// Records the server skipped, each with its reason in `summary.skipped` (a record that
    /// breaks a bound of the contract is skipped, never the whole scan).
    #[serde(default)]
    pub skipped: i64,
    /// The machine's hits and misses as the hook saw them, after this scan (its page's headline);
    /// absent from servers older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hit_miss: Option<HitMiss>,
}

/// A machine's Triton cache lookups as the hook saw them (`/api/v1/headline?machine=`'s figures),
/// the last line of a scan's summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HitMiss {
    pub machine: String,
    /// The hook ever reported a lookup from this machine. False: hits are unknown, so there is
    /// no hit rate (not 0%).
    pub hook: bool,
    /// The last 7 days (168 hours).
    pub week: Lookups,
    pub all_time: Lookups,
}

/// Hits and misses of one window, and what the misses cost.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Lookups {
    pub hits: i64,
    /// Lookups that compiled.
    pub misses: i64,
    /// hits / (hits + misses); `None` without lookups.
    pub hit_rate: Option<f64>,
    /// Compile time the hook timed on misses (ms); `None`: none timed.
    pub miss_ms: Option<f64>,
    /// Compile time the hits saved (ms), each at its entry's timed compile; `None`: none known.
    pub saved_ms: Option<f64>,
}

impl HitMiss {
    /// The line a scan's summary ends with.
    pub fn line(&self) -> String {
        if !self.hook {
            return format!(
                "hits and misses on {}: unknown, the hook has not reported from this machine (no hit rate; hook/README.md enables it)",
                self.machine
            );
        }
        format!(
            "hits and misses on {} (the hook's Triton cache lookups): last 7 days {}; all time {}",
            self.machine,
            self.week.text(),
            self.all_time.text()
        )
    }
}

impl Lookups {
    fn text(&self) -> String {
        let rate = self.hit_rate.map(|r| format!("hit rate {:.1}%", r * 100.0)).unwrap_or_else(|| "no lookups".into());
        let mut t = format!("{rate} ({} hits, {} misses)", self.hits, self.misses);
        if let Some(ms) = self.miss_ms {
            t += &format!(", {} compiling on misses", crate::fmt::duration_ms(ms));
        }
        if let Some(ms) = self.saved_ms {
            t += &format!(", {} saved by hits", crate::fmt::duration_ms(ms));
        }
        t
    }
}

/// Version of the staged upload protocol (`/api/v1/uploads`, docs/API.md): a scan sent in
/// bounded parts that the server assembles into one all-or-nothing scan.
pub const UPLOAD_FORMAT: u32 = 2;

/// `POST /api/v1/uploads`: begin a staged upload, or resume it (the same `client_id`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UploadBegin {
    pub format: u32,
    pub client_id: String,
    pub machine: String,
    pub root: String,
    pub scanned_at: i64,
}

/// The answer to [`UploadBegin`]: where the upload stands on the server.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct UploadSession {
    /// The staged upload's id (its URL: `/api/v1/uploads/{upload_id}/...`); 0 when `scan_id` is set.
    pub upload_id: i64,
    /// The scan this upload was committed as, when it was (a repeat of a finished upload).
    pub scan_id: Option<i64>,
    /// Parts the server holds already (a resumed upload sends only the others).
    pub parts: Vec<i64>,
    /// The largest part and the largest IR blob the server takes, decompressed.
    pub max_part_bytes: u64,
    pub max_blob_bytes: u64,
    /// The salt of this upload's blob proofs (absent from older servers: no proofs taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salt: Option<String>,
}

/// `PUT /api/v1/uploads/{id}/parts/{n}`: records of one scan, a bounded share of it. A part's
/// entries reference IR blobs by sha256; the blobs go separately
/// (`PUT /api/v1/uploads/{id}/blobs/{sha256}`, the raw text gzipped).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ScanPart {
    #[serde(default)]
    pub entries: Vec<Entry>,
    #[serde(default)]
    pub unchanged: Vec<String>,
    #[serde(default)]
    pub skipped: Vec<Skip>,
    #[serde(default)]
    pub best_configs: Vec<BestConfig>,
    #[serde(default)]
    pub events: Vec<HookEvent>,
    #[serde(default)]
    pub inductor_autotune: Vec<InductorAutotune>,
    /// Entries whose facts the server holds: only this machine's own part of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub present: Vec<Present>,
    /// (entry dir, dir stamp) of unchanged entries whose stamp is new.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stamps: Vec<(String, String)>,
}

impl ScanPart {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
            && self.present.is_empty()
            && self.stamps.is_empty()
            && self.unchanged.is_empty()
            && self.skipped.is_empty()
            && self.best_configs.is_empty()
            && self.events.is_empty()
            && self.inductor_autotune.is_empty()
    }
}

/// The answer to a part: what of it the server will store, and what it skipped.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct PartAnswer {
    pub n: i64,
    pub entries: i64,
    pub skipped: i64,
}

/// `POST /api/v1/uploads/{id}/commit`: the scan's last facts; the server then stores every
/// part in one transaction.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct UploadCommit {
    /// Parts sent, numbered `0..parts`.
    pub parts: i64,
    pub duration_ms: i64,
    #[serde(default)]
    pub event_files: Vec<EventFileMark>,
    #[serde(default)]
    pub beside: Vec<ToolSize>,
    /// Where the cache sits (absent from older clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hazards: Option<Hazards>,
}

/// `POST /api/v1/uploads/{id}/facts`: which of these [`fact_digest`]s the server lacks (it
/// then needs the whole entry); the others go as [`Present`] records.
#[derive(Debug, Serialize, Deserialize)]
pub struct FactsRequest {
    pub facts: Vec<String>,
    /// Facts of relocated entries (held only by a relocated entry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relocated: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct FactsAnswer {
    pub missing: Vec<String>,
}

/// `POST /api/v1/uploads/{id}/proofs`: IR texts this machine holds and the server may hold from
/// another machine, each as `[sha256, blob_proof(salt, text)]`. The server answers those it holds
/// and whose proof matches its own text; the client sends the others. Only a client that holds a
/// text can learn that the server has it (the salt is the upload's, chosen by the server).
#[derive(Debug, Serialize, Deserialize)]
pub struct ProofsRequest {
    pub proofs: Vec<(String, String)>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ProofsAnswer {
    pub held: Vec<String>,
}

/// The proof of holding `text`: sha256 of the upload's salt (hex) and the text, in hex.
pub fn blob_proof(salt: &str, text: &[u8]) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(salt.as_bytes());
    h.update([0]);
    h.update(text);
    hex::encode(h.finalize())
}

/// `POST /api/v1/uploads/{id}/previous`: what the server holds of the upload's root on this
/// machine, so the client's scanner skips what is unchanged as a local re-scan does: for each
/// live entry, `[dir, sig, stamp]` (the stamp `null` when none was trusted).
#[derive(Debug, Serialize, Deserialize, Default)]
pub struct PreviousAnswer {
    pub entries: Vec<(String, String, Option<String>)>,
}

/// `POST /api/v1/blobs/missing` body and answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct MissingRequest {
    pub sha256: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct MissingResponse {
    pub missing: Vec<String>,
    /// How far the server has read each hook event file of the token's machine: a client scans
    /// events from there on, so an upload carries only lines the server has not got. (Absent
    /// from older servers: the client then sends every line, which the server dedupes.)
    #[serde(default)]
    pub event_files: Vec<EventFileMark>,
    /// The server's upload size limit (decompressed), so a client can keep under it.
    #[serde(default)]
    pub max_upload_bytes: Option<u64>,
}

/// Machine names become URL parts and file-ish labels: letters, digits, `.`, `_`, `-`, 1–64
/// chars, not starting with `.` (no path-like names).
pub fn valid_machine_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fact names what was read as well as the files: the scanner's entries of a real cache
    /// keep their facts through the wire's JSON (a server computes the same digest from what it
    /// parsed), and an entry with the same files but other figures (a node lying about
    /// registers, the kernel or the metadata) is another fact, so it can poison nobody's rows.
    #[test]
    fn a_fact_covers_what_was_read_and_survives_the_wire() {
        let root = crate::test_corpus::unpacked("h100-jit-3.6.0").join("triton-cache");
        let report = crate::collect::scan_report(&root, "x").unwrap();
        let kernels: Vec<&Entry> = report.entries.iter().filter(|e| e.kind == EntryKind::Kernel).collect();
        assert!(kernels.len() > 100, "{}", kernels.len());
        for e in &kernels {
            let wire: Entry = serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
            assert_eq!(wire.fact(), e.fact(), "{}", e.key);
        }
        let e = kernels.iter().find(|e| e.registers.is_some()).unwrap();
        let forged: [fn(&mut Entry); 4] = [
            |e| e.registers = e.registers.map(|r| r + 1),
            |e| e.kernel = Some("other_kernel".into()),
            |e| e.num_warps = e.num_warps.map(|w| w * 2),
            |e| e.metadata.as_mut().unwrap()["shared"] = 1.into(),
        ];
        for (i, forge) in forged.iter().enumerate() {
            let mut lie = (*e).clone();
            forge(&mut lie);
            assert_ne!(lie.fact(), e.fact(), "forgery {i}");
        }
    }

    /// A group whose children sit in its dir is stored by their names and read back with a
    /// machine's own dir exactly as that machine's scanner made it; any other is stored as it is.
    #[test]
    fn a_group_stored_by_its_names_reads_back_with_each_machines_dir() {
        let group = |at: &str, relocated: bool| GroupInfo {
            children: ["k.cubin", "k.json", "k.ttir"].map(|n| (n.to_string(), Some(format!("{at}/{n}")))).into(),
            relocated,
            written_at: Some(at.to_string()),
            missing: vec!["k.ttir".into()],
        };
        let (a, b) =
            (group("/tmp/torchinductor_alice/triton/0/KEY", false), group("/home/bob/.triton/cache/KEY", false));
        assert_eq!(a.stored_json(), b.stored_json());
        for g in [&a, &b] {
            let at = g.written_at.as_deref().unwrap();
            assert_eq!(group_json_at(g.stored_json(), at), serde_json::to_string(g).unwrap());
        }
        let moved = group("/elsewhere/KEY", true);
        assert_eq!(moved.in_dir(), None);
        assert_eq!(group_json_at(moved.stored_json(), "/here/KEY"), serde_json::to_string(&moved).unwrap());
        let mut odd = group("/c/KEY", false);
        odd.children.insert("x.ptx".into(), Some("/c/OTHER/x.ptx".into()));
        assert_eq!(odd.in_dir(), None, "a child outside the dir");
    }

    /// A kind added by a newer client is read as `other`, not refused: the entry is kept.
    #[test]
    fn unknown_entry_kind_from_another_client_reads_as_other() {
        let k: EntryKind = serde_json::from_str("\"kernel\"").unwrap();
        assert_eq!(k, EntryKind::Kernel);
        let k: EntryKind = serde_json::from_str("\"from_the_future\"").unwrap();
        assert_eq!(k, EntryKind::Other);
    }

    /// An event kind this version cannot count is skipped with its reason, never the report.
    #[test]
    fn unknown_event_kind_in_an_upload_is_skipped() {
        let report = |event: &str| {
            serde_json::json!({"format": REPORT_FORMAT, "client_id": "c", "machine": "m", "root": "/r",
                "scanned_at": 1_763_000_000_000i64, "duration_ms": 1, "entries": [],
                "events": [{"ts": 1_763_000_000_000i64, "host": "h", "pid": 1, "key": "k", "kernel": null,
                            "event": event, "compile_ms": null, "stages_ms": null}]})
            .to_string()
        };
        let read = |event: &str| {
            let mut stage = crate::web::api::whole::Memory::default();
            let h = crate::web::api::whole::decode(report(event).as_bytes(), false, 1 << 20, &mut stage).unwrap();
            assert!(h.check("m").is_ok());
            stage.parts.remove(0)
        };
        assert_eq!(read("hit").events[0].event, EventKind::Hit);
        let r = read("evicted");
        assert!(r.events.is_empty());
        assert_eq!(r.skipped[0].kind, SkipKind::OutOfBounds);
        assert!(r.skipped[0].reason.contains("evicted"), "{:?}", r.skipped);
        assert_eq!("evicted".parse::<EventKind>().unwrap_err(), "event \"evicted\" is not hit, miss or compile");
    }

    /// The SQL that counts events and selects entry kinds compares the stored text with these
    /// names: the enums must be stored as exactly them.
    #[tokio::test]
    async fn kinds_are_stored_as_their_names() {
        let dir = tempfile::TempDir::new().unwrap();
        let pool = crate::db::open(&dir.path().join("t.db")).await.unwrap();
        for k in [EventKind::Hit, EventKind::Miss, EventKind::Compile] {
            let s: String = sqlx::query_scalar("SELECT ?").bind(k).fetch_one(&pool).await.unwrap();
            assert_eq!(s, k.as_str());
        }
        let kinds = [EntryKind::Kernel, EntryKind::BinaryOnly, EntryKind::Launcher, EntryKind::Autotune];
        for k in kinds.into_iter().chain([EntryKind::Partial, EntryKind::Other]) {
            let s: String = sqlx::query_scalar("SELECT ?").bind(k).fetch_one(&pool).await.unwrap();
            assert_eq!(s, k.as_str());
            let back: EntryKind = sqlx::query_scalar("SELECT ?").bind(&s).fetch_one(&pool).await.unwrap();
            assert_eq!(back, k);
        }
        assert_eq!(EntryKind::sql_list(&[EntryKind::Kernel, EntryKind::BinaryOnly]), "('kernel', 'binary_only')");
    }

    #[test]
    fn skips_keep_their_kind_on_the_wire_and_old_clients_reasons_are_read() {
        let s = Skip::new("KEY", SkipKind::Symlink, "symlink out of the cache");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v, serde_json::json!({"path": "KEY", "kind": "symlink", "reason": "symlink out of the cache"}));
        assert_eq!(serde_json::from_value::<Skip>(v).unwrap(), s);
        // a client from before `kind`: its wording decides, once, here
        let old = |r: &str| serde_json::from_value::<Skip>(serde_json::json!({"path": "K", "reason": r})).unwrap().kind;
        assert_eq!(old("vanished during scan"), SkipKind::Vanished);
        assert_eq!(old("empty entry dir (Triton creates one on every lookup)"), SkipKind::EmptyDir);
        assert_eq!(old("dir unreadable (its entries kept as they were): permission denied"), SkipKind::DirUnreadable);
        assert_eq!(old("permission denied"), SkipKind::Other);
        // a kind from a newer client: its text is read as an old client's
        let newer = serde_json::json!({"path": "K", "kind": "quantum", "reason": "vanished during scan"});
        assert_eq!(serde_json::from_value::<Skip>(newer).unwrap().kind, SkipKind::Vanished);
        // the kind, not the text, decides for a new client
        let typed = serde_json::json!({"path": "K", "kind": "unreadable", "reason": "vanished? no: EIO"});
        assert_eq!(serde_json::from_value::<Skip>(typed).unwrap().kind, SkipKind::Unreadable);
    }
}

/// One max-autotune decision Inductor recorded in its local autotune cache
/// (`<inductor dir>/cache/<hash>`: `{"cache": {op: {shape key: {precision: {choice: ms}}}}}`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct InductorAutotune {
    /// The file, relative to the root.
    pub path: String,
    pub op: String,
    /// The shape key exactly as Inductor wrote it.
    pub key: String,
    pub precision: String,
    /// Every benchmarked choice and its time, fastest first (failed ones last).
    pub choices: Vec<AutotuneChoice>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct AutotuneChoice {
    pub name: String,
    /// `None`: the choice failed to benchmark (Inductor wrote `Infinity`).
    pub ms: Option<f64>,
}
