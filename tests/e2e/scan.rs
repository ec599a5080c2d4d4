//! Issue #2, the scanner: every corpus archive scanned, and what the database holds checked
//! against facts computed from the files themselves (and a few pinned facts from the corpus
//! README); older key formats; re-scans; the CLI's `--json`; caches made by other Triton
//! versions when a Python with Triton is at hand.

use crate::common::*;
use cachelens::db::Store;
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

// ---------------------------------------------------------------------------------------------
// Helpers (also used by damaged.rs; the generic ones are in common.rs)

pub fn looks_like_key(name: &str) -> bool {
    key_to_hex(name).is_some()
}

/// Entry dirs under a cache root (`<root>/<KEY>` or `<root>/triton/<dev>/<KEY>`), with files.
pub fn entry_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut bases = vec![root.to_path_buf()];
    if root.join("triton").is_dir() {
        for d in std::fs::read_dir(root.join("triton")).unwrap() {
            bases.push(d.unwrap().path());
        }
    }
    for b in bases {
        for d in std::fs::read_dir(&b).unwrap() {
            let p = d.unwrap().path();
            if p.is_dir() && looks_like_key(p.file_name().unwrap().to_str().unwrap()) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

pub fn file_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|d| d.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// The metadata file of a kernel entry: `<name>.json`, not the group or autotune file.
pub fn metadata_file(dir: &Path) -> Option<PathBuf> {
    file_names(dir)
        .into_iter()
        .find(|n| n.ends_with(".json") && !n.starts_with("__grp__") && !n.ends_with(".autotune.json"))
        .map(|n| dir.join(n))
}

/// Where `cuobjdump` can be found, as scripts/check-cuobjdump.sh looks for it.
pub fn cuobjdump_available() -> Result<(), String> {
    if let Some(c) = std::env::var_os("CUOBJDUMP") {
        return if Path::new(&c).exists() { Ok(()) } else { Err(format!("CUOBJDUMP={c:?} does not exist")) };
    }
    let on_path = Command::new("sh").args(["-c", "command -v cuobjdump"]).output().is_ok_and(|o| o.status.success());
    let in_wheel = Command::new("sh")
        .args(["-c", "for p in python3 python; do d=$($p -c 'import os,triton;print(os.path.dirname(triton.__file__))' 2>/dev/null) && [ -x \"$d/backends/nvidia/bin/cuobjdump\" ] && exit 0; done; exit 1"])
        .status()
        .is_ok_and(|s| s.success());
    if on_path || in_wheel || Path::new("/tmp/triton-whl/triton/backends/nvidia/bin/cuobjdump").exists() {
        Ok(())
    } else {
        Err("cuobjdump not found ($CUOBJDUMP, PATH, an installed triton, /tmp/triton-whl)".into())
    }
}

/// `cuobjdump -res-usage` REG for every cubin under `dir`: path -> (kernel name, REG, STACK, LOCAL).
pub fn cuobjdump_regs(dir: &Path) -> BTreeMap<PathBuf, (String, i64, i64, i64)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-cuobjdump.sh");
    let out = Command::new("bash").arg(script).arg(dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "check-cuobjdump.sh failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let (file, rest) = line.split_once(' ').unwrap();
        let f: HashMap<&str, &str> = rest.split(' ').filter_map(|kv| kv.split_once('=')).collect();
        let num = |k: &str| f[k].parse::<i64>().unwrap_or_else(|_| panic!("{line}"));
        let prev = m.insert(PathBuf::from(file), (f["KERNEL"].to_string(), num("REG"), num("STACK"), num("LOCAL")));
        assert!(prev.is_none(), "one kernel per Triton cubin: {line}");
    }
    m
}

/// `; NumVgprs: N` from an `.amdgcn` file, read here without the scanner's parser.
pub fn amdgcn_vgprs(text: &str) -> i64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("; NumVgprs:"))
        .map(|v| v.trim().parse().unwrap())
        .expect("NumVgprs in .amdgcn")
}

/// One row of `entries`, as the tests read it.
#[derive(Debug)]
pub struct Row_ {
    pub id: i64,
    pub key: String,
    pub dir: String,
    pub kind: String,
    pub kernel: Option<String>,
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub warp_size: Option<i64>,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub triton_version: Option<String>,
    pub meta_hash: Option<String>,
    pub created_at: Option<i64>,
    pub bytes: i64,
    pub registers: Option<i64>,
    pub spills: Option<i64>,
    pub relocated: bool,
    pub partial: Option<String>,
    pub removed_at: Option<i64>,
    pub first_scan_id: i64,
    pub last_scan_id: i64,
    pub metadata_json: Option<String>,
    pub group_json: Option<String>,
}

pub async fn rows(pool: &Store, machine: &str) -> BTreeMap<String, Row_> {
    // the texts of a row with a fact are kept once per fact (`fact_texts`), a group file whose
    // children sit in the entry's dir by their names
    sqlx::query(
        "SELECT e.*, COALESCE(e.metadata_json, t.metadata_json) AS metadata_json,
                COALESCE(e.group_json, t.group_json) AS group_json
         FROM entry_rows e JOIN machines m ON m.id = e.machine_id
           LEFT JOIN fact_texts t ON t.fact = e.fact AND t.relocated = e.relocated
         WHERE m.name = ? ORDER BY e.dir",
    )
    .bind(machine)
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|r| {
        let row = Row_ {
            id: r.get("id"),
            key: r.get("key"),
            dir: r.get("dir"),
            kind: r.get("kind"),
            kernel: r.get("kernel"),
            backend: r.get("backend"),
            arch: r.get("arch"),
            warp_size: r.get("warp_size"),
            num_warps: r.get("num_warps"),
            num_stages: r.get("num_stages"),
            triton_version: r.get("triton_version"),
            meta_hash: r.get("meta_hash"),
            created_at: r.get("created_at"),
            bytes: r.get("bytes"),
            registers: r.get("registers"),
            spills: r.get("spills"),
            relocated: r.get::<cachelens::db::Flag, _>("relocated").0,
            partial: r.get("partial"),
            removed_at: r.get("removed_at"),
            first_scan_id: r.get("first_scan_id"),
            last_scan_id: r.get("last_scan_id"),
            metadata_json: r.get("metadata_json"),
            // a group stored by its children's names reads back with this row's dir
            // (`db::entries::entry_detail` does the same)
            group_json: r.get::<Option<String>, _>("group_json").map(|g| {
                let at: Option<String> = r.get("group_at");
                let at = at.unwrap_or_else(|| cachelens::model::entry_path(r.get("root"), r.get("dir")));
                cachelens::model::group_json_at(g, &at)
            }),
        };
        (row.dir.clone(), row)
    })
    .collect()
}

