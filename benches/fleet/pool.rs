//! The fleet's caches, on disk: a pool of distinct entries cloned from the real H100 corpus
//! entries of `demo/*.tar.xz` under new keys, and each node's cache dir as a window of that pool,
//! made of hard links to the pool's files.
//!
//! A clone is a real cache entry as Triton would have written it under that key: a new key is
//! the base32 of a new 32-byte hash (as Triton names its dirs), the metadata JSON's `hash` is that
//! hash, its kernel `name` is varied (`K_v{clone % variety}`, as `benches/load/fleet.rs` does) and
//! the files named after the kernel are renamed with it (`K.cubin` → `K_v3.cubin`, the group file
//! `__grp__K.json` → `__grp__K_v3.json`), and the group file's `child_paths` name the clone's own
//! files. Every other file is a hard link to the unpacked corpus's (same bytes, same mtime: the
//! scanner reads the metadata file's mtime as the compile time). What is not true to a real
//! clone: the cubin's kernel symbol keeps the corpus's name (the scanner finds no symbol of the
//! varied name and reads the first kernel's resources, noting `kernel_not_found`).
//!
//! Group files hold absolute paths. A node's group file is, as `--group-files` says:
//! - `copy` (default): written per node with that node's own paths, as Triton writes them on
//!   each machine (every node's group files are then distinct texts: machine-specific bytes,
//!   which a fleet whose nodes use one cache path would not have);
//! - `link`: a hard link to the pool's group file, whose paths are the pool's: byte-identical on
//!   every node (as on a fleet using one cache path), but the scanner calls every entry
//!   "relocated" (written elsewhere).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Instant, SystemTime};

/// The corpora the pool is cloned from: the H100 ones (one GPU, one Triton build: what a fleet
/// shares), every key dir in them (Triton's cache dirs and Inductor's `triton/0/`).
pub const ARCHIVES: &[&str] = &[
    "h100-jit-3.6.0",
    "h100-inductor-3.6.0",
    "h100-fpfusion-off-triton-3.6.0",
    "h100-hook-3.6.0",
    "h100-inductor-autotune-triton-3.6.0",
];

/// One corpus entry dir, the template of its clones.
pub struct Template {
    pub dir: PathBuf,
    /// File names, sorted.
    pub files: Vec<String>,
    /// The metadata file's kernel name and hash (entries without metadata: launchers, autotune).
    pub kernel: Option<String>,
    pub hash: Option<String>,
    pub meta: Option<String>,
    pub group: Option<String>,
    /// The file names the group file's `child_paths` lists.
    pub children: Vec<String>,
}

impl Template {
    /// The name of `file` in a clone of variant `v`.
    pub fn renamed(&self, file: &str, v: usize) -> String {
        let Some(k) = &self.kernel else { return file.to_string() };
        if let Some(rest) = file.strip_prefix(&format!("__grp__{k}.")) {
            return format!("__grp__{k}_v{v}.{rest}");
        }
        match file.strip_prefix(&format!("{k}.")) {
            Some(rest) => format!("{k}_v{v}.{rest}"),
            None => file.to_string(),
        }
    }

    /// Whether it is a compiled kernel (metadata and a binary): the routes' entries.
    pub fn is_kernel(&self) -> bool {
        self.meta.is_some() && self.files.iter().any(|f| f.ends_with(".cubin"))
    }
}

fn find_entries(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for d in std::fs::read_dir(dir)? {
        let d = d?;
        let name = d.file_name().to_string_lossy().to_string();
        if !d.file_type()?.is_dir() || name == ".cachelens" {
            continue;
        }
        if cachelens::scan::walk::is_key(&name) {
            out.push(d.path());
        } else if depth < 6 {
            find_entries(&d.path(), depth + 1, out)?;
        }
    }
    Ok(())
}

/// Every key dir with files in the corpora, sorted by path.
pub fn templates(roots: &[PathBuf]) -> anyhow::Result<Vec<Template>> {
    let mut dirs = vec![];
    for r in roots {
        find_entries(r, 0, &mut dirs)?;
    }
    dirs.sort();
    let mut out = vec![];
    for dir in dirs {
        let mut files: Vec<String> = std::fs::read_dir(&dir)?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        if files.is_empty() {
            continue;
        }
        files.sort();
        let group = files.iter().find(|f| f.starts_with("__grp__")).cloned();
        let meta = files
            .iter()
            .find(|f| f.ends_with(".json") && !f.starts_with("__grp__") && !f.ends_with(".autotune.json"))
            .cloned();
        let (mut kernel, mut hash) = (None, None);
        if let Some(m) = &meta
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&std::fs::read(dir.join(m))?)
        {
            kernel = v.get("name").and_then(|n| n.as_str()).map(str::to_string);
            hash = v.get("hash").and_then(|n| n.as_str()).map(str::to_string);
        }
        let children = match &group {
            Some(g) => read_children(&dir.join(g))?,
            None => vec![],
        };
        out.push(Template { dir, files, kernel, hash, meta, group, children });
    }
    Ok(out)
}

