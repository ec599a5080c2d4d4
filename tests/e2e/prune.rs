//! `cachelens prune` on caches compiled here by a real `pip install triton` (3.6.0, sm_90 on this
//! CPU) with the hook on: what it removes misses when compiled again, what it keeps (IR stripped
//! or not) hits; and compiles racing `prune --apply` runs never crash nor load a partial entry.
//! Needs `CACHELENS_PYTHON`; without it these tests fail, unless `CACHELENS_ALLOW_SKIP=1`.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles the workload's configs of `kernels` with the hook on, `rounds` times or for
/// `seconds`, checking every compiled kernel is whole (its cubin an ELF file and, per key, the
/// same bytes every time; its metadata naming the kernel and hash). Prints one JSON line.
const COMPILE: &str = r#"
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
import workload, triton
kernels, rounds, seconds = sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4])
target = workload.parse_target("cuda:90")
cfgs = list(workload.configs(kernels, "cuda"))
seen, out = {}, {"compiles": 0, "errors": [], "partial": 0, "keys": []}
t0, r = time.time(), 0
while r < rounds or time.time() - t0 < seconds:
    r += 1
    keys = []
    for name, fn, sig, constexprs, ptr_idx, opts in cfgs:
        try:
            k = triton.compile(workload.make_source(fn, sig, constexprs, ptr_idx), target=target, options=opts)
            out["compiles"] += 1
            cubin = k.asm["cubin"]
            whole = cubin[:4] == b"\x7fELF" and k.metadata.hash == k.hash and k.metadata.name == fn.__name__
            digest = hashlib.sha256(cubin).hexdigest()
            if not whole or seen.setdefault(k.hash, digest) != digest:
                out["partial"] += 1
            keys.append(workload._key_of(k.hash))
        except Exception as e:
            out["errors"].append(f"{type(e).__name__}: {e}"[:300])
    out["keys"] = keys
print(json.dumps(out))
"#;

fn python() -> Option<std::ffi::OsString> {
    let p = std::env::var_os("CACHELENS_PYTHON").filter(|p| !p.is_empty());
    if p.is_none() {
        skip_or_fail("CACHELENS_PYTHON (a python with Triton 3.6.0) is not set");
    }
    p
}

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

