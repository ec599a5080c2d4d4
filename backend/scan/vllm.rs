//! vLLM's compile cache as recent vLLM writes it: per rank and model part,
//! `torch_compile_cache/<hash>/rank_<i>_<j>/<prefix>/` (prefix e.g. `backbone`) holds
//! `cache_key_factors.json` (vLLM's key factors: `env`, `config_hash`, `code_hash`,
//! `compiler_hash`) and one `artifact_compile_range_<a>_<b>_subgraph_<n>` per compiled range:
//! a binary file (Inductor's standalone-compile format, read by [`standalone`]) or, saved
//! "unpacked", a dir holding its own Inductor cache (`fxgraph/`, `aotautograd/`, generated code,
//! and `triton/<device>/<KEY>/` once loaded with `TRITON_CACHE_DIR` unset: the discovery finds
//! that Triton cache and scans the artifact dir as an Inductor dir).
//!
//! Such a prefix dir is a root of its own ([`super::discover`]); what fills it is listed beside
//! it ([`sizes`]): the key factors in words, and each artifact with its bytes, inodes and what it
//! holds. An unpacked artifact that is itself a root is counted without its `triton/`,
//! `fxgraph/` and `aotautograd/` (that root's scan and its own "beside" count those). Files are
//! opened without following symlinks, from the prefix dir's descriptor, never above it.

use super::fsat::{self, Kind};
use super::{beside, standalone};
use crate::model::ToolSize;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

/// vLLM's key factors file in a prefix dir.
pub const FACTORS: &str = "cache_key_factors.json";
/// The name every compiled range's artifact starts with.
pub const ARTIFACT: &str = "artifact_compile_range_";
/// A key factors file larger than this is listed, not read.
pub const MAX_FACTORS_BYTES: u64 = 1 << 20;
/// The key factors in words are cut to this many bytes.
pub const MAX_HOLDS: usize = 2000;
/// At most this many artifacts are read per prefix dir (the rest are listed by size only).
pub const MAX_ARTIFACTS: usize = 4096;

/// Whether a dir child's name makes its dir a vLLM prefix dir.
pub fn marks_prefix_dir(name: &[u8]) -> bool {
    name == FACTORS.as_bytes() || name.starts_with(ARTIFACT.as_bytes())
}

/// What fills the prefix dir `rel` below `base` (opened as `base_fd`): its key factors and each
/// artifact. `roots`: every root found (relative to `base`), to leave out what they count.
/// Empty when `rel` is no vLLM prefix dir.
pub fn sizes(base: &Path, base_fd: BorrowedFd<'_>, rel: &Path, roots: &[PathBuf]) -> Vec<ToolSize> {
    let Ok(fd) = fsat::open_rel(base_fd, rel) else { return vec![] };
    let Ok((d, children)) = fsat::list(fd) else { return vec![] };
    let Ok(dfd) = d.fd() else { return vec![] };
    let owner = fsat::owner(dfd).unwrap_or(u32::MAX);
    let dir = base.join(rel);
    let mut out = vec![];
    let mut read = 0usize;
    for c in children.iter().filter(|c| marks_prefix_dir(c.name.as_encoded_bytes())) {
        let path = dir.join(&c.name);
        let row = match c.kind {
            Kind::File if c.name == FACTORS => factors(dfd, &c.name, &path, owner),
            Kind::File => {
                read += 1;
                binary(dfd, &c.name, &path, owner, read <= MAX_ARTIFACTS)
            }
            Kind::Dir => unpacked(dfd, &c.name, &path, roots.contains(&rel.join(&c.name))),
            // a symlink is neither followed nor counted
            _ => continue,
        };
        out.push(row);
    }
    out
}

fn row(tool: &str, path: &Path, bytes: u64, holds: String) -> ToolSize {
    ToolSize {
        tool: tool.into(),
        path: path.display().to_string(),
        files: 1,
        bytes: bytes as i64,
        complete: true,
        inodes: Some(1),
        holds: Some(holds),
    }
}