/// RFC 4648 base32 without padding (Triton's dir names since 3.3).
fn base32(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let (mut out, mut acc, mut bits) = (String::new(), 0u32, 0);
    for &b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 5 {
            out.push(A[((acc >> (bits - 5)) & 31) as usize] as char);
            bits -= 5;
        }
    }
    if bits > 0 {
        out.push(A[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// Pool entry `j`'s hash (hex, the metadata's `hash`) and key (its dir name).
pub fn key_of(j: usize) -> (String, String) {
    use sha2::Digest;
    let h = sha2::Sha256::digest(format!("cachelens fleet bench {j}").as_bytes());
    (hex::encode(h), base32(&h))
}

/// What the pool and the nodes are: sizes and the window rule.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub nodes: usize,
    pub entries: usize,
    /// Distinct entries (the ring the windows are taken on).
    pub pool: usize,
    /// How far node i+1's window starts after node i's.
    pub stride: usize,
    pub variety: usize,
    pub link_groups: bool,
}

impl Plan {
    /// Pool index of node `i`'s `k`-th entry.
    pub fn at(&self, i: usize, k: usize) -> usize {
        (i * self.stride + k) % self.pool
    }

    /// Distinct keys the nodes hold (all of the pool, unless the windows do not reach round).
    pub fn distinct(&self) -> usize {
        ((self.nodes.max(1) - 1) * self.stride + self.entries).min(self.pool)
    }

    /// Keys node `i` holds that nodes before it do not (by the windows, on the ring).
    pub fn new_keys(&self, i: usize) -> usize {
        let before = if i == 0 { 0 } else { ((i - 1) * self.stride + self.entries).min(self.pool) };
        let upto = (i * self.stride + self.entries).min(self.pool);
        upto.saturating_sub(before)
    }
}

/// Pool entry `j` of `t`: its template, clone number's variant, key.
fn parts(t: &[Template], j: usize, variety: usize) -> (&Template, usize) {
    (&t[j % t.len()], (j / t.len()) % variety.max(1))
}

fn set_mtime(path: &Path, to: SystemTime) -> std::io::Result<()> {
    std::fs::File::options().write(true).open(path)?.set_modified(to)
}

/// A group file as Triton writes it (`json.dumps`), its children at `dir`.
fn group_text(children: &[String], dir: &Path) -> String {
    let parts: Vec<String> = children
        .iter()
        .map(|c| {
            let p = dir.join(c).display().to_string();
            format!("{}: {}", serde_json::to_string(c).unwrap(), serde_json::to_string(&p).unwrap())
        })
        .collect();
    format!("{{\"child_paths\": {{{}}}}}", parts.join(", "))
}

/// The children a template's group file names, renamed for variant `v`.
fn group_children(t: &Template, v: usize) -> anyhow::Result<Vec<String>> {
    Ok(t.children.iter().map(|k| t.renamed(k, v)).collect())
}

/// The file names a group file lists.
fn read_children(path: &Path) -> anyhow::Result<Vec<String>> {
    let text: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
    Ok(match text.get("child_paths") {
        Some(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        Some(serde_json::Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
        _ => vec![],
    })
}

/// Make pool entry `j` at `dir/<key>`.
fn make_pool_entry(t: &[Template], j: usize, variety: usize, dir: &Path) -> anyhow::Result<()> {
    let (tm, v) = parts(t, j, variety);
    let (hash, key) = key_of(j);
    let out = dir.join(&key);
    std::fs::create_dir(&out)?;
    for f in &tm.files {
        let (src, dst) = (tm.dir.join(f), out.join(tm.renamed(f, v)));
        let mtime = std::fs::metadata(&src)?.modified()?;
        if Some(f) == tm.meta.as_ref() {
            let mut text = String::from_utf8(std::fs::read(&src)?)?;
            if let Some(old) = &tm.hash {
                text = text.replace(old.as_str(), &hash);
            }
            if let Some(k) = &tm.kernel {
                let renamed = format!("\"name\": \"{k}_v{v}\"");
                text = text.replace(&format!("\"name\": \"{k}\""), &renamed);
                if !text.contains(&renamed) {
                    // not json.dumps' spacing: rewrite through serde
                    let mut m: serde_json::Value = serde_json::from_str(&text)?;
                    m["name"] = format!("{k}_v{v}").into();
                    m["hash"] = hash.clone().into();
                    text = serde_json::to_string(&m)?;
                }
            }
            std::fs::write(&dst, text)?;
            set_mtime(&dst, mtime)?;
        } else if Some(f) == tm.group.as_ref() {
            std::fs::write(&dst, group_text(&group_children(tm, v)?, &out))?;
            set_mtime(&dst, mtime)?;
        } else {
            std::fs::hard_link(&src, &dst)?;
        }
    }
    Ok(())
}

/// Node `i`'s cache dir at `dir`: its window of the pool, hard links to the pool's files; its
/// group files as `link_groups` says. Returns the files written (not linked).
fn make_node(t: &[Template], plan: &Plan, i: usize, pool: &Path, dir: &Path) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut written = 0;
    for k in 0..plan.entries {
        let j = plan.at(i, k);
        let (tm, v) = parts(t, j, plan.variety);
        let (_, key) = key_of(j);
        let (from, to) = (pool.join(&key), dir.join(&key));
        std::fs::create_dir(&to)?;
        for f in &tm.files {
            let name = tm.renamed(f, v);
            if Some(f) == tm.group.as_ref() && !plan.link_groups {
                let mtime = std::fs::metadata(from.join(&name))?.modified()?;
                std::fs::write(to.join(&name), group_text(&group_children(tm, v)?, &to))?;
                set_mtime(&to.join(&name), mtime)?;
                written += 1;
            } else {
                std::fs::hard_link(from.join(&name), to.join(&name))?;
            }
        }
    }
    Ok(written)
}

/// Runs `f(i)` for i in 0..n on `threads` threads.
fn par(n: usize, threads: usize, f: impl Fn(usize) -> anyhow::Result<usize> + Sync) -> anyhow::Result<usize> {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| -> anyhow::Result<usize> {
                    let mut sum = 0;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return Ok(sum);
                        }
                        sum += f(i)?;
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

/// The fleet on disk: the pool and one cache dir per node.
pub struct Fleet {
    pub templates: Vec<Template>,
    pub plan: Plan,
    pub pool: PathBuf,
    /// Node dirs (absolute, canonical), with their machine names.
    pub nodes: Vec<(String, PathBuf)>,
    /// What making it took (or "reused").
    pub built: String,
}

impl Fleet {
    /// Pool entry `j`'s key.
    pub fn key(&self, j: usize) -> String {
        key_of(j).1
    }

    /// Pool entry `j`'s template and variant.
    pub fn entry(&self, j: usize) -> (&Template, usize) {
        parts(&self.templates, j, self.plan.variety)
    }
}

/// Make (or reuse, when a run with the same plan completed it) the pool and the node dirs under
/// `work`.
pub fn build(work: &Path, templates: Vec<Template>, plan: Plan, rebuild: bool) -> anyhow::Result<Fleet> {
    std::fs::create_dir_all(work)?;
    let work = work.canonicalize()?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let pool = work.join(format!("pool-{}-v{}-t{}", plan.pool, plan.variety, templates.len()));
    let nodes_dir = work.join(format!(
        "nodes-{}x{}-s{}-p{}-v{}-{}",
        plan.nodes,
        plan.entries,
        plan.stride,
        plan.pool,
        plan.variety,
        if plan.link_groups { "linked-groups" } else { "own-groups" }
    ));
    let nodes: Vec<(String, PathBuf)> =
        (0..plan.nodes).map(|i| (format!("node-{:03}", i + 1), nodes_dir.join(format!("node-{:03}", i + 1)))).collect();
    let mut built = vec![];
    if rebuild || !pool.join(".complete").exists() {
        let _ = std::fs::remove_dir_all(&pool);
        let _ = std::fs::remove_dir_all(&nodes_dir);
        std::fs::create_dir_all(&pool)?;
        let t = Instant::now();
        par(plan.pool, threads, |j| make_pool_entry(&templates, j, plan.variety, &pool).map(|_| 1))?;
        std::fs::write(pool.join(".complete"), "")?;
        built.push(format!("pool of {} entries made in {:.1} s", plan.pool, t.elapsed().as_secs_f64()));
    } else {
        built.push(format!("pool of {} entries reused ({})", plan.pool, pool.display()));
    }
    if rebuild || !nodes_dir.join(".complete").exists() {
        let _ = std::fs::remove_dir_all(&nodes_dir);
        let t = Instant::now();
        let written = par(plan.nodes, threads, |i| make_node(&templates, &plan, i, &pool, &nodes[i].1))?;
        std::fs::write(nodes_dir.join(".complete"), "")?;
        built.push(format!(
            "{} node dirs of {} entries made in {:.1} s (hard links to the pool; {} group files {})",
            plan.nodes,
            plan.entries,
            t.elapsed().as_secs_f64(),
            written,
            if plan.link_groups { "linked" } else { "written with each node's paths" }
        ));
    } else {
        built.push(format!("node dirs reused ({})", nodes_dir.display()));
    }
    Ok(Fleet { templates, plan, pool, nodes, built: built.join("; ") })
}