/// The compile command: hooked, into `cache`, with `env` on top of a clean Triton environment.
fn compile_cmd(
    py: &std::ffi::OsStr,
    cache: &Path,
    kernels: &str,
    rounds: u32,
    secs: f64,
    env: &[(&str, &str)],
) -> Command {
    let mut cmd = Command::new(py);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TRITON_") || k.starts_with("CACHELENS_HOOK")) {
        cmd.env_remove(k);
    }
    cmd.args(["-c", COMPILE])
        .arg(repo("scripts"))
        .args([kernels, &rounds.to_string(), &secs.to_string()])
        .env("TRITON_CACHE_DIR", cache)
        .env("TRITON_CACHE_MANAGER", "cachelens_hook:TrackingCacheManager")
        .env("PYTHONPATH", repo("hook"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn run_json(mut cmd: Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    // prune --json prints one JSON document; the compile script one line after Triton's output
    let last = out.stdout.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap().to_vec();
    serde_json::from_slice(&out.stdout)
        .or_else(|_| serde_json::from_slice(&last))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn compile(py: &std::ffi::OsStr, cache: &Path, kernels: &str, env: &[(&str, &str)]) -> Value {
    let v = run_json(compile_cmd(py, cache, kernels, 1, 0.0, env));
    assert_eq!((v["errors"].as_array().unwrap().len(), v["partial"].as_i64()), (0, Some(0)), "{v}");
    v
}

/// The hook's event lines in the cache's event files. Read while compiles run, only whole lines
/// count (a writer may be half way through its last), and a file rotated away meanwhile is
/// passed over; once they are done, every line is whole.
fn events(cache: &Path) -> Vec<Value> {
    let mut out = vec![];
    for f in std::fs::read_dir(cache.join(".cachelens")).unwrap() {
        let f = f.unwrap().path();
        if f.to_string_lossy().ends_with(".jsonl") {
            let Ok(text) = std::fs::read_to_string(&f) else { continue };
            let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            out.extend(whole.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()));
        }
    }
    out
}

fn keys_with(evs: &[Value], event: &str) -> BTreeSet<String> {
    evs.iter().filter(|e| e["event"] == event).map(|e| e["key"].as_str().unwrap().to_string()).collect()
}

/// `cachelens prune` on the database `db`; `home` is its XDG_DATA_HOME (where the default plan
/// file goes on PostgreSQL).
fn prune(db: &Path, home: &Path, args: &[&str]) -> Value {
    let mut cmd = Command::new(bin());
    cmd.args(["prune", "--json", "-q", "--machine", "node", "--db"]).arg(db).args(args).env_remove("CACHELENS_DB");
    cmd.env("XDG_DATA_HOME", home);
    run_json(cmd)
}

fn strs(v: &Value) -> BTreeSet<String> {
    arr(v).iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// An old Triton temp dir (`tmp.pid_*`, two hours old) inside an entry dir.
fn orphan(entry: &Path) -> PathBuf {
    let t = entry.join("tmp.pid_999999_0a1b2c3d-dead-beef-0000-000000000000");
    std::fs::create_dir(&t).unwrap();
    std::fs::write(t.join("add_kernel.ttgir"), "half written").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::open(&t).unwrap().set_modified(old).unwrap();
    t
}

/// How many files the entry dir holds if every one is a group file prune stubbed (Triton reads
/// it as a miss), else None.
fn stubbed(dir: &Path) -> Option<usize> {
    let names: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|d| d.unwrap().path()).collect();
    let stub = |p: &PathBuf| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or_default();
        p.file_name().unwrap().to_string_lossy().starts_with("__grp__")
            && v["child_paths"].is_null()
            && v["pruned_by"].is_string()
    };
    names.iter().all(stub).then_some(names.len())
}

/// Compile add and softmax, then add again with `TRITON_DEFAULT_FP_FUSION=0` (new keys of the
/// same variants). The dry run plans the 6 old add keys as superseded, the IR of 11 of the 12
/// kept entries (`--ir`; the 12th holds an orphaned temp dir, planned too); `--apply --plan` removes exactly that; compiling
/// again hits every kept entry (IR stripped: the rewritten group file still loads) and misses
/// every pruned one.
#[test]
fn pruned_entries_miss_and_kept_ones_hit() {
    let Some(py) = python() else { return };
    let tmp = tempfile::TempDir::new().unwrap();
    let cache = tmp.path().join("cache");
    let (_db, db) = fresh_db_at_blocking();
    let old = strs(&compile(&py, &cache, "add", &[])["keys"]);
    let soft = strs(&compile(&py, &cache, "softmax", &[])["keys"]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let fused_off = [("TRITON_DEFAULT_FP_FUSION", "0")];
    let new = strs(&compile(&py, &cache, "add", &fused_off)["keys"]);
    assert_eq!((old.len(), soft.len(), new.len()), (6, 6, 6));
    assert!(old.is_disjoint(&new));
    // an entry holding a writer's temp dir reads as partial: its IR is left for a later run
    let with_temp = soft.iter().next().unwrap().clone();
    let temp = orphan(&cache.join(&with_temp));

    let plan_file = tmp.path().join("plan.json");
    let dry = prune(&db, tmp.path(), &[cache.to_str().unwrap(), "--ir", "--plan", plan_file.to_str().unwrap()]);
    let root = &dry["plan"]["roots"][0];
    let items = arr(&root["items"]);
    let of = |class: &str| -> BTreeSet<String> {
        items.iter().filter(|i| i["class"] == class).map(|i| i["key"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(of("superseded"), old, "{root}");
    let kept: BTreeSet<String> = soft.union(&new).cloned().collect();
    let stripped: BTreeSet<String> = kept.iter().filter(|k| **k != with_temp).cloned().collect();
    assert_eq!(of("ir"), stripped, "{root}");
    assert_eq!(of("orphan_temp").len(), 1, "{root}");
    assert!(of("relocated").is_empty() && of("unused").is_empty(), "{root}");
    for i in items.iter().filter(|i| i["class"] == "ir") {
        let files = strs(&i["files"]);
        let exts: BTreeSet<&str> = files.iter().map(|f| f.rsplit('.').next().unwrap()).collect();
        assert_eq!(exts, ["llir", "ptx", "ttgir", "ttir"].into_iter().collect(), "{i}");
    }
    assert!(dry["apply"].as_str().unwrap().starts_with("cachelens prune --apply --plan "), "{dry}");
    assert!(cache.join(old.iter().next().unwrap()).is_dir(), "a dry run removes nothing");

    let applied = prune(&db, tmp.path(), &["--apply", "--plan", plan_file.to_str().unwrap(), "--grace", "0"]);
    let a = &applied["applied"][0];
    assert_eq!(a["applied"]["removed"].as_u64(), Some(items.len() as u64), "{a}");
    assert_eq!(a["scan"]["removed_entries"], 6, "the scan after it records what went: {a}");
    assert!(!temp.exists());
    // a whole entry's files go; its dir stays with its group file stubbed (a writer may be about
    // to put a file into it, a reader to open the group), until a later run finds it so for an hour
    for k in &old {
        assert_eq!(stubbed(&cache.join(k)), Some(1), "{k}");
    }
    for k in &stripped {
        let names: BTreeSet<String> =
            std::fs::read_dir(cache.join(k)).unwrap().map(|d| d.unwrap().file_name().into_string().unwrap()).collect();
        let exts: BTreeSet<&str> = names.iter().map(|f| f.rsplit('.').next().unwrap()).collect();
        assert_eq!(exts, ["cubin", "json", "source"].into_iter().collect(), "{k}: {names:?}");
    }
    // nothing prune left behind in the namespace
    for d in std::fs::read_dir(&cache).unwrap() {
        assert!(!d.unwrap().file_name().to_string_lossy().starts_with("tmp."));
    }

    let before = events(&cache).len();
    compile(&py, &cache, "softmax", &[]);
    compile(&py, &cache, "add", &fused_off);
    compile(&py, &cache, "add", &[]);
    let evs = &events(&cache)[before..];
    assert_eq!(keys_with(evs, "hit"), kept, "every kept entry is a hit");
    assert_eq!(keys_with(evs, "miss"), old, "every pruned entry is a miss");

    // The dirs whole entries leave: an empty one goes once it has been empty for an hour, a
    // younger one stays (a writer that missed may be about to put a file into it).
    let all = prune(&db, tmp.path(), &[cache.to_str().unwrap(), "--apply", "--unused-for", "0", "--grace", "0"]);
    assert!(all["applied"][0]["applied"]["removed"].as_i64().unwrap() >= kept.len() as i64, "{all}");
    let (aged, young) = (old.iter().next().unwrap(), kept.iter().next().unwrap());
    assert_eq!(stubbed(&cache.join(aged)), Some(1), "{aged}");
    let touch = Command::new("touch").args(["-d", "2 hours ago"]).arg(cache.join(aged)).status().unwrap();
    assert!(touch.success());
    let dry = prune(&db, tmp.path(), &[cache.to_str().unwrap()]);
    let items = arr(&dry["plan"]["roots"][0]["items"]);
    let empties: Vec<&Value> = items.iter().filter(|i| i["class"] == "orphan_temp").collect();
    assert_eq!(empties.len(), 1, "{items:?}");
    assert_eq!(empties[0]["key"], aged.as_str(), "{}", empties[0]);
    assert_eq!(empties[0]["inodes"], 2, "the dir and its group stub: {}", empties[0]);
    assert!(empties[0]["why"].as_str().unwrap().starts_with("empty entry dir last changed"), "{}", empties[0]);
    // a scan reads a stubbed dir as no entry (as an empty dir)
    let mut cmd = Command::new(bin());
    cmd.args(["scan", "--json", "-q", "--machine", "node", "--db"]).arg(&db).arg(&cache).env_remove("CACHELENS_DB");
    let scan = &run_json(cmd)["scans"][0];
    let dirs = std::fs::read_dir(&cache).unwrap().filter(|d| stubbed(&d.as_ref().unwrap().path()) == Some(1)).count();
    assert!(dirs >= kept.len() + old.len(), "{dirs}");
    assert_eq!(scan["entries"], 0, "{scan}");
    assert_eq!(scan["skipped"]["entry taken out by cachelens prune (its group file a stub)"], dirs, "{scan}");
    prune(&db, tmp.path(), &[cache.to_str().unwrap(), "--apply", "--grace", "0"]);
    assert!(!cache.join(aged).exists(), "{aged}");
    assert!(cache.join(young).is_dir(), "{young}");
}

/// A loop of compiles (the add kernels, hooked) racing a loop of `prune --apply --unused-for 0`
/// (every entry can go, every run): counted, no compile fails and none loads a partial entry.
#[test]
fn compiles_racing_prune_apply_never_crash_nor_load_a_partial_entry() {
    let Some(py) = python() else { return };
    let tmp = tempfile::TempDir::new().unwrap();
    let cache = tmp.path().join("cache");
    let (_db, db) = fresh_db_at_blocking();
    compile(&py, &cache, "add", &[]);
    let secs = std::env::var("CACHELENS_PRUNE_RACE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(40.0);
    let mut loop_ = compile_cmd(&py, &cache, "add", 1, secs, &[]);
    let child = loop_.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let (mut runs, mut removed, mut kept) = (0, 0, 0);
    let started = std::time::Instant::now();
    while started.elapsed().as_secs_f64() < secs {
        let v = prune(&db, tmp.path(), &[cache.to_str().unwrap(), "--apply", "--unused-for", "0", "--grace", "0.2"]);
        runs += 1;
        removed += v["applied"][0]["applied"]["removed"].as_i64().unwrap();
        kept += arr(&v["applied"][0]["applied"]["skipped"]).len();
        // Let the loop hit once before the next prune (a busy machine compiles slower than it
        // prunes: without this every compile could find its entry gone, and none hit).
        let hits = || events(&cache).iter().filter(|e| e["event"] == "hit").count();
        let seen = hits();
        let wait = std::time::Instant::now();
        while hits() == seen && wait.elapsed().as_secs() < 30 && started.elapsed().as_secs_f64() < secs {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(out.stdout.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap()).unwrap();
    let evs = events(&cache);
    let (hits, misses) =
        (evs.iter().filter(|e| e["event"] == "hit").count(), evs.iter().filter(|e| e["event"] == "miss").count());
    println!(
        "race: {} compiles ({hits} hits, {misses} misses in the hook's log), {runs} prune runs removed {removed} entries, {kept} kept as changed; errors {:?}, partial {}",
        v["compiles"], v["errors"], v["partial"]
    );
    assert_eq!(arr(&v["errors"]).len(), 0, "{v}");
    assert_eq!(v["partial"], 0, "{v}");
    assert!(runs >= 3 && removed > 0, "the prunes raced: {runs} runs, {removed} removed");
    assert!(hits > 0 && misses > 6, "the compiles hit and missed: {hits} hits, {misses} misses");
}