/// `cache_key_factors.json`: its hashes and env factors in words.
fn factors(dfd: BorrowedFd<'_>, name: &OsStr, path: &Path, owner: u32) -> ToolSize {
    let opened = fsat::open_file(dfd, name, owner);
    let Ok((f, len)) = opened else {
        let why = opened.err().map(|e| super::walk::reason(&e)).unwrap_or_default();
        let mut t = row("vllm-key-factors", path, 0, format!("not read: {why}"));
        t.complete = false;
        return t;
    };
    let mut t = row("vllm-key-factors", path, len, String::new());
    let text = if len > MAX_FACTORS_BYTES {
        format!("not read: {}", super::limits::over_cap("key factors", MAX_FACTORS_BYTES))
    } else {
        let mut buf = vec![];
        let parsed = fsat::read_capped(f, len, MAX_FACTORS_BYTES, &mut buf)
            .ok()
            .and_then(|_| serde_json::from_slice::<serde_json::Value>(&buf).ok());
        match parsed {
            Some(v) => factors_text(&v),
            None => "not read: not JSON".into(),
        }
    };
    t.holds = Some(text);
    t
}

/// `config_hash=…, code_hash=…, compiler_hash=…; env: K=V, …` (other top-level fields by
/// name), cut to [`MAX_HOLDS`] bytes.
pub fn factors_text(v: &serde_json::Value) -> String {
    let Some(obj) = v.as_object() else { return "not read: not a JSON object".into() };
    let plain = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut parts: Vec<String> =
        obj.iter().filter(|(k, _)| k.ends_with("_hash")).map(|(k, v)| format!("{k}={}", plain(v))).collect();
    let others: Vec<&str> = obj.keys().filter(|k| !k.ends_with("_hash") && *k != "env").map(String::as_str).collect();
    if !others.is_empty() {
        parts.push(format!("also {}", others.join(", ")));
    }
    let mut text = parts.join(", ");
    if let Some(env) = obj.get("env").and_then(|e| e.as_object()) {
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={}", plain(v))).collect();
        text.push_str(&format!("; env: {}", env.join(", ")));
    }
    if text.len() > MAX_HOLDS {
        let mut cut = MAX_HOLDS;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// A binary artifact: its size, and what its index says it holds.
fn binary(dfd: BorrowedFd<'_>, name: &OsStr, path: &Path, owner: u32, read: bool) -> ToolSize {
    let (size, _, _) = fsat::stat(dfd, name).unwrap_or((0, 0, Kind::Other));
    let mut t = row("vllm-artifact", path, size, String::new());
    let holds = match (read, fsat::open_file(dfd, name, owner)) {
        (false, _) => format!("binary; not read: past the first {MAX_ARTIFACTS} artifacts of this dir"),
        (true, Ok((f, len))) => format!("binary: {}", standalone::holds(&standalone::read_artifact(&f, len))),
        (true, Err(e)) => {
            t.complete = false;
            format!("binary; not read: {}", super::walk::reason(&e))
        }
    };
    t.holds = Some(holds);
    t
}

/// An unpacked artifact dir: its files, bytes and inodes (less what its own root counts).
fn unpacked(dfd: BorrowedFd<'_>, name: &OsStr, path: &Path, is_root: bool) -> ToolSize {
    let Ok(fd) = fsat::open_dir(dfd, name) else {
        let mut t = row("vllm-artifact", path, 0, "unpacked; not read: unreadable".into());
        (t.files, t.inodes, t.complete) = (0, None, false);
        return t;
    };
    let except: &[&str] = if is_root { &["triton", "fxgraph", "aotautograd"] } else { &[] };
    let mut t = beside::count_inodes("vllm-artifact", path, fd.as_fd(), except);
    let kernels = fsat::open_dir(fd.as_fd(), OsStr::new("triton")).ok().map(|tfd| triton_keys(tfd.as_fd()));
    t.holds = Some(match (is_root, kernels) {
        (true, Some(n)) => format!(
            "unpacked Inductor cache; {n} Triton kernel dirs in triton/<device>/, scanned as a Triton cache \
             (its entries, fxgraph/ and aotautograd/ are counted there, not here)"
        ),
        _ => "unpacked Inductor cache, not loaded yet (no Triton kernel dirs in it)".into(),
    });
    t
}

/// Key-named dirs in `triton/<device>/` dirs.
fn triton_keys(fd: BorrowedFd<'_>) -> usize {
    let dup = rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(std::io::Error::from);
    let Ok((d, devs)) = dup.and_then(fsat::list) else { return 0 };
    let Ok(dfd) = d.fd() else { return 0 };
    let mut n = 0;
    for dev in devs.iter().filter(|c| c.kind == Kind::Dir) {
        if let Ok((_, keys)) = fsat::open_dir(dfd, &dev.name).and_then(fsat::list) {
            n +=
                keys.iter().filter(|k| k.kind == Kind::Dir && k.name.to_str().is_some_and(super::walk::is_key)).count();
        }
    }
    n
}