fn mtime_ms(p: &Path) -> i64 {
    std::fs::metadata(p).unwrap().modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Check every entry row of `machine` against the files under `root`; returns the expected
/// kind counts.
async fn check_against_files(pool: &Store, machine: &str, root: &Path) -> BTreeMap<String, i64> {
    let rows = rows(pool, machine).await;
    let dirs = entry_dirs(root);
    assert_eq!(rows.len(), dirs.len(), "{machine}: one row per entry dir");
    let here = root.canonicalize().unwrap();
    let mut kinds = BTreeMap::new();
    for d in &dirs {
        let rel = d.strip_prefix(root).unwrap().display().to_string();
        let r = rows.get(&rel).unwrap_or_else(|| panic!("{machine}: no row for {rel}"));
        let names = file_names(d);
        assert_eq!(r.key, d.file_name().unwrap().to_str().unwrap());
        assert!(r.removed_at.is_none());
        assert_eq!(r.partial, None, "{machine} {rel}: {:?}", r.partial);
        let size: u64 = names.iter().map(|n| std::fs::metadata(d.join(n)).unwrap().len()).sum();
        assert_eq!(r.bytes, size as i64, "{rel}: bytes");
        // every artifact with its sha256
        let arts: BTreeMap<String, String> = sqlx::query("SELECT name, sha256 FROM entry_files WHERE entry_id = ?")
            .bind(r.id)
            .fetch_all(pool)
            .await
            .unwrap()
            .into_iter()
            .map(|x| (x.get("name"), x.get("sha256")))
            .collect();
        let want: BTreeMap<String, String> = names.iter().map(|n| (n.clone(), sha256_file(&d.join(n)))).collect();
        assert_eq!(arts, want, "{rel}: artifacts and their sha256");

        let kind = if names.iter().any(|n| n.ends_with(".autotune.json")) {
            "autotune"
        } else if names.iter().all(|n| n.ends_with(".so")) {
            "launcher"
        } else if names.iter().any(|n| n.ends_with(".cubin") || n.ends_with(".hsaco")) {
            if names.iter().any(|n| n.ends_with(".ttir") || n.ends_with(".source")) { "kernel" } else { "binary_only" }
        } else {
            "other"
        };
        assert_eq!(r.kind, kind, "{rel}: kind");
        *kinds.entry(kind.to_string()).or_default() += 1;
        if kind == "autotune" {
            let n = names.iter().find(|n| n.ends_with(".autotune.json")).unwrap();
            assert_eq!(r.kernel.as_deref(), Some(n.trim_end_matches(".autotune.json")));
        }
        let Some(mf) = metadata_file(d) else { continue };
        if kind == "autotune" {
            continue;
        }
        let m: Value = serde_json::from_slice(&std::fs::read(&mf).unwrap()).unwrap();
        // the raw metadata is kept (every field)
        let stored: Value = serde_json::from_str(r.metadata_json.as_deref().unwrap()).unwrap();
        assert_eq!(stored, m, "{rel}: metadata JSON kept as written");
        assert_eq!(r.kernel.as_deref(), m["name"].as_str(), "{rel}: kernel name");
        assert_eq!(r.num_warps, m["num_warps"].as_i64(), "{rel}: num_warps");
        assert_eq!(r.num_stages, m["num_stages"].as_i64(), "{rel}: num_stages");
        assert_eq!(r.triton_version.as_deref(), m.get("triton_version").and_then(Value::as_str), "{rel}");
        assert_eq!(r.backend.as_deref(), m["target"]["backend"].as_str());
        assert_eq!(r.warp_size, m["target"]["warp_size"].as_i64());
        let arch = match &m["target"]["arch"] {
            Value::Number(n) => format!("sm_{n}"),
            v => v.as_str().unwrap().to_string(),
        };
        assert_eq!(r.arch.as_deref(), Some(arch.as_str()));
        let hash = m["hash"].as_str().unwrap();
        assert_eq!(r.meta_hash.as_deref(), Some(hash));
        assert_eq!(key_to_hex(&r.key).as_deref(), Some(hash), "{rel}: decode(KEY) == metadata hash");
        assert_eq!(r.created_at, Some(mtime_ms(&mf)), "{rel}: created_at = metadata mtime");
        // group file: children as written; relocated iff some child path is not in this dir
        let gname = names.iter().find(|n| n.starts_with("__grp__")).unwrap();
        let g: Value = serde_json::from_slice(&std::fs::read(d.join(gname)).unwrap()).unwrap();
        let entry_here = here.join(&rel);
        let relocated = g["child_paths"]
            .as_object()
            .unwrap()
            .values()
            .any(|p| Path::new(p.as_str().unwrap()).parent() != Some(entry_here.as_path()));
        assert_eq!(r.relocated, relocated, "{rel}: relocated");
        let stored_group: Value = serde_json::from_str(r.group_json.as_deref().unwrap()).unwrap();
        let children: BTreeSet<&str> =
            stored_group["children"].as_object().unwrap().keys().map(String::as_str).collect();
        let want: BTreeSet<&str> = g["child_paths"].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(children, want);
    }
    kinds
}

// ---------------------------------------------------------------------------------------------

/// (machine, archive, root inside the archive)
const ROOTS: &[(&str, &str, &str)] = &[
    ("h100-jit", "h100-jit-3.6.0", "triton-cache"),
    ("h100-jit-inductor", "h100-jit-3.6.0", "inductor"),
    ("h100-inductor", "h100-inductor-3.6.0", "inductor"),
    ("h100-fpfusion", "h100-fpfusion-off-triton-3.6.0", "triton-cache"),
    ("a100-1", "a100-upgrade-1-triton-3.4.0", "triton-cache"),
    ("a100-2", "a100-upgrade-2-triton-3.5.1", "triton-cache"),
    ("mi300-1", "mi300-upgrade-1-triton-3.6.0", "triton-cache"),
    ("mi300-2", "mi300-upgrade-2-triton-3.9.0", "triton-cache"),
];

/// Every archive of the corpus, each as its own machine, checked against its files.
#[tokio::test]
async fn corpus_scans_match_the_files() {
    let tmp = tempfile::TempDir::new().unwrap();
    let (_dbdir, pool) = fresh_db().await;
    let mut unpacked_archives = BTreeSet::new();
    let mut summaries = BTreeMap::new();
    for (machine, archive, sub) in ROOTS {
        if unpacked_archives.insert(*archive) {
            unpack(archive, tmp.path());
        }
        let root = tmp.path().join(archive).join(sub);
        summaries.insert(*machine, scan(&pool, &root, machine).await);
    }

    // --- facts computed from the files
    let mut kinds_by_machine = BTreeMap::new();
    for (machine, archive, sub) in ROOTS {
        let root = tmp.path().join(archive).join(sub);
        let kinds = check_against_files(&pool, machine, &root).await;
        let s = &summaries[machine];
        assert_eq!(s.entries, kinds.values().sum::<i64>(), "{machine}: summary entries");
        assert_eq!(s.new_entries, s.entries, "{machine}: first scan: all new");
        assert!(s.skipped.is_empty(), "{machine}: nothing skipped in a clean cache: {:?}", s.skipped);
        assert_eq!(s.partial, 0);
        // every group file in the corpus points to the writer's paths: all relocated
        assert_eq!(s.relocated, kinds.get("kernel").copied().unwrap_or(0), "{machine}: relocated");
        kinds_by_machine.insert(*machine, kinds);
    }

    // --- pinned facts (corpus README)
    let k = |m: &str, kind: &str| kinds_by_machine[m].get(kind).copied().unwrap_or(0);
    assert_eq!((k("h100-jit", "kernel"), k("h100-jit", "launcher"), k("h100-jit", "autotune")), (113, 5, 4));
    assert_eq!(kinds_by_machine["h100-jit"].values().sum::<i64>(), 122);
    assert_eq!(k("h100-jit-inductor", "kernel"), 3);
    assert_eq!(k("h100-inductor", "kernel"), 62);
    assert_eq!(k("h100-fpfusion", "kernel"), 45);
    assert_eq!(k("a100-1", "kernel"), 45);
    assert_eq!(k("a100-2", "kernel"), 90);
    assert_eq!(k("mi300-1", "kernel"), 25);
    assert_eq!(k("mi300-2", "kernel"), 50);
    let versions = |m: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query(
                "SELECT triton_version AS v, COUNT(*) AS n FROM entry_rows e JOIN machines m ON m.id = e.machine_id
                 WHERE m.name = ? AND kind = 'kernel' GROUP BY 1 ORDER BY 1",
            )
            .bind(m)
            .fetch_all(&pool)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.get::<Option<String>, _>("v").unwrap_or_default(), r.get::<i64, _>("n")))
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(versions("h100-jit").await, [("3.6.0".to_string(), 113)]);
    assert_eq!(versions("a100-1").await, [("3.4.0".to_string(), 45)]);
    assert_eq!(versions("a100-2").await, [("3.4.0".to_string(), 45), ("3.5.1".to_string(), 45)]);
    assert_eq!(versions("mi300-2").await, [("3.6.0".to_string(), 25), ("3.9.0".to_string(), 25)]);
    let names: BTreeSet<String> = sqlx::query_scalar(
        "SELECT DISTINCT kernel FROM entry_rows e JOIN machines m ON m.id = e.machine_id WHERE m.name = 'h100-jit' AND kind = 'kernel'",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    assert_eq!(names, ["add_kernel", "layernorm_kernel", "matmul_kernel", "softmax_kernel"].map(String::from).into());
    let mi = rows(&pool, "mi300-2").await;
    assert!(mi.values().all(|r| r.backend.as_deref() == Some("hip")
        && r.arch.as_deref() == Some("gfx942")
        && r.warp_size == Some(64)));
    let a100 = rows(&pool, "a100-2").await;
    assert!(a100.values().all(|r| r.backend.as_deref() == Some("cuda")
        && r.arch.as_deref() == Some("sm_80")
        && r.warp_size == Some(32)));
    // env-var fields and options that env vars set, kept in the raw metadata
    let meta_count = |m: &'static str, cond: String| {
        let pool = pool.clone();
        async move {
            count(
                &pool,
                &format!(
                    "SELECT COUNT(*) FROM entry_rows e JOIN machines m ON m.id = e.machine_id
                       JOIN fact_texts t ON t.fact = e.fact AND t.relocated = e.relocated
                     WHERE m.name = '{m}' AND {}",
                    cond.replace("metadata_json", "t.metadata_json")
                ),
            )
            .await
        }
    };
    // a JSON true or false: SQLite's json_extract reads it as 1 or 0; on PostgreSQL `->` keeps
    // it JSON (its json_extract reads a string "true" and a true alike)
    let flag = |field: &str, v: bool| match on_postgres() {
        true => format!("CAST(CAST(metadata_json AS JSON) -> '{field}' AS TEXT) = '{v}'"),
        false => format!("json_extract(metadata_json, '$.{field}') = {}", i32::from(v)),
    };
    let text = |field: &str, v: &str| format!("json_extract(metadata_json, '$.{field}') = '{v}'");
    assert_eq!(meta_count("h100-jit", text("TRITON_DISABLE_LINE_INFO", "true")).await, 45);
    assert_eq!(meta_count("h100-jit", flag("debug", true)).await, 17);
    assert_eq!(meta_count("h100-fpfusion", text("TRITON_DEFAULT_FP_FUSION", "false")).await, 45);
    assert_eq!(meta_count("h100-fpfusion", flag("enable_fp_fusion", false)).await, 45);

    // --- registers: CUDA from the cubin's .nv.info == cuobjdump -res-usage; AMD from .amdgcn
    let mut cubins = 0;
    let mut amd = 0;
    match cuobjdump_available() {
        Ok(()) => {
            for (machine, archive, sub) in ROOTS {
                let root = tmp.path().join(archive).join(sub);
                let truth = cuobjdump_regs(&root);
                let rows = rows(&pool, machine).await;
                for (file, (kname, reg, stack, local)) in &truth {
                    let rel = file.parent().unwrap().strip_prefix(&root).unwrap().display().to_string();
                    let r = &rows[&rel];
                    assert_eq!(r.kernel.as_deref(), Some(kname.as_str()), "{}", file.display());
                    assert_eq!(r.registers, Some(*reg), "{}: REG", file.display());
                    assert_eq!(r.spills, Some((stack + local) / 4), "{}: (STACK+LOCAL)/4", file.display());
                    cubins += 1;
                }
            }
            assert_eq!(cubins, 113 + 3 + 62 + 45 + 45 + 90, "every cubin checked");
        }
        Err(why) => skip_or_fail(&format!("registers vs cuobjdump: {why}")),
    }
    for (machine, archive, sub) in ROOTS {
        let root = tmp.path().join(archive).join(sub);
        let rows = rows(&pool, machine).await;
        for d in entry_dirs(&root) {
            if let Some(n) = file_names(&d).into_iter().find(|n| n.ends_with(".amdgcn")) {
                let rel = d.strip_prefix(&root).unwrap().display().to_string();
                let want = amdgcn_vgprs(&std::fs::read_to_string(d.join(n)).unwrap());
                assert_eq!(rows[&rel].registers, Some(want), "{rel}: VGPRs");
                amd += 1;
            }
        }
    }
    assert_eq!(amd, 75);
    println!("registers checked: {cubins} cubins against cuobjdump, {amd} amdgcn");

    // --- the 4 autotune winners: min by median timing (the first of [median, p20, p80])
    let root = tmp.path().join("h100-jit-3.6.0/triton-cache");
    let rows_jit = rows(&pool, "h100-jit").await;
    let mut winners = 0;
    let mut infs = 0;
    for d in entry_dirs(&root) {
        let Some(n) = file_names(&d).into_iter().find(|n| n.ends_with(".autotune.json")) else { continue };
        // Python writes a failed config's timing as a bare Infinity (not JSON)
        let text = std::fs::read_to_string(d.join(n)).unwrap();
        let bare_inf = text.contains("Infinity");
        let v: Value =
            serde_json::from_str(&text.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null"))
                .unwrap();
        let ct = v["configs_timings"].as_array().unwrap();
        let best = (0..ct.len())
            .min_by(|a, b| {
                let t = |i: usize| ct[i][1][0].as_f64().unwrap_or(f64::INFINITY);
                t(*a).partial_cmp(&t(*b)).unwrap()
            })
            .unwrap();
        let id = rows_jit[&d.file_name().unwrap().to_string_lossy().into_owned()].id;
        let stored: Vec<(i64, bool, Option<f64>, String)> = sqlx::query(
            "SELECT idx, winner, best_ms, config_json FROM fact_autotune
                 WHERE fact_id = (SELECT fact_id FROM entries WHERE id = ?) ORDER BY idx",
        )
        .bind(id)
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.get("idx"), r.get::<cachelens::db::Flag, _>("winner").0, r.get("best_ms"), r.get("config_json")))
        .collect();
        assert_eq!(stored.len(), ct.len(), "every config stored");
        let w: Vec<i64> = stored.iter().filter(|s| s.1).map(|s| s.0).collect();
        assert_eq!(w, [best as i64], "{}: winner = min median", d.display());
        assert_eq!(stored[best].2, ct[best][1][0].as_f64());
        if bare_inf {
            infs += 1;
        }
        let cfg: Value = serde_json::from_str(&stored[best].3).unwrap();
        assert_eq!(cfg, ct[best][0]);
        winners += 1;
    }
    assert_eq!(winners, 4);
    println!("autotune files with bare Infinity timings: {infs}");

    // --- Inductor .best_config files, each linked to an entry of the same machine
    for (machine, want) in [("h100-inductor", 21), ("h100-jit-inductor", 1)] {
        assert_eq!(summaries[machine].best_configs, want);
        let linked = count(
            &pool,
            &format!(
                "SELECT COUNT(*) FROM best_configs b JOIN machines m ON m.id = b.machine_id
                 JOIN entry_rows e ON e.machine_id = b.machine_id AND e.key = b.triton_cache_hash WHERE m.name = '{machine}'"
            ),
        )
        .await;
        assert_eq!(linked, want, "{machine}: every best_config's triton_cache_hash is an entry key");
    }
    let bc: (i64, i64) = sqlx::query_as(
        "SELECT num_warps, num_stages FROM best_configs WHERE triton_cache_hash = '6TX7AYBLQ3ZPDRMDPDWX4MPRYGSAWC7RTVC5SBVCCUBQVPSKA7FA'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(bc, (4, 1));

    // --- IR text stored once: blob count = distinct sha256 of the text files
    let mut all_text = 0;
    let mut distinct = BTreeSet::new();
    for (_, archive, sub) in ROOTS {
        for d in entry_dirs(&tmp.path().join(archive).join(sub)) {
            for n in file_names(&d) {
                let ext = n.rsplit_once('.').map(|x| x.1).unwrap_or("");
                if ["source", "ttir", "ttgir", "llir", "ptx", "amdgcn", "json"].contains(&ext) {
                    all_text += 1;
                    distinct.insert(sha256_file(&d.join(n)));
                }
            }
        }
    }
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM blobs").await, distinct.len() as i64);
    assert!(
        all_text > distinct.len(),
        "the corpus repeats files (a100-1 is inside a100-2): {all_text} vs {}",
        distinct.len()
    );
    let orphans = count(&pool, "SELECT COUNT(*) FROM blobs WHERE sha256 NOT IN (SELECT sha256 FROM entry_files)").await;
    assert_eq!(orphans, 0);
    // each text read back (compressed at rest, `db/blobs.rs`) is as long as its row says
    let sql = format!("SELECT b.sha256, {} FROM blobs b", cachelens::db::blobs::COLUMNS);
    for r in sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&pool).await.unwrap() {
        let stored = cachelens::db::blobs::Stored::from_row(&r).unwrap();
        let bytes = stored.bytes;
        assert_eq!(stored.text().unwrap().len() as i64, bytes, "{}", r.get::<String, _>(0));
    }
}

