//! Hazards and prune's owner check on real file systems made here: a tmpfs with a small inode
//! table, mounted in a private mount namespace (`unshare -rm`, else `unshare -m` as root), scanned
//! by the real CLI; and a copied cache handed to uid 65534, which `prune --apply` refuses unless
//! told. Where neither mount nor chown can be done (no user namespaces, no CAP_SYS_ADMIN, not
//! root), the test fails unless `CACHELENS_ALLOW_SKIP=1`, saying why.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Files, dirs and links under `p`, `p` included (what copying it takes in inodes; no hard links
/// in the corpus).
fn inodes_under(p: &Path) -> u64 {
    let mut n = 1;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        n += if e.file_type().unwrap().is_dir() { inodes_under(&e.path()) } else { 1 };
    }
    n
}

/// Run `script` (sh) in a private mount namespace: as root of a new user namespace, else (root
/// with CAP_SYS_ADMIN) in a mount namespace alone. `Err` says why neither could start.
fn in_mount_namespace(script: &str, args: &[&Path]) -> Result<std::process::Output, String> {
    let mut why = vec![];
    for how in [&["-rm"][..], &["-m"][..]] {
        let probe = Command::new("unshare").args(how).args(["sh", "-c", "mount -t tmpfs tmpfs /mnt"]).output();
        match probe {
            Ok(o) if o.status.success() => {
                let mut cmd = Command::new("unshare");
                cmd.args(how).args(["sh", "-ec", script, "sh"]).args(args);
                return Ok(cmd.output().unwrap());
            }
            Ok(o) => why.push(format!("unshare {}: {}", how[0], String::from_utf8_lossy(&o.stderr).trim())),
            Err(e) => why.push(format!("unshare {}: {e}", how[0])),
        }
    }
    Err(why.join("; "))
}

/// A copy of the hook corpus on a tmpfs of `used + 4` inodes: the scan summary reports tmpfs, the
/// file system's inode figures equal `statvfs` of the mount, and under 5% free gives the warning.
#[test]
fn a_cache_on_a_small_inode_tmpfs_reports_its_inodes_and_the_warning() {
    let (_t, dir) = unpacked("h100-hook-3.6.0");
    let src = dir.join("triton-cache");
    let work = tempfile::TempDir::new().unwrap();
    let mnt = work.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let (_db, db) = fresh_db_at_blocking();
    // the cache's own inodes, the mount's root dir, and 4 free: 4 of ~180 is under 5%
    let nr_inodes = inodes_under(&src) + 1 + 4;
    let script = format!(
        "mount -t tmpfs -o size=64m,nr_inodes={nr_inodes} tmpfs \"$1\"
         cp -a \"$2\" \"$1/cache\"
         \"$3\" scan \"$1/cache\" --db \"$4\" --machine tmpfs-node --json -q
         stat -f -c 'statvfs %c %d' \"$1/cache\""
    );
    let out = match in_mount_namespace(&script, &[&mnt, &src, &bin(), &db]) {
        Ok(o) => o,
        Err(why) => return skip_or_fail(&format!("no tmpfs can be mounted here: {why}")),
    };
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let (json, statvfs) = stdout.rsplit_once("statvfs ").expect("stat's line last");
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let (total, free): (u64, u64) = {
        let mut it = statvfs.split_whitespace().map(|n| n.parse::<u64>().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    };
    println!("tmpfs of {nr_inodes} inodes: statvfs {total} total, {free} free");
    let h = &v["scans"][0]["hazards"];
    assert_eq!(h["fs_type"], "tmpfs", "{h}");
    assert_eq!(h["network"], false);
    assert_eq!(h["fs_inodes"], total, "{h}");
    assert_eq!(h["fs_inodes_free"], free, "{h}");
    assert!(free * 20 < total && free > 0, "nearly full: {free} of {total}");
    let cache = h["cache_inodes"].as_u64().unwrap();
    assert!(cache > 0 && cache <= total - free, "{cache} cache inodes of {} used", total - free);
    let warnings = h["warnings"].to_string();
    assert!(warnings.contains(&format!("its file system has {free} of {total} inodes free (under 5%)")), "{warnings}");
    assert!(!warnings.contains("network file system"), "{warnings}");
}

/// Every path under `p` with its owner uid.
fn owners(p: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = vec![(p.display().to_string(), std::fs::symlink_metadata(p).unwrap().uid())];
    if std::fs::symlink_metadata(p).unwrap().is_dir() {
        let mut kids: Vec<_> = std::fs::read_dir(p).unwrap().map(|e| e.unwrap().path()).collect();
        kids.sort();
        for k in kids {
            out.extend(owners(&k));
        }
    }
    out
}

/// `cachelens prune` on the database `db`; `home` is its XDG_DATA_HOME (where the default plan
/// file goes on PostgreSQL).
fn prune(db: &Path, home: &Path, root: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(bin());
    cmd.args(["prune", "--json", "-q", "--machine", "node", "--db"]).arg(db).arg(root).args(extra);
    cmd.env_remove("CACHELENS_DB").env("XDG_DATA_HOME", home).output().unwrap()
}

/// A copy of the hook corpus (with a crashed writer's temp dir, which a prune removes) handed to
/// uid 65534: `prune --apply` refuses it and removes nothing; a dry run says so and plans it;
/// `--allow-other-owner` applies the plan.
#[test]
fn prune_apply_refuses_a_cache_of_another_owner_unless_told() {
    if !rustix::process::geteuid().is_root() {
        return skip_or_fail("handing a cache to another user needs root");
    }
    let (_t, dir) = unpacked("h100-hook-3.6.0");
    let root = dir.join("triton-cache");
    let key = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .unwrap();
    let tmp = key.join("tmp.pid_999999_0a1b2c3d");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::write(tmp.join("add_kernel.ttgir"), "half written").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::open(&tmp).unwrap().set_modified(old).unwrap();
    for (p, _) in owners(&root) {
        std::os::unix::fs::lchown(&p, Some(65534), Some(65534)).unwrap();
    }
    let before = owners(&root);
    assert!(before.iter().all(|(_, uid)| *uid == 65534));
    let (home, db) = fresh_db_at_blocking();

    let out = prune(&db, home.path(), &root, &["--apply"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(stderr.contains("is owned by uid 65534, not by you (uid 0)") && stderr.contains("--allow-other-owner"));
    assert_eq!(owners(&root), before, "nothing removed");

    let dry = prune(&db, home.path(), &root, &[]);
    let stderr = String::from_utf8_lossy(&dry.stderr);
    assert!(dry.status.success(), "{stderr}");
    assert!(stderr.contains("note:") && stderr.contains("owned by uid 65534"), "{stderr}");
    assert_eq!(owners(&root), before, "a dry run removes nothing");

    let out = prune(&db, home.path(), &root, &["--apply", "--allow-other-owner"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let removed = v["applied"][0]["applied"]["removed"].as_i64().unwrap();
    assert!(removed >= 1, "{stdout}");
    assert!(!tmp.exists(), "the orphaned temp dir went");
    assert!(key.exists() && owners(&key).iter().all(|(_, uid)| *uid == 65534), "what stays keeps its owner");
}
