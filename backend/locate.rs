//! Which roots a `scan` or `up` reads: each path given (or each default location that exists)
//! is searched for Triton cache dirs ([`scan::discover`]), and every one found is a root.

use crate::model::ToolSize;
use crate::scan::{self, discover};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// A Triton cache dir found, and what other tools keep beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Root {
    pub path: PathBuf,
    pub beside: Vec<ToolSize>,
}

/// A default cache location of one tool, and where its path came from.
#[derive(Debug, Clone)]
pub struct Default {
    pub tool: &'static str,
    pub path: PathBuf,
    /// The env var that named it, or "default".
    pub from: String,
}

fn env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The default locations: Triton's (`$TRITON_CACHE_DIR`, else `$TRITON_HOME/.triton/cache`,
/// else `~/.triton/cache`), Inductor's (`$TORCHINDUCTOR_CACHE_DIR`, else
/// `/tmp/torchinductor_$USER`) and vLLM's (`$VLLM_CACHE_ROOT`, else `~/.cache/vllm`).
pub fn defaults() -> Vec<Default> {
    let home = env("HOME").unwrap_or_else(|| PathBuf::from("/"));
    let pick = |tool, vars: &[(&str, &dyn Fn(PathBuf) -> PathBuf)], fallback: PathBuf| {
        for (var, f) in vars {
            if let Some(v) = env(var) {
                return Default { tool, path: f(v), from: format!("${var}") };
            }
        }
        Default { tool, path: fallback, from: "default".into() }
    };
    let same = |p: PathBuf| p;
    let user = std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| "root".into());
    vec![
        pick(
            "triton",
            &[("TRITON_CACHE_DIR", &same), ("TRITON_HOME", &|p: PathBuf| p.join(".triton").join("cache"))],
            home.join(".triton").join("cache"),
        ),
        pick(
            "inductor",
            &[("TORCHINDUCTOR_CACHE_DIR", &same)],
            std::env::temp_dir().join(format!("torchinductor_{user}")),
        ),
        pick("vllm", &[("VLLM_CACHE_ROOT", &same)], home.join(".cache").join("vllm")),
    ]
}

/// The roots below `paths` (the defaults that exist when empty), with what was found and not
/// found written to `say` (one line each). `known`: the roots this machine's earlier scans read;
/// one below a path that no longer looks like a cache (its entry dirs all deleted) is scanned
/// again all the same, so that its entries are marked removed. An error when a path given cannot
/// be read, or when no root is found and `allow_empty` is false.
pub fn roots(
    paths: &[PathBuf],
    known: &[String],
    allow_empty: bool,
    say: &mut dyn FnMut(String),
) -> anyhow::Result<Vec<Root>> {
    let mut out: Vec<Root> = vec![];
    let mut looked = vec![];
    if paths.is_empty() {
        for d in defaults() {
            if !d.path.is_dir() {
                say(format!("{} cache ({}): {} not found", d.tool, d.from, d.path.display()));
                continue;
            }
            let found = under(&d.path, known, say)?;
            say(format!("{} cache ({}): {}: {} Triton cache dirs", d.tool, d.from, d.path.display(), found.len()));
            looked.push(d.path);
            out.extend(found);
        }
    } else {
        for p in paths {
            out.extend(under(p, known, say)?);
            looked.push(p.clone());
        }
    }
    out.dedup();
    if out.is_empty() && !allow_empty {
        let shown: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!(
            "no Triton cache found {} (looked {} dirs deep for a dir of key-named entry dirs, symlinks not followed); \
             pass --allow-empty if none is expected yet",
            if shown.is_empty() {
                "at any default location".to_string()
            } else {
                format!("under {}", shown.join(", "))
            },
            discover::MAX_DEPTH
        );
    }
    Ok(out)
}

/// The Triton cache dirs below one path, each listed through `say`.
fn under(path: &Path, known: &[String], say: &mut dyn FnMut(String)) -> anyhow::Result<Vec<Root>> {
    let canon = crate::collect::resolve_root(path)?;
    let found = match discover::find(&canon) {
        Ok(f) => f,
        Err(e) => {
            // scanned as a root all the same: its scan records the dir as unreadable and keeps
            // the entries an earlier scan of it found (none are marked removed)
            say(format!("cannot list {}: {}: scanning it as a cache dir", canon.display(), scan::walk::reason(&e)));
            return Ok(vec![Root { path: canon, beside: vec![] }]);
        }
    };
    let base = scan::fsat::open_root(&canon)?;
    let rels: Vec<PathBuf> =
        found.roots.iter().map(|r| r.strip_prefix(&canon).unwrap_or(Path::new("")).to_path_buf()).collect();
    let mut roots = vec![];
    for (r, rel) in found.roots.into_iter().zip(&rels) {
        let shown = if rel.as_os_str().is_empty() { ".".to_string() } else { scan::walk::shown(rel) };
        let mut beside = scan::beside::sizes(&canon, base.as_fd(), rel);
        let vllm = scan::vllm::sizes(&canon, base.as_fd(), rel, &rels);
        let what = if vllm.is_empty() { "Triton cache" } else { "vLLM compile cache" };
        say(format!("found {what}: {} ({shown} under {})", r.display(), canon.display()));
        beside.extend(vllm);
        roots.push(Root { path: r, beside });
    }
    if found.symlinks > 0 {
        say(format!("  {} symlinks under {} not followed", found.symlinks, canon.display()));
    }
    for u in &found.unreadable {
        say(format!("  not searched: {u}"));
    }
    if found.too_deep > 0 {
        say(format!(
            "  {} dirs deeper than {} levels (or {} below a torch_compile_cache dir) not searched",
            found.too_deep,
            discover::MAX_DEPTH,
            discover::VLLM_DEPTH
        ));
    }
    if found.truncated {
        say(format!("  search stopped after {} dirs", discover::MAX_DIRS));
    }
    for k in known.iter().map(PathBuf::from) {
        // a root scanned before, below this path, still a dir but no longer found (emptied)
        if k.starts_with(&canon) && !roots.iter().any(|r| r.path == k) && k.is_dir() {
            say(format!("scanned before, no entry dir now: {} (scanning it again)", k.display()));
            roots.push(Root { path: k, beside: vec![] });
        }
    }
    Ok(roots)
}