/// A cache whose group files point where it sits is not relocated; one copied elsewhere is.
/// A group file written as a plain list (RemoteCacheManager) parses too.
#[tokio::test]
async fn relocated_only_when_group_paths_point_elsewhere() {
    let (_t, root) = unpacked("mi300-upgrade-1-triton-3.6.0");
    let cache = root.join("triton-cache");
    let here = cache.canonicalize().unwrap();
    let dirs = entry_dirs(&cache);
    for d in &dirs {
        let g = file_names(d).into_iter().find(|n| n.starts_with("__grp__")).unwrap();
        let mut v: Value = serde_json::from_slice(&std::fs::read(d.join(&g)).unwrap()).unwrap();
        let key = d.file_name().unwrap();
        for (name, p) in v["child_paths"].as_object_mut().unwrap() {
            *p = Value::from(here.join(key).join(name).display().to_string());
        }
        std::fs::write(d.join(&g), serde_json::to_vec(&v).unwrap()).unwrap();
    }
    // one group as a plain list of names
    let g = file_names(&dirs[0]).into_iter().find(|n| n.starts_with("__grp__")).unwrap();
    let v: Value = serde_json::from_slice(&std::fs::read(dirs[0].join(&g)).unwrap()).unwrap();
    let names: Vec<&String> = v["child_paths"].as_object().unwrap().keys().collect();
    std::fs::write(dirs[0].join(&g), serde_json::to_vec(&serde_json::json!({ "child_paths": names })).unwrap())
        .unwrap();

    let (_d, pool) = fresh_db().await;
    let s = scan(&pool, &cache, "here").await;
    assert_eq!((s.entries, s.relocated, s.partial), (25, 0, 0));
    let list_row = &rows(&pool, "here").await[&dirs[0].file_name().unwrap().to_string_lossy().into_owned()];
    assert_eq!(list_row.kind, "kernel");
    let grp: Value = serde_json::from_str(list_row.group_json.as_deref().unwrap()).unwrap();
    assert_eq!(grp["children"].as_object().unwrap().len(), names.len());
    assert!(grp["children"].as_object().unwrap().values().all(Value::is_null));

    // the very same cache moved: every entry with a path group is relocated now
    let moved = root.join("moved");
    std::fs::rename(&cache, &moved).unwrap();
    let s = scan(&pool, &moved, "moved").await;
    assert_eq!((s.entries, s.relocated), (25, 24));
    let r = rows(&pool, "moved").await;
    let written_at: BTreeSet<String> = r
        .values()
        .filter_map(|r| {
            serde_json::from_str::<Value>(r.group_json.as_deref()?).ok()?["written_at"].as_str().map(String::from)
        })
        .collect();
    assert_eq!(written_at.len(), 24, "each group points to its own old entry dir");
    assert!(written_at.iter().all(|w| w.starts_with(&here.display().to_string())));

    // written through a symlinked path (TRITON_CACHE_DIR=~/link, link -> the real dir) and
    // scanned through the real one: the same dirs, not relocated
    let link = root.join("link");
    std::os::unix::fs::symlink(&moved, &link).unwrap();
    for d in entry_dirs(&moved) {
        let g = file_names(&d).into_iter().find(|n| n.starts_with("__grp__")).unwrap();
        let mut v: Value = serde_json::from_slice(&std::fs::read(d.join(&g)).unwrap()).unwrap();
        let key = d.file_name().unwrap();
        if let Some(m) = v["child_paths"].as_object_mut() {
            for (name, p) in m {
                *p = Value::from(link.join(key).join(name).display().to_string());
            }
        }
        std::fs::write(d.join(&g), serde_json::to_vec(&v).unwrap()).unwrap();
    }
    let s = scan(&pool, &moved, "aliased").await;
    assert_eq!((s.entries, s.relocated), (25, 0), "a symlink alias of the entry dir is not a relocation");
    // ... while the link pointing elsewhere makes them relocated again
    std::fs::remove_file(&link).unwrap();
    std::fs::create_dir(&link).unwrap();
    let s = scan(&pool, &moved, "aliased-gone").await;
    assert_eq!((s.entries, s.relocated), (25, 24));
}

/// Keys in the 3.2 (43-char urlsafe base64) and 3.1 (64-char hex) formats, and metadata
/// without `triton_version` (before 3.4 Triton did not write it).
#[tokio::test]
async fn older_key_formats_and_metadata_without_version() {
    let (_t, root) = unpacked("a100-upgrade-1-triton-3.4.0");
    let src_cache = root.join("triton-cache");
    let src = entry_dirs(&src_cache).into_iter().next().unwrap();
    let cache = root.join("old-formats");
    std::fs::create_dir(&cache).unwrap();
    let make = |hash: &str, key: &str, drop_version: bool| {
        let d = cache.join(key);
        std::fs::create_dir(&d).unwrap();
        for n in file_names(&src) {
            let bytes = std::fs::read(src.join(&n)).unwrap();
            if n.starts_with("__grp__") {
                std::fs::write(d.join(&n), bytes).unwrap();
            } else if n.ends_with(".json") {
                let mut m: Value = serde_json::from_slice(&bytes).unwrap();
                m["hash"] = Value::from(hash);
                if drop_version {
                    m.as_object_mut().unwrap().remove("triton_version");
                }
                std::fs::write(d.join(&n), serde_json::to_vec(&m).unwrap()).unwrap();
            } else {
                std::fs::write(d.join(&n), bytes).unwrap();
            }
        }
    };
    let h = |s: &str| hex::encode(Sha256::digest(s.as_bytes()));
    let (h1, h2, h3) = (h("3.2 key"), h("3.1 key"), h("no version"));
    let b64 = hex_to_b64url(&h1);
    assert_eq!(b64.len(), 43);
    assert_eq!(key_to_hex(&b64).as_deref(), Some(h1.as_str()));
    let b32 = hex_to_b32(&h3);
    assert_eq!(b32.len(), 52);
    make(&h1, &b64, false);
    make(&h2, &h2, true);
    make(&h3, &b32, true);
    // not keys: wrong length / alphabet (ignored, not entries)
    std::fs::create_dir(cache.join("NOTAKEY")).unwrap();
    std::fs::write(cache.join("NOTAKEY/x.json"), "{}").unwrap();

    let (_d, pool) = fresh_db().await;
    let s = scan(&pool, &cache, "old").await;
    assert_eq!(s.entries, 3);
    assert_eq!(s.partial, 0);
    let r = rows(&pool, "old").await;
    for (key, hash, version) in [(&b64, &h1, Some("3.4.0")), (&h2, &h2, None), (&b32, &h3, None)] {
        let e = &r[key.as_str()];
        assert_eq!(e.kind, "kernel");
        assert_eq!(e.meta_hash.as_deref(), Some(hash.as_str()));
        assert_eq!(key_to_hex(&e.key).as_deref(), Some(hash.as_str()));
        assert_eq!(e.triton_version.as_deref(), version);
        assert_eq!(e.kernel.as_deref(), r.values().next().unwrap().kernel.as_deref());
        assert!(e.registers.unwrap() > 0);
    }
}

/// Re-scans: nothing changed → nothing re-read; one entry touched → 1 changed; one deleted →
/// removed (row kept); re-added → back, with its first-seen scan kept.
#[tokio::test]
async fn rescan_rereads_only_changed_entries() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let cache = root.join("triton-cache");
    let (_d, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    let s1 = scan(&pool, &cache, "m").await;
    assert_eq!((s1.entries, s1.new_entries), (122, 122));

    let s2 = scan(&pool, &cache, "m").await;
    assert_eq!(
        (s2.entries, s2.new_entries, s2.changed_entries, s2.unchanged_entries, s2.removed_entries),
        (122, 0, 0, 122, 0),
        "nothing re-read"
    );
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM scans").await, 2);
    // unchanged rows are not rewritten (a live row's last sighting is its root's latest scan)
    assert_eq!(
        count(&pool, &format!("SELECT COUNT(*) FROM entry_rows WHERE last_scan_id = {}", s1.scan_id)).await,
        122
    );

    let dirs = entry_dirs(&cache);
    let touched = &dirs[3];
    let ir = file_names(touched).into_iter().find(|n| n.ends_with(".ttgir")).unwrap();
    let mut text = std::fs::read_to_string(touched.join(&ir)).unwrap();
    text.push_str("\n// edited\n");
    // written as Triton writes (renamed into place): an in-place write is seen only by --full
    std::fs::write(touched.join("edit.tmp"), &text).unwrap();
    std::fs::rename(touched.join("edit.tmp"), touched.join(&ir)).unwrap();
    let s3 = scan(&pool, &cache, "m").await;
    assert_eq!((s3.new_entries, s3.changed_entries, s3.unchanged_entries, s3.removed_entries), (0, 1, 121, 0));
    let sha = hex::encode(Sha256::digest(text.as_bytes()));
    assert_eq!(count(&pool, &format!("SELECT COUNT(*) FROM entry_files WHERE sha256 = '{sha}'")).await, 1);
    assert_eq!(count(&pool, &format!("SELECT COUNT(*) FROM blobs WHERE sha256 = '{sha}'")).await, 1);

    // a touch alone (same bytes, new mtime) is a change too for a file-by-file check (`--full`;
    // the key dir does not change): re-read, same content
    let f = touched.join(&ir);
    let t = std::fs::File::options().write(true).open(&f).unwrap();
    t.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5)).unwrap();
    drop(t);
    let s3b = cachelens::collect::scan_local_with(&store, &cache, "m", true).await.unwrap();
    assert_eq!((s3b.changed_entries, s3b.unchanged_entries), (1, 121));

    let gone = &dirs[7];
    let gone_key = gone.file_name().unwrap().to_string_lossy().into_owned();
    let saved = root.join("saved");
    std::fs::rename(gone, &saved).unwrap();
    let s4 = scan(&pool, &cache, "m").await;
    assert_eq!((s4.entries, s4.removed_entries, s4.unchanged_entries), (121, 1, 121));
    let r = &rows(&pool, "m").await[&gone_key];
    assert!(r.removed_at.is_some(), "removed, never deleted");
    assert_eq!(r.last_scan_id, s3b.scan_id, "a removed row's last scan is the last one that saw it");
    let last_seen: i64 = sqlx::query_scalar("SELECT last_seen_at FROM entry_rows WHERE id = ?")
        .bind(r.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    let s3b_at: i64 = sqlx::query_scalar("SELECT scanned_at FROM scans WHERE id = ?")
        .bind(s3b.scan_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(last_seen, s3b_at);
    assert_eq!(
        count(&pool, &format!("SELECT COUNT(*) FROM entry_files WHERE entry_id = {}", r.id)).await as usize,
        file_names(&saved).len()
    );
    let s5 = scan(&pool, &cache, "m").await;
    assert_eq!((s5.entries, s5.removed_entries), (121, 0), "removed once");

    std::fs::rename(&saved, gone).unwrap();
    let s6 = scan(&pool, &cache, "m").await;
    assert_eq!((s6.entries, s6.new_entries, s6.unchanged_entries, s6.removed_entries), (122, 1, 121, 0));
    let r = &rows(&pool, "m").await[&gone_key];
    assert!(r.removed_at.is_none(), "back");
    assert_eq!(r.first_scan_id, s1.scan_id, "one entry across scans: first seen kept");
    assert_eq!(r.last_scan_id, s6.scan_id);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM entry_rows").await, 122);
    let scans: Vec<(i64, i64, i64)> =
        sqlx::query_as("SELECT entries, new_entries, removed_entries FROM scans ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(scans, [(122, 122, 0), (122, 0, 0), (122, 0, 0), (122, 0, 0), (121, 0, 1), (121, 0, 0), (122, 1, 0)]);
}

/// `cachelens scan PATH... --machine --db --json` prints the summary as JSON; the scan is
/// recorded with machine, time, root, counts and bytes.
#[tokio::test]
async fn cli_scan_json() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let (_db, db) = fresh_db_at().await;
    let out = Command::new(bin())
        .args(["scan", "--machine", "box-1", "--json", "--db"])
        .arg(&db)
        .arg(root.join("triton-cache"))
        .arg(root.join("inductor"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    // one shape for one root or many: {scans: [...], failed, database, server}
    assert_eq!(
        (v["failed"].clone(), v["database"].as_str(), v["server"].clone()),
        (serde_json::json!([]), db.to_str(), Value::Null)
    );
    let a = v["scans"].as_array().expect("a list of summaries");
    assert_eq!(a.len(), 2);
    assert_eq!(a[0]["machine"], "box-1");
    assert_eq!(a[0]["entries"], 122);
    assert_eq!(a[0]["relocated"], 113);
    assert_eq!(a[1]["entries"], 3);
    assert_eq!(a[1]["best_configs"], 1);
    let want_bytes: u64 = entry_dirs(&root.join("triton-cache"))
        .iter()
        .flat_map(|d| file_names(d).into_iter().map(move |n| std::fs::metadata(d.join(n)).unwrap().len()))
        .sum();
    assert_eq!(a[0]["bytes"], want_bytes);
    let pool = cachelens::db::open(&db).await.unwrap();
    let row: (String, String, i64, i64, i64) = sqlx::query_as(
        "SELECT m.name, s.root, s.scanned_at, s.entries, s.bytes FROM scans s JOIN machines m ON m.id = s.machine_id ORDER BY s.id LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(row.0, "box-1");
    assert_eq!(row.1, root.join("triton-cache").canonicalize().unwrap().display().to_string());
    assert!(row.2 > 1_700_000_000_000);
    assert_eq!((row.3, row.4), (122, want_bytes as i64));
    // a second run: nothing re-read
    let out = Command::new(bin())
        .args(["scan", "--machine", "box-1", "--json", "--db"])
        .arg(&db)
        .arg(root.join("triton-cache"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["scans"].as_array().map(Vec::len), Some(1), "one root: the same shape, {v}");
    let v = &v["scans"][0];
    assert_eq!((v["new_entries"].as_i64(), v["unchanged_entries"].as_i64()), (Some(0), Some(122)));
}

/// Caches written by real Triton releases beyond the corpus (scripts/workload.py, CPU only),
/// for cuda:80 and hip:gfx942. `$CACHELENS_PYTHON` (one python with triton) and/or
/// `$CACHELENS_PYTHONS` (several, `:`-separated).
#[tokio::test]
async fn caches_from_other_triton_versions() {
    let mut pythons: Vec<String> = vec![];
    for var in ["CACHELENS_PYTHON", "CACHELENS_PYTHONS"] {
        if let Ok(v) = std::env::var(var) {
            pythons.extend(v.split(':').filter(|s| !s.is_empty()).map(String::from));
        }
    }
    if pythons.is_empty() {
        return skip_or_fail("no $CACHELENS_PYTHON / $CACHELENS_PYTHONS (a python with triton installed)");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/workload.py");
    let (_d, pool) = fresh_db().await;
    let tmp = tempfile::TempDir::new().unwrap();
    let cuobj = cuobjdump_available();
    for (i, py) in pythons.iter().enumerate() {
        for target in ["cuda:80", "hip:gfx942"] {
            let cache = tmp.path().join(format!("{i}-{}", target.replace(':', "-")));
            let out = Command::new(py)
                .arg(&script)
                .args(["--target", target, "--kernels", "add,softmax,matmul", "--limit", "4"])
                .env("TRITON_CACHE_DIR", &cache)
                .output()
                .unwrap();
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                let last = err.lines().last().unwrap_or("");
                skip_or_fail(&format!("{py} --target {target}: workload failed: {last}"));
                continue;
            }
            let w: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
            let version = w["triton_version"].as_str().unwrap().to_string();
            let machine = format!("gen-{i}-{}", target.replace(':', "-"));
            let s = scan(&pool, &cache, &machine).await;
            let kinds = check_against_files(&pool, &machine, &cache).await;
            let keys: BTreeSet<String> =
                w["keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
            let r = rows(&pool, &machine).await;
            let kernel_keys: BTreeSet<String> =
                r.values().filter(|e| e.kind == "kernel").map(|e| e.key.clone()).collect();
            assert_eq!(kernel_keys, keys, "{version} {target}: one kernel entry per compile");
            assert_eq!(s.relocated, 0, "written in place: not relocated");
            let key_len = keys.iter().next().unwrap().len();
            for e in r.values().filter(|e| e.kind == "kernel") {
                // Triton writes `triton_version` from 3.3 on (3.0-3.2 do not): null, not invented
                let minor: u32 = version.split('.').nth(1).unwrap().parse().unwrap();
                let want = (minor >= 3).then_some(version.as_str());
                assert_eq!(e.triton_version.as_deref(), want, "{version}: triton_version");
                // key format by release: hex (≤3.1), urlsafe base64 (3.2), base32 (3.3+)
                let want_len = match minor {
                    0 | 1 => 64,
                    2 => 43,
                    _ => 52,
                };
                assert_eq!(e.key.len(), want_len, "{version}: key format");
                assert_eq!(key_to_hex(&e.key), e.meta_hash, "{version}: decode(KEY) == hash");
                assert!(e.registers.unwrap_or(0) > 0, "{version} {target} {}: registers", e.key);
            }
            if let (true, Err(why)) = (target.starts_with("cuda"), &cuobj) {
                skip_or_fail(&format!("registers vs cuobjdump: {why}"));
            }
            if target.starts_with("cuda")
                && let Ok(()) = &cuobj
            {
                for (file, (_, reg, _, _)) in cuobjdump_regs(&cache) {
                    let rel = file.parent().unwrap().strip_prefix(&cache).unwrap().display().to_string();
                    assert_eq!(r[&rel].registers, Some(reg), "{version}: {}", file.display());
                }
            }
            println!("triton {version} {target}: {} entries {kinds:?}, key length {key_len}", s.entries);
        }
    }
}

/// Run scripts/workload.py with `$CACHELENS_PYTHON` into `cache` (CPU only); its JSON summary,
/// or `None` (after [`skip_or_fail`]) when there is no such python.
fn workload(cache: &Path, target: &str, env: &[(&str, &str)]) -> Option<Value> {
    let Some(py) = std::env::var("CACHELENS_PYTHON").ok().filter(|p| !p.is_empty()) else {
        skip_or_fail("no $CACHELENS_PYTHON (a python with triton installed)");
        return None;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/workload.py");
    let out = Command::new(&py)
        .arg(&script)
        .args(["--target", target, "--kernels", "add,softmax", "--limit", "3"])
        .env("TRITON_CACHE_DIR", cache)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "workload.py failed: {}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap())
}

/// A cache written with `TRITON_STORE_BINARY_ONLY=1` (metadata, binary and group file only):
/// each compile is one `binary_only` entry, complete (not partial), with its resources.
#[tokio::test]
async fn binary_only_cache() {
    let tmp = tempfile::TempDir::new().unwrap();
    let cache = tmp.path().join("cache");
    let Some(w) = workload(&cache, "cuda:80", &[("TRITON_STORE_BINARY_ONLY", "1")]) else { return };
    let keys: BTreeSet<String> = w["keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().into()).collect();
    assert!(!keys.is_empty());
    let (_d, pool) = fresh_db().await;
    let s = scan(&pool, &cache, "bo").await;
    assert_eq!(s.partial, 0, "{s:?}");
    let r = rows(&pool, "bo").await;
    let bo: BTreeSet<String> = r.values().filter(|e| e.kind == "binary_only").map(|e| e.key.clone()).collect();
    assert_eq!(bo, keys, "one binary_only entry per compile");
    for e in r.values().filter(|e| e.kind == "binary_only") {
        let files = file_names(&cache.join(&e.dir));
        // Triton 3.4+ stores the unoptimised TTIR (`.source`) even so
        let stored = |n: &String| [".json", ".cubin", ".source"].iter().any(|x| n.ends_with(x));
        assert!(files.iter().all(stored) && files.len() == 4, "{files:?}");
        assert!(e.registers.unwrap_or(0) > 0 && e.arch.as_deref() == Some("sm_80") && e.partial.is_none());
        assert_eq!(key_to_hex(&e.key), e.meta_hash);
    }
}

/// `cachelens scan` with no path, no --machine, no --db: the cache is `$TRITON_CACHE_DIR`,
/// else `$HOME/.triton/cache`; the machine is the hostname; the database is
/// `$XDG_DATA_HOME/cachelens/cachelens.db`, else `$HOME/.local/share/cachelens/cachelens.db`.
#[tokio::test]
async fn cli_scan_default_paths() {
    let (_t, root) = unpacked("h100-jit-3.6.0");
    let home = tempfile::TempDir::new().unwrap();
    std::fs::create_dir_all(home.path().join(".triton")).unwrap();
    std::fs::rename(root.join("triton-cache"), home.path().join(".triton/cache")).unwrap();
    let xdg = tempfile::TempDir::new().unwrap();
    let run = |env: &[(&str, &Path)]| {
        let mut cmd = Command::new(bin());
        cmd.args(["scan", "--json"]).env_remove("TRITON_CACHE_DIR").env_remove("XDG_DATA_HOME");
        cmd.env_remove("CACHELENS_DB")
            .env_remove("CACHELENS_MACHINE")
            .env_remove("CACHELENS_SERVER")
            .env("HOME", home.path());
        let out = cmd.envs(env.iter().map(|(k, v)| (*k, *v))).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["scans"][0].clone()
    };
    let host = cachelens::collect::hostname();
    let cache = home.path().join(".triton/cache").canonicalize().unwrap();
    // HOME alone: ~/.triton/cache into ~/.local/share/cachelens/cachelens.db
    let s = run(&[]);
    assert_eq!((s["root"].as_str(), s["machine"].as_str()), (cache.to_str(), Some(host.as_str())));
    assert_eq!(s["entries"], 122);
    assert!(home.path().join(".local/share/cachelens/cachelens.db").is_file());
    // TRITON_CACHE_DIR and XDG_DATA_HOME win
    let inductor = root.join("inductor");
    let s = run(&[("TRITON_CACHE_DIR", &inductor), ("XDG_DATA_HOME", xdg.path())]);
    assert_eq!(s["root"].as_str(), inductor.canonicalize().unwrap().to_str());
    assert_eq!((s["entries"].as_i64(), s["new_entries"].as_i64()), (Some(3), Some(3)));
    let pool = cachelens::db::open(&xdg.path().join("cachelens/cachelens.db")).await.unwrap();
    assert_eq!(rows(&pool, &host).await.len(), 3, "only the second scan went there");
}

/// Entries cloned under new keys (identical IR, as the scan benchmark builds them): every clone's
/// IR stays viewable, each text is stored once, locally and in an upload report.
#[tokio::test]
async fn cloned_entries_share_their_ir_and_each_shows_it() {
    let (_t, dir) = unpacked("a100-upgrade-1-triton-3.4.0");
    let cache = dir.join("triton-cache");
    let keys: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.join("__grp__add_kernel.json").exists() || p.join("__grp__softmax_kernel.json").exists())
        .collect();
    assert!(keys.len() >= 4);
    let mut clones = vec![];
    for (i, k) in keys.iter().enumerate() {
        // a valid base32 key: CLONE, a letter per clone, padding
        let clone = cache.join(format!("{:A<52}", format!("CLONE{}", (b'B' + i as u8) as char)));
        std::fs::create_dir(&clone).unwrap();
        for f in std::fs::read_dir(k).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, clone.join(f.file_name().unwrap())).unwrap();
        }
        clones.push(clone.file_name().unwrap().to_string_lossy().to_string());
    }
    let (_d, pool) = fresh_db().await;
    let store = cachelens::db::Db::from(pool.clone());
    cachelens::collect::scan_local(&store, &cache, "m").await.unwrap();
    // every llir/ptx artifact of every entry, clone or not, has its text in blobs, stored once
    let rows = sqlx::query(
        "SELECT a.ext, COUNT(*), COUNT(b.sha256), COUNT(DISTINCT a.sha256),
                COUNT(DISTINCT CASE WHEN e.key NOT LIKE 'CLONE%' THEN a.sha256 END),
                SUM(CASE WHEN e.key LIKE 'CLONE%' THEN 1 ELSE 0 END)
         FROM entry_files a JOIN entry_rows e ON e.id = a.entry_id
         LEFT JOIN blobs b ON b.sha256 = a.sha256 WHERE a.ext IN ('llir', 'ptx', 'ttgir') GROUP BY a.ext",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 3);
    for r in &rows {
        let (ext, n, with_text, distinct, originals, cloned): (String, i64, i64, i64, i64, i64) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
        assert_eq!(n, with_text, "{ext}: every artifact's text is stored");
        assert_eq!(cloned, keys.len() as i64, "{ext}: every clone has one");
        assert_eq!(distinct, originals, "{ext}: each clone shares its original's text");
    }
    let state = cachelens::web::AppState::new(pool.clone(), cachelens::web::Config::default());
    for key in &clones {
        let (code, page) = get(&state, &format!("/entries/m/{key}?ir=llir")).await;
        assert_eq!(code, 200);
        assert!(page.contains("define ") && !page.contains("was not stored"), "{key}: llir shown");
    }
    // an upload report carries each text once, for originals and clones alike
    let r = cachelens::collect::scan_report(&cache, "m").unwrap();
    for e in &r.entries {
        for a in e.artifacts.iter().filter(|a| ["llir", "ptx", "ttgir"].contains(&a.ext())) {
            assert!(r.blobs.contains_key(&a.sha256), "{}/{}: text in the report", e.key, a.name);
        }
    }
}
